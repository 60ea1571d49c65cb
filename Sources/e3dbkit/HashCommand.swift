import ArgumentParser
import E3DBKit
import Foundation

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
        var failed = false
        for name in files.isEmpty ? ["-"] : files {
            do {
                let digest = try HashCommand.digest(of: name, outputByteCount: length / 8)
                print("\(digest.map { String(format: "%02x", $0) }.joined())  \(name)")
            } catch {
                FileHandle.standardError.write(Data("e3dbkit: \(name): \(error)\n".utf8))
                failed = true
            }
        }
        if failed { throw ExitCode.failure }
    }

    static func digest(of path: String, outputByteCount: Int) throws -> Data {
        let handle: FileHandle
        if path == "-" {
            handle = FileHandle.standardInput
        } else {
            guard let opened = FileHandle(forReadingAtPath: path) else {
                throw CLIError("cannot open \(path)", exitCode: ExitStatus.noInput)
            }
            handle = opened
        }
        var hasher = try BLAKE2b(outputByteCount: outputByteCount)
        while let block = try handle.read(upToCount: 65_536), !block.isEmpty {
            hasher.update(data: block)
        }
        return hasher.finalize()
    }
}
