import Synchronization

#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif

#if canImport(Glibc)
    package import Glibc
#elseif canImport(Musl)
    package import Musl
#elseif canImport(Darwin)
    package import Darwin
#endif

/// A file that appears whole or not at all: the package's one atomic writer (encrypted and decrypted file outputs,
/// the command line's outputs, known keys, the server's file bodies, the store's key header, a rekeyed database).
///
/// The bytes go to a temporary file, mode `mode` whatever the umask, in the destination's directory (or in
/// `temporaryDirectory`, which must be on the same file system); `commit()` writes nothing more, `fsync`s the
/// file, gives it its name and syncs the directory (`FileIO/syncDirectory(_:)`, whose policy applies).
///
/// On Linux the temporary file is created with `O_TMPFILE`: it has no name while it is written, so an interrupted
/// or killed process (even by SIGKILL) leaves nothing behind. Its commit links it through `/proc/self/fd`, so it is
/// used only when that shows the new descriptor (not where /proc is not mounted, as in some containers and chroots).
/// Elsewhere, on a file system without `O_TMPFILE`, or without /proc, it is created as `temporaryName()`
/// (`.e3dbkit-<16 hex digits>.tmp`, the one naming scheme) with `O_EXCL | O_NOFOLLOW`, and registered with
/// `TemporaryFileRegistry` so that signal handlers can remove it. `abort()` (or deinit without commit) truncates and
/// removes it.
package final class AtomicFile: @unchecked Sendable {
    /// How the finished file takes its name.
    package enum Publication: Sendable {
        /// `rename(2)` over the path: whatever is there (a file, a symbolic link) is replaced, never written
        /// through.
        case replace
        /// `link(2)`: fails with `EEXIST` when anything has the name, even if it appeared while the file was
        /// written. On a file system without hard links, a final check that the name is free, then `rename(2)` (a
        /// narrow window).
        case createNew
    }

    /// The final path.
    package let path: String
    /// The name the output has before it is renamed to `path` (from creation on, unless
    /// `isUnnamedUntilCommit`).
    package let temporaryPath: String
    /// True when the output has no name until `commit()` (Linux `O_TMPFILE`).
    package let isUnnamedUntilCommit: Bool
    /// The open temporary file (-1 after `commit()` or `abort()`), for advice such as `posix_fadvise`.
    package private(set) var descriptor: Int32
    private let publication: Publication
    /// Where the unnamed file is linked from at commit (`UnnamedFile.descriptorDirectory`).
    private let descriptorDirectory: String
    private var done = false
    private var hasName: Bool
    private var registration: Int?

    /// A fresh temporary name: `.e3dbkit-<16 hex digits>.tmp`, short whatever the length of the final name.
    package static func temporaryName() -> String { ".e3dbkit-\(Hex.encode(SecureRandom.bytes(count: 8))).tmp" }

    /// A fresh temporary path in `directory` (`temporaryName()`).
    package static func temporaryPath(in directory: String) -> String {
        (directory == "/" ? "" : directory) + "/" + temporaryName()
    }

    /// Creates the temporary file.
    ///
    /// - Parameters:
    ///   - path: where the output goes.
    ///   - mode: its permission bits, exactly (the umask does not narrow them).
    ///   - publication: whether an existing file at `path` is replaced.
    ///   - temporaryDirectory: where the temporary file lives until commit, on the same file system as `path`;
    ///     nil: `path`'s directory.
    ///   - descriptorDirectory: where this process's descriptors have names, through which an unnamed file is
    ///     linked at commit (`/proc/self/fd`; a test names a directory without them to take the named path).
    /// - Throws: `FileIOError` if the temporary file cannot be created.
    package init(
        path: String, mode: mode_t = 0o600, publication: Publication = .replace, temporaryDirectory: String? = nil,
        descriptorDirectory: String = UnnamedFile.descriptorDirectory
    ) throws(FileIOError) {
        self.path = path
        self.publication = publication
        self.descriptorDirectory = descriptorDirectory
        let directory = temporaryDirectory ?? FileIO.directory(of: path)
        let temporaryPath = Self.temporaryPath(in: directory)
        self.temporaryPath = temporaryPath
        let unnamed = UnnamedFile.openLinkable(inDirectory: directory, through: descriptorDirectory)
        if unnamed >= 0 {
            descriptor = unnamed
            isUnnamedUntilCommit = true
            hasName = false
        } else {
            isUnnamedUntilCommit = false
            registration = TemporaryFileRegistry.register(temporaryPath)
            descriptor = FileIO.retryingInterrupted {
                unsafe open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            }
            hasName = descriptor >= 0
            guard descriptor >= 0 else {
                let code = errno
                TemporaryFileRegistry.unregister(registration)
                throw FileIOError("create", path: temporaryPath, errno: code)
            }
        }
        // The umask may have narrowed the mode: secrets keep exactly 0600, other files what was asked.
        guard fchmod(descriptor, mode) == 0 else {
            let error = FileIOError("fchmod", path: temporaryPath, errno: errno)
            abort()
            throw error
        }
    }

    deinit { abort() }

    /// Appends `bytes`.
    package func write(_ bytes: UnsafeRawBufferPointer) throws(FileIOError) {
        try unsafe FileIO.writeAll(descriptor, bytes, path: temporaryPath)
    }

    /// Appends `bytes`.
    package func write(_ bytes: RawSpan) throws(FileIOError) {
        try FileIO.writeAll(descriptor, bytes, path: temporaryPath)
    }

    /// Appends `bytes` (a `Data`, an array).
    package func write(contentsOf bytes: some ContiguousBytes) throws(FileIOError) {
        let written = unsafe bytes.withUnsafeBytes { raw -> Result<Void, FileIOError> in
            do throws(FileIOError) {
                try unsafe write(raw)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try written.get()
    }

    /// Flushes the temporary file to disk, gives it its name and syncs the directory. After a failure the output
    /// is not in place (`abort()` removes the temporary file), except when only the final directory sync failed.
    package func commit() throws(FileIOError) {
        guard !done else { return }
        try FileIO.sync(descriptor, path: temporaryPath)
        if publication == .createNew && !hasName {
            // An unnamed file is linked straight to its name, which fails if anything has it.
            guard UnnamedFile.link(descriptor, to: path, through: descriptorDirectory) == 0 else {
                throw FileIOError("link", path: path, errno: errno)
            }
            finishClosed()
        } else {
            if !hasName {
                registration = TemporaryFileRegistry.register(temporaryPath)
                guard UnnamedFile.link(descriptor, to: temporaryPath, through: descriptorDirectory) == 0 else {
                    let code = errno
                    TemporaryFileRegistry.unregister(registration)
                    registration = nil
                    throw FileIOError("link", path: temporaryPath, errno: code)
                }
                hasName = true
            }
            let fd = descriptor
            descriptor = -1
            guard close(fd) == 0 else { throw FileIOError("close", path: temporaryPath, errno: errno) }
            switch publication {
            case .replace: try rename()
            case .createNew: try linkNew()
            }
            finishClosed()
        }
        try FileIO.syncDirectory(containing: path)
    }

    /// `rename(2)` of the named temporary file to `path`.
    private func rename() throws(FileIOError) {
        guard renameFile(temporaryPath, path) == 0 else { throw FileIOError("rename", path: path, errno: errno) }
    }

    /// `link(2)` of the named temporary file to `path` (failing if the name is taken), then `unlink(2)` of it.
    private func linkNew() throws(FileIOError) {
        guard unsafe link(temporaryPath, path) == 0 else {
            let code = errno
            guard [EPERM, ENOTSUP, EOPNOTSUPP, EXDEV].contains(code) else {
                throw FileIOError("link", path: path, errno: code)
            }
            // File systems without hard links: check once more, then rename (a narrow window).
            var info = stat()
            guard unsafe lstat(path, &info) != 0 else { throw FileIOError("link", path: path, errno: EEXIST) }
            try rename()
            return
        }
        _ = unsafe unlink(temporaryPath)
    }

    /// Marks the output committed: the temporary file is closed and no longer the registry's.
    private func finishClosed() {
        if descriptor >= 0 {
            _ = close(descriptor)
            descriptor = -1
        }
        TemporaryFileRegistry.unregister(registration)
        registration = nil
        done = true
    }

    /// Closes and removes the temporary file (nothing after a commit).
    package func abort() {
        guard !done else { return }
        done = true
        if descriptor >= 0 {
            // Shrink first so no plaintext blocks linger if unlink fails.
            _ = ftruncate(descriptor, 0)
            _ = close(descriptor)
            descriptor = -1
        }
        if hasName { _ = unsafe unlink(temporaryPath) }
        TemporaryFileRegistry.unregister(registration)
        registration = nil
    }

    /// Renames a finished temporary file (one another writer made, such as SQLite, at `temporaryPath(in:)`) over
    /// `path` and syncs the directory: the commit of an output that is not written through an `AtomicFile`.
    package static func replace(_ path: String, with temporary: String) throws(FileIOError) {
        guard renameFile(temporary, path) == 0 else { throw FileIOError("rename", path: path, errno: errno) }
        try FileIO.syncDirectory(containing: path)
    }
}

/// `rename(2)` (inside `AtomicFile`, `rename` is a member).
private func renameFile(_ from: String, _ to: String) -> Int32 { unsafe rename(from, to) }

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
            return FileIO.retryingInterrupted { openFile(directory, temporaryFileFlag | access | O_CLOEXEC, 0o600) }
        #else
            errno = EOPNOTSUPP
            return -1
        #endif
    }

    /// Where this process's open descriptors have names (Linux procfs), through which an unnamed file is linked.
    package static let descriptorDirectory = "/proc/self/fd"

    /// `open(inDirectory:readable:)` (write-only) for a file that `link(_:to:through:)` will name: the file is kept
    /// only when `descriptorDirectory` shows the new descriptor as that very file (`isNamed(_:in:)`), so that the
    /// link at commit cannot fail for want of it (no /proc in a container or chroot). Either way the caller makes
    /// a named file instead when this returns -1.
    ///
    /// - Parameters:
    ///   - directory: where the file's blocks live (and where it will be linked).
    ///   - descriptorDirectory: where the process's descriptors have names (`/proc/self/fd`).
    /// - Returns: the descriptor; or -1 with `open(inDirectory:readable:)`'s `errno` when no unnamed file can be
    ///   made (`EOPNOTSUPP` off Linux or on a file system without `O_TMPFILE`), or with `ENOENT` when one was made
    ///   but `descriptorDirectory` does not name it (it is closed).
    package static func openLinkable(inDirectory directory: String, through descriptorDirectory: String) -> Int32 {
        let fd = open(inDirectory: directory, readable: false)
        guard fd >= 0 else { return -1 }
        guard isNamed(fd, in: descriptorDirectory) else {
            _ = close(fd)
            errno = ENOENT
            return -1
        }
        return fd
    }

    /// Whether `descriptorDirectory`'s entry for `fd` is the file `fd` has open (same device and inode): what
    /// procfs shows, and an entry that only has the descriptor's number as its name does not.
    package static func isNamed(_ fd: Int32, in descriptorDirectory: String) -> Bool {
        var opened = stat()
        var named = stat()
        // Safety: `fstat` and `stat` write into the two locals, for the call only; the path is a NUL-terminated copy.
        guard unsafe fstat(fd, &opened) == 0, unsafe stat("\(descriptorDirectory)/\(fd)", &named) == 0 else {
            return false
        }
        return opened.st_dev == named.st_dev && opened.st_ino == named.st_ino
    }

    /// Gives the unnamed file `fd` the name `path` (`linkat` through `descriptorDirectory`, `/proc/self/fd`); fails
    /// with `EEXIST` if `path` exists.
    ///
    /// - Returns: 0, or -1 with `errno` set.
    package static func link(_ fd: Int32, to path: String, through descriptorDirectory: String) -> Int32 {
        #if os(Linux)
            // Safety: both paths are lent to `linkat` as NUL-terminated copies for the call only.
            return unsafe linkat(AT_FDCWD, "\(descriptorDirectory)/\(fd)", AT_FDCWD, path, AT_SYMLINK_FOLLOW)
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
/// `AtomicFile` registers its temporary path here for as long as the file has a name (on Linux with `O_TMPFILE`
/// only for the instant between linking and renaming it at commit; elsewhere from creation to commit or abort). A
/// program that installs handlers for SIGINT, SIGTERM or SIGHUP calls `removeAll()` from them (the `e3dbkit` CLI
/// does, through E3DBFiles' `PendingTemporaryFiles`).
package enum TemporaryFileRegistry {
    static let capacity = 64

    /// C strings (from `strdup`) as bit patterns; 0 marks a free slot. Whoever exchanges a pointer out of a slot
    /// owns it, so a signal handler and the thread unregistering never both use it.
    nonisolated(unsafe) static let slots: UnsafeMutablePointer<Atomic<Int>> = {
        let slots = UnsafeMutablePointer<Atomic<Int>>.allocate(capacity: capacity)
        for i in 0..<capacity { unsafe (slots + i).initialize(to: Atomic(0)) }
        return unsafe slots
    }()

    /// Sets up the registry. Call it before installing a signal handler that calls `removeAll()`, so the handler
    /// never runs the one-time initialisation.
    package static func prepare() { _ = unsafe slots }

    /// Removes every registered file (`unlink`). Async-signal-safe: atomic exchanges and `unlink(2)` only.
    package static func removeAll() {
        for i in 0..<capacity { remove(slot: i) }
    }

    /// Claims slot `index` and unlinks its file, if any. Async-signal-safe.
    package static func remove(slot index: Int) {
        let bits = unsafe slots[index].exchange(0, ordering: .acquiringAndReleasing)
        if let path = unsafe UnsafePointer<CChar>(bitPattern: bits) { _ = unsafe unlink(path) }
    }

    /// Registers `path`; returns its slot, or nil when the registry is full (the file is then only removed by
    /// `AtomicFile/abort()`).
    package static func register(_ path: String) -> Int? {
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
    package static func unregister(_ index: Int?) {
        guard let index else { return }
        let bits = unsafe slots[index].exchange(0, ordering: .acquiringAndReleasing)
        if let path = unsafe UnsafeMutablePointer<CChar>(bitPattern: bits) { unsafe free(path) }
    }
}
