import ArgumentParser
import E3DBKit
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Exit codes shared by every subcommand (sysexits.h where one fits).
enum ExitStatus {
    /// A generic failure.
    static let failure = ExitCode(1)
    /// Authentication or integrity failure: a MAC, signature or checksum did not verify.
    static let authentication = ExitCode(2)
    /// Malformed input data (EX_DATAERR).
    static let dataError = ExitCode(65)
    /// An input file could not be opened (EX_NOINPUT).
    static let noInput = ExitCode(66)
    /// An output file could not be created (EX_CANTCREAT).
    static let cannotCreate = ExitCode(73)
}

/// A one-line error on stderr followed by an exit code; the CLI's way to fail without a stack trace.
struct CLIError: Error, CustomStringConvertible {
    let message: String
    let exitCode: ExitCode
    var description: String { message }

    init(_ message: String, exitCode: ExitCode = ExitStatus.failure) {
        self.message = message
        self.exitCode = exitCode
    }

    /// Maps a library error to the CLI's exit codes through its category, for every command: verification
    /// failures exit 2, malformed input 65, unusable arguments 64, I/O and system failures 1.
    init(_ error: E3DBError, while doing: String) {
        self.message = "\(doing): \(error.message)\(CLIError.where(error))"
        self.exitCode = CLIError.exitCode(for: error.code.category)
    }

    /// The one table from error categories to exit codes.
    static func exitCode(for category: E3DBError.Category) -> ExitCode {
        switch category {
        case .verification: ExitStatus.authentication
        case .malformedInput: ExitStatus.dataError
        case .invalidArgument: ExitCode.validationFailure
        case .io, .system, .cancelled: ExitStatus.failure
        }
    }

    static func `where`(_ error: E3DBError) -> String {
        var parts: [String] = []
        if let field = error.context.field { parts.append("field \(String(reflecting: field))") }
        if let part = error.context.part { parts.append(part) }
        if let chunk = error.context.chunkIndex { parts.append("chunk \(chunk)") }
        if let offset = error.context.offset { parts.append("offset \(offset)") }
        return parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")"
    }
}

/// Prints `error` as one line on stderr and exits with its code. Every command's `run()` ends up here on failure.
func exitWithError(_ error: any Error) -> Never {
    switch error {
    case let error as CLIError:
        FileHandle.standardError.write(Data("e3dbkit: \(error.message)\n".utf8))
        exit(error.exitCode.rawValue)
    case let error as E3DBError:
        let cli = CLIError(error, while: "error")
        FileHandle.standardError.write(Data("e3dbkit: \(cli.message)\n".utf8))
        exit(cli.exitCode.rawValue)
    default:
        FileHandle.standardError.write(Data("e3dbkit: \(error)\n".utf8))
        exit(ExitStatus.failure.rawValue)
    }
}

enum CLIIO {
    /// Reads a whole input: a path, or `-` for stdin.
    static func readAll(_ path: String) throws -> Data {
        if path == "-" { return FileHandle.standardInput.readDataToEndOfFile() }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError("cannot read \(path)", exitCode: ExitStatus.noInput)
        }
        return data
    }

    /// Reads a secret from a file (or `-` for stdin) into wiped storage, dropping one trailing newline.
    /// Secrets are never taken from argv, where `ps` and shell history can see them.
    static func readSecret(_ path: String, what: String) throws -> SecureBytes {
        var data = try readAll(path)
        defer { data.resetBytes(in: 0..<data.count) }
        while let last = data.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") {
            data.removeLast()
        }
        guard !data.isEmpty else { throw CLIError("\(what) file \(path) is empty", exitCode: ExitStatus.dataError) }
        return SecureBytes(copying: data)
    }

    /// Reads a secret text (base64url key, JSON identity) as a String. The caller's String cannot be wiped.
    static func readSecretText(_ path: String, what: String) throws -> String {
        let bytes = try readSecret(path, what: what)
        return bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Writes `data` to stdout (`-`) or atomically to a file created with `mode` (0600 for secrets).
    static func write(_ data: Data, to path: String, mode: mode_t = 0o644, overwrite: Bool = true) throws {
        if path == "-" {
            FileHandle.standardOutput.write(data)
            return
        }
        if !overwrite && FileManager.default.fileExists(atPath: path) {
            throw CLIError("\(path) exists; pass --force to overwrite", exitCode: ExitStatus.cannotCreate)
        }
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        let temporary = (directory.isEmpty ? "." : directory) + "/.\(url.lastPathComponent).\(UUID().uuidString).tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL, mode)
        guard fd >= 0 else { throw CLIError("cannot create \(path): \(String(cString: strerror(errno)))", exitCode: ExitStatus.cannotCreate) }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: data)
            try handle.synchronize()
            try handle.close()
        } catch {
            unlink(temporary)
            throw CLIError("cannot write \(path): \(error)", exitCode: ExitStatus.cannotCreate)
        }
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw CLIError("cannot create \(path): \(String(cString: strerror(errno)))", exitCode: ExitStatus.cannotCreate)
        }
    }

    /// Writes a secret file with mode 0600.
    static func writeSecret(_ data: Data, to path: String, overwrite: Bool) throws {
        try write(data, to: path, mode: 0o600, overwrite: overwrite)
    }
}
