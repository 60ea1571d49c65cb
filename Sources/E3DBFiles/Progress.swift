import Dispatch
import E3DBPrimitives

/// How far a file operation has got.
public struct FileProgress: Sendable, Hashable {
    /// Input bytes consumed so far (plaintext when encrypting, ciphertext when decrypting).
    public var bytesProcessed: Int
    /// Total input bytes, when the source knows it (a regular file does; a pipe does not).
    public var totalBytes: Int?
    /// Chunks sealed or opened so far.
    public var chunksProcessed: Int

    /// Creates a value.
    public init(bytesProcessed: Int, totalBytes: Int?, chunksProcessed: Int) {
        self.bytesProcessed = bytesProcessed
        self.totalBytes = totalBytes
        self.chunksProcessed = chunksProcessed
    }

    /// `bytesProcessed / totalBytes` in 0...1, when the total is known.
    public var fractionCompleted: Double? {
        guard let totalBytes else { return nil }
        guard totalBytes > 0 else { return 1 }
        return min(1, Double(bytesProcessed) / Double(totalBytes))
    }
}

/// A thread-safe flag that cancels a running file operation from another thread or task.
///
/// Operations also stop when the Swift task running them is cancelled. A cancelled operation throws
/// `.cancelled` and commits nothing.
public final class FileCancellation: @unchecked Sendable {
    // A serial queue as the lock keeps this portable without Synchronization (macOS 15+).
    private let queue = DispatchQueue(label: "E3DBFiles.cancellation")
    private var flag = false

    /// Creates a flag that is not set.
    public init() {}

    /// Requests cancellation. Safe from any thread; idempotent.
    public func cancel() { queue.sync { flag = true } }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { queue.sync { flag } }
}

/// Progress, cancellation and checksum choices shared by the streaming operations.
struct RunControl {
    var progress: (@Sendable (FileProgress) -> Void)?
    var cancellation: FileCancellation?
    var totalBytes: Int?

    func checkCancelled() throws(E3DBError) {
        if Task.isCancelled || cancellation?.isCancelled == true {
            throw E3DBError(.cancelled, "the file operation was cancelled; no output was committed")
        }
    }

    func report(_ bytes: Int, chunks: Int) {
        progress?(FileProgress(bytesProcessed: bytes, totalBytes: totalBytes, chunksProcessed: chunks))
    }
}
