import E3DBFiles
package import E3DBPrimitives
public import Foundation
public import HTTPTypes

/// How the client reaches the server. E3DBClient links no HTTP library: `AsyncHTTPClientTransport` (the
/// `E3DBAsyncHTTPClient` product: SwiftNIO, private CAs, pinned keys, proxies) and `URLSessionTransport` (the
/// `E3DBURLSession` product) implement it, and an app can supply its own. A transport performs one request; the
/// client adds authentication, retries and the operation's name to the error.
///
/// Requests and responses are swift-http-types' (`HTTPTypes`, pure Swift types): the transport gets an
/// `HTTPRequest` (method, scheme, authority, path, `headerFields`) and a body, and answers with the response's
/// body and its `HTTPResponse` (status, `headerFields`), in the order of URLSession's own `HTTPTypesFoundation`
/// methods, so a transport over URLSession's `data(for:)` and `upload(for:from:)` passes their answers on. Header
/// names are `HTTPField.Name` (case-insensitive); a request the client makes carries no value `HTTPField` would
/// have to change (the client refuses a line break or NUL as `.invalidParameter` before the request exists).
///
/// ## The request's path
///
/// `path` holds the path and the query exactly as the client was given them: a presigned file URL's query (its
/// signature) must reach the server byte for byte. Join `scheme`, `"://"`, `authority` and `path` into the URL
/// your library takes, and decode or encode none of it again (Foundation's `URL(string:)` keeps a valid URL as it
/// is).
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
/// - `.invalidParameter`: a request that can never succeed (no `http` or `https` scheme, no authority, a path that is
///   not a URL's); never retried.
/// - `.invalidResponse`: a body over `maxResponseSize` (1 MiB for an upload's answer or a download's non-2xx
///   answer; its HTTP status is not kept), a status outside 100...999, more than 1,000 header fields; final.
/// - `.fileIOFailed`: an upload's body that cannot be opened or read; final.
///
/// The client puts the operation in front of these messages (`record read: …`). The one exception to "only
/// `E3DBError`": what a download's `receive` throws comes back unchanged, whatever its type. An error of another
/// type from a transport (one outside E3DBKit) is reported as `.transportFailed` with its type's name, and retried.
///
/// ## Duties
///
/// What the client relies on a transport for (a transport of your own needs swift-http-types, product `HTTPTypes`,
/// in its `Package.swift`):
/// - Never follow a redirect: a 3xx comes back as it is (a default `URLSession` follows them: give it a delegate
///   whose `willPerformHTTPRedirection` answers nil). Following one would fetch a file body from a host the client's
///   file-origin check never saw.
/// - Honour `timeout`, the bound on the whole exchange (`.transportFailed` past it).
/// - Cap what is collected: `send`'s body at `maxResponseSize`, an upload's answer and a download's non-2xx answer
///   at 1 MiB (`.invalidResponse` past it); never call `receive` with an empty `Data`.
/// - Refuse a status outside 100...999 as `.invalidResponse` (`HTTPResponse.Status(code:)` accepts 0...999).
public protocol E3DBTransport: Sendable {
    /// Sends a request and returns the whole response.
    /// - Parameters:
    ///   - request: the request.
    ///   - body: the request's body, if any.
    ///   - timeout: the time the whole exchange may take.
    ///   - maxResponseSize: the largest body to accept.
    /// - Returns: the response's body and head.
    /// - Throws: `E3DBError` (see "Failures").
    func send(_ request: HTTPRequest, body: Data?, timeout: Duration, maxResponseSize: Int) async throws
        -> (Data, HTTPResponse)

