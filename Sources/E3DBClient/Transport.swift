import E3DBFiles
package import E3DBPrimitives
public import Foundation

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

/// How the client reaches the server. E3DBClient links no HTTP library: `AsyncHTTPClientTransport` (the
/// `E3DBAsyncHTTPClient` product: SwiftNIO, private CAs, pinned keys, proxies) and `URLSessionTransport` (the
/// `E3DBURLSession` product) implement it, and an app can supply its own. A transport performs one request; the
/// client adds authentication, retries and the operation's name to the error.
///
/// ## Failures
///
/// A transport throws `E3DBError`, with what failed in the message (never a header value, token or presigned
/// URL) and, where it holds no secret, the underlying error as `cause`:
/// - `.transportFailed`: the exchange failed (connecting, sending, receiving, a timeout, a body cut short); the
///   client retries idempotent requests after it.
/// - `.requestCancelled`: the calling task was cancelled.
/// - `.untrustedCertificate`, `.certificateExpired`, `.hostnameMismatch`, `.pinMismatch`, `.tlsHandshakeFailed`:
///   the server's TLS was refused; never retried.
/// - `.invalidParameter`: a request that can never succeed (no host, an invalid URL, header name or value); never
///   retried.
/// - `.invalidResponse`: a body over `maxResponseSize` (1 MiB for an upload's answer or a download's non-2xx
///   answer; its HTTP status is not kept); final.
/// - `.fileIOFailed`: an upload's body that cannot be opened or read; final.
///
/// The client puts the operation in front of these messages (`record read: …`). The one exception to "only
/// `E3DBError`": what a download's `receive` throws comes back unchanged, whatever its type. An error of another
/// type from a transport (one outside E3DBKit) is reported as `.transportFailed` with its type's name, and retried.
public protocol E3DBTransport: Sendable {
    /// Sends a request and returns the whole response.
    /// - Parameters:
    ///   - request: the request.
    ///   - timeout: the time the whole exchange may take.
    ///   - maxResponseSize: the largest body to accept.
    /// - Throws: `E3DBError` (see "Failures").
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
    /// two thread switches per request (see `EventLoopTaskExecutor` in `E3DBAsyncHTTPClient`, and
    /// ``E3DBClient/withTransportAffinity(_:)``).
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

/// The host of `url` as a transport's messages name it ("the server" when it has none): never the rest of the URL,
/// whose path or query may hold a secret (a presigned signature).
package func messageHost(of url: String) -> String {
    URLComponents(string: url)?.host ?? "the server"
}

/// What a download's receiver threw, on its way out of a transport unchanged (see `withTransportFailures`).
package struct TransportReceiverFailure: Error {
    package let error: any Error
    package init(_ error: any Error) { self.error = error }
}

/// Runs one exchange of a transport so that everything it throws is an `E3DBError`, in one place for this
/// package's transports: an `E3DBError` as it is, `.requestCancelled` once the calling task is cancelled, what a
/// receiver threw (wrapped in `TransportReceiverFailure` by the transport) unchanged, and the transport's library's
/// other errors as `map` makes them (`.transportFailed` or a TLS code).
/// - Parameters:
///   - map: the transport's mapping of its library's errors.
///   - body: the exchange.
package func withTransportFailures<T>(
    mapping map: (any Error) -> E3DBError, _ body: () async throws -> T
) async throws -> T {
    do { return try await body() } catch let receiver as TransportReceiverFailure { throw receiver.error } catch {
        if let error = error as? E3DBError { throw error }
        if error is CancellationError || Task.isCancelled {
            throw E3DBError(.requestCancelled, "the request was cancelled", cause: CancellationError())
        }
        throw map(error)
    }
}

extension E3DBClient {
    /// Runs `body` with this client's transport's preferred task executor (``E3DBTransport/preferredTaskExecutor``),
    /// so that every request it makes, and the encryption and decryption around it, run on the thread that owns the
    /// connection: with `AsyncHTTPClientTransport`, an event loop of its group (`EventLoopTaskExecutor`). Useful
    /// around a loop of many sequential requests; with a transport that has no such executor, `body` runs as it
    /// would without it.
    ///
    /// With `AsyncHTTPClientTransport`, each call takes the next loop of the transport's event loop group, so
    /// concurrent tasks that each call it spread over the group's threads. CPU-heavy work inside `body` holds that
    /// loop's other connections back: keep it to the client's own work.
    /// - Parameter body: the work.
    /// - Returns: what `body` returns.
    public func withTransportAffinity<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        guard let executor = transport.preferredTaskExecutor else { return try await body() }
        return try await withTaskExecutorPreference(executor, operation: body)
    }
}
