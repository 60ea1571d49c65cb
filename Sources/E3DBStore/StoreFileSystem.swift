import E3DBPrimitives
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The store directory's own files (the key header and the database files) as the store creates and finds them:
/// owner-only from the start, whatever the umask, and never through a symbolic link.
///
/// The key header holds the sealed master key, its salt and KDF cost: readable by other local users, it is an offline
/// guessing target. So the directory the store creates is 0700 and its files 0600 (SQLite gives a database's
/// journals the database's mode). A directory the caller made already keeps its mode.
enum StoreFileSystem {
    /// What is at a path, without following a symbolic link.
    enum Kind: Equatable {
        case missing
        case regularFile
        case directory
        /// A symbolic link, FIFO, socket or device: never a store file.
        case other
    }

    /// What is at `url` (`lstat`: a symbolic link is `.other`, whatever it points at).
    /// - Throws: `databaseError` when the path cannot be examined (a permission problem).
    static func kind(of url: URL) throws(E3DBError) -> Kind {
        var info = stat()
        if unsafe lstat(url.path, &info) != 0 {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return .missing }
            throw E3DBError(
                .databaseError, "cannot examine \(url.lastPathComponent) (errno \(code))")
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .regularFile
        case S_IFDIR: return .directory
        default: return .other
        }
    }

    /// Creates the store's directory (and missing parents) with mode 0700; an existing directory is left as it is.
    /// - Throws: `databaseError`.
    static func create(_ directory: URL) throws(E3DBError) {
        if try kind(of: directory) == .directory { return }
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw E3DBError(.databaseError, "cannot create \(directory.path): \(error.localizedDescription)")
        }
    }

    /// Creates an empty file with mode 0600 (exclusive, not through a symbolic link), for SQLite to open as a new
    /// database.
    /// - Throws: `databaseError`, `storeExists` when something is already there.
    static func createPrivateFile(_ url: URL) throws(E3DBError) {
        let fd = unsafe open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let code = errno
            throw E3DBError(
                code == EEXIST ? .storeExists : .databaseError,
                "cannot create \(url.lastPathComponent) (errno \(code))")
        }
        // The umask may have taken bits from 0600; the owner needs both.
        let changed = fchmod(fd, 0o600)
        let code = errno
        close(fd)
        guard changed == 0 else {
            throw E3DBError(
                .databaseError, "cannot set the mode of \(url.lastPathComponent) (errno \(code))")
        }
    }

    /// Which file a name or a descriptor is: its device and inode.
    struct Identity: Equatable {
        let device: UInt64
        let inode: UInt64
    }

    /// The file at `url` (not through a symbolic link), nil when there is none or it cannot be examined.
    static func identity(of url: URL) -> Identity? {
        var info = stat()
        guard unsafe lstat(url.path, &info) == 0 else { return nil }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// The file open as `descriptor`, nil when it cannot be examined.
    static func identity(descriptor: Int32) -> Identity? {
        var info = stat()
        guard unsafe fstat(descriptor, &info) == 0 else { return nil }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }
}
