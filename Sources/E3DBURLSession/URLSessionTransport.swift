public import E3DBClient
import E3DBFiles
import E3DBPrimitives
public import Foundation
public import HTTPTypes
import Synchronization

#if canImport(FoundationNetworking)
    public import FoundationNetworking
#endif

/// An ``E3DBClient/E3DBTransport`` over Foundation's `URLSession` (FoundationNetworking on Linux), for apps that
/// do not want AsyncHTTPClient: the system's proxies, TLS trust and certificate pinning through a session delegate.
///
/// The transport creates its session from your configuration (ephemeral by default) with a delegate of its own,
/// which streams every body and refuses redirects (the E3DB API never redirects: a 3xx comes back as it is, and
/// the client reports it), and passes every authentication challenge to your `delegate`. That is where certificate
/// pinning goes, as with the old e3db-swift SDK:
///
/// ```swift
/// final class Pinning: NSObject, URLSessionDelegate {
///     func urlSession(
///         _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
///         completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
///     ) {
///         guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
///             let trust = challenge.protectionSpace.serverTrust, isPinned(trust)
///         else { return completionHandler(.cancelAuthenticationChallenge, nil) }
///         completionHandler(.useCredential, URLCredential(trust: trust))
///     }
/// }
/// let transport = URLSessionTransport(delegate: Pinning())
/// let client = try E3DBClient(identity: identity, transport: transport)
/// ```
///
/// Why not a `URLSession` you made: swift-corelibs-foundation (Linux) delivers a task's body only to its
/// session's delegate (a task's own delegate sees the body only for completion-handler tasks, which also collect
/// the whole body in memory), so streaming needs the transport's delegate on the session. On Linux libcurl checks
/// the server's certificate against the system's CAs and raises no server-trust challenge: pinning through the
/// delegate works on Apple platforms only.
///
/// Downloads: the body goes to the receiver piece by piece as it arrives. URLSession on Linux cannot pause a
/// transfer (`suspend()` does not stop libcurl reading, and has no `bytes(for:)`), so up to 1 MiB that the
/// receiver has not taken yet is held in memory and the rest goes to an unlinked temporary file (mode 0600) that
/// the receiver then reads: memory stays bounded whatever the receiver's pace, on every platform, by the same code.
public struct URLSessionTransport: E3DBTransport {
    let owner: SessionOwner

    /// A transport over a new session.
    /// - Parameters:
    ///   - configuration: the session's configuration (ephemeral by default: no cookies, cache or credentials
    ///     kept); copied.
    ///   - delegate: receives the session's and tasks' authentication challenges (server trust for certificate
    ///     pinning, client certificates); nil for the system's default handling. Its other methods are not called.
    public init(configuration: URLSessionConfiguration = .ephemeral, delegate: (any URLSessionDelegate)? = nil) {
        owner = SessionOwner(configuration: configuration, delegate: delegate)
    }

    /// The largest piece of a body held in memory ahead of the receiver before the rest goes to a file.
    package static let memoryAhead = 1 << 20

    /// The most body bytes this transport has held in memory ahead of a receiver at once (for this package's
    /// tests: the bound that keeps a download's memory constant).
    package var bufferedBytesHighWater: Int { owner.bufferedHighWater.load(ordering: .relaxed) }

    public func send(_ request: HTTPRequest, body: Data?, timeout: Duration, maxResponseSize: Int) async throws
        -> (Data, HTTPResponse)
    {
        var r = try urlRequest(request, timeout: timeout)
        r.httpBody = body
        return try await mappingFailures(of: r) {
            let task = owner.session.dataTask(with: r)
            return try await owner.run(task, timeout: timeout) { exchange, response in
                try await exchange.collect(response, upTo: maxResponseSize)
            }
        }
    }

