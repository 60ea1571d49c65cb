import Synchronization

/// Deadlines of in-flight calls, enforced by one watchdog task that wakes every ``tick``: registering a call costs a
/// lock and a dictionary insert, where a timer per call would wake an event loop twice (to schedule and to cancel
/// it) and a cancelled `Task.sleep` would stay queued until its deadline. A call past its deadline is cancelled
/// within one tick of it.
final class CallDeadlines: Sendable {
    private struct Call {
        var deadline: ContinuousClock.Instant
        var cancel: @Sendable () -> Void
    }

    private struct State {
        var next: UInt64 = 0
        var calls: [UInt64: Call] = [:]
        var expired: Set<UInt64> = []
        var watchdog: Task<Void, Never>?
    }

    private let state = Mutex(State())
    /// How often the watchdog looks for expired calls.
    let tick: Duration

    /// - Parameter tick: how often the watchdog looks for expired calls (started with the first call).
    init(tick: Duration = .milliseconds(250)) {
        self.tick = tick
    }

    deinit { state.withLock { $0.watchdog?.cancel() } }

    /// Registers a call that `cancel` cancels when `timeout` passes before ``end(_:)``.
    /// - Returns: the call's ticket for ``end(_:)``.
    func begin(timeout: Duration, cancel: @escaping @Sendable () -> Void) -> UInt64 {
        let deadline = ContinuousClock.now + timeout
        return state.withLock { state in
            state.next += 1
            state.calls[state.next] = Call(deadline: deadline, cancel: cancel)
            if state.watchdog == nil {
                let tick = self.tick
                state.watchdog = Task { [weak self] in
                    while !Task.isCancelled {
                        try? await Task.sleep(for: tick)
                        guard let self else { return }
                        self.cancelExpired()
                    }
                }
            }
            return state.next
        }
    }

    /// Unregisters a call.
    /// - Returns: whether it was cancelled for passing its deadline.
    func end(_ ticket: UInt64) -> Bool {
        state.withLock { state in
            state.calls[ticket] = nil
            return state.expired.remove(ticket) != nil
        }
    }

    /// Stops the watchdog (calls registered afterwards start a new one).
    func stop() {
        state.withLock { state in
            state.watchdog?.cancel()
            state.watchdog = nil
        }
    }

    private func cancelExpired() {
        let now = ContinuousClock.now
        let due: [@Sendable () -> Void] = state.withLock { state in
            var due: [@Sendable () -> Void] = []
            for (ticket, call) in state.calls where call.deadline <= now {
                state.calls[ticket] = nil
                state.expired.insert(ticket)
                due.append(call.cancel)
            }
            return due
        }
        for cancel in due { cancel() }
    }
}
