package import ArgumentParser
package import E3DBPrimitives

/// Exit codes shared by every subcommand of `e3dbkit` and `e3dbkit-server` (sysexits.h where one fits): the one
/// table in the README.
package enum ExitStatus {
    /// A generic failure: I/O (an output that cannot be written or created), the system, cancellation.
    package static let failure = ExitCode(1)
    /// Authentication or integrity failure: a MAC, signature or checksum did not verify.
    package static let authentication = ExitCode(2)
    /// A usage error: a missing, conflicting or malformed option (EX_USAGE, ArgumentParser's validation code).
    package static let usage = ExitCode.validationFailure
    /// Malformed input data (EX_DATAERR).
    package static let dataError = ExitCode(65)
    /// An input file could not be opened or read (EX_NOINPUT).
    package static let noInput = ExitCode(66)
    /// A store's passphrase or key is wrong (EX_NOPERM).
    package static let wrongKey = ExitCode(77)
}

/// A one-line error on stderr followed by an exit code; the command line's way to fail without a stack trace.
package struct CLIError: Error, CustomStringConvertible {
    package let message: String
    package let exitCode: ExitCode
    package var description: String { message }

    package init(_ message: String, exitCode: ExitCode = ExitStatus.failure) {
        self.message = message
        self.exitCode = exitCode
    }

    /// Maps a library error to the CLI's exit codes through its category, for every command: verification
    /// failures exit 2, malformed input 65, unusable arguments 64, I/O and system failures 1.
    package init(_ error: E3DBError, while doing: String) {
        self.message = "\(doing): \(error.message)\(CLIError.where(error))"
        self.exitCode = error.code == .wrongKey ? ExitStatus.wrongKey : CLIError.exitCode(for: error.code.category)
    }

    /// The one table from error categories to exit codes.
    package static func exitCode(for category: E3DBError.Category) -> ExitCode {
        switch category {
        case .verification: ExitStatus.authentication
        case .malformedInput: ExitStatus.dataError
        case .invalidArgument: ExitStatus.usage
        case .io, .system, .cancelled: ExitStatus.failure
        }
    }

    package static func `where`(_ error: E3DBError) -> String {
        var parts: [String] = []
        if let item = error.context.item { parts.append(item) }
        if let field = error.context.field { parts.append("field \(String(reflecting: field))") }
        if let part = error.context.part { parts.append(part) }
        if let chunk = error.context.chunkIndex { parts.append("chunk \(chunk)") }
        if let offset = error.context.offset { parts.append("offset \(offset)") }
        return parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")"
    }
}

/// Runs a library call; an `E3DBError` it throws becomes the command's one-line error "`doing`: message" with the
/// exit code of its category (``CLIError/init(_:while:)``). The one wrapper every command uses around the library.
package func libraryCall<T>(_ doing: String, _ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as E3DBError {
        throw CLIError(error, while: doing)
    }
}

/// ``libraryCall(_:_:)`` for async calls (the API client).
package func libraryCall<T>(_ doing: String, _ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as E3DBError {
        throw CLIError(error, while: doing)
    }
}