    public func upload(_ request: HTTPRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> (Data, HTTPResponse)
    {
        var r = try urlRequest(request, timeout: timeout)
        r.setValue(String(size), forHTTPHeaderField: "Content-Length")
        return try await mappingFailures(of: r) {
            guard FileManager.default.isReadableFile(atPath: bodyPath) else {
                throw E3DBError(
                    .fileIOFailed, "cannot open the upload's body \(bodyPath)", context: .init(item: bodyPath))
            }
            // The session reads the file as it sends it.
            let task = owner.session.uploadTask(with: r, fromFile: URL(fileURLWithPath: bodyPath))
            return try await owner.run(task, timeout: timeout) { exchange, response in
                try await exchange.collect(response, upTo: 1 << 20)
            }
        }
    }

    public func download(_ request: HTTPRequest, timeout: Duration, receive: (Data) async throws -> Void)
        async throws -> (Data, HTTPResponse)
    {
        let r = try urlRequest(request, timeout: timeout)
        return try await mappingFailures(of: r) {
            let task = owner.session.dataTask(with: r)
            return try await owner.run(task, timeout: timeout) { exchange, response in
                let head = try Self.head(response)
                guard head.status.kind == .successful else {
                    return try await exchange.collect(response, upTo: 1 << 20)
                }
                while let piece = try await exchange.next() {
                    do { try await receive(piece) } catch { throw TransportReceiverFailure(error) }
                }
                try exchange.checkComplete(response)
                return (Data(), head)
            }
        }
    }

    /// The URLSession request for `request`, the one place the typed request is mapped: its URL
    /// (`absoluteURL()`, byte for byte), method and header fields in order. `E3DBError` `.invalidParameter` for one
    /// that can never succeed (never retried): a request that is not to an `http` or `https` URL with a host. Its
    /// header fields need no check: `HTTPField` holds no line break, NUL or other control character.
    func urlRequest(_ request: HTTPRequest, timeout: Duration) throws(E3DBError) -> URLRequest {
        guard let url = URL(string: try request.absoluteURL()), url.host?.isEmpty == false else {
            throw E3DBError(
                .invalidParameter, "the request's URL is not an absolute http or https URL with a host")
        }
        var r = URLRequest(url: url)
        r.httpMethod = request.method.rawValue
        // URLSession's timeout is the longest pause between two pieces; the whole exchange's deadline is run's.
        r.timeoutInterval = max(Double(timeout.components.seconds), 1)
        for field in request.headerFields { r.addValue(field.value, forHTTPHeaderField: field.name.rawName) }
        return r
    }

    /// URLSession's response head as an `HTTPResponse`: the one place its status and headers are mapped.
    static func head(_ response: HTTPURLResponse) throws(E3DBError) -> HTTPResponse {
        var fields: [(name: String, value: String)] = []
        for case (let name as String, let value) in response.allHeaderFields { fields.append((name, "\(value)")) }
        return HTTPResponse(
            status: try HTTPResponse.Status(received: response.statusCode),
            headerFields: try HTTPFields(received: fields))
    }
}

/// The session and its delegate; invalidates the session when the last transport copy goes.
final class SessionOwner: Sendable {
    let session: URLSession
    let router: SessionDelegate
    /// See ``URLSessionTransport/bufferedBytesHighWater``.
    let bufferedHighWater = Atomic<Int>(0)

    init(configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?) {
        router = SessionDelegate(caller: delegate)
        let queue = OperationQueue()
        // One at a time: the pieces of a body arrive in order.
        queue.maxConcurrentOperationCount = 1
        session = URLSession(configuration: configuration, delegate: router, delegateQueue: queue)
    }

    deinit { session.finishTasksAndInvalidate() }

    /// Runs `task` within `timeout`: awaits its response, then `body` (which reads the response's body from the
    /// exchange). Cancelling the calling task, or the deadline, cancels the URLSession task.
    func run(
        _ task: URLSessionTask, timeout: Duration,
        _ body: (Exchange, HTTPURLResponse) async throws -> (Data, HTTPResponse)
    ) async throws -> (Data, HTTPResponse) {
        let exchange = Exchange(task: task, owner: self)
        router.register(exchange, for: task)
        defer {
            // A task whose body was not read to its end (a receiver that threw, a limit) stops here.
            exchange.fail(CancellationError())
            router.unregister(task)
            exchange.close()
        }
        let deadline = Task {
            try await Task.sleep(for: timeout)
            exchange.fail(URLError(.timedOut))
        }
        defer { deadline.cancel() }
        return try await withTaskCancellationHandler {
            task.resume()
            let response = try await exchange.response()
            return try await body(exchange, response)
        } onCancel: {
            exchange.fail(CancellationError())
        }
    }
}

/// The session's delegate: hands each task's events to its `Exchange`, refuses redirects, and passes
/// authentication challenges to the caller's delegate.
final class SessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
    /// The caller's delegate, called from the session's serial queue as URLSession itself would.
    let caller: (any URLSessionDelegate)?
    let exchanges = Mutex<[Int: Exchange]>([:])

    init(caller: (any URLSessionDelegate)?) { self.caller = caller }

    func register(_ exchange: Exchange, for task: URLSessionTask) {
        exchanges.withLock { $0[task.taskIdentifier] = exchange }
    }

    func unregister(_ task: URLSessionTask) { _ = exchanges.withLock { $0.removeValue(forKey: task.taskIdentifier) } }

    func exchange(_ task: URLSessionTask) -> Exchange? { exchanges.withLock { $0[task.taskIdentifier] } }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        exchange(dataTask)?.received(response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        exchange(dataTask)?.append(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let exchange = exchange(task) else { return }
        if let error { exchange.failed(error) } else { exchange.finish(task.response) }
    }

    /// Never followed: the 3xx response comes back as it is.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(
        _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(FoundationNetworking)
            guard let caller else { return completionHandler(.performDefaultHandling, nil) }
            caller.urlSession(session, didReceive: challenge, completionHandler: completionHandler)
        #else
            guard let method = caller?.urlSession(_:didReceive:completionHandler:) else {
                return completionHandler(.performDefaultHandling, nil)
            }
            method(session, challenge, completionHandler)
        #endif
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(FoundationNetworking)
            if let caller = caller as? any URLSessionTaskDelegate {
                caller.urlSession(session, task: task, didReceive: challenge, completionHandler: completionHandler)
            } else {
                urlSession(session, didReceive: challenge, completionHandler: completionHandler)
            }
        #else
            if let method = (caller as? any URLSessionTaskDelegate)?.urlSession(
                _:task:didReceive:completionHandler:)
            {
                method(session, task, challenge, completionHandler)
            } else {
                urlSession(session, didReceive: challenge, completionHandler: completionHandler)
            }
        #endif
    }
}
