internal import ServiceLifecycle

extension ServerStorage {
    /// One storage's whole life, structured: its background work (``run()``) runs in a child task beside `body`;
    /// once `body` ends (returns or throws), the storage is closed (``close()``: grouped writes finished,
    /// connections closed), then the background work is cancelled and awaited. Nothing the storage started runs on
    /// after this returns.
    /// - Parameter body: what uses the storage.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws (the storage is closed all the same), else a failure to close, else a failure
    ///   of the background work.
    package func running<T>(_ body: () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            // The body starts once the background task has: postgres-nio warns about a lease before `run()`.
            let (started, starting) = AsyncStream<Void>.makeStream()
            group.addTask {
                starting.finish()
                // In a task of its own, which does not inherit the caller's task-locals: called inside a
                // ServiceLifecycle service, the pool would see that service's graceful shutdown
                // (postgres-nio's `run()` ends on it) and stop before `body` and `close()` are done. It stops
                // when this child task is cancelled, after `close()`.
                let background = Task.detached { try await self.run() }
                try await withTaskCancellationHandler {
                    try await background.value
                } onCancel: {
                    background.cancel()
                }
            }
            for await _ in started {}
            let outcome: Result<T, any Error>
            do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
            var failure: (any Error)?
            do { try await close() } catch { failure = error }
            group.cancelAll()
            do { try await group.waitForAll() } catch { failure = failure ?? error }
            let value = try outcome.get()
            if let failure { throw failure }
            return value
        }
    }
}

/// A storage as a ServiceLifecycle service: ``ServerStorage/running(_:)`` until the service group shuts down
/// gracefully (or is cancelled). Listed before the services that use the storage, it is shut down after them.
struct StorageService: Service {
    let storage: any ServerStorage

    func run() async throws {
        try await storage.running {
            // Cancellation (the group failing) ends the wait as a graceful shutdown does.
            try? await gracefulShutdown()
        }
    }
}
