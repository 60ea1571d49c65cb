import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Answers record reads and writes in the channel pipeline, on the connection's event loop, without a Swift task
/// per request:
/// `GET /v1/storage/records/{id}` and `POST /v1/storage/records` with a Bearer token in the cache, on either
/// storage. Everything else goes on to Hummingbird's router unchanged.
///
/// Record reads and writes are the API's most frequent requests. Through the router each also pays for a Swift
/// task's resumptions on the global executor, the asynchronous channel's hand-offs between the event loop and that
/// task, and building the request and response values: for a read, several times the work of the read itself
/// (docs/performance.md, "Record reads in the pipeline"). Here a SQLite read is answered in one call on the event
/// loop; a PostgreSQL read is submitted to the storage's grouped reads, and a write's body is decoded and checked
/// on the loop and its row submitted to the storage's grouped inserts; their completions come back to the loop to
/// write the answer.
///
/// The answers are ``E3DBService/readRecordNow(caller:id:)`` and
/// ``E3DBService/writeRecordNow(caller:body:completion:)`` (and `readRecordLater(caller:id:completion:)` for
/// PostgreSQL), which share their checks, bodies and refusals with the router's routes; when they decline (token
/// not cached, a SQLite read's storage failure, a path that is not exactly a UUID) the request is handed to the
/// router as if this handler were not there. Requests keep their order: while a response from the router is
/// outstanding on the connection (HTTP/1.1 pipelining), every request goes to the router, and while a read or
/// write here waits for storage, later requests wait here and nothing more is read from the socket. Every request also goes to the router once the socket's
/// send buffer is full (the router's writer waits for it: a client that pipelines requests without reading the
/// answers is held back there) and after a routed one that asked to close the connection. Answers are flushed
/// once per socket read. The handler sits after Hummingbird's connection-state handler, which therefore sees every
/// request and response (idle timeout, graceful shutdown), and it counts and logs what it answers like the router.
final class RecordFastPath: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    static let route = "/v1/storage/records/*"
    static let writeRoute = "/v1/storage/records"
    private static let prefix = "/v1/storage/records/"
    private static let uuidLength = 36

    private let service: E3DBService
    /// A matching request head waiting for its end, when it arrived, and its caller (the Bearer token's client,
    /// looked up once, when the head arrived).
    private var held: (head: HTTPRequest, started: ContinuousClock.Instant, caller: ClientRow)?
    /// The body of a held record write, as it arrives.
    private var heldBody = ByteBuffer()
    /// A record read or write submitted to storage whose answer is not written yet: later request parts, events
    /// (end of input) and errors wait in `deferred`, in order, until it is; reads from the socket wait too
    /// (`readWithheld`) once ``deferredBeforeWithholding`` parts wait.
    private var waiting = false
    private var deferred = CircularBuffer<Deferred>()
    private var readWithheld = false
    /// Parts passed to the router since the last read-complete (which is what makes it take them).
    private var forwarded = false
    /// Requests handed to the router whose response has not ended yet.
    private var routed = 0
    /// A routed request asked to close the connection (or the router wrote a response nobody asked for, as for a
    /// parse error): the router ends the connection, and nothing more is answered here.
    private var closing = false
    /// Answers written since the last flush.
    private var unflushed = false

    /// Record writes with a larger body go to the router: a body is decoded on the event loop.
    static let largestWriteHere = 64 << 10

    private enum Deferred {
        case part(HTTPRequestPart)
        case event(Any)
        case error(any Error)
    }

    init(service: E3DBService) { self.service = service }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if waiting {
            deferred.append(.part(part))
            return
        }
        handle(part, context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if waiting { deferred.append(.event(event)) } else { context.fireUserInboundEventTriggered(event) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if waiting { deferred.append(.error(error)) } else { context.fireErrorCaught(error) }
    }

    private func handle(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            if routed == 0, !closing, context.channel.isWritable,
               Self.mayRead(head) || mayWrite(head),
               let authorization = head.headerFields[.authorization],
               let caller = service.cachedBearerClient(authorization) {  // else the router authenticates
                held = (head, .now, caller)
                heldBody.clear()
                return
            }
            route(head)
        case .body(let chunk):
            if let (head, _, _) = held {
                var chunk = chunk
                if head.method == .post, heldBody.readableBytes + chunk.readableBytes <= declaredLength(head) {
                    heldBody.writeBuffer(&chunk)
                    return
                }
                // A GET with a body, or more body than declared: the router decides what to make of it.
                routeHeld(head, context: context)
            }
        case .end:
            if let (head, started, caller) = held {
                held = nil
                if answer(head, caller: caller, started: started, context: context) { return }
                routeHeld(head, context: context)
            }
        }
        forward(part, context: context)
    }

    private func forward(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        forwarded = true
        context.fireChannelRead(wrapInboundOut(part))
    }

    /// Answers a held request whose end arrived, or returns `false` for the router.
    private func answer(_ head: HTTPRequest, caller: ClientRow, started: ContinuousClock.Instant,
                        context: ChannelHandlerContext) -> Bool {
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context), eventLoop: loop)
        if head.method == .get {
            if service.nonSuspendingReads != nil {
                guard let answer = service.readRecordNow(caller: caller, id: Self.id(head)) else { return false }
                reply(answer.status, answer.body, to: .get, started: started, context: context)
                return true
            }
            let submitted = service.readRecordLater(caller: caller, id: Self.id(head)) { result in
                loop.execute {
                    let (handler, context) = bound.value
                    let (status, body) = handler.service.readAnswer(result)
                    handler.answered(status, body, to: .get, started: started, context: context)
                }
            }
            if submitted { waiting = true }
            return submitted
        }
        let outcome = service.writeRecordNow(caller: caller, body: Data(heldBody.readableBytesView)) { result in
            loop.execute {
                let (handler, context) = bound.value
                let (status, body) = handler.service.writeAnswer(result)
                handler.answered(status, body, to: .post, started: started, context: context)
            }
        }
        switch outcome {
        case .answered(let status, let body): reply(status, body, to: .post, started: started, context: context)
        case .submitted: waiting = true
        }
        return true
    }

    /// The answer of a submitted record read or write, on the event loop: written and flushed, then what arrived
    /// meanwhile handled in order (and handed to the router with a read-complete when any of it went there), and
    /// reading resumed.
    private func answered(_ status: HTTPResponse.Status, _ body: ByteBuffer, to method: HTTPRequest.Method,
                          started: ContinuousClock.Instant, context: ChannelHandlerContext) {
        waiting = false
        guard context.channel.isActive else {  // the client left while storage worked: nothing to answer or replay
            deferred.removeAll()
            service.finished(method: method, route: method == .get ? Self.route : Self.writeRoute, status: status,
                             started: started, inPipeline: true)
            return
        }
        reply(status, body, to: method, started: started, context: context)
        flushIfNeeded(context)  // before anything deferred reaches the router, which may close the connection
        while !waiting, let next = deferred.popFirst() {
            switch next {
            case .part(let part): handle(part, context: context)
            case .event(let event): context.fireUserInboundEventTriggered(event)
            case .error(let error): context.fireErrorCaught(error)
            }
        }
        flushIfNeeded(context)
        if forwarded {
            forwarded = false
            context.fireChannelReadComplete()
        }
        if !waiting, readWithheld {
            readWithheld = false
            context.read()
        }
    }

    /// Parts that may wait behind an answer before reads from the socket are withheld. A client that sends one
    /// request at a time never gets there, so its socket stays registered for reading: withholding each time
    /// costs two `epoll_ctl` calls per request. A client that pipelines is stopped after about this many parts
    /// (and what one read brought).
    static let deferredBeforeWithholding = 32

    func read(context: ChannelHandlerContext) {
        if waiting, deferred.count >= Self.deferredBeforeWithholding { readWithheld = true } else { context.read() }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushIfNeeded(context)
        forwarded = false
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            routed -= 1
            if routed < 0 { closing = true }
        }
        context.write(data, promise: promise)
    }

    /// Counts a request handed to the router (the caller passes its head on).
    private func route(_ head: HTTPRequest) {
        routed += 1
        if let connection = head.headerFields[.connection], connection.lowercased() != "keep-alive" { closing = true }
    }

    /// Hands a held request to the router: its head, and the body held so far.
    private func routeHeld(_ head: HTTPRequest, context: ChannelHandlerContext) {
        held = nil
        route(head)
        forward(.head(head), context: context)
        if heldBody.readableBytes > 0 {
            forward(.body(heldBody), context: context)
            heldBody = ByteBuffer()
        }
    }

    /// A GET of exactly `/v1/storage/records/` and 36 characters, with a Bearer token, without a query, an
    /// `Expect` or a `Connection` header (the router closes connections and refuses expectations).
    private static func mayRead(_ head: HTTPRequest) -> Bool {
        guard head.method == .get, let path = head.path, path.utf8.count == prefix.utf8.count + uuidLength,
              path.hasPrefix(prefix), head.headerFields[.authorization] != nil,
              head.headerFields[.connection] == nil, head.headerFields[.expect] == nil else { return false }
        return true
    }

    /// A POST of exactly `/v1/storage/records` with a Bearer token in the cache, a `Content-Length` of at most
    /// ``largestWriteHere`` and the server's body limit, and no `Expect`, `Connection` or `Transfer-Encoding`
    /// header.
    private func mayWrite(_ head: HTTPRequest) -> Bool {
        guard head.method == .post, head.path == Self.writeRoute, head.headerFields[.authorization] != nil,
              head.headerFields[.connection] == nil, head.headerFields[.expect] == nil,
              head.headerFields[.transferEncoding] == nil else { return false }
        let length = declaredLength(head)
        return length > 0 && length <= min(service.configuration.maxBodySize, Self.largestWriteHere)
    }

    /// The request's `Content-Length`, or -1.
    private func declaredLength(_ head: HTTPRequest) -> Int {
        head.headerFields[.contentLength].flatMap(Int.init) ?? -1
    }

    private static func id(_ head: HTTPRequest) -> String { String(head.path?.dropFirst(prefix.count) ?? "") }

    /// Writes a JSON response with the headers the router's responses carry (`Content-Type`, `Content-Length`,
    /// `Date`).
    /// Writes an answer (``write(_:_:context:)``) and counts and logs it like the router's.
    private func reply(_ status: HTTPResponse.Status, _ body: ByteBuffer, to method: HTTPRequest.Method,
                       started: ContinuousClock.Instant, context: ChannelHandlerContext) {
        write(status, body, context: context)
        service.finished(method: method, route: method == .get ? Self.route : Self.writeRoute, status: status,
                         started: started, inPipeline: true)
    }

    private func flushIfNeeded(_ context: ChannelHandlerContext) {
        guard unflushed else { return }
        unflushed = false
        context.flush()
    }

    private func write(_ status: HTTPResponse.Status, _ body: ByteBuffer, context: ChannelHandlerContext) {
        let head = HTTPResponse(status: status, headerFields: [
            .contentType: "application/json", .contentLength: String(body.readableBytes), .date: HTTPDate.now(),
        ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.write(wrapOutboundOut(.end(nil)), promise: nil)
        unflushed = true
    }
}

/// The `Date` header value (RFC 9110 IMF-fixdate, always GMT), formatted at most once a second.
enum HTTPDate {
    private static let cached = Mutex<(second: Int, text: String)>((-1, ""))
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func now() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let second = Int(now.tv_sec)
        return cached.withLock { cached in
            if cached.second != second { cached = (second, format(second)) }
            return cached.text
        }
    }

    /// `Thu, 26 Nov 2026 14:00:01 GMT` for seconds since 1970.
    static func format(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var t = tm()
        gmtime_r(&time, &t)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(days[Int(t.tm_wday)]), \(two(t.tm_mday)) \(months[Int(t.tm_mon)]) \(t.tm_year + 1900) "
            + "\(two(t.tm_hour)):\(two(t.tm_min)):\(two(t.tm_sec)) GMT"
    }
}
