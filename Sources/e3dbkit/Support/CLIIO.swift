import ArgumentParser
import E3DBCommandLine
import E3DBKit
import E3DBStore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

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
