public import AsyncHTTPClient
import E3DBFiles
import E3DBPrimitives
public import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOSSL
import Synchronization

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

    /// The first value of a header (case-insensitive name).
    public func header(_ name: String) -> String? { firstHeader(name, in: headers) }

    /// Sets the header `name` (case-insensitive) to `value`, wherever it is: replaces the first header of that
    /// name and removes any others, or adds it at the end.
    public mutating func setHeader(_ name: String, _ value: String) {
        let lowered = name.lowercased()
        guard let first = headers.firstIndex(where: { $0.0.lowercased() == lowered }) else {
            headers.append((name, value))
            return
        }
        headers[first] = (name, value)
        headers = headers.enumerated().filter { $0.offset <= first || $0.element.0.lowercased() != lowered }
            .map(\.element)
    }
}

/// The first value of the header `name` (case-insensitive) in `headers`.
func firstHeader(_ name: String, in headers: [(String, String)]) -> String? {
    let lowered = name.lowercased()
    return headers.first { $0.0.lowercased() == lowered }?.1
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
    public func header(_ name: String) -> String? { firstHeader(name, in: headers) }
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
    /// ``download(_:timeout:receive:)``. A failure to create, write or sync the file is `E3DBError` `.fileIOFailed`.
    public func download(_ request: TransportRequest, to destinationPath: String, timeout: Duration) async throws
        -> TransportResponse
    {
        guard
            FileManager.default.createFile(
                atPath: destinationPath, contents: nil, attributes: [.posixPermissions: 0o600]),
            let out = FileHandle(forWritingAtPath: destinationPath)
        else {
            throw E3DBError(
                .fileIOFailed, "cannot create the download's file \(destinationPath)",
                context: .init(item: destinationPath))
        }
        defer { try? out.close() }
        func failed(_ error: any Error) -> E3DBError {
            E3DBError(
                .fileIOFailed, "writing the download's file \(destinationPath) failed",
                context: .init(item: destinationPath), cause: error)
        }
        let response = try await download(request, timeout: timeout) { piece in
            do { try out.write(contentsOf: piece) } catch { throw failed(error) }
        }
        do { try out.synchronize() } catch { throw failed(error) }
        return response
    }

    /// None by default.
    public var preferredTaskExecutor: (any TaskExecutor)? { nil }
}

/// The default transport: one process-wide AsyncHTTPClient (connection pooling, keep-alive, TLS) that fails a
/// request at once when the server refuses the connection (no silent reconnect loop until the deadline; the
/// client's own retries and backoff apply) and gives up connecting after 10 s.
///
/// ``init(tls:proxy:)`` adds private CAs, public key pins and an HTTP proxy: CAs apply per request on the shared
/// client, each proxy has a process-wide client of its own, and pinned servers are reached through a loopback
/// forwarder that makes the TLS connection itself (AsyncHTTPClient 1.37 has no hook to see the server's
/// certificate): it verifies the chain and host name as usual, then checks the key against the pins before it
/// passes a byte on.
public struct AsyncHTTPClientTransport: E3DBTransport {
    let client: HTTPClient
    /// The CAs and pins; the defaults for a transport over a given client.
    let tls: ClientTLSOptions
    /// The per-request TLS configuration, nil for the system's CAs.
    let tlsConfiguration: TLSConfiguration?
    /// The proxy, if any.
    let proxy: HTTPProxy?

    static func makeClient(proxy: HTTPProxy?) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.timeout = .init(connect: .seconds(10))
        // The E3DB API never redirects. Following one would fetch a file body from a host the file-origin check
        // never saw, or leave the pinned forwarder for an unpinned https connection: a 3xx is an error instead.
        configuration.redirectConfiguration = .disallow
        if let proxy {
            configuration.proxy = .server(
                host: proxy.host, port: proxy.port,
                authorization: proxy.credentials.map {
                    .basic(credentials: Data($0.utf8).base64EncodedString())
                })
        }
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    private static let processClient: HTTPClient = makeClient(proxy: nil)
    /// One client per proxy for the life of the process (a client is never shut down, as the process-wide one).
    private static let proxyClients = Mutex<[HTTPProxy: HTTPClient]>([:])

    /// A transport over the process-wide client.
    public init() {
        client = Self.processClient
        tls = ClientTLSOptions()
        tlsConfiguration = nil
        proxy = nil
    }

    /// A transport that trusts `tls`'s CAs (the system's by default), accepts only its pinned keys (any by
    /// default), and connects through `proxy` (directly by default; see ``HTTPProxy/fromEnvironment(for:environment:)``).
    /// Transports with the same proxy share one process-wide client and its connections. With CAs or pins, a
    /// request to an `http://` URL is refused (`.invalidParameter`, ``ClientTLSOptions/check(for:)``) before it is sent.
    /// - Parameters:
    ///   - tls: CAs and pins.
    ///   - proxy: an HTTP proxy (for a pinned server, the forwarder asks it for the tunnel).
    public init(tls: ClientTLSOptions, proxy: HTTPProxy? = nil) {
        if let proxy {
            client = Self.proxyClients.withLock { clients in
                if let existing = clients[proxy] { return existing }
                let made = Self.makeClient(proxy: proxy)
                clients[proxy] = made
                return made
            }
        } else {
            client = Self.processClient
        }
        self.tls = tls
        self.proxy = proxy
        tlsConfiguration = tls.certificateAuthorities.isEmpty ? nil : tls.nioConfiguration
    }

