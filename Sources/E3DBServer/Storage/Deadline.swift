import E3DBPrimitives

/// A call did not finish within its deadline (``withDeadline(_:_:)``).
struct DeadlineExceeded: Error, Sendable {
    let timeout: Duration
}

/// Runs `body` and returns its outcome, or throws ``DeadlineExceeded`` once `timeout` passes first: the one timeout
/// of a storage call (PostgreSQL: waiting for a pooled connection included). Cancelling the caller cancels `body`
/// and the caller throws `CancellationError` at once.
///
/// The timer is a child task of a task group, which ends (the timer cancelled) before this returns; the caller
/// waits in the group for the first of the body's outcome, the deadline or its own cancellation. `body` itself runs
/// in one task of its own, the only one that may outlive this call: at the deadline it is cancelled, and the caller
/// returns at once without waiting for it to end, because some bodies do not end when cancelled (a postgres-nio 1.33
/// query that waits behind a lock ignores cancellation until the lock is released, or until `statement_timeout`,
/// and must not hold its caller that long). Were the body a child of the group, the group would wait for it when
/// the deadline fires: the caller would get its deadline error only when such a query ends. What bounds the
/// orphaned body is its own backend: `statement_timeout` and the pool's shutdown for PostgreSQL (the pool is a
/// service of the server, so its connections close before the server stops), the HTTP client's timeout for the
/// object store.
/// - Parameters:
///   - timeout: how long `body` may take.
///   - body: the work.
/// - Returns: what `body` returns.
/// - Throws: ``DeadlineExceeded`` when `timeout` passed first, `CancellationError` when the caller was cancelled
///   first, else what `body` throws.
func withDeadline<T: Sendable>(
    _ timeout: Duration,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try Task.checkCancellation()
    let race = FirstOutcome<T>()
    let work = Task {
        do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
    }
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            try? await Task.sleep(for: timeout)
            guard !Task.isCancelled else { return }
            work.cancel()
            race.finish(.failure(DeadlineExceeded(timeout: timeout)))
        }
        // The timer has nothing left to do once there is an outcome: the group then waits only for its sleep to
        // end, which cancellation ends at once.
        defer { group.cancelAll() }
        return try await race.outcome(onCancel: { work.cancel() })
    }
}
