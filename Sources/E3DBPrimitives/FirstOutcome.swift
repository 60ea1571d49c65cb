import Synchronization

/// The first of several outcomes racing to end one wait (a body's result, a deadline, the waiter's cancellation);
/// later ones are ignored. Its one waiter leaves when its task is cancelled. The one home of this race: the server's
/// `withDeadline` and the client's wait for a shared token fetch.
package final class FirstOutcome<T: Sendable>: Sendable {
    private struct State {
        var outcome: Result<T, any Error>?
        var waiter: CheckedContinuation<T, any Error>?
        var finished = false
    }

    private let state = Mutex(State())

    package init() {}

    /// Ends the race with `outcome`, unless it has ended already.
    package func finish(_ outcome: Result<T, any Error>) {
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

    /// Waits for the first outcome. When the waiting task is cancelled, the race ends with `cancellation()` (the
    /// waiter resumed at once, whether it was waiting already or not yet) after `onCancel` ran.
    /// - Parameters:
    ///   - onCancel: what the waiter's cancellation also does (cancel the work, say).
    ///   - cancellation: the error a cancelled waiter ends with.
    package func outcome(
        onCancel: @escaping @Sendable () -> Void = {},
        cancellation: @escaping @Sendable () -> any Error = { CancellationError() }
    ) async throws -> T {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                let outcome = state.withLock { state -> Result<T, any Error>? in
                    if let outcome = state.outcome { return outcome }
                    state.waiter = continuation
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            onCancel()
            finish(.failure(cancellation()))
        }
    }
}
