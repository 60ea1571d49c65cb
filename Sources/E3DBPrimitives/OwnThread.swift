import Foundation

/// Runs `body` (blocking work, or long CPU work such as a memory-hard KDF) on a new thread of its own and awaits its
/// outcome, so that no thread of Swift concurrency's cooperative pool (one per core) is held meanwhile. The one
/// helper for this in E3DBKit: the client's file decryption from a download pipe, the store's async `open` and
/// `create` (Argon2id), the test support's waits for child processes.
/// - Parameters:
///   - name: the thread's name (seen in debuggers and crash reports).
///   - body: the work.
/// - Returns: what `body` returns.
/// - Throws: what `body` throws.
package func onOwnThread<T: Sendable, Failure: Error>(
    named name: String = "e3dbkit-blocking", _ body: @escaping @Sendable () throws(Failure) -> T
) async throws(Failure) -> T {
    let outcome = await withCheckedContinuation { (done: CheckedContinuation<Result<T, Failure>, Never>) in
        let thread = Thread { done.resume(returning: Result { () throws(Failure) -> T in try body() }) }
        thread.name = name
        thread.start()
    }
    return try outcome.get()
}
