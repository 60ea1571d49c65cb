import E3DBFiles
import E3DBPrimitives
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The store's `files/` directory, opened once per operation without following a link: every body is listed,
/// created, named, opened and removed relative to this descriptor, so a `files` symlink (or one put in place of a
/// body) never leads out of the store, and only names of the form `<uuid>.e3f` are ever removed (security review 3,
/// M3 and L6). Someone who can write the store directory can still delete or replace what is in it; they cannot
/// make the store write, delete or read anything elsewhere.
final class BodyDirectory {
    /// The directory's descriptor (`O_DIRECTORY | O_NOFOLLOW`).
    let descriptor: Int32

    deinit { _ = close(descriptor) }

    /// `<id>.e3f` when `id` is a body id as the store writes it (a lowercase UUID), else nil: a name from a row is
    /// never used before this check, so it cannot name anything but a body in `files/` (no `/`, no `..`).
    static func bodyName(_ id: String) -> String? {
        UUID(lowercasedString: id) == nil ? nil : "\(id).e3f"
    }

    /// Whether a name in `files/` is one the store gives a body (`<lowercase uuid>.e3f`); nothing else there is
    /// ever reported or removed.
    static func isBodyName(_ name: String) -> Bool {
        name.hasSuffix(".e3f") && bodyName(String(name.dropLast(4))) == name
    }