    /// A transport over a client you configure (and shut down).
    public init(client: HTTPClient) {
        self.client = client
        tls = ClientTLSOptions()
        tlsConfiguration = nil
        proxy = nil
    }

    /// An executor on the next event loop of the client's group.
    public var preferredTaskExecutor: (any TaskExecutor)? { EventLoopTaskExecutor(client.eventLoopGroup.next()) }

    public func send(_ request: TransportRequest, timeout: Duration, maxResponseSize: Int) async throws
        -> TransportResponse
    {
        let (prepared, tunnel) = try await prepare(request)
        var r = prepared
        if let body = request.body { r.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await execute(r, through: tunnel, url: request.url, timeout: timeout)
        let body = try await response.body.collect(upTo: maxResponseSize)
        return TransportResponse(
            status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
            body: Data(body.readableBytesView))
    }

    /// Executes `r` (through the pinning forwarder `tunnel`, if any). When the server's certificate does not
    /// verify, looks at its dates to tell an expired certificate (`.certificateExpired`) from an untrusted one.
    func execute(_ r: HTTPClientRequest, through tunnel: PinnedTunnel?, url: String, timeout: Duration) async throws
        -> HTTPClientResponse
    {
        do {
            // The forwarder is a local socket and asks the proxy itself: its requests never go to the proxy.
            let direct = tunnel == nil ? client : Self.processClient
            return try await PinnedTunnel.reporting(tunnel) {
                try await direct.execute(r, timeout: .seconds(max(timeout.components.seconds, 1)))
            }
        } catch {
            guard finalTransportFailure(error, operation: "", url: url)?.code == .untrustedCertificate,
                let components = URLComponents(string: url), let host = components.host,
                let expired = await PinnedTunnel.validityFailure(
                    host: host, port: components.port ?? 443,
                    proxy: proxy)
            else {
                throw error
            }
            throw expired
        }
    }

    /// The AsyncHTTPClient request, with this transport's TLS configuration; for a pinned `https` URL, rewritten
    /// to the forwarder's Unix domain socket (`http+unix`), which connects to the server (its `Host` header kept).
    func prepare(_ request: TransportRequest) async throws -> (HTTPClientRequest, PinnedTunnel?) {
        try tls.check(for: request.url)
        var url = request.url
        var tunnel: PinnedTunnel?
        var host: String?
        if !tls.pins.isEmpty, let components = URLComponents(string: request.url),
            components.scheme?.lowercased() == "https", let name = components.host
        {
            let port = components.port ?? 443
            let forwarder = try await PinnedTunnel.shared(host: name, port: port, tls: tls, proxy: proxy)
            host =
                components.port == nil
                ? components.percentEncodedHost : "\(components.percentEncodedHost ?? name):\(port)"
            let target = components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
            guard let local = URL(httpURLWithSocketPath: forwarder.socketPath, uri: target.isEmpty ? "/" : target)
            else {
                throw E3DBError(.invalidParameter, "the request's path cannot be sent to the pinning forwarder")
            }
            url = local.absoluteString
            tunnel = forwarder
        }
        var r = HTTPClientRequest(url: url)
        r.method = HTTPMethod(rawValue: request.method)
        if let host { r.headers.add(name: "Host", value: host) }
        for (name, value) in request.headers { r.headers.add(name: name, value: value) }
        if tunnel == nil { r.tlsConfiguration = tlsConfiguration }
        return (r, tunnel)
    }

    public func upload(_ request: TransportRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> TransportResponse
    {
        let (prepared, tunnel) = try await prepare(request)
        var r = prepared
        guard let handle = FileHandle(forReadingAtPath: bodyPath) else {
            throw E3DBError(
                .fileIOFailed, "cannot open the upload's body \(bodyPath)", context: .init(item: bodyPath))
        }
        defer { try? handle.close() }
        r.body = .stream(FileChunks(handle: handle), length: .known(size))
        let response = try await execute(r, through: tunnel, url: request.url, timeout: timeout)
        let body = try await response.body.collect(upTo: 1 << 20)
        return TransportResponse(
            status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
            body: Data(body.readableBytesView))
    }

    /// See ``E3DBTransport/download(_:timeout:receive:)``: each piece shares the storage of the NIO buffer it
    /// arrived in.
    public func download(_ request: TransportRequest, timeout: Duration, receive: (Data) async throws -> Void)
        async throws -> TransportResponse
    {
        let (r, tunnel) = try await prepare(request)
        let response = try await execute(r, through: tunnel, url: request.url, timeout: timeout)
        let headers = response.headers.map { ($0.name, $0.value) }
        guard (200..<300).contains(Int(response.status.code)) else {
            let body = try await response.body.collect(upTo: 1 << 20)
            return TransportResponse(
                status: Int(response.status.code), headers: headers, body: Data(body.readableBytesView))
        }
        for try await buffer in response.body where buffer.readableBytes > 0 {
            guard
                let piece = buffer.getData(
                    at: buffer.readerIndex, length: buffer.readableBytes,
                    byteTransferStrategy: .noCopy)
            else { continue }
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
            // Safety: `FileIO.read` writes at most `size` bytes, the writable bytes asked for, inside the closure.
            let n = unsafe buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
                do throws(FileIOError) {
                    return try unsafe FileIO.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[..<size]))
                } catch {
                    failure = error.errno
                    return 0
                }
            }
            if failure != 0 { throw E3DBError(.fileIOFailed, "reading the upload's body failed (errno \(failure))") }
            return n == 0 ? nil : buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(handle: handle) }
}
