import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs `body` (blocking work, or long CPU work such as a memory-hard KDF) on a new thread of its own and awaits its
/// outcome, so that no thread of Swift concurrency's cooperative pool (one per core) is held meanwhile. The one
/// helper for this in E3DBKit: the client's file decryption from a download pipe, the test support's waits for
/// child processes, and, bounded by permits (`onOwnThread(named:permits:onCancel:_:)`), the store's async calls
/// whose work is not only database accesses and the client's file work.
///
/// The thread is started with `pthread_create` itself, whose failure (a process or thread limit, no memory) ends
/// the call with `threadUnavailable` without running `body` (Foundation's `Thread.start` ignores it on Linux, and
/// the caller would wait forever). `body`, and everything it captures, is released on the thread before the caller
/// is resumed: once this returns, the thread holds nothing of the caller's.
/// - Parameters:
///   - name: the thread's name (seen in debuggers and crash reports; Linux keeps its first 15 bytes).
///   - body: the work.
/// - Returns: what `body` returns.
/// - Throws: what `body` throws, or `threadUnavailable` when no thread could be started.
package func onOwnThread<T: Sendable>(
    named name: String = "e3dbkit-blocking", _ body: @escaping @Sendable () throws(E3DBError) -> T
) async throws(E3DBError) -> T {
    try await outcomeOnOwnThread(named: name, body).get().get()
}

/// `onOwnThread(named:_:)` for work that throws any error.
package func onOwnThread<T: Sendable>(
    named name: String = "e3dbkit-blocking", _ body: @escaping @Sendable () throws -> T
) async throws -> T {
    try await outcomeOnOwnThread(named: name, body).get().get()
}

/// `onOwnThread(named:_:)` bounded and cancellable: the one form of blocking work that many callers may start at
/// once (the store's async calls, the client's file work and upload bodies, the server's file bodies; each kind
/// with its own `blockingThreadLimit` permits). `body` runs once a permit of `permits` is free: a caller
/// beyond them waits, suspended, and one whose task is cancelled before it gets a permit (or before the call) ends
/// with `cancelled` and starts no thread. Cancelling the caller's task later calls `onCancel`, which tells the work
/// to stop (the file cipher's `FileCancellation`); work that does not check runs to its end, and its outcome is
/// returned to the cancelled caller. The permit is given back once the thread has ended.
/// - Parameters:
///   - name: the thread's name, and the work's in the `cancelled` message.
///   - permits: the bound.
///   - onCancel: called once when the caller's task is cancelled while the work runs.
///   - body: the work.
/// - Returns: what `body` returns.
/// - Throws: `cancelled` (before a permit), `threadUnavailable`, or what `body` throws.
package func onOwnThread<T: Sendable>(
    named name: String, permits: AsyncPermits<Never>, onCancel: @escaping @Sendable () -> Void = {},
    _ body: @escaping @Sendable () throws(E3DBError) -> T
) async throws(E3DBError) -> T {
    try await permittedOutcome(named: name, permits: permits, onCancel: onCancel, body).get().get()
}

/// `onOwnThread(named:permits:onCancel:_:)` for work that throws any error.
package func onOwnThread<T: Sendable>(
    named name: String, permits: AsyncPermits<Never>, onCancel: @escaping @Sendable () -> Void = {},
    _ body: @escaping @Sendable () throws -> T
) async throws -> T {
    try await permittedOutcome(named: name, permits: permits, onCancel: onCancel, body).get().get()
}

/// The outcome of `body` run on a thread of its own once a permit is free; `cancelled` when the caller was
/// cancelled before it got one, `threadUnavailable` when no thread could be started.
private func permittedOutcome<T: Sendable, Failure: Error>(
    named name: String, permits: AsyncPermits<Never>, onCancel: @escaping @Sendable () -> Void,
    _ body: @escaping @Sendable () throws(Failure) -> T
) async -> Result<Result<T, Failure>, E3DBError> {
    do { try await permits.acquire() } catch {
        return .failure(E3DBError(.cancelled, "\(name) was cancelled before it started"))
    }
    defer { permits.release() }
    return await withTaskCancellationHandler {
        await outcomeOnOwnThread(named: name, body)
    } onCancel: {
        onCancel()
    }
}