    /// Opens `files/` in `storeDirectory`. With `create`, a missing directory is made, mode 0700 whatever the
    /// umask; without it, a missing directory is nil (no bodies).
    /// - Throws: `storeTampered` naming `files` when it is a symbolic link or not a directory; `databaseError`
    ///   when it cannot be made or opened.
    init?(in storeDirectory: URL, create: Bool) throws(E3DBError) {
        let path = storeDirectory.appendingPathComponent(EncryptedStore.filesDirectoryName).path
        var created = false
        if create {
            if unsafe mkdir(path, 0o700) == 0 {
                created = true
            } else if errno != EEXIST {
                throw Self.failure("cannot create", path, errno)
            }
        }
        let fd = unsafe open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT && !create { return nil }
            if code == ELOOP || code == ENOTDIR {
                var info = stat()
                let what = unsafe lstat(path, &info) == 0 ? Self.kind(info.st_mode) : "not a directory"
                throw E3DBError(
                    .storeTampered,
                    "\(EncryptedStore.filesDirectoryName) in the store is \(what), not a directory: file bodies are "
                        + "only listed, read, written and removed in a directory of the store's own",
                    context: .init(item: EncryptedStore.filesDirectoryName))
            }
            throw Self.failure("cannot open", path, code)
        }
        // The umask may have narrowed the mode mkdir was given.
        if created { _ = fchmod(fd, 0o700) }
        descriptor = fd
    }

    static func failure(_ what: String, _ path: String, _ code: Int32) -> E3DBError {
        E3DBError(
            .databaseError, unsafe "\(what) \(path): \(String(cString: strerror(code)))",
            context: .init(item: EncryptedStore.filesDirectoryName))
    }

    /// What a file mode is, in words, for a message.
    static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a directory"
        case S_IFLNK: "a symbolic link"
        case S_IFIFO: "a FIFO"
        case S_IFCHR, S_IFBLK: "a device"
        case S_IFSOCK: "a socket"
        default: "not a regular file"
        }
    }

    /// The names in the directory (`.` and `..` left out), read through a descriptor of its own for the same
    /// directory (never a path).
    func names() throws(E3DBError) -> [String] {
        // Safety: the name is lent to `openat` as a NUL-terminated copy for the call only (so are those below).
        let listing = FileIO.retryingInterrupted { unsafe openat(descriptor, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard listing >= 0 else { throw Self.failure("cannot list", EncryptedStore.filesDirectoryName, errno) }
        guard let stream = unsafe fdopendir(listing) else {
            let code = errno
            _ = close(listing)
            throw Self.failure("cannot list", EncryptedStore.filesDirectoryName, code)
        }
        defer { _ = unsafe closedir(stream) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = unsafe readdir(stream) else {
                if errno != 0 { throw Self.failure("cannot list", EncryptedStore.filesDirectoryName, errno) }
                return names
            }
            // Safety: `d_name` is a NUL-terminated name inside the entry, valid until the next readdir.
            let name = unsafe withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                unsafe String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    /// Why a body could not be opened.
    enum OpenFailure: Error {
        /// No such name.
        case missing
        /// A symbolic link, FIFO, directory, device or socket: never opened, never followed.
        case notRegular(String)
        /// Any other error (`errno`).
        case system(Int32)
    }

    /// Opens the body `name` for reading: `O_NOFOLLOW` (a link is refused, not followed) and `O_NONBLOCK` (a FIFO
    /// does not wait for a writer), a regular file required by `fstat`, then blocking reads again.
    func openBody(_ name: String) -> Result<Int32, OpenFailure> {
        // Safety: the name is lent to `openat` as a NUL-terminated copy for the call only.
        let fd = FileIO.retryingInterrupted {
            unsafe openat(descriptor, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        }
        guard fd >= 0 else {
            switch errno {
            case ENOENT: return .failure(.missing)
            case ELOOP: return .failure(.notRegular(Self.kind(S_IFLNK)))
            case let code: return .failure(.system(code))
            }
        }
        var info = stat()
        guard unsafe fstat(fd, &info) == 0 else {
            let code = errno
            _ = close(fd)
            return .failure(.system(code))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            _ = close(fd)
            return .failure(.notRegular(Self.kind(info.st_mode)))
        }
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 else {
            let code = errno
            _ = close(fd)
            return .failure(.system(code))
        }
        return .success(fd)
    }

    /// Removes the entry `name` (a link itself, never its target); only body names are removed.
    /// - Returns: whether it was removed.
    @discardableResult
    func remove(_ name: String) -> Bool {
        guard Self.isBodyName(name) else { return false }
        return unsafe unlinkat(descriptor, name, 0) == 0
    }

    /// Flushes the directory's entries (a body just named) to disk.
    func sync() throws(E3DBError) {
        do throws(FileIOError) {
            try FileIO.syncDirectory(descriptor: descriptor, path: EncryptedStore.filesDirectoryName)
        } catch {
            throw Self.failure("cannot sync", EncryptedStore.filesDirectoryName, error.errno)
        }
    }
}

/// A body being written, created in ``BodyDirectory`` with no name (Linux `O_TMPFILE`; elsewhere as
/// `.e3dbkit-<hex>.tmp`), mode 0600 whatever the umask. The file cipher's `finish()` only marks it complete;
/// ``publish()`` names it `<id>.e3f` (inside the write transaction of its row, never replacing a name), so a body
/// without a committed row exists only after a crash at that moment.
final class StagedBody: FileByteSink {
    let directory: BodyDirectory
    /// `<id>.e3f`.
    let name: String
    private var fd: Int32
    private var output: FileDescriptorSink
    /// The temporary name where the system has no unnamed files.
    private let temporaryName: String?
    private(set) var complete = false
    private(set) var published = false

    init(in directory: BodyDirectory, id: String) throws(E3DBError) {
        guard let name = BodyDirectory.bodyName(id) else {
            throw E3DBError(.databaseError, "\(id) is not a body id")
        }
        self.directory = directory
        self.name = name
        // `/proc/self/fd/N` is the directory held open, not a path that could be swapped.
        var opened = UnnamedFile.open(inDirectory: "/proc/self/fd/\(directory.descriptor)", readable: false)
        var temporary: String?
        if opened < 0 {
            // The package's one temporary naming scheme (`AtomicFile`'s), created relative to the held directory.
            let named = AtomicFile.temporaryName()
            // Safety: the name is lent to `openat` as a NUL-terminated copy for the call only.
            opened = FileIO.retryingInterrupted {
                unsafe openat(directory.descriptor, named, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            }
            guard opened >= 0 else {
                throw BodyDirectory.failure("cannot create a file body in", EncryptedStore.filesDirectoryName, errno)
            }
            temporary = named
        }
        // The umask may have narrowed the mode; a body is 0600, not less (and never more).
        _ = fchmod(opened, 0o600)
        fd = opened
        temporaryName = temporary
        output = FileDescriptorSink(fileDescriptor: opened)
    }

    deinit { abort() }

    func write(_ bytes: RawSpan) throws { try output.write(bytes) }

    func finish() throws { complete = true }

    func abort() {
        guard !published, fd >= 0 else { return }
        // Shrink first so no blocks linger if the name cannot be removed.
        _ = ftruncate(fd, 0)
        _ = close(fd)
        fd = -1
        if let temporaryName { _ = unsafe unlinkat(directory.descriptor, temporaryName, 0) }
    }

    /// Syncs the body and names it `<id>.e3f` in the directory; fails (`EEXIST`) rather than replace a name.
    func publish() throws(E3DBError) {
        guard complete, fd >= 0 else {
            throw E3DBError(.databaseError, "a file body was published before it was complete")
        }
        do throws(FileIOError) { try FileIO.sync(fd) } catch { throw failure(error.errno) }
        let linked =
            if let temporaryName {
                unsafe linkat(directory.descriptor, temporaryName, directory.descriptor, name, 0)
            } else {
                unsafe linkat(AT_FDCWD, "/proc/self/fd/\(fd)", directory.descriptor, name, AT_SYMLINK_FOLLOW)
            }
        guard linked == 0 else { throw failure(errno) }
        published = true
        if let temporaryName { _ = unsafe unlinkat(directory.descriptor, temporaryName, 0) }
        _ = close(fd)
        fd = -1
    }

    private func failure(_ code: Int32) -> E3DBError {
        BodyDirectory.failure("cannot write the file body", "\(EncryptedStore.filesDirectoryName)/\(name)", code)
    }
}
