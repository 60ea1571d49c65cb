public import AsyncHTTPClient
public import E3DBClient
import E3DBFiles
import E3DBPrimitives
public import Foundation
public import HTTPTypes
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOHTTPTypesHTTP1
import NIOSSL
import Synchronization

/// E3DBClient's transport over AsyncHTTPClient, the one `e3dbkit client` uses: one process-wide AsyncHTTPClient
/// (connection pooling, keep-alive, TLS) that fails a request at once when the server refuses the connection (no silent reconnect loop until the deadline; the
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

    public func send(_ request: HTTPRequest, body: Data?, timeout: Duration, maxResponseSize: Int) async throws
        -> (Data, HTTPResponse)
    {
        let url = try request.absoluteURL()
        return try await mappingFailures(url: url) {
            let (prepared, tunnel) = try await prepare(request, url: url)
            var r = prepared
            if let body { r.body = .bytes(ByteBuffer(bytes: body)) }
            let response = try await execute(r, through: tunnel, url: url, timeout: timeout)
            return try await Self.collect(response, upTo: maxResponseSize)
        }
    }

    /// The whole response (any status), refused as `.invalidResponse` once its body exceeds `limit` bytes.
    static func collect(_ response: HTTPClientResponse, upTo limit: Int) async throws -> (Data, HTTPResponse) {
        let head = try Self.head(response)
        let body: ByteBuffer
        do { body = try await response.body.collect(upTo: limit) } catch is NIOTooManyBytesError {
            throw E3DBError(
                .invalidResponse, "the response body is larger than the \(limit) bytes accepted",
                context: .init(expected: limit))
        }
        return (Data(body.readableBytesView), head)
    }

    /// AsyncHTTPClient's response head as an `HTTPResponse`: the one place its status and headers are mapped.
    static func head(_ response: HTTPClientResponse) throws(E3DBError) -> HTTPResponse {
        HTTPResponse(
            status: try HTTPResponse.Status(received: Int(response.status.code)),
            headerFields: try HTTPFields(received: response.headers.map { ($0.name, $0.value) }))
    }

    /// Runs one exchange with `url`: everything it throws is `E3DBError` (`transportFailure(_:url:)`).
    func mappingFailures<T>(url: String, _ body: () async throws -> T) async throws -> T {
        try await withTransportFailures(mapping: { transportFailure($0, url: url) }, body)
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
            guard let components = URLComponents(string: url), let host = components.host,
                tlsFailure(error, host: host)?.code == .untrustedCertificate,
                let expired = await PinnedTunnel.validityFailure(
                    host: host, port: components.port ?? 443,
                    proxy: proxy)
            else {
                throw error
            }
            throw expired
        }
    }

    /// The AsyncHTTPClient request for `request` (whose URL is `url`, `request.absoluteURL()`), the one place the
    /// typed request is mapped: its method, its header fields in order, this transport's TLS configuration; for a
    /// pinned `https` URL, rewritten to the forwarder's Unix domain socket (`http+unix`), which connects to the
    /// server (the request's authority as its `Host` header, its path and query as they are).
    func prepare(_ request: HTTPRequest, url: String) async throws -> (HTTPClientRequest, PinnedTunnel?) {
        try tls.check(for: url)
        var target = url
        var tunnel: PinnedTunnel?
        var host: String?
        if !tls.pins.isEmpty, let components = URLComponents(string: url), components.scheme?.lowercased() == "https",
            let name = components.host
        {
            let forwarder = try await PinnedTunnel.shared(
                host: name, port: components.port ?? 443, tls: tls, proxy: proxy)
            guard let local = URL(httpURLWithSocketPath: forwarder.socketPath, uri: request.path ?? "/") else {
                throw E3DBError(.invalidParameter, "the request's path cannot be sent to the pinning forwarder")
            }
            host = request.authority
            target = local.absoluteString
            tunnel = forwarder
        }
        var r = HTTPClientRequest(url: target)
        r.method = HTTPMethod(request.method)
        if let host { r.headers.add(name: "Host", value: host) }
        r.headers.add(contentsOf: HTTPHeaders(request.headerFields))
        if tunnel == nil { r.tlsConfiguration = tlsConfiguration }
        return (r, tunnel)
    }

    public func upload(_ request: HTTPRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> (Data, HTTPResponse)
    {
        let url = try request.absoluteURL()
        return try await mappingFailures(url: url) {
            let (prepared, tunnel) = try await prepare(request, url: url)
            var r = prepared
            // The body sequence owns the descriptor: AsyncHTTPClient may still read it after `execute` returned.
            let file = try await onOwnThread(named: "e3dbkit-upload", permits: FileChunks.permits) {
                () throws(E3DBError) -> OwnedDescriptor in
                do throws(FileIOError) { return try OwnedDescriptor(opening: bodyPath, flags: O_RDONLY) } catch {
                    throw E3DBError(
                        .fileIOFailed, "cannot open the upload's body \(bodyPath)",
                        context: .init(item: bodyPath))
                }
            }
            r.body = .stream(FileChunks(file: file), length: .known(size))
            let response = try await execute(r, through: tunnel, url: url, timeout: timeout)
            return try await Self.collect(response, upTo: 1 << 20)
        }
    }

    /// See `E3DBTransport.download(_:timeout:receive:)`: each piece shares the storage of the NIO buffer it
    /// arrived in.
    public func download(_ request: HTTPRequest, timeout: Duration, receive: (Data) async throws -> Void)
        async throws -> (Data, HTTPResponse)
    {
        let url = try request.absoluteURL()
        return try await mappingFailures(url: url) {
            let (r, tunnel) = try await prepare(request, url: url)
            let response = try await execute(r, through: tunnel, url: url, timeout: timeout)
            let head = try Self.head(response)
            guard head.status.kind == .successful else { return try await Self.collect(response, upTo: 1 << 20) }
            for try await buffer in response.body where buffer.readableBytes > 0 {
                guard
                    let piece = buffer.getData(
                        at: buffer.readerIndex, length: buffer.readableBytes,
                        byteTransferStrategy: .noCopy)
                else { continue }
                do { try await receive(piece) } catch { throw TransportReceiverFailure(error) }
            }
            return (Data(), head)
        }
    }
}

