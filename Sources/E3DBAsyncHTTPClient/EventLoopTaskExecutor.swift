public import NIOCore

/// A Swift concurrency task executor that runs jobs on one SwiftNIO event loop.
///
/// AsyncHTTPClient runs every connection on an event loop thread. A task that awaits a request on the global
/// concurrent executor is suspended there, resumed from the event loop, and hops back: two thread switches per
/// request, each a futex wake-up and a context switch, which at a few hundred microseconds per request is a large
/// share of a record read. A task that prefers this executor (`withTaskExecutorPreference`) runs on the event loop
/// itself, so AsyncHTTPClient picks a connection on the same loop and the response resumes the task without
/// leaving the thread. ``AsyncHTTPClientTransport/preferredTaskExecutor`` is one, and E3DBClient's
/// `withTransportAffinity(_:)` sets it up.
public final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: the only stored property is an EventLoop, which is thread-safe (it is Sendable).
    /// The event loop the jobs run on.
    public let eventLoop: any EventLoop

    /// An executor for `eventLoop`.
    public init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Whether the calling code runs on this executor's event loop thread.
    public var isCurrent: Bool { eventLoop.inEventLoop }

    /// Runs `job` on the event loop (in the current iteration's task queue when called on the loop's thread).
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { unsafe job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
