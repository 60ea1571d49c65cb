import Foundation

/// Runs blocking work (waiting for a child process, reading its pipe to the end) on a thread of its own and
/// awaits the result. A test that blocks instead holds one of Swift concurrency's cooperative threads, of which a
/// 2-core machine has two: two long blocking tests then stall every other test of the run, and tests with
/// timeouts (a storage call's 30 s deadline) fail. Test code only.
/// - Parameter body: the blocking work.
/// - Returns: what `body` returns.
/// - Throws: what `body` throws.
public func offCooperativePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}
