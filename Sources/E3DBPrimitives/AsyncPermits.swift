import Synchronization

/// At most `count` holders at once: an async caller beyond that waits for a permit, suspended (no thread is held),
/// in arrival order; a waiter whose task is cancelled leaves the queue at once, holding nothing. The one counting
/// semaphore of the package: the store's record readers and its blocking calls bound their work with it (`Owner`
/// `Never`), the server's search limiter (`AsyncLimiter`) bounds searches with it, its waiting room bounded in all
/// (`maxWaiting`) and per owner, a client (`maxWaitingPerOwner`), so that one client cannot take every place.
///
/// A permit is never lost: a cancellation that comes as the permit is handed over leaves the caller holding it
/// (`acquire(owner:)` returns normally), and the caller gives it back with `release()`.
package final class AsyncPermits<Owner: Hashable & Sendable>: Sendable {
    /// Why `acquire(owner:)` refused a caller a place in the queue.
    package enum Refusal: Error, Equatable {
        /// `maxWaiting` callers wait already.
        case queueFull
        /// `maxWaitingPerOwner` callers of this owner wait already.
        case ownerQueueFull
    }

    private struct Waiter {
        let id: UInt64
        let owner: Owner?
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var free: Int
        var waiting: [Waiter] = []
        var waitingPerOwner: [Owner: Int] = [:]
        var nextID: UInt64 = 0
        /// Callers between taking their id and asking for a permit, by id: true once their cancellation handler
        /// ran. A handler that finds its id neither here nor in `waiting` does nothing (the caller has its answer).
        var arriving: [UInt64: Bool] = [:]

        /// Removes the waiter at `index` from the queue, and from its owner's count.
        mutating func remove(at index: Int) -> Waiter {
            let waiter = waiting.remove(at: index)
            if let owner = waiter.owner {
                let left = waitingPerOwner[owner, default: 1] - 1
                waitingPerOwner[owner] = left > 0 ? left : nil
            }
            return waiter
        }
    }

    private let state: Mutex<State>
    private let maxWaiting: Int
    private let maxWaitingPerOwner: Int
    private let arrived: (@Sendable () -> Void)?

    /// - Parameters:
    ///   - count: the number of permits (at least 1).
    ///   - maxWaiting: the most callers waiting at once; more are refused (`Refusal.queueFull`).
    ///   - maxWaitingPerOwner: the most callers of one owner waiting at once (`Refusal.ownerQueueFull`).
    ///   - arrived: called by each caller between taking its id and asking for a permit (tests: a cancellation
    ///     there is one that comes while the caller is arriving).
    package init(
        _ count: Int, maxWaiting: Int = .max, maxWaitingPerOwner: Int = .max, arrived: (@Sendable () -> Void)? = nil
    ) {
        state = Mutex(State(free: max(1, count)))
        self.maxWaiting = maxWaiting
        self.maxWaitingPerOwner = maxWaitingPerOwner
        self.arrived = arrived
    }

    /// Takes a permit, waiting for one when none is free. Every successful call is matched by one `release()`.
    /// - Parameter owner: whose call it is, for `maxWaitingPerOwner` (nil: counted in `maxWaiting` only).
    /// - Throws: `CancellationError` when the task is cancelled before it gets a permit (it holds none then);
    ///   `Refusal` when the waiting room, or the owner's share of it, is full.
    package func acquire(owner: Owner? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state in
            state.nextID += 1
            state.arriving[state.nextID] = false
            return state.nextID
        }
        // The handler's effect is keyed by `id` and found only while the caller is arriving or queued, so the
        // bookkeeping does not depend on when the runtime runs it: one that ran before the request below is seen
        // there, one that runs later (after the permit, or even after this returns) finds nothing to do.
        try await withTaskCancellationHandler {
            arrived?()
            return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if state.arriving.removeValue(forKey: id) == true { return .failure(CancellationError()) }
                    if state.free > 0 {
                        state.free -= 1
                        return .success(())
                    }
                    guard state.waiting.count < maxWaiting else { return .failure(Refusal.queueFull) }
                    if let owner {
                        let queued = state.waitingPerOwner[owner, default: 0]
                        guard queued < maxWaitingPerOwner else { return .failure(Refusal.ownerQueueFull) }
                        state.waitingPerOwner[owner] = queued + 1
                    }
                    state.waiting.append(Waiter(id: id, owner: owner, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                if let index = state.waiting.firstIndex(where: { $0.id == id }) {
                    return state.remove(at: index)
                }
                // Not queued yet: the request sees it. Already answered: nothing to do.
                if state.arriving[id] != nil { state.arriving[id] = true }
                return nil
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Gives a permit back: to the first waiter, if any.
    package func release() {
        let next = state.withLock { state -> Waiter? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.remove(at: 0)  // the permit passes to it
        }
        next?.continuation.resume()
    }

    /// The free permits and the callers waiting (for tests).
    package var snapshot: (free: Int, waiting: Int) { state.withLock { ($0.free, $0.waiting.count) } }

    /// The callers between taking an id and asking for a permit (for tests: 0 when no call is in progress).
    package var arrivingCount: Int { state.withLock { $0.arriving.count } }
}
