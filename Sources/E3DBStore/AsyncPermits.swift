import Synchronization

/// At most `count` holders at once: an async caller beyond that waits for a permit, suspended (no thread is held),
/// in arrival order; a waiter whose task is cancelled leaves the queue at once, holding nothing. The store's record
/// readers bound their async reads with it.
final class AsyncPermits: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var free: Int
        var waiting: [Waiter] = []
        var nextID: UInt64 = 0
        /// Waiters whose cancellation handler ran before they were queued, or after they got their permit.
        var cancelled: Set<UInt64> = []
    }

    private let state: Mutex<State>

    /// - Parameter count: the number of permits (at least 1).
    init(_ count: Int) {
        state = Mutex(State(free: max(1, count)))
    }

    /// Takes a permit, waiting for one when none is free. Every successful call is matched by one ``release()``.
    /// - Throws: `CancellationError` when the task is cancelled before it gets a permit (it holds none then).
    func acquire() async throws {
        try Task.checkCancellation()
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        // Forgets a cancellation that came after the permit (the handler does not run once this returns).
        defer { _ = state.withLock { $0.cancelled.remove(id) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let granted = state.withLock { state -> Bool? in
                    if state.cancelled.remove(id) != nil { return false }
                    if state.free > 0 {
                        state.free -= 1
                        return true
                    }
                    state.waiting.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                switch granted {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                if let index = state.waiting.firstIndex(where: { $0.id == id }) {
                    return state.waiting.remove(at: index)
                }
                state.cancelled.insert(id)  // not queued yet, or already granted
                return nil
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Gives a permit back: to the first waiter, if any.
    func release() {
        let next = state.withLock { state -> Waiter? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.continuation.resume()
    }

    /// The free permits and the callers waiting (for tests).
    var snapshot: (free: Int, waiting: Int) { state.withLock { ($0.free, $0.waiting.count) } }
}
