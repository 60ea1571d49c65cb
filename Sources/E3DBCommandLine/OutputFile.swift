import E3DBPrimitives
package import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Output files that are complete or absent, written through the package's `AtomicFile`: the bytes go to a private
/// temporary file in the destination's directory (unnamed on Linux, else a short `.e3dbkit-<hex>.tmp` name created
/// `O_EXCL | O_NOFOLLOW`; the final mode from the start), are synced, and the file is linked into place (and the
/// directory synced) only when everything was written.
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
        do throws(FileIOError) {
            let file = try AtomicFile(path: path, mode: mode, publication: force ? .replace : .createNew)
            try file.write(contentsOf: data)
            try file.commit()
        } catch {
            if error.errno == EEXIST && error.path == path {
                throw CLIError("\(path) exists; pass --force to replace it", exitCode: ExitStatus.failure)
            }
            throw CLIError("cannot write \(path): \(error.reason)", exitCode: ExitStatus.failure)
        }
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
}