    /// Sends `request` with the file at `bodyPath` as its body, streamed (constant memory), and returns the
    /// response (its body collected up to 1 MiB).
    func upload(_ request: HTTPRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> (Data, HTTPResponse)

    /// Sends `request` and hands a 2xx response's body to `receive` piece by piece, in order, as it arrives,
    /// awaiting each call before reading more (so a slow receiver slows the download instead of filling memory).
    /// Pieces may have any non-zero size. Any other status comes back with its body collected up to 1 MiB, and
    /// `receive` is not called.
    ///
    /// Returns once the whole body was received (with an empty body); throws if the exchange fails or the body
    /// ends before its `Content-Length`, and rethrows at once what `receive` throws (stop reading then; the
    /// client has given up on the response). With URLSession, `bytes(for:)` read in batches or a data-task
    /// delegate feeding an `AsyncStream` both fit.
    /// - Parameters:
    ///   - request: the request.
    ///   - timeout: the time the whole exchange may take.
    ///   - receive: consumes the next piece of the body; the piece is the callee's to keep.
    func download(_ request: HTTPRequest, timeout: Duration, receive: (Data) async throws -> Void)
        async throws -> (Data, HTTPResponse)

    /// A task executor on the thread that runs this transport's connections, or nil. Tasks that prefer it avoid
    /// two thread switches per request (see `EventLoopTaskExecutor` in `E3DBAsyncHTTPClient`, and
    /// ``E3DBClient/withTransportAffinity(_:)``).
    /// Each read may return a different executor of the transport's threads.
    var preferredTaskExecutor: (any TaskExecutor)? { get }
}

extension E3DBTransport {
    /// Sends `request` and streams a 2xx response's body into the file at `destinationPath` (created, or truncated,
    /// and mode 0600 either way; a symbolic link there is refused, never written through); any other status comes
    /// back with its body collected up to 1 MiB and the file left empty. Built on ``download(_:timeout:receive:)``.
    /// The body is gathered in memory into batches of 4 MiB, each written on a thread of its own (as the file's
    /// creation and the final write and `fsync`: `FileWork`'s I/O steps), never on the caller's thread of Swift
    /// concurrency's cooperative pool; the download waits while a batch is written. A symbolic link at the path, or a
    /// failure to create, write or sync the file, is `E3DBError` `.fileIOFailed`; cancellation while a batch waits
    /// for its thread is `.requestCancelled`.
    public func download(_ request: HTTPRequest, to destinationPath: String, timeout: Duration) async throws
        -> (Data, HTTPResponse)
    {
        let fd = try await FileWork.run("download", kind: .io) { _ throws -> Int32 in
            // Safety: the path is lent to `open` as a NUL-terminated copy for the call only.
            let fd = FileIO.retryingInterrupted {
                unsafe open(destinationPath, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
            }
            guard fd >= 0 else {
                let code = errno
                throw E3DBError(
                    .fileIOFailed,
                    code == ELOOP
                        ? "the download's file \(destinationPath) is a symbolic link; it is not written through"
                        : "cannot create the download's file \(destinationPath)",
                    context: .init(item: destinationPath),
                    cause: FileIOError("open", path: destinationPath, errno: code))
            }
            // An existing file keeps its mode through `open`: the download's is 0600 whatever it was.
            guard fchmod(fd, 0o600) == 0 else {
                let code = errno
                close(fd)
                throw E3DBError(
                    .fileIOFailed, "cannot make the download's file \(destinationPath) private (mode 0600)",
                    context: .init(item: destinationPath),
                    cause: FileIOError("fchmod", path: destinationPath, errno: code))
            }
            return fd
        }
        defer { close(fd) }
        /// Writes `batch` (and, at the end, syncs the file) on a thread of file work.
        func write(_ batch: Data, sync: Bool) async throws {
            try await FileWork.run("download", kind: .io) { _ throws in
                do throws(FileIOError) {
                    if !batch.isEmpty { try FileIO.writeAll(fd, batch.bytes, path: destinationPath) }
                    if sync { try FileIO.sync(fd, path: destinationPath) }
                } catch {
                    throw E3DBError(
                        .fileIOFailed, "writing the download's file \(destinationPath) failed",
                        context: .init(item: destinationPath), cause: error)
                }
            }
        }
        /// An empty batch with room for a whole one (and the piece that fills it), so that it never grows by doubling.
        func emptyBatch() -> Data {
            var batch = Data()
            batch.reserveCapacity(downloadBatchSize + downloadBatchSlack)
            return batch
        }
        var batch = emptyBatch()
        let response = try await download(request, timeout: timeout) { piece in
            batch.append(piece)
            if batch.count >= downloadBatchSize {
                let full = batch
                batch = Data()
                try await write(full, sync: false)
                batch = emptyBatch()  // once the full one is written: one batch in memory at a time
            }
        }
        try await write(batch, sync: true)
        return response
    }

    /// None by default.
    public var preferredTaskExecutor: (any TaskExecutor)? { nil }
}

/// The bytes of a download that `download(_:to:timeout:)` gathers before it writes them to the file (one thread of
/// file work per batch: its start, 55 to 330 µs, is small beside writing 4 MiB).
let downloadBatchSize = 4 << 20

/// The room a download's batch keeps beyond `downloadBatchSize` for the piece that fills it (transports hand pieces
/// of at most 1 MiB; a larger one makes the batch grow once).
let downloadBatchSlack = 1 << 20

/// The host of `url` as a transport's messages name it ("the server" when it has none): never the rest of the URL,
/// whose path or query may hold a secret (a presigned signature).
package func messageHost(of url: String) -> String {
    URLComponents(string: url)?.host ?? "the server"
}

extension HTTPRequest {
    /// A request for the absolute `url` that keeps its text byte for byte: its scheme, its authority (host and
    /// port) and its path with the query as the path (a presigned URL's signature is neither decoded nor encoded
    /// again); a fragment is dropped. (Not HTTPTypesFoundation's `init(method:url:headerFields:)`, which takes a
    /// Foundation `URL`, may re-encode it and traps on one without a scheme.)
    /// - Parameters:
    ///   - method: the method.
    ///   - checkedURL: an absolute `http` or `https` URL with a host and no user info, in printable ASCII.
    ///   - headerFields: the header fields.
    /// - Throws: `E3DBError` `.invalidParameter` for any other URL; the message quotes no part of it (its query may
    ///   hold a signature).
    package init(method: Method, checkedURL url: String, headerFields: HTTPFields = [:]) throws(E3DBError) {
        guard isURLText(url.utf8), let components = URLComponents(string: url),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            components.host?.isEmpty == false, components.user == nil, components.password == nil,
            let separator = url.range(of: "://")
        else {
            throw E3DBError(
                .invalidParameter, "the request's URL is not an absolute http or https URL with a host")
        }
        let rest = url[separator.upperBound...]
        let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let target = rest[end...].prefix { $0 != "#" }
        self.init(
            method: method, scheme: String(url[..<separator.lowerBound]), authority: String(rest[..<end]),
            path: target.first == "/" ? String(target) : "/" + target, headerFields: headerFields)
    }

