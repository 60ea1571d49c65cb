import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Serves `GET /v1/storage/records/{id}` on the connection's event loop, in the channel pipeline, when it can be
/// answered without suspending: a Bearer token in the cache and a storage that reads without suspending (SQLite).
/// Everything else goes on to Hummingbird's router unchanged.
///
/// A record read is the API's most frequent request and the cheapest one to answer: one indexed statement of a few
/// microseconds. Through the router it also pays for a Swift task's resumptions on the global executor, the
/// asynchronous channel's hand-offs between the event loop and that task, and building the request and response
/// values, several times the work of the read itself (docs/performance.md, "Record reads in the pipeline"). Here
/// the head and end of the request are read, the record is read, and the response is written, in one call on the
/// event loop.
///
/// The answer is ``E3DBService/readRecordNow(authorization:id:)``, which shares its read check and body with the
/// router's route; when it declines (token not cached, storage failure, PostgreSQL, a path that is not exactly a
/// UUID) the request is handed to the router as if this handler were not there. Requests keep their order: while
/// a response from the router is outstanding on the connection (HTTP/1.1 pipelining), every request goes to the
/// router. So does every request once the socket's send buffer is full (the router's writer waits for it: a client
/// that pipelines reads without reading the answers is held back there) and every request after a routed one that
/// asked to close the connection. Answers are flushed once per socket read. The handler sits after Hummingbird's
/// connection-state handler, which therefore sees every request and response (idle timeout, graceful shutdown),
/// and it counts and logs what it answers like the router does.
final class RecordReadFastPath: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    static let route = "/v1/storage/records/*"
    private static let prefix = "/v1/storage/records/"
    private static let uuidLength = 36

    private let service: E3DBService
    /// A matching request head waiting for its end, and when it arrived.
    private var held: (head: HTTPRequest, started: ContinuousClock.Instant)?
    /// Requests handed to the router whose response has not ended yet.
    private var routed = 0
    /// A routed request asked to close the connection (or the router wrote a response nobody asked for, as for a
    /// parse error): the router ends the connection, and nothing more is answered here.
    private var closing = false
    /// Answers written since the last flush.
    private var unflushed = false

    init(service: E3DBService) { self.service = service }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if routed == 0, !closing, context.channel.isWritable, Self.mayAnswer(head) {
                held = (head, .now)
                return
            }
            route(head)
        case .body:
            if let (head, _) = held {  // a GET with a body: the router decides what to make of it
                held = nil
                route(head)
                context.fireChannelRead(wrapInboundOut(.head(head)))
            }
        case .end:
            if let (head, started) = held {
                held = nil
                if let authorization = head.headerFields[.authorization],
                   let answer = service.readRecordNow(authorization: authorization, id: Self.id(head)) {
                    write(answer.status, answer.body, context: context)
                    service.finished(method: .get, route: Self.route, status: answer.status, started: started,
                                     inPipeline: true)
                    return
                }
                route(head)
                context.fireChannelRead(wrapInboundOut(.head(head)))
            }
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if unflushed {
            unflushed = false
            context.flush()
        }
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

    /// A GET of exactly `/v1/storage/records/` and 36 characters, with a Bearer token, without a query, an
    /// `Expect` or a `Connection` header (the router closes connections and refuses expectations).
    private static func mayAnswer(_ head: HTTPRequest) -> Bool {
        guard head.method == .get, let path = head.path, path.utf8.count == prefix.utf8.count + uuidLength,
              path.hasPrefix(prefix), head.headerFields[.authorization] != nil,
              head.headerFields[.connection] == nil, head.headerFields[.expect] == nil else { return false }
        return true
    }

    private static func id(_ head: HTTPRequest) -> String { String(head.path?.dropFirst(prefix.count) ?? "") }

    /// Writes a JSON response with the headers the router's responses carry (`Content-Type`, `Content-Length`,
    /// `Date`).
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
