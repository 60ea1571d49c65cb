package import E3DBFiles
package import E3DBPrimitives
import Foundation

/// The client side's blocking file work: each call runs on a thread of its own (`onOwnThread`), so that no thread of
/// Swift concurrency's cooperative pool waits for the disk or for a slow source. Two pools, each of E3DBPrimitives'
/// `blockingThreadLimit` permits (twice the processors, at least 8) for every client and transport in the process
/// together: the work is CPU (the cipher, MD5) or waiting for the disk, and a thread per call uncapped would be a
/// thread per concurrent upload.
///
/// - `wholeFile`: work that lasts as long as a whole file (`writeFile`'s encryption, which may take minutes, or wait
///   forever for a slow source such as a FIFO).
/// - `io`: one short step (a download's batch written and synced, `URLSessionTransport`'s read of its spill file,
///   removing `writeFile`'s ciphertext).
///
/// Work that holds a permit never waits for work that needs one: whole-file work reads and writes its files itself,
/// and an I/O step waits for nothing but the disk, so `limit` encryptions stalled on their sources never stall a
/// download. `readFile`'s decryption, which waits for the body its transport may spill to a file and read back
/// through the I/O pool, takes no permit.
package enum FileWork {
    /// Which pool a call takes its permit from.
    package enum Kind: Sendable {
        /// Work that lasts as long as a whole file.
        case wholeFile
        /// One short read, write, sync or unlink.
        case io
    }

    /// How many threads of one kind of file work run at once.
    package static let limit = blockingThreadLimit

    /// The permits of whole-file work.
    package static let wholeFilePermits = AsyncPermits<Never>(limit)

    /// The permits of I/O steps.
    package static let ioPermits = AsyncPermits<Never>(limit)

    /// The permits of `kind`.
    package static func permits(_ kind: Kind) -> AsyncPermits<Never> {
        switch kind {
        case .wholeFile: wholeFilePermits
        case .io: ioPermits
        }
    }

    /// Runs `body` on a thread of its own once a permit of `kind` is free (a caller beyond `limit` waits, suspended).
    /// A caller whose task is cancelled before it gets a permit ends with `.requestCancelled` and starts nothing;
    /// cancelling it later sets the `FileCancellation` `body` is given, which the file cipher checks between chunks
    /// (it then stops with `.cancelled`, reported as `.requestCancelled`). The permit is given back once `body` ended.
    /// - Parameters:
    ///   - operation: the client operation, for the cancellation's message (`file upload`, …).
    ///   - kind: the pool (see `FileWork`).
    ///   - body: the blocking work.
    /// - Returns: what `body` returns.
    /// - Throws: `.requestCancelled`, `threadUnavailable`, or what `body` throws.
    package static func run<T: Sendable>(
        _ operation: String, kind: Kind, _ body: @escaping @Sendable (FileCancellation) throws -> T
    ) async throws -> T {
        try await run(operation, permits: permits(kind), body)
    }

    /// `run(_:kind:_:)` with the permits of a pool of the caller's (a test's).
    package static func run<T: Sendable>(
        _ operation: String, permits: AsyncPermits<Never>, _ body: @escaping @Sendable (FileCancellation) throws -> T
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

    /// Removes the file or directory at `url` as an I/O step, best effort (errors ignored), also when the caller's
    /// task is cancelled: the removal runs in a task of its own, which the caller awaits.
    static func removeQuietly(_ url: URL) async {
        let path = url.path
        await Task {
            _ = try? await run("file cleanup", kind: .io) { _ in
                try FileManager.default.removeItem(atPath: path)
            }
        }.value
    }
}
