import HummingbirdCore
import Logging
import NIOCore

/// The server's child channel: Hummingbird's HTTP/1.1 channel (`base`, possibly inside TLS) with
/// ``RecordFastPath`` after its connection-state handler when `fastPath` is given, and, with `onLoop`
/// (`--handlers-on-event-loop`), each connection handled on its own event loop: the connection's task prefers an executor
/// that runs its jobs on the channel's event loop, so reading a request, running the route and writing the
/// response happen on the thread that owns the socket. Hummingbird's default runs every connection's task on the
/// global concurrent executor, which costs two thread switches (a futex wake-up each) per request between the
/// event loop and the task. The routes' storage work is short and CPU-bound (a cached SQLite statement on the
/// calling thread, or an await that suspends without holding the loop), so the loop is never held long. Measured
/// (docs/performance.md, "Server"): lower latency with one busy connection, fewer requests/s with 64.
struct E3DBChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let onLoop: Bool
    /// The service whose record reads and writes ``RecordFastPath`` answers; `nil`: every request goes to the router.
    let fastPath: E3DBService?
    /// Open connections per client address: a connection past the limit is closed before anything is read.
    let connections: AddressConnections

    struct TooManyConnections: Error {}

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        if let address = channel.remoteAddress.flatMap(AddressConnections.key) {
            guard connections.open(address) else {
                logger.notice("connection refused: too many from one address", metadata: ["address": .string(address)])
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(TooManyConnections())
            }
            let connections = self.connections
            channel.closeFuture.whenComplete { _ in connections.close(address) }
        }
        let configured = base.setup(channel: channel, logger: logger)
        guard let service = fastPath else { return configured }
        return configured.flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(RecordFastPath(service: service),
                                    position: .after(try pipeline.handler(type: HTTPConnectionStateHandler.self)))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        guard onLoop else { return await base.handle(value: value, logger: logger) }
        await withTaskExecutorPreference(LoopExecutor(loop: value.channel.eventLoop)) {
            await base.handle(value: value, logger: logger)
        }
    }
}

/// Runs Swift concurrency jobs on one event loop.
final class LoopExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: the one stored property is an EventLoop, which is thread-safe.
    let loop: any EventLoop

    init(loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
