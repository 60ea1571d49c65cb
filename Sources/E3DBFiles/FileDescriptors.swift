public import E3DBKeys
public import E3DBPrimitives

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A POSIX error from a file operation (wrapped in `.fileIOFailed` by the cipher).
public struct FileSystemError: Error, Sendable, CustomStringConvertible {
    /// The operation that failed (`open`, `read`, `write`, `rename`, ...).
    public let operation: String
    /// `errno`.
    public let errno: Int32
    /// The path involved, if any.
    public let path: String?

    init(operation: String, errno: Int32, path: String?) {
        self.operation = operation
        self.errno = errno
        self.path = path
    }

    /// The public form of the package's `FileIOError`.
    init(_ error: FileIOError) { self.init(operation: error.operation, errno: error.errno, path: error.path) }

    /// The text of the error.
    public var description: String { FileIOError(operation, path: path, errno: errno).description }
}

/// Runs a call of the package's descriptor helper (`FileIO`), its failure as the public ``FileSystemError``.
func fileSystemCall<Result>(_ call: () throws(FileIOError) -> Result) throws(FileSystemError) -> Result {
    do throws(FileIOError) { return try call() } catch { throw FileSystemError(error) }
}

/// A ``FileByteSource`` reading an open file descriptor (file, pipe, socket). It does not close the descriptor.
public struct FileDescriptorSource: FileByteSource, Sendable {
    /// The descriptor read from.
    public let fileDescriptor: Int32
    /// The remaining size when the descriptor is a regular file (for progress), else nil.
    public let totalByteCount: Int?

    /// Creates a source over `fileDescriptor`, reading from its current offset.
    ///
    /// - Parameter fileDescriptor: an open, readable descriptor.
    public init(fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
        var info = stat()
        if unsafe fstat(fileDescriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
            let position = lseek(fileDescriptor, 0, SEEK_CUR)
            totalByteCount = position >= 0 ? max(0, Int(info.st_size) - Int(position)) : Int(info.st_size)
        } else {
            totalByteCount = nil
        }
    }

    /// See ``FileByteSource/read(into:)``. Retries on `EINTR`.
    public mutating func read(into buffer: inout MutableRawSpan) throws -> Int {
        let fd = fileDescriptor
        return try unsafe buffer.withUnsafeMutableBytes { buffer in
            try fileSystemCall { () throws(FileIOError) in try unsafe FileIO.read(fd, into: buffer) }
        }
    }
}

/// A ``FileByteSink`` writing to an open file descriptor. It does not close the descriptor.
///
/// A descriptor cannot be un-written: on ``abort()`` a regular file is truncated back to where writing started
/// (so no unverified plaintext remains in it); for a pipe or socket the reader must discard what it received when
/// the operation throws. Prefer the path APIs, which write a temporary file and rename it.
public struct FileDescriptorSink: FileByteSink, Sendable {
    /// The descriptor written to.
    public let fileDescriptor: Int32
    private let startOffset: Int
    private let isRegularFile: Bool

    /// Creates a sink over `fileDescriptor`, writing from its current offset.
    ///
    /// - Parameter fileDescriptor: an open, writable descriptor.
    public init(fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
        var info = stat()
        isRegularFile = unsafe fstat(fileDescriptor, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
        startOffset = isRegularFile ? max(0, Int(lseek(fileDescriptor, 0, SEEK_CUR))) : 0
    }

    /// See ``FileByteSink/write(_:)``. Writes everything, retrying on short writes and `EINTR`.
    public mutating func write(_ bytes: RawSpan) throws {
        let fd = fileDescriptor
        try fileSystemCall { () throws(FileIOError) in try FileIO.writeAll(fd, bytes) }
    }

    /// See ``FileByteSink/finish()``. Nothing to commit for a descriptor.
    public mutating func finish() throws {}

    /// See ``FileByteSink/abort()``. Truncates a regular file back to its starting offset.
    public mutating func abort() {
        guard isRegularFile else { return }
        _ = ftruncate(fileDescriptor, off_t(startOffset))
        _ = lseek(fileDescriptor, off_t(startOffset), SEEK_SET)
    }
}

/// Temporary files that exist on disk but are not committed yet, so that a signal handler can remove them.
///
/// ``AtomicFileSink`` (like every atomic writer of the package) registers its temporary path here for as long as
/// the file has a name (on Linux with `O_TMPFILE` only for the instant between linking and renaming it at commit;
/// elsewhere from creation to commit or abort). A program that installs handlers for SIGINT, SIGTERM or SIGHUP
/// calls ``removeAll()`` from them (the `e3dbkit` CLI does). SIGKILL cannot be handled: on Linux the output is
/// unnamed until commit, so nothing remains; elsewhere a `.e3dbkit-<hex>.tmp` file may remain and can be deleted.
public enum PendingTemporaryFiles {
    /// Sets up the registry. Call it before installing a signal handler that calls ``removeAll()``, so the handler
    /// never runs the one-time initialisation.
    public static func prepare() { TemporaryFileRegistry.prepare() }

