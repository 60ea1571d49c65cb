import E3DBPrimitives
import Foundation

/// Runs blocking work (waiting for a child process, reading its pipe to the end) on a thread of its own and
/// awaits the result. The one place where test support blocks: a test that blocked instead would hold one of Swift
/// concurrency's cooperative threads, of which a 2-core machine has two, and tests run in parallel.
/// Test code only.
/// - Parameter body: the blocking work.
/// - Returns: what `body` returns.
/// - Throws: what `body` throws.
package func offCooperativePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await onOwnThread(named: "e3dbkit-test-wait", body)
}
