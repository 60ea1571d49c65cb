import Synchronization

/// A call did not finish within its deadline (``withDeadline(_:_:)``).
struct DeadlineExceeded: Error, Sendable {
    let timeout: Duration
}

/// Runs `body` and returns its outcome, or throws ``DeadlineExceeded`` once `timeout` passes first: the one timeout
/// of a storage call (PostgreSQL: waiting for a pooled connection included). At the deadline `body` is cancelled and
/// the caller returns at once, without waiting for it to end: a query that waits behind a lock ignores
/// cancellation until the lock is released, and must not hold its caller that long. Cancelling the caller cancels
/// `body`.
/// - Parameters:
///   - timeout: how long `body` may take.
///   - body: the work.
/// - Returns: what `body` returns.
/// - Throws: ``DeadlineExceeded`` when `timeout` passed first, else what `body` throws.
func withDeadline<T: Sendable>(
    _ timeout: Duration,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = DeadlineRace<T>()
    let work = Task {
        do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
    }
    let timer = Task {
        try? await Task.sleep(for: timeout)
        guard !Task.isCancelled else { return }
        work.cancel()
        race.finish(.failure(DeadlineExceeded(timeout: timeout)))
    }
    defer { timer.cancel() }
    return try await withTaskCancellationHandler {
        try await race.outcome()
    } onCancel: {
        work.cancel()
    }
}

/// The first outcome of ``withDeadline(_:_:)``: the body's or the deadline's; later ones are ignored.
private final class DeadlineRace<T: Sendable>: Sendable {
    private struct State {
        var outcome: Result<T, any Error>?
        var waiter: CheckedContinuation<T, any Error>?
        var finished = false
    }

    private let state = Mutex(State())

    func finish(_ outcome: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
            guard !state.finished else { return nil }
            state.finished = true
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.outcome = outcome
            return nil
        }
        waiter?.resume(with: outcome)
    }

    func outcome() async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let outcome = state.withLock { state -> Result<T, any Error>? in
                if let outcome = state.outcome { return outcome }
                state.waiter = continuation
                return nil
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }
}
