/// A call did not finish within its deadline (``withDeadline(_:_:)``).
struct DeadlineExceeded: Error, Sendable {
    let timeout: Duration
}

/// Runs `body` as a child task and cancels it when `timeout` passes first: the one timeout of a storage call
/// (PostgreSQL: waiting for a pooled connection included). Scoped to the calling task: nothing outlives the call,
/// and cancelling the caller cancels `body`.
/// - Parameters:
///   - timeout: how long `body` may take.
///   - body: the work; it must end when cancelled (postgres-nio's leases and queries do).
/// - Returns: what `body` returns.
/// - Throws: ``DeadlineExceeded`` when `timeout` passed first, else what `body` throws.
func withDeadline<T: Sendable>(_ timeout: Duration,
                               _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: DeadlineOutcome<T>.self) { group in
        group.addTask { .finished(try await body()) }
        group.addTask {
            try await Task.sleep(for: timeout)
            return .timedOut
        }
        defer { group.cancelAll() }
        switch try await group.next() {
        case .finished(let value)?: return value
        case .timedOut?, nil: throw DeadlineExceeded(timeout: timeout)
        }
    }
}

/// What finished first in ``withDeadline(_:_:)``.
private enum DeadlineOutcome<T: Sendable>: Sendable {
    case finished(T)
    case timedOut
}
