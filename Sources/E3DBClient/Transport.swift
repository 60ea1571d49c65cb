public import Foundation
public import AsyncHTTPClient
import NIOCore
import NIOFoundationCompat
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

    /// Sends `request` with the file at `bodyPath` as its body, streamed (constant memory), and returns the
    /// response (its body collected up to 1 MiB).
    func upload(_ request: TransportRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> TransportResponse

    /// Sends `request` and hands a 2xx response's body to `receive` piece by piece, in order, as it arrives,
    /// awaiting each call before reading more (so a slow receiver slows the download instead of filling memory).
    /// Pieces may have any non-zero size. Any other status comes back with its body collected up to 1 MiB, and
    /// `receive` is not called.
    ///
    /// Returns once the whole body was received (with an empty `body`); throws if the exchange fails or the body
    /// ends before its `Content-Length`, and rethrows at once what `receive` throws (stop reading then; the
    /// client has given up on the response). With URLSession, `bytes(for:)` read in batches or a data-task
    /// delegate feeding an `AsyncStream` both fit.
    /// - Parameters:
    ///   - request: the request.
    ///   - timeout: the time the whole exchange may take.
    ///   - receive: consumes the next piece of the body; the piece is the callee's to keep.
    func download(_ request: TransportRequest, timeout: Duration, receive: (Data) async throws -> Void)
        async throws -> TransportResponse

    /// A task executor on the thread that runs this transport's connections, or nil. Tasks that prefer it avoid
    /// two thread switches per request (see ``EventLoopTaskExecutor`` and ``E3DBClient/withTransportAffinity(_:)``).
    /// Each read may return a different executor of the transport's threads.
    var preferredTaskExecutor: (any TaskExecutor)? { get }
}

extension E3DBTransport {
    /// Sends `request` and streams a 2xx response's body into the file at `destinationPath` (created, mode 0600);
    /// any other status comes back with its body collected up to 1 MiB and the file left empty. Built on
    /// ``download(_:timeout:receive:)``.
    public func download(_ request: TransportRequest, to destinationPath: String, timeout: Duration) async throws
        -> TransportResponse {
        guard FileManager.default.createFile(atPath: destinationPath, contents: nil, attributes: [.posixPermissions: 0o600]),
              let out = FileHandle(forWritingAtPath: destinationPath) else {
            throw CocoaError(.fileWriteNoPermission)
        }
        defer { try? out.close() }
        let response = try await download(request, timeout: timeout) { piece in try out.write(contentsOf: piece) }
        try out.synchronize()
        return response
    }

    /// None by default.
    public var preferredTaskExecutor: (any TaskExecutor)? { nil }
}

/// The default transport: one process-wide AsyncHTTPClient (connection pooling, keep-alive, TLS) that fails a
/// request at once when the server refuses the connection (no silent reconnect loop until the deadline; the
/// client's own retries and backoff apply) and gives up connecting after 10 s.
public struct AsyncHTTPClientTransport: E3DBTransport {
    let client: HTTPClient

    private static let processClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout = .init(connect: .seconds(10))
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// A transport over the process-wide client.
    public init() { client = Self.processClient }

    /// A transport over a client you configure (and shut down).
    public init(client: HTTPClient) { self.client = client }

    /// An executor on the next event loop of the client's group.
    public var preferredTaskExecutor: (any TaskExecutor)? { EventLoopTaskExecutor(client.eventLoopGroup.next()) }

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

    func prepare(_ request: TransportRequest) -> HTTPClientRequest {
        var r = HTTPClientRequest(url: request.url)
        r.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { r.headers.add(name: name, value: value) }
        return r
    }

    public func upload(_ request: TransportRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> TransportResponse {
        var r = prepare(request)
        guard let handle = FileHandle(forReadingAtPath: bodyPath) else {
            throw CocoaError(.fileReadNoSuchFile)
        }
        defer { try? handle.close() }
        r.body = .stream(FileChunks(handle: handle), length: .known(size))
        let response = try await client.execute(r, timeout: .seconds(max(timeout.components.seconds, 1)))
        let body = try await response.body.collect(upTo: 1 << 20)
        return TransportResponse(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                                 body: Data(body.readableBytesView))
    }

    /// See ``E3DBTransport/download(_:timeout:receive:)``: each piece shares the storage of the NIO buffer it
    /// arrived in.
    public func download(_ request: TransportRequest, timeout: Duration, receive: (Data) async throws -> Void)
        async throws -> TransportResponse {
        let response = try await client.execute(prepare(request), timeout: .seconds(max(timeout.components.seconds, 1)))
        let headers = response.headers.map { ($0.name, $0.value) }
        guard (200..<300).contains(Int(response.status.code)) else {
            let body = try await response.body.collect(upTo: 1 << 20)
            return TransportResponse(status: Int(response.status.code), headers: headers, body: Data(body.readableBytesView))
        }
        for try await buffer in response.body where buffer.readableBytes > 0 {
            guard let piece = buffer.getData(at: buffer.readerIndex, length: buffer.readableBytes,
                                             byteTransferStrategy: .noCopy) else { continue }
            try await receive(piece)
        }
        return TransportResponse(status: Int(response.status.code), headers: headers, body: Data())
    }
}

/// A file read in 256 KiB chunks as an async sequence of buffers (an upload body in constant memory).
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let handle: FileHandle

    struct AsyncIterator: AsyncIteratorProtocol {
        let handle: FileHandle
        /// Reads straight into the buffer that goes to the socket (no `Data` in between).
        mutating func next() async throws -> ByteBuffer? {
            let size = 256 << 10
            var buffer = ByteBufferAllocator().buffer(capacity: size)
            var failure: Int32 = 0
            let fd = handle.fileDescriptor
            let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
                var r: Int
                repeat { r = read(fd, raw.baseAddress, size) } while r < 0 && errno == EINTR
                if r < 0 { failure = errno }
                return Swift.max(r, 0)
            }
            if failure != 0 { throw POSIXError(POSIXError.Code(rawValue: failure) ?? .EIO) }
            return n == 0 ? nil : buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(handle: handle) }
}
