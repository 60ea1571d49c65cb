import ArgumentParser
import E3DBKit
import E3DBStore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Exit codes shared by every subcommand (sysexits.h where one fits): the one table in the README.
enum ExitStatus {
    /// A generic failure: I/O (an output that cannot be written or created), the system, cancellation.
    static let failure = ExitCode(1)
    /// Authentication or integrity failure: a MAC, signature or checksum did not verify.
    static let authentication = ExitCode(2)
    /// A usage error: a missing, conflicting or malformed option (EX_USAGE, ArgumentParser's validation code).
    static let usage = ExitCode.validationFailure
    /// Malformed input data (EX_DATAERR).
    static let dataError = ExitCode(65)
    /// An input file could not be opened or read (EX_NOINPUT).
    static let noInput = ExitCode(66)
    /// A store's passphrase or key is wrong (EX_NOPERM).
    static let wrongKey = ExitCode(77)
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
        self.exitCode = error.code == .wrongKey ? ExitStatus.wrongKey : CLIError.exitCode(for: error.code.category)
    }

    /// The one table from error categories to exit codes.
    static func exitCode(for category: E3DBError.Category) -> ExitCode {
        switch category {
        case .verification: ExitStatus.authentication
        case .malformedInput: ExitStatus.dataError
        case .invalidArgument: ExitStatus.usage
        case .io, .system, .cancelled: ExitStatus.failure
        }
    }

    static func `where`(_ error: E3DBError) -> String {
        var parts: [String] = []
        if let item = error.context.item { parts.append(item) }
        if let field = error.context.field { parts.append("field \(String(reflecting: field))") }
        if let part = error.context.part { parts.append(part) }
        if let chunk = error.context.chunkIndex { parts.append("chunk \(chunk)") }
        if let offset = error.context.offset { parts.append("offset \(offset)") }
        return parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")"
    }
}

/// The whole-input helpers the commands use (``CLIInput`` and ``OutputFile`` underneath).
enum CLIIO {
    /// Reads a whole input: any readable path, or `-` for stdin (bounded by the documents' read limit).
    static func readAll(_ path: String, what: String = "input") throws -> Data {
        try CLIInput.read(path, what: what)
    }

    /// Reads a secret from a file (or `-` for stdin) into wiped storage, without surrounding whitespace.
    /// Secrets are never taken from argv, where `ps` and shell history can see them.
    static func readSecret(_ path: String, what: String) throws -> SecureBytes {
        try CLIInput.readSecret(path, what: what)
    }

    /// Writes `data` to stdout (`-`) or to a new file created with `mode` (0600 for secrets), replacing an
    /// existing path only when `overwrite` is set.
    static func write(_ data: Data, to path: String, mode: mode_t = 0o644, overwrite: Bool) throws {
        try OutputFile.write(data, to: path, mode: mode, force: overwrite)
    }

    /// Writes a secret file with mode 0600.
    static func writeSecret(_ data: Data, to path: String, overwrite: Bool) throws {
        try OutputFile.write(data, to: path, mode: 0o600, force: overwrite)
    }
}
