package import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Output files that are complete or absent: the bytes go to a private temporary file in the destination's
/// directory (a short name, `O_EXCL | O_NOFOLLOW`, the final mode from the start), are synced, and the file is
/// linked into place only when everything was written.
///
/// An existing path, including a symlink (dangling or not), is never replaced unless `force` is set; with `force`
/// the path itself is replaced (a symlink is replaced by the new file, never written through). Without `force` the
/// new file is published with `link(2)`, so a file that appears meanwhile is not replaced either.
package enum OutputFile {
    /// Writes `data` to `path`, or to standard output when `path` is `-`.
    package static func write(_ data: some ContiguousBytes, to path: String, mode: mode_t = 0o644, force: Bool) throws {
        if path == "-" {
            try StandardOutput.write(data)
            return
        }
        try refuseExisting(path, force: force)
        let directory = directoryOf(path)
        let (fd, temporary) = try createTemporary(in: directory, mode: mode, for: path)
        var committed = false
        defer {
            if !committed { unsafe unlink(temporary) }
        }
        let failure = unsafe data.withUnsafeBytes { unsafe Descriptor.writeAll(fd, $0) }
        if failure != 0 {
            close(fd)
            throw CLIError("cannot write \(path): \(Descriptor.message(failure))", exitCode: ExitStatus.failure)
        }
        if fsync(fd) != 0 {
            let code = errno
            close(fd)
            throw CLIError("cannot write \(path): \(Descriptor.message(code))", exitCode: ExitStatus.failure)
        }
        if close(fd) != 0 {
            throw CLIError("cannot write \(path): \(Descriptor.message(errno))", exitCode: ExitStatus.failure)
        }
        try publish(temporary, as: path, force: force)
        committed = true
    }

    /// Fails with a one-line error when `path` exists (as anything, including a dangling symlink) and `force`
    /// is not set.
    package static func refuseExisting(_ path: String, force: Bool) throws {
        var info = stat()
        if unsafe lstat(path, &info) == 0 {
            if (info.st_mode & S_IFMT) == S_IFDIR {
                throw CLIError("\(path) is a directory", exitCode: ExitStatus.failure)
            }
            if !force {
                let what = (info.st_mode & S_IFMT) == S_IFLNK ? "is a symlink" : "exists"
                throw CLIError("\(path) \(what); pass --force to replace it", exitCode: ExitStatus.failure)
            }
        }
    }

    static func directoryOf(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// A new file `DIR/.e3dbkit-XXXXXXXX` (short, whatever the length of the final name) created exclusively.
    static func createTemporary(in directory: String, mode: mode_t, for path: String) throws -> (Int32, String) {
        for _ in 0..<16 {
            let suffix = (0..<8).map { _ in String(UInt8.random(in: 0...15), radix: 16) }.joined()
            let temporary = (directory == "/" ? "" : directory) + "/.e3dbkit-" + suffix
            let fd = unsafe open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            if fd >= 0 {
                // The umask may have narrowed the mode; secrets keep exactly 0600, other files what was asked.
                _ = fchmod(fd, mode)
                return (fd, temporary)
            }
            if errno != EEXIST {
                throw CLIError("cannot create \(path): \(Descriptor.message(errno))", exitCode: ExitStatus.failure)
            }
        }
        throw CLIError("cannot create \(path): no free temporary name in \(directory)", exitCode: ExitStatus.failure)
    }

    /// Moves the finished temporary file to `path`: `rename(2)` with `force`, otherwise `link(2)` (which fails
    /// if anything took the name meanwhile) and `unlink(2)`.
    static func publish(_ temporary: String, as path: String, force: Bool) throws {
        if force {
            guard unsafe rename(temporary, path) == 0 else {
                throw CLIError("cannot create \(path): \(Descriptor.message(errno))", exitCode: ExitStatus.failure)
            }
            return
        }
        guard unsafe link(temporary, path) == 0 else {
            let code = errno
            if code == EEXIST {
                throw CLIError("\(path) exists; pass --force to replace it", exitCode: ExitStatus.failure)
            }
            // File systems without hard links: check once more, then rename (a narrow window, documented).
            if code == EPERM || code == ENOTSUP || code == EOPNOTSUPP || code == EXDEV {
                try refuseExisting(path, force: false)
                guard unsafe rename(temporary, path) == 0 else {
                    throw CLIError("cannot create \(path): \(Descriptor.message(errno))", exitCode: ExitStatus.failure)
                }
                return
            }
            throw CLIError("cannot create \(path): \(Descriptor.message(code))", exitCode: ExitStatus.failure)
        }
        unsafe unlink(temporary)
    }
}
