import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

@Suite("CLI: hash and vectors")
struct PrimitivesCLITests {
    @Test func hashMatchesB2sumFormat() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = SecureRandom.bytes(count: 200_000)
        let file = dir.appendingPathComponent("data.bin")
        try data.write(to: file)
        let result = try await CLIRunner.run(["hash", file.path])
        #expect(result.status == 0)
        let digest = try BLAKE2b.hash(data: data, outputByteCount: 64)
        let hex = digest.map { String(format: "%02x", $0) }.joined()
        #expect(result.stdoutText == "\(hex)  \(file.path)\n")
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/b2sum") {
            let b2 = try await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/b2sum"), [file.path]).stdout
            #expect(result.stdout == b2, "byte-identical to GNU b2sum")
        }
    }

    @Test func hashReadsStdinWithLength() async throws {
        let result = try await CLIRunner.run(["hash", "-l", "256"], stdin: Data("abc".utf8))
        #expect(result.status == 0)
        let hex = try BLAKE2b.hash(data: Data("abc".utf8), outputByteCount: 32).map { String(format: "%02x", $0) }
            .joined()
        #expect(result.stdoutText == "\(hex)  -\n")
    }

    @Test func hashRejectsBadLengthAndMissingFiles() async throws {
        #expect(try await CLIRunner.run(["hash", "-l", "100"]).status == 64)
        let missing = try await CLIRunner.run(["hash", "/nonexistent/e3dbkit-test"])
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("cannot open"))
    }

    @Test func vectorsVerifyPrintsATable() async throws {
        let result = try await CLIRunner.run(["vectors", "verify", "--filter", "primitives/"])
        #expect(result.status == 0, "\(result.stdoutText)")
        #expect(result.stdoutText.contains("primitives/box"))
        #expect(result.stdoutText.contains(" 0 failed"))
    }

    @Test("e3dbkit-vectors verify (the main job) is e3dbkit vectors verify: same table, same status, same usage error")
    func vectorsExecutableIsTheSameCommand() async throws {
        let arguments = ["verify", "--filter", "primitives/"]
        let viaCLI = try await CLIRunner.run(["vectors"] + arguments)
        let alone = try await ChildProcess.run(CLIRunner.vectorsBinary, arguments)
        #expect(alone.status == 0, "\(alone.stderr)")
        #expect(alone.stdoutText == viaCLI.stdoutText)
        #expect(alone.stdoutText.contains("primitives/box"))
        let missing = try await ChildProcess.run(CLIRunner.vectorsBinary, ["verify", "/nonexistent/e3dbkit-vectors"])
        #expect(missing.status == 66, "\(missing.stderr)")
        let bare = try await ChildProcess.run(CLIRunner.vectorsBinary, [])
        #expect(bare.status == 64)
        #expect(bare.stderr.contains("missing subcommand for 'e3dbkit-vectors'"))
    }

    @Test func vectorsVerifyFailsOnABrokenVector() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let original = try String(
            contentsOf: root.appendingPathComponent("TestVectors/primitives/hashes.json"), encoding: .utf8)
        // Corrupt one expected digest.
        let broken = original.replacingOccurrences(
            of: "\"md5Base64\": \"DPb7oJVFD4O0cXsAkVRltA==\"", with: "\"md5Base64\": \"AAAAAAAAAAAAAAAAAAAAAA==\"")
        #expect(broken != original)
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("primitives"), withIntermediateDirectories: true)
        try broken.write(to: dir.appendingPathComponent("primitives/hashes.json"), atomically: true, encoding: .utf8)
        let result = try await CLIRunner.run(["vectors", "verify", dir.path, "--filter", "primitives/hashes"])
        #expect(result.status == 1)
        #expect(result.stdoutText.contains("1 failed"))
        #expect(result.stdoutText.contains("FAIL primitives/hashes #7"))
    }
}
