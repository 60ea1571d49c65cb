import ArgumentParser
import E3DBCommandLine
import E3DBKit
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `e3dbkit hash [FILE ...]`: BLAKE2b of files or stdin in GNU `b2sum` format.
struct HashCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash",
        abstract: "Print BLAKE2b checksums, in the same format as GNU b2sum.",
        discussion: """
            With no FILE, or when FILE is -, reads standard input. Output lines are "<hex digest>  <name>", \
            byte for byte what `b2sum` prints. Files are read in 64 KiB blocks, so memory stays constant.
            """
    )

    @Option(name: [.short, .long], help: "Digest length in bits: a multiple of 8 from 128 to 512 (b2sum -l).")
    var length: Int = 512

    @Argument(help: "Files to hash (- for standard input).")
    var files: [String] = []

    func validate() throws {
        guard length % 8 == 0, (128...512).contains(length) else {
            throw ValidationError("--length must be a multiple of 8 from 128 to 512")
        }
    }

    func run() throws {
        var failure: CLIError?
        for name in files.isEmpty ? ["-"] : files {
            let digest: Data
            do {
                digest = try HashCommand.digest(of: name, outputByteCount: length / 8)
            } catch let error as CLIError {
                // b2sum goes on with the other files; the exit code is the first failure's.
                StandardError.line("e3dbkit: \(error.message)")
                if failure == nil { failure = error }
                continue
            }
            try StandardOutput.line("\(Hex.encode(digest))  \(name)")
        }
        if let failure { throw ExitCode(failure.exitCode.rawValue) }
    }

    /// BLAKE2b of a file (any readable path) or of stdin, read in 64 KiB blocks.
    static func digest(of path: String, outputByteCount: Int) throws -> Data {
        let (fd, owned) = try CLIInput.open(path, what: "input")
        defer { if owned { close(fd) } }
        var hasher: BLAKE2b
        do {
            hasher = try BLAKE2b(outputByteCount: outputByteCount)
        } catch {
            throw CLIError(error, while: "hashing")
        }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = try CLIInput.readSome(fd, into: &buffer, what: "input", path: path)
            if count == 0 { break }
            hasher.update(data: buffer[0..<count])
        }
        return hasher.finalize()
    }
}