    /// The request's URL, `scheme://authority` and the path with its query as they are, for a transport whose
    /// library takes a URL (see "The request's path" at `E3DBTransport`).
    /// - Throws: `E3DBError` `.invalidParameter` for a request that is not `http` or `https`, has no authority or
    ///   one with user info or a `/`, `?` or `#` (which would move the URL's path), a path that does not start with
    ///   `/` or holds a `#` (which would cut it short), or any of them outside printable ASCII; the message quotes
    ///   none of them.
    package func absoluteURL() throws(E3DBError) -> String {
        guard let scheme, ["http", "https"].contains(scheme.lowercased()), let authority, !authority.isEmpty,
            isURLText(authority.utf8), !authority.utf8.contains(where: { "@/?#".utf8.contains($0) }), let path,
            path.hasPrefix("/"), isURLText(path.utf8), !path.utf8.contains(UInt8(ascii: "#"))
        else {
            throw E3DBError(
                .invalidParameter,
                "the request is not to an http or https URL with a host and a path (scheme, authority and path)")
        }
        return scheme + "://" + authority + path
    }
}

/// Whether `bytes` are printable ASCII (`!` to `~`): all a URL may hold, without spaces or control characters.
private func isURLText(_ bytes: String.UTF8View) -> Bool {
    !bytes.isEmpty && bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F }
}

extension HTTPField {
    /// The field `name: value`, refusing a value that `init(name:value:)` would change (it turns a line break,
    /// NUL or another control character into a space, and trims leading and trailing spaces): a header the
    /// server would read differently from what the client meant.
    /// - Throws: `E3DBError` `.invalidParameter` naming the header, never its value (a token, say).
    package init(name: Name, checkedValue value: String) throws(E3DBError) {
        guard HTTPField.isValidValue(value) else {
            throw E3DBError(
                .invalidParameter,
                "the value of the request's \(name.rawName) header holds a character HTTP cannot carry (a line "
                    + "break, NUL or another control character) or leading or trailing spaces",
                context: .init(field: name.rawName))
        }
        self.init(name: name, value: value)
    }
}

extension HTTPResponse {
    /// The most header fields a transport takes in a response: `HTTPFields` traps past `UInt16.max`, and no
    /// answer of the API or an object store comes near this.
    package static let maxHeaderFields = 1_000
}

extension HTTPFields {
    /// A response's header fields as a transport received them, in order, all of them (`Host` too), but for a
    /// field whose name is not an HTTP token, which `HTTPFields` cannot hold: the one place both transports map them.
    /// - Parameter fields: the response's fields, names and values.
    /// - Throws: `E3DBError` `.invalidResponse` for more than `HTTPResponse.maxHeaderFields` fields.
    package init(received fields: [(name: String, value: String)]) throws(E3DBError) {
        guard fields.count <= HTTPResponse.maxHeaderFields else {
            throw E3DBError(
                .invalidResponse,
                "the server's response has \(fields.count) header fields, more than the "
                    + "\(HTTPResponse.maxHeaderFields) accepted",
                context: .init(expected: HTTPResponse.maxHeaderFields, actual: fields.count))
        }
        self.init()
        reserveCapacity(fields.count)
        for (name, value) in fields {
            guard let name = HTTPField.Name(name) else { continue }
            append(HTTPField(name: name, value: value))
        }
    }
}

extension HTTPResponse.Status {
    /// The status `code` of a response a transport received, or `E3DBError` `.invalidResponse` for a number that
    /// is no HTTP status (`init(code:)` traps outside 0...999).
    package init(received code: Int) throws(E3DBError) {
        guard (100...999).contains(code) else {
            throw E3DBError(
                .invalidResponse, "the server's status \(code) is not an HTTP status", context: .init(actual: code))
        }
        self.init(code: code)
    }
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
        if let error = error as? E3DBError {
            // Bounded blocking work (an upload's file reads) refused for a cancelled task: the transport's code.
            guard error.code == .cancelled else { throw error }
            throw E3DBError(.requestCancelled, "the request was cancelled", cause: error)
        }
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