    /// Removes every registered file (`unlink`). Async-signal-safe: atomic exchanges and `unlink(2)` only.
    public static func removeAll() { TemporaryFileRegistry.removeAll() }
}

/// A ``FileByteSink`` that writes a temporary file in `path`'s directory and renames it over `path` only on
/// ``finish()`` (then syncs the directory).
///
/// On Linux the temporary file is created with `O_TMPFILE`: it has no name while it is written, so an interrupted
/// or killed process (even by SIGKILL) leaves nothing behind; ``finish()`` links it as `.e3dbkit-<hex>.tmp` and
/// renames that over `path`. Elsewhere (or on a file system without `O_TMPFILE`) the file is created under that
/// name, mode 0600, and registered with ``PendingTemporaryFiles`` so signal handlers can remove it. ``abort()``
/// (or deinit without finish) removes it.
public final class AtomicFileSink: FileByteSink, @unchecked Sendable {
    private let file: AtomicFile

    /// The final path.
    public var path: String { file.path }
    /// The temporary path: the name the output has before the rename (from creation on, unless
    /// ``isUnnamedUntilCommit``).
    public var temporaryPath: String { file.temporaryPath }
    /// True when the output has no name until ``finish()`` (Linux `O_TMPFILE`).
    public var isUnnamedUntilCommit: Bool { file.isUnnamedUntilCommit }

    /// Creates the temporary file.
    ///
    /// - Parameter path: where the output goes; an existing file there is replaced on ``finish()``.
    /// - Throws: ``FileSystemError`` if the temporary file cannot be created.
    public init(path: String) throws {
        file = try fileSystemCall { () throws(FileIOError) in try AtomicFile(path: path) }
    }

    /// See ``FileByteSink/write(_:)``.
    public func write(_ bytes: RawSpan) throws {
        try fileSystemCall { () throws(FileIOError) in try file.write(bytes) }
    }

    /// Flushes the temporary file to disk, gives it its temporary name if it has none, renames it to ``path`` and
    /// syncs the directory.
    public func finish() throws {
        try fileSystemCall { () throws(FileIOError) in try file.commit() }
    }

    /// Closes and removes the temporary file.
    public func abort() { file.abort() }
}

extension E3DBFileCipher {
    /// Encrypts the file at `inputPath` into `outputPath` (written as a temporary file beside it, then renamed).
    ///
    /// - Parameters:
    ///   - inputPath: the plaintext file.
    ///   - outputPath: where the encrypted file goes; replaced atomically on success, untouched on failure.
    ///   - accessKey: the access key.
    ///   - options: checksums, progress, cancellation.
    /// - Returns: sizes, chunk count and checksums.
    /// - Throws: `E3DBError` with `.fileIOFailed` (cannot open, read, write or rename) or
    ///   `.cancelled`.
    public static func encryptFile(
        atPath inputPath: String, toPath outputPath: String, accessKey: AccessKey,
        options: FileEncryptionOptions = FileEncryptionOptions()
    ) throws(E3DBError) -> FileEncryptionResult {
        let input = try openForReading(inputPath)
        defer { _ = close(input) }
        var source = FileDescriptorSource(fileDescriptor: input)
        var sink = try atomicSink(outputPath)
        return try encrypt(from: &source, to: &sink, accessKey: accessKey, options: options)
    }

    /// Decrypts the file at `inputPath` into `outputPath`, strictly and atomically: the plaintext goes to a
    /// temporary file (mode 0600) beside `outputPath` that is renamed only after the whole file authenticated.
    ///
    /// - Parameters:
    ///   - inputPath: the encrypted file.
    ///   - outputPath: where the plaintext goes; untouched on failure.
    ///   - accessKey: the access key.
    ///   - options: expected checksum, zero-chunk policy, progress, cancellation.
    /// - Returns: sizes, chunk count and checksums.
    /// - Throws: the codes of ``decrypt(from:to:accessKey:options:)``.
    public static func decryptFile(
        atPath inputPath: String, toPath outputPath: String, accessKey: AccessKey,
        options: FileDecryptionOptions = FileDecryptionOptions()
    ) throws(E3DBError) -> FileDecryptionResult {
        let input = try openForReading(inputPath)
        defer { _ = close(input) }
        var source = FileDescriptorSource(fileDescriptor: input)
        var sink = try atomicSink(outputPath)
        return try decrypt(from: &source, to: &sink, accessKey: accessKey, options: options)
    }

