public import E3DBKeys
public import E3DBPrimitives
import Synchronization

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

    /// The text of the error.
    public var description: String {
        let reason = unsafe String(cString: strerror(errno))
        return path.map { "\(operation) \($0): \(reason)" } ?? "\(operation): \(reason)"
    }
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
            try retryingInterrupted("read") {
                #if canImport(Darwin)
                    unsafe Darwin.read(fd, buffer.baseAddress, buffer.count)
                #elseif canImport(Glibc)
                    unsafe Glibc.read(fd, buffer.baseAddress, buffer.count)
                #else
                    unsafe Musl.read(fd, buffer.baseAddress, buffer.count)
                #endif
            }
        }
    }
}

/// Runs a system call until it does not fail with `EINTR`; a negative result throws ``FileSystemError``.
func retryingInterrupted(_ operation: String, _ call: () -> Int) throws -> Int {
    while true {
        let n = call()
        if n >= 0 { return n }
        if errno == EINTR { continue }
        throw FileSystemError(operation: operation, errno: errno, path: nil)
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
        try unsafe bytes.withUnsafeBytes { try unsafe writeAll(fileDescriptor, $0) }
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

func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws {
    var done = 0
    while done < bytes.count {
        let rest = unsafe UnsafeRawBufferPointer(rebasing: bytes[done...])
        #if canImport(Darwin)
            let n = Darwin.write(fd, rest.baseAddress, rest.count)
        #elseif canImport(Glibc)
            let n = unsafe Glibc.write(fd, rest.baseAddress, rest.count)
        #else
            let n = Musl.write(fd, rest.baseAddress, rest.count)
        #endif
        if n < 0 {
            if errno == EINTR { continue }
            throw FileSystemError(operation: "write", errno: errno, path: nil)
        }
        done += n
    }
}

/// Files with no name until they are committed.
package enum UnnamedFile {
    #if os(Linux) && (arch(x86_64) || arch(arm64))
        /// Linux `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`); Glibc does not export the macro to Swift.
        static let temporaryFileFlag: Int32 = 0o20_000_000 | O_DIRECTORY
    #endif

    /// Opens a new file with no name in `directory` (Linux `O_TMPFILE`), mode 0600, or returns -1 with `errno`
    /// set (`EOPNOTSUPP`, `EISDIR`, `EINVAL` when the platform or the file system cannot).
    ///
    /// - Parameters:
    ///   - directory: where the file's blocks live (and where it may later be linked).
    ///   - readable: open read-write instead of write-only.
    /// - Returns: the descriptor, or -1.
    package static func open(inDirectory directory: String, readable: Bool) -> Int32 {
        #if os(Linux) && (arch(x86_64) || arch(arm64))
            let access = readable ? O_RDWR : O_WRONLY
            return openFile(directory, temporaryFileFlag | access | O_CLOEXEC, 0o600)
        #else
            errno = EOPNOTSUPP
            return -1
        #endif
    }

    /// Gives the unnamed file `fd` the name `path` (`linkat` through `/proc/self/fd`); fails with `EEXIST` if
    /// `path` exists.
    ///
    /// - Returns: 0, or -1 with `errno` set.
    package static func link(_ fd: Int32, to path: String) -> Int32 {
        #if os(Linux)
            return unsafe linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, path, AT_SYMLINK_FOLLOW)
        #else
            errno = EOPNOTSUPP
            return -1
        #endif
    }
}

/// `open(2)` under another name (inside `UnnamedFile`, `open` is the member).
private func openFile(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    unsafe open(path, flags, mode)
}

/// Temporary files that exist on disk but are not committed yet, so that a signal handler can remove them.
///
/// ``AtomicFileSink`` registers its temporary path here for as long as the file has a name (on Linux with
/// `O_TMPFILE` only for the instant between linking and renaming it at commit; elsewhere from creation to commit or
/// abort). A program that installs handlers for SIGINT, SIGTERM or SIGHUP calls ``removeAll()`` from them (the
/// `e3dbkit` CLI does). SIGKILL cannot be handled: on Linux the output is unnamed until commit, so nothing
/// remains; elsewhere a `.e3dbkit-<hex>.tmp` file may remain and can be deleted.
public enum PendingTemporaryFiles {
    static let capacity = 64

    /// C strings (from `strdup`) as bit patterns; 0 marks a free slot. Whoever exchanges a pointer out of a slot
    /// owns it, so a signal handler and the thread unregistering never both use it.
    nonisolated(unsafe) static let slots: UnsafeMutablePointer<Atomic<Int>> = {
        let slots = UnsafeMutablePointer<Atomic<Int>>.allocate(capacity: capacity)
        for i in 0..<capacity { unsafe (slots + i).initialize(to: Atomic(0)) }
        return unsafe slots
    }()

    /// Sets up the registry. Call it before installing a signal handler that calls ``removeAll()``, so the handler
    /// never runs the one-time initialisation.
    public static func prepare() { _ = unsafe slots }

    /// Removes every registered file (`unlink`). Async-signal-safe: atomic exchanges and `unlink(2)` only.
    public static func removeAll() {
        for i in 0..<capacity { remove(slot: i) }
    }

    /// Claims slot `index` and unlinks its file, if any. Async-signal-safe.
    static func remove(slot index: Int) {
        let bits = unsafe slots[index].exchange(0, ordering: .acquiringAndReleasing)
        if let path = unsafe UnsafePointer<CChar>(bitPattern: bits) { _ = unsafe unlink(path) }
    }

    /// Registers `path`; returns its slot, or nil when the registry is full (the file is then only removed by
    /// ``AtomicFileSink/abort()``).
    static func register(_ path: String) -> Int? {
        guard let copy = unsafe strdup(path) else { return nil }
        let bits = Int(bitPattern: copy)
        for i in 0..<capacity
        where unsafe slots[i].compareExchange(expected: 0, desired: bits, ordering: .acquiringAndReleasing).exchanged {
            return i
        }
        unsafe free(copy)
        return nil
    }

    /// Forgets slot `index` (the file was renamed or removed).
    static func unregister(_ index: Int?) {
        guard let index else { return }
        let bits = unsafe slots[index].exchange(0, ordering: .acquiringAndReleasing)
        if let path = unsafe UnsafeMutablePointer<CChar>(bitPattern: bits) { unsafe free(path) }
    }
}

/// A ``FileByteSink`` that writes a temporary file in `path`'s directory and renames it over `path` only on
/// ``finish()``.
///
/// On Linux the temporary file is created with `O_TMPFILE`: it has no name while it is written, so an interrupted
/// or killed process (even by SIGKILL) leaves nothing behind; ``finish()`` links it as `.e3dbkit-<hex>.tmp` and
/// renames that over `path`. Elsewhere (or on a file system without `O_TMPFILE`) the file is created under that
/// name, mode 0600, and registered with ``PendingTemporaryFiles`` so signal handlers can remove it. ``abort()``
/// (or deinit without finish) removes it.
public final class AtomicFileSink: FileByteSink, @unchecked Sendable {
    /// The final path.
    public let path: String
    /// The temporary path: the name the output has before the rename (from creation on, unless
    /// ``isUnnamedUntilCommit``).
    public let temporaryPath: String
    /// True when the output has no name until ``finish()`` (Linux `O_TMPFILE`).
    public let isUnnamedUntilCommit: Bool
    private var fd: Int32
    private var done = false
    private var hasName: Bool
    private var registration: Int?

    /// Creates the temporary file.
    ///
    /// - Parameter path: where the output goes; an existing file there is replaced on ``finish()``.
    /// - Throws: ``FileSystemError`` if the temporary file cannot be created.
    public init(path: String) throws {
        self.path = path
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[...$0]) } ?? ""
        let suffix = Hex.encode(SecureRandom.bytes(count: 8))
        temporaryPath = "\(directory).e3dbkit-\(suffix).tmp"
        let unnamed = UnnamedFile.open(inDirectory: directory.isEmpty ? "." : directory, readable: false)
        if unnamed >= 0 {
            fd = unnamed
            isUnnamedUntilCommit = true
            hasName = false
            return
        }
        isUnnamedUntilCommit = false
        registration = PendingTemporaryFiles.register(temporaryPath)
        fd = unsafe open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        hasName = fd >= 0
        if fd < 0 {
            let code = errno
            PendingTemporaryFiles.unregister(registration)
            throw FileSystemError(operation: "create", errno: code, path: temporaryPath)
        }
    }

    deinit { abort() }

    /// See ``FileByteSink/write(_:)``.
    public func write(_ bytes: RawSpan) throws {
        do {
            try unsafe bytes.withUnsafeBytes { try unsafe writeAll(fd, $0) }
        } catch let error as FileSystemError {
            throw FileSystemError(operation: error.operation, errno: error.errno, path: temporaryPath)
        }
    }

    /// Flushes the temporary file to disk, gives it its temporary name if it has none, and renames it to ``path``.
    public func finish() throws {
        guard !done else { return }
        if fsync(fd) != 0 { throw FileSystemError(operation: "fsync", errno: errno, path: temporaryPath) }
        if !hasName {
            registration = PendingTemporaryFiles.register(temporaryPath)
            if UnnamedFile.link(fd, to: temporaryPath) != 0 {
                let code = errno
                PendingTemporaryFiles.unregister(registration)
                registration = nil
                throw FileSystemError(operation: "link", errno: code, path: temporaryPath)
            }
            hasName = true
        }
        if close(fd) != 0 {
            fd = -1
            throw FileSystemError(operation: "close", errno: errno, path: temporaryPath)
        }
        fd = -1
        if unsafe rename(temporaryPath, path) != 0 {
            throw FileSystemError(operation: "rename", errno: errno, path: path)
        }
        PendingTemporaryFiles.unregister(registration)
        registration = nil
        done = true
    }

    /// Closes and removes the temporary file.
    public func abort() {
        guard !done else { return }
        done = true
        if fd >= 0 {
            // Shrink first so no plaintext blocks linger if unlink fails.
            _ = ftruncate(fd, 0)
            _ = close(fd)
            fd = -1
        }
        if hasName { _ = unsafe unlink(temporaryPath) }
        PendingTemporaryFiles.unregister(registration)
        registration = nil
    }
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
