import E3DBPrimitives
package import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Checked writes to a file descriptor: every byte is written or the failure is reported (ENOSPC, EPIPE with
/// SIGPIPE ignored, EIO). Foundation's `FileHandle.write(_:)` traps on these, so the command line never uses it.
package enum Descriptor {
    /// Writes all of `bytes` to `fd` (`FileIO.writeAll`: retrying on EINTR and short writes).
    /// - Returns: 0 on success, otherwise the `errno` of the failed write.
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        do throws(FileIOError) {
            try unsafe FileIO.writeAll(fd, bytes)
            return 0
        } catch {
            return error.errno
        }
    }

    package static func message(_ code: Int32) -> String { FileIO.message(code) }
}

/// Standard output through `write(2)`: a lost write is an error with exit code 1, never a crash or a silent 0.
package enum StandardOutput {
    package static func write(_ data: some ContiguousBytes) throws {
        let failure = unsafe data.withUnsafeBytes { unsafe Descriptor.writeAll(STDOUT_FILENO, $0) }
        if failure != 0 {
            throw CLIError(
                "cannot write to standard output: \(Descriptor.message(failure))", exitCode: ExitStatus.failure)
        }
    }

    package static func write(_ text: String) throws {
        var text = text
        try text.withUTF8 { try unsafe write(UnsafeRawBufferPointer($0)) }
    }

    /// `text` followed by a newline.
    package static func line(_ text: String) throws { try write(text + "\n") }

    /// `bytes` followed by a newline, in one write when small.
    package static func line(_ bytes: Data) throws {
        var data = bytes
        data.append(UInt8(ascii: "\n"))
        try write(data)
    }
}

/// Standard error: best effort (there is nowhere left to report a failure).
package enum StandardError {
    package static func line(_ text: String) {
        var text = text + "\n"
        text.withUTF8 { _ = unsafe Descriptor.writeAll(STDERR_FILENO, UnsafeRawBufferPointer($0)) }
    }

    package static func write(_ text: String) {
        var text = text
        text.withUTF8 { _ = unsafe Descriptor.writeAll(STDERR_FILENO, UnsafeRawBufferPointer($0)) }
    }
}

/// A byte count as progress lines show it: `512 B`, `12.0 MiB`, `1.5 GiB` (binary units, one decimal).
package enum ByteSize {
    package static func text(_ bytes: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }
}