    /// Encrypts from one open descriptor to another (neither is closed).
    ///
    /// - Parameters:
    ///   - input: a readable descriptor, read from its current offset to its end.
    ///   - output: a writable descriptor; a regular file is truncated back on failure.
    ///   - accessKey: the access key.
    ///   - options: checksums, progress, cancellation.
    /// - Returns: sizes, chunk count and checksums.
    /// - Throws: as ``encrypt(from:to:accessKey:options:)``.
    public static func encrypt(
        fileDescriptor input: Int32, to output: Int32, accessKey: AccessKey,
        options: FileEncryptionOptions = FileEncryptionOptions()
    ) throws(E3DBError) -> FileEncryptionResult {
        var source = FileDescriptorSource(fileDescriptor: input)
        var sink = FileDescriptorSink(fileDescriptor: output)
        return try encrypt(from: &source, to: &sink, accessKey: accessKey, options: options)
    }

    /// Decrypts from one open descriptor to another (neither is closed).
    ///
    /// - Warning: plaintext reaches `output` chunk by chunk. On failure a regular file is truncated back to where
    ///   writing started; a pipe's reader must discard what it got when this throws.
    /// - Parameters:
    ///   - input: a readable descriptor.
    ///   - output: a writable descriptor.
    ///   - accessKey: the access key.
    ///   - options: expected checksum, zero-chunk policy, progress, cancellation.
    /// - Returns: sizes, chunk count and checksums.
    /// - Throws: as ``decrypt(from:to:accessKey:options:)``.
    public static func decrypt(
        fileDescriptor input: Int32, to output: Int32, accessKey: AccessKey,
        options: FileDecryptionOptions = FileDecryptionOptions()
    ) throws(E3DBError) -> FileDecryptionResult {
        var source = FileDescriptorSource(fileDescriptor: input)
        var sink = FileDescriptorSink(fileDescriptor: output)
        return try decrypt(from: &source, to: &sink, accessKey: accessKey, options: options)
    }

    /// Computes checksums of everything `source` delivers (for example an encrypted file before upload: its MD5
    /// is `FileMeta.checksum`, its BLAKE2b-512 equals `b2sum`).
    ///
    /// - Parameters:
    ///   - source: the bytes to hash (treated as ciphertext).
    ///   - kinds: which checksums; `.plaintextBLAKE2b512` is ignored.
    /// - Returns: the checksums and the byte count.
    /// - Throws: `.fileIOFailed`.
    public static func checksums(
        of source: inout some FileByteSource, kinds: FileChecksumKinds = [.ciphertextBLAKE2b512, .ciphertextMD5]
    ) throws(E3DBError) -> (checksums: FileChecksums, byteCount: Int) {
        let pipeline = try ChecksumPipeline(kinds: kinds.subtracting(.plaintextBLAKE2b512), concurrent: true)
        let slots = SlotRing(count: slotCount)
        defer {
            pipeline.drain()
            slots.wipe()
        }
        var total = 0
        var current = 0
        while true {
            slots.acquire(current)
            let n = try unsafe slots.withCiphertext(current) { (buffer) throws(E3DBError) in
                try unsafe readFully(&source, into: buffer)
            }
            if n == 0 {
                slots.release(current)
                break
            }
            pipeline.submit(slot: current, of: slots, ciphertextCount: n, plaintextCount: nil)
            total += n
            current = (current + 1) % slots.count
        }
        return (pipeline.finish(), total)
    }

    static func openForReading(_ path: String) throws(E3DBError) -> Int32 {
        let fd = unsafe open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw E3DBError(.fileIOFailed, "\(FileSystemError(operation: "open", errno: errno, path: path))")
        }
        return fd
    }

    static func atomicSink(_ path: String) throws(E3DBError) -> AtomicFileSink {
        do {
            return try AtomicFileSink(path: path)
        } catch {
            throw ioError("cannot create the output", error)
        }
    }
}