/// The outcome of `body` run on a thread of its own, or `threadUnavailable` when none could be started.
private func outcomeOnOwnThread<T: Sendable, Failure: Error>(
    named name: String, _ body: @escaping @Sendable () throws(Failure) -> T
) async -> Result<Result<T, Failure>, E3DBError> {
    await withCheckedContinuation { (done: CheckedContinuation<Result<Result<T, Failure>, E3DBError>, Never>) in
        let work = ThreadWork(name: name, body: body, done: done)
        if let failure = startThread(work) { done.resume(returning: .failure(failure)) }
    }
}

/// What a started thread runs: `ThreadWork`, behind a base class the C start routine can name without its generics.
private class ThreadEntry {
    func run() {}
}

private final class ThreadWork<T: Sendable, Failure: Error>: ThreadEntry {
    let name: String
    private var body: (@Sendable () throws(Failure) -> T)?
    private let done: CheckedContinuation<Result<Result<T, Failure>, E3DBError>, Never>

    init(
        name: String, body: @escaping @Sendable () throws(Failure) -> T,
        done: CheckedContinuation<Result<Result<T, Failure>, E3DBError>, Never>
    ) {
        self.name = name
        self.body = body
        self.done = done
    }

    override func run() {
        nameThread(name)
        let outcome = runBody()
        // `body` and its captures are gone: the caller resumed now finds no reference of theirs on this thread.
        done.resume(returning: .success(outcome))
    }

    /// Runs `body` once and drops it: its captures are released when this returns.
    private func runBody() -> Result<T, Failure> {
        guard let body else {
            preconditionFailure("a thread's work runs once")  // not input: one start per ThreadWork
        }
        self.body = nil
        return Result { () throws(Failure) -> T in try body() }
    }
}

/// Starts a detached thread running `entry.run()`; the error to resume with when it cannot be started.
private func startThread(_ entry: ThreadEntry) -> E3DBError? {
    // Safety: the retain passed here is taken back exactly once: by the thread's start routine, or below when the
    // thread could not be created (then no start routine runs).
    let context = unsafe Unmanaged.passRetained(entry).toOpaque()
    #if canImport(Darwin)
        var thread: pthread_t?
    #else
        var thread = pthread_t()
    #endif
    let status = unsafe pthread_create(&thread, nil, threadMain, context)
    guard status == 0 else {
        unsafe Unmanaged<ThreadEntry>.fromOpaque(context).release()
        return E3DBError(
            .threadUnavailable, "cannot start a thread for blocking work (pthread_create: error \(status))")
    }
    #if canImport(Darwin)
        if let thread { pthread_detach(thread) }
    #else
        pthread_detach(thread)
    #endif
    return nil
}

#if canImport(Darwin)
    private let threadMain: @convention(c) (UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? = { context in
        // Safety: `context` is the retained `ThreadEntry` of `startThread`, taken back once, here.
        let entry = unsafe Unmanaged<ThreadEntry>.fromOpaque(context).takeRetainedValue()
        entry.run()
        return nil
    }
#else
    private let threadMain: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? = { context in
        guard let context = unsafe context else { return nil }
        // Safety: `context` is the retained `ThreadEntry` of `startThread`, taken back once, here.
        let entry = unsafe Unmanaged<ThreadEntry>.fromOpaque(context).takeRetainedValue()
        entry.run()
        return nil
    }
#endif

/// Names the current thread (Foundation sets the system's name too; Linux keeps its first 15 bytes).
private func nameThread(_ name: String) {
    Thread.current.name = name
}

/// How many threads of `onOwnThread(named:permits:onCancel:_:)` a library lets run at once for one purpose: twice the
/// processors, at least 8. The work is mostly waiting for the disk (reads, writes and fsyncs of file bodies), which
/// more threads than cores overlap; the bound keeps a burst of requests from starting thousands of threads.
package let blockingThreadLimit = max(8, 2 * ProcessInfo.processInfo.processorCount)
