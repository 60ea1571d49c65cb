#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A system call on a file that failed: which call, on which path (when there is one), and `errno`. It never holds
/// file content or a secret, so its text may go into an error message or a log.
package struct FileIOError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The call that failed (`open`, `read`, `write`, `fsync`, `rename`, …).
    package let operation: String
    /// The path involved, if any.
    package let path: String?
    /// `errno` after the call.
    package let errno: Int32

    package init(_ operation: String, path: String?, errno: Int32) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    /// `strerror(errno)`.
    package var reason: String { FileIO.message(errno) }

    /// `operation path: reason`.
    package var description: String {
        path.map { "\(operation) \($0): \(reason)" } ?? "\(operation): \(reason)"
    }
}

/// The package's one home for descriptor I/O: every call retried on `EINTR`, every read and write loop all-or-error,
/// every failure a `FileIOError` naming the call, the path and `errno`.
package enum FileIO {
    /// `strerror(code)`.
    package static func message(_ code: Int32) -> String { unsafe String(cString: strerror(code)) }

    /// Runs `call` until it does not fail with `EINTR`; returns its last result (`errno` is set when it is
    /// negative).
    package static func retryingInterrupted<Result: BinaryInteger>(_ call: () -> Result) -> Result {
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }

    /// One `read(2)` into `buffer`, retried on `EINTR`.
    /// - Returns: the bytes read, 0 at the end of the input.
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String? = nil)
        throws(FileIOError) -> Int
    {
        let n = retryingInterrupted { unsafe systemRead(fd, buffer.baseAddress, buffer.count) }
        guard n >= 0 else { throw FileIOError("read", path: path, errno: errno) }
        return n
    }

    /// Reads until `buffer` is full or the input ends.
    /// - Returns: the bytes read (fewer than `buffer.count` only at the end of the input).
    package static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String? = nil)
        throws(FileIOError) -> Int
    {
        var done = 0
        while done < buffer.count {
            let n = try unsafe read(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), path: path)
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// One `pread(2)` at `offset`, retried on `EINTR`.
    /// - Returns: the bytes read, 0 at the end of the file.
    package static func read(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int, path: String? = nil
    ) throws(FileIOError) -> Int {
        let n = retryingInterrupted { unsafe pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
        guard n >= 0 else { throw FileIOError("pread", path: path, errno: errno) }
        return n
    }

    /// Writes every byte of `bytes` to `fd`, retrying on `EINTR` and short writes (a write of 0 bytes is `EIO`).
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String? = nil)
        throws(FileIOError)
    {
        var done = 0
        while done < bytes.count {
            let rest = unsafe UnsafeRawBufferPointer(rebasing: bytes[done...])
            let n = retryingInterrupted { unsafe systemWrite(fd, rest.baseAddress, rest.count) }
            guard n > 0 else { throw FileIOError("write", path: path, errno: n == 0 ? EIO : errno) }
            done += n
        }
    }

    /// Writes every byte of `bytes` to `fd` (see the `UnsafeRawBufferPointer` overload).
    package static func writeAll(_ fd: Int32, _ bytes: RawSpan, path: String? = nil) throws(FileIOError) {
        // Safety: the pointer is used only inside the closure, for `bytes.byteCount` bytes.
        try unsafe bytes.withUnsafeBytes { (raw) throws(FileIOError) in try unsafe writeAll(fd, raw, path: path) }
    }

    /// `fsync(2)`, retried on `EINTR`.
    package static func sync(_ fd: Int32, path: String? = nil) throws(FileIOError) {
        guard retryingInterrupted({ fsync(fd) }) == 0 else { throw FileIOError("fsync", path: path, errno: errno) }
    }

    /// Opens `path` read-only (a file or a directory, following links) and syncs it.
    package static func sync(path: String) throws(FileIOError) {
        let fd = retryingInterrupted { unsafe open(path, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw FileIOError("open", path: path, errno: errno) }
        defer { _ = close(fd) }
        try sync(fd, path: path)
    }

    /// The `errno` values of a directory that cannot be synced by its nature rather than by a failure: opening it
    /// is refused (`EACCES`: a directory its owner may write but not read), or the file system does not sync
    /// directories (`EINVAL`, `ENOTSUP`, `EOPNOTSUPP`: some FUSE and network file systems), or it is read-only
    /// (`EROFS`, where nothing was renamed either).
    static let unsyncableDirectory: Set<Int32> = [EACCES, EINVAL, ENOTSUP, EOPNOTSUPP, EROFS]

    /// Makes the entries of `directory` (a rename or link just done in it) durable: `fsync(2)` on the directory.
    ///
    /// Policy: a directory that cannot be synced by its nature (see `unsyncableDirectory`: no read permission, or a
    /// file system that refuses `fsync` on a directory) counts as synced, since on such a file system nothing more
    /// can be done and the name is as durable as it makes it. Every other failure (`EIO`, `ENOSPC`, `EDQUOT`, a
    /// directory that is gone) throws: the name that was just made may not survive a crash.
    /// - Throws: `FileIOError` (`open` or `fsync`, the directory's path, `errno`).
    package static func syncDirectory(_ directory: String) throws(FileIOError) {
        let fd = retryingInterrupted { unsafe open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else {
            if unsyncableDirectory.contains(errno) { return }
            throw FileIOError("open", path: directory, errno: errno)
        }
        defer { _ = close(fd) }
        try syncDirectory(descriptor: fd, path: directory)
    }

    /// `syncDirectory(_:)` on a directory already open as `fd` (`path` names it in an error).
    package static func syncDirectory(descriptor fd: Int32, path: String) throws(FileIOError) {
        if retryingInterrupted({ fsync(fd) }) == 0 || unsyncableDirectory.contains(errno) { return }
        throw FileIOError("fsync", path: path, errno: errno)
    }

    /// `syncDirectory(_:)` of the directory that holds `path`.
    package static func syncDirectory(containing path: String) throws(FileIOError) {
        try syncDirectory(directory(of: path))
    }

    /// The directory part of `path`: `.` for a bare name, `/` for a name in the root.
    package static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }
}

/// An open file descriptor and its one owner: whoever holds a reference may use `fd`, and it is closed when the last
/// reference goes (`deinit`), never before. A read that outlives the scope that opened the file (an HTTP client
/// reading a request body in a task of its own, after the response was returned) keeps this alive, so the number it
/// reads is never closed under it and reused for another file or socket. Hold it, not the bare `fd`, in every
/// sequence, iterator and thread closure that reads.
package final class OwnedDescriptor: Sendable {
    /// The descriptor: valid while this object lives.
    package let fd: Int32

    /// Takes ownership of `fd` (an open descriptor no one else closes).
    package init(_ fd: Int32) { self.fd = fd }

    /// Opens `path` with `flags` (`O_CLOEXEC` added), retried on `EINTR`.
    /// - Throws: `FileIOError` (`open`, the path, `errno`).
    package convenience init(opening path: String, flags: Int32) throws(FileIOError) {
        // Safety: the path is lent to `open` as a NUL-terminated copy for the call only.
        let fd = FileIO.retryingInterrupted { unsafe open(path, flags | O_CLOEXEC) }
        guard fd >= 0 else { throw FileIOError("open", path: path, errno: errno) }
        self.init(fd)
    }

    deinit { _ = close(fd) }
}

// `read(2)` and `write(2)` under other names (inside `FileIO`, `read` and `write` are members).
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    unsafe read(fd, buffer, count)
}

private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    unsafe write(fd, buffer, count)
}
