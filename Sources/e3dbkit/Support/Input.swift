import E3DBCommandLine
import E3DBKit
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whole inputs read with `open(2)` and `read(2)`: any path that can be opened for reading works, including
/// `/dev/stdin`, FIFOs and `<(…)` process substitution, and `-` is standard input.
///
/// Inputs are bounded: documents by ``documentLimit`` (the documents' own read limit), secrets by
/// ``secretLimit``. A larger input is malformed (exit 65) and is not read past the limit. Standard input can be
/// claimed once per command: a second `-` is a usage error (exit 64) instead of an empty read.
enum CLIInput {
    /// The largest JSON document an input may hold (64 MiB, the documents' read limit).
    static let documentLimit = DocumentLimits.parse.maxInputBytes
    /// The largest secret file (identity JSON, access key): 1 MiB.
    static let secretLimit = 1 << 20

    private static let stdinClaim = Mutex<String?>(nil)

    /// Marks standard input as used by `what`; throws a usage error when another input already took it.
    static func claimStandardInput(for what: String) throws {
        try stdinClaim.withLock { (owner: inout String?) throws(CLIError) in
            if let owner {
                throw CLIError(
                    "standard input ('-') is already the \(owner); it cannot also be the \(what)",
                    exitCode: ExitStatus.usage)
            }
            owner = what
        }
    }

    /// Opens `path` (or claims standard input for `-`) for reading.
    /// - Returns: The descriptor and whether the caller must close it.
    static func open(_ path: String, what: String) throws -> (fd: Int32, owned: Bool) {
        if path == "-" {
            try claimStandardInput(for: what)
            return (STDIN_FILENO, false)
        }
        let fd = systemOpen(path)
        guard fd >= 0 else {
            throw CLIError(
                "cannot open the \(what) \(path): \(Descriptor.message(errno))", exitCode: ExitStatus.noInput)
        }
        var info = stat()
        if unsafe fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw CLIError("cannot read the \(what) \(path): it is a directory", exitCode: ExitStatus.noInput)
        }
        return (fd, true)
    }

    /// Reads all of `path` (at most `limit` bytes).
    static func read(_ path: String, what: String, limit: Int = documentLimit) throws -> Data {
        let (fd, owned) = try open(path, what: what)
        defer { if owned { close(fd) } }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = try readSome(fd, into: &buffer, what: what, path: path)
            if count == 0 { break }
            guard data.count + count <= limit else {
                throw CLIError(
                    "the \(what) \(display(path)) is larger than \(limit) bytes", exitCode: ExitStatus.dataError)
            }
            data.append(contentsOf: buffer[0..<count])
        }
        return data
    }

    /// Reads a secret from `path` into wiped storage, without leading or trailing ASCII whitespace (spaces, tabs,
    /// CR, LF), the same for every command. The bytes never pass through ordinary memory: they are read straight
    /// into a wiped buffer and copied from there into one of the right size.
    static func readSecret(_ path: String, what: String, limit: Int = secretLimit) throws -> SecureBytes {
        let (fd, owned) = try open(path, what: what)
        defer { if owned { close(fd) } }
        var length = 0
        var failure: CLIError?
        let buffer = unsafe SecureBytes(count: limit + 1) { (raw: UnsafeMutableRawBufferPointer) in
            do throws(FileIOError) {
                length = try unsafe FileIO.readFully(fd, into: raw)
            } catch {
                failure = readFailure(error, what: what, path: path)
            }
        }
        if let failure { throw failure }
        guard length <= limit else {
            throw CLIError("the \(what) \(display(path)) is larger than \(limit) bytes", exitCode: ExitStatus.dataError)
        }
        return try unsafe buffer.withUnsafeBytes { (raw) throws(CLIError) -> SecureBytes in
            var start = 0
            var end = length
            while start < end, unsafe isSpace(raw[start]) { start += 1 }
            while end > start, unsafe isSpace(raw[end - 1]) { end -= 1 }
            guard end > start else {
                throw CLIError("the \(what) \(display(path)) is empty", exitCode: ExitStatus.dataError)
            }
            return unsafe SecureBytes(count: end - start) { target in
                unsafe target.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[start..<end]))
            }
        }
    }

    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    static func display(_ path: String) -> String { path == "-" ? "from standard input" : path }

    private static func systemOpen(_ path: String) -> Int32 {
        #if canImport(Glibc)
            unsafe Glibc.open(path, O_RDONLY | O_CLOEXEC)
        #else
            Darwin.open(path, O_RDONLY | O_CLOEXEC)
        #endif
    }

    /// One `read(2)` of `path` into `buffer` (`FileIO.read`, retried on EINTR); 0 at the end of the input.
    static func readSome(_ fd: Int32, into buffer: inout [UInt8], what: String, path: String) throws(CLIError) -> Int {
        let result = unsafe buffer.withUnsafeMutableBytes { raw in
            Result { () throws(FileIOError) in try unsafe FileIO.read(fd, into: raw) }
        }
        do throws(FileIOError) { return try result.get() } catch { throw readFailure(error, what: what, path: path) }
    }

    /// The one-line error of a failed read of the input `path`.
    static func readFailure(_ error: FileIOError, what: String, path: String) -> CLIError {
        CLIError("cannot read the \(what) \(display(path)): \(error.reason)", exitCode: ExitStatus.noInput)
    }
}
