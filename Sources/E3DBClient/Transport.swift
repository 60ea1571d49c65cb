public import Foundation
import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// One HTTP request as the client sends it.
public struct TransportRequest: Sendable {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
    public var method: String
    /// The absolute URL.
    public var url: String
    /// Header names and values.
    public var headers: [(String, String)]
    /// The body, if any.
    public var body: Data?

    public init(method: String, url: String, headers: [(String, String)] = [], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// One HTTP response.
public struct TransportResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: Data

    public init(status: Int, headers: [(String, String)], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of a header (case-insensitive name).
    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
}

/// How the client reaches the server: AsyncHTTPClient by default; an app can supply its own (URLSession, say).
/// A transport performs one request; the client adds authentication, retries and error mapping.
public protocol E3DBTransport: Sendable {
    /// Sends a request and returns the whole response.
    /// - Parameters:
    ///   - request: the request.
    ///   - timeout: the time the whole exchange may take.
    ///   - maxResponseSize: the largest body to accept.
    /// - Throws: any error for a failure to connect, send or receive (the client retries idempotent requests).
    func send(_ request: TransportRequest, timeout: Duration, maxResponseSize: Int) async throws -> TransportResponse
}

/// The default transport: AsyncHTTPClient's shared client (connection pooling, keep-alive, TLS).
public struct AsyncHTTPClientTransport: E3DBTransport {
    let client: HTTPClient

    /// A transport over `HTTPClient.shared`.
    public init() { client = .shared }

    public func send(_ request: TransportRequest, timeout: Duration, maxResponseSize: Int) async throws
        -> TransportResponse {
        var r = HTTPClientRequest(url: request.url)
        r.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { r.headers.add(name: name, value: value) }
        if let body = request.body { r.body = .bytes(ByteBuffer(bytes: body)) }
        let seconds = timeout.components.seconds
        let response = try await client.execute(r, timeout: .seconds(max(seconds, 1)))
        let body = try await response.body.collect(upTo: maxResponseSize)
        return TransportResponse(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                                 body: Data(body.readableBytesView))
    }
}