/// A file read in 1 MiB chunks as an async sequence of buffers (an upload body in constant memory). Each chunk is
/// read on a thread of its own (`onOwnThread`, at most `blockingThreadLimit` at once in the process), so that no
/// thread of Swift concurrency's cooperative pool waits for the disk; the thread costs some 0.1 ms, a tenth of what
/// sending the MiB takes.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    /// The body's file, closed when the last of this sequence, its iterators and their reads lets it go.
    let file: OwnedDescriptor

    /// The threads reading upload bodies, for all transports of the process.
    static let permits = AsyncPermits<Never>(blockingThreadLimit)
    static let chunkBytes = 1 << 20

    struct AsyncIterator: AsyncIteratorProtocol {
        let file: OwnedDescriptor
        /// Whether a read came short: the file has ended.
        private var atEnd = false

        init(file: OwnedDescriptor) { self.file = file }

        mutating func next() async throws -> ByteBuffer? {
            guard !atEnd else { return nil }
            // The thread holds the file itself: it stays open until the read is done, whoever returned meanwhile.
            let file = self.file
            let buffer = try await onOwnThread(named: "e3dbkit-upload", permits: FileChunks.permits) {
                () throws(E3DBError) -> ByteBuffer in try FileChunks.read(file.fd)
            }
            // `readFully` comes short only at the end of the file: no thread is started to read nothing.
            atEnd = buffer.readableBytes < FileChunks.chunkBytes
            return buffer.readableBytes == 0 ? nil : buffer
        }
    }

    /// Reads up to `chunkBytes` from `fd` (blocking) straight into the buffer that goes to the socket (no `Data` in
    /// between): fewer only at the end of the file.
    static func read(_ fd: Int32) throws(E3DBError) -> ByteBuffer {
        let size = chunkBytes
        var buffer = ByteBufferAllocator().buffer(capacity: size)
        var failure: Int32 = 0
        // Safety: `FileIO.readFully` writes at most `size` bytes, the writable bytes asked for, inside the closure.
        _ = unsafe buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
            do throws(FileIOError) {
                return try unsafe FileIO.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[..<size]))
            } catch {
                failure = error.errno
                return 0
            }
        }
        if failure != 0 { throw E3DBError(.fileIOFailed, "reading the upload's body failed (errno \(failure))") }
        return buffer
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(file: file) }
}
