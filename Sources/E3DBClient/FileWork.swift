package import E3DBFiles
package import E3DBPrimitives
import Foundation

/// The client side's blocking file work (the file cipher's reads and writes of a whole file, a download's writes
/// and `fsync`): each call runs on a thread of its own (`onOwnThread`), so that no thread of Swift concurrency's
/// cooperative pool waits for the disk or for a slow source, and at most `limit` such threads run at once in the
/// process, for every client and transport together (`permits`): E3DBPrimitives' `blockingThreadLimit`, twice the
/// processors, at least 8, as the store's blocking calls: the work is CPU (the cipher, MD5) or waiting for the disk,
/// and a thread per call uncapped would be a thread per concurrent upload. Work that holds a permit never waits for
/// work that needs one: `readFile`'s decryption, which waits for the body its transport may spill to a file and
/// read back through here, takes no permit.
package enum FileWork {
    /// How many threads of file work run at once.
    package static let limit = blockingThreadLimit

    /// The permits of those threads.
    package static let permits = AsyncPermits<Never>(limit)

    /// Runs `body` on a thread of its own once a permit is free (a caller beyond `limit` waits, suspended). A caller
    /// whose task is cancelled before it gets a permit ends with `.requestCancelled` and starts nothing; cancelling
    /// it later sets the `FileCancellation` `body` is given, which the file cipher checks between chunks (it then
    /// stops with `.cancelled`, reported as `.requestCancelled`). The permit is given back once `body` ended.
    /// - Parameters:
    ///   - operation: the client operation, for the cancellation's message (`file upload`, …).
    ///   - body: the blocking work.
    /// - Returns: what `body` returns.
    /// - Throws: `.requestCancelled`, `threadUnavailable`, or what `body` throws.
    package static func run<T: Sendable>(
        _ operation: String, _ body: @escaping @Sendable (FileCancellation) throws -> T
    ) async throws -> T {
        let cancellation = FileCancellation()
        do {
            return try await onOwnThread(named: "e3dbkit-file", permits: permits, onCancel: { cancellation.cancel() }) {
                try body(cancellation)
            }
        } catch let error as E3DBError where error.code == .cancelled {
            throw cancelledError(operation)
        }
    }
}
