import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

/// `e3dbkit file ...` end to end: runs the built binary (``CLIRunner``).
@Suite("e3dbkit file")
struct FileCLITests {
    let directory: URL
    let keyFile: URL
    let key = AccessKey()

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        keyFile = directory.appendingPathComponent("key")
        try Data((key.base64URLEncoded + "\n").utf8).write(to: keyFile)
    }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    func entries() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    @Test(arguments: [0, 1, 65_536, 200_000])
    func encryptDecryptRoundTrip(size: Int) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try plain.write(to: URL(fileURLWithPath: path("plain")))
        let enc = try await CLIRunner.run([
            "file", "encrypt", "--access-key-file", keyFile.path, path("plain"), path("enc"),
        ])
        #expect(enc.status == 0, "\(enc.stderr)")
        let encrypted = try Data(contentsOf: URL(fileURLWithPath: path("enc")))
        #expect(encrypted.count == E3DBFileFormat.encryptedSize(forPlaintextSize: size))
        #expect(enc.stdoutText.contains("checksum: \(Base64.encode(Hashes.md5(encrypted)))"))
        #expect(enc.stdoutText.contains("size: \(encrypted.count)"))
        let b2 = Hex.encode(try BLAKE2b.hash(data: encrypted, outputByteCount: 64))
        #expect(enc.stdoutText.contains("blake2b-512: \(b2)"))
        #expect(enc.stderr.isEmpty, "no progress bar when stderr is not a terminal")

        let dec = try await CLIRunner.run([
            "file", "decrypt", "--access-key-file", keyFile.path, path("enc"), path("dec"),
        ])
        #expect(dec.status == 0, "\(dec.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path("dec"))) == plain)

        let sum = try await CLIRunner.run(["file", "checksum", path("enc")])
        #expect(sum.status == 0)
        #expect(
            sum.stdoutText
                == "checksum: \(Base64.encode(Hashes.md5(encrypted)))\nsize: \(encrypted.count)\nblake2b-512: \(b2)\n")
        #expect(try entries() == ["dec", "enc", "key", "plain"], "no temporary files left")
    }

    @Test func standardInputAndOutput() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = Data((0..<150_000).map { UInt8(truncatingIfNeeded: $0) })
        let enc = try await CLIRunner.run(
            ["file", "encrypt", "--access-key-file", keyFile.path, "-", "-"], stdin: plain)
        #expect(enc.status == 0, "\(enc.stderr)")
        #expect(enc.stdout.count == E3DBFileFormat.encryptedSize(forPlaintextSize: plain.count))
        let dec = try await CLIRunner.run(
            ["file", "decrypt", "--access-key-file", keyFile.path, "-", "-"], stdin: enc.stdout)
        #expect(dec.status == 0, "\(dec.stderr)")
        #expect(dec.stdout == plain)
        let sum = try await CLIRunner.run(["file", "checksum", "-"], stdin: enc.stdout)
        #expect(sum.stdoutText.hasPrefix("checksum: \(Base64.encode(Hashes.md5(enc.stdout)))\n"))
    }

    @Test func integrityFailuresExitTwoAndLeaveNoOutput() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = Data(repeating: 7, count: 140_000)
        try plain.write(to: URL(fileURLWithPath: path("plain")))
        _ = try await CLIRunner.run([
            "file", "encrypt", "-q", "--access-key-file", keyFile.path, path("plain"), path("enc"),
        ])
        let good = try Data(contentsOf: URL(fileURLWithPath: path("enc")))
        var flipped = good
        flipped[70_000] ^= 1
        let otherKey = directory.appendingPathComponent("other")
        try Data(AccessKey().base64URLEncoded.utf8).write(to: otherKey)
        let cases: [(String, Data, String, [String])] = [
            ("truncated at a chunk boundary", Data(good.prefix(124 + 65_553)), keyFile.path, []),
            ("truncated mid-chunk", Data(good.prefix(100_000)), keyFile.path, []),
            ("tampered", flipped, keyFile.path, []),
            ("appended", good + Data([0]), keyFile.path, ["--expected-size", "\(good.count)"]),
            ("wrong key", good, otherKey.path, []),
            ("wrong checksum", good, keyFile.path, ["--expected-checksum", Base64.encode(Hashes.md5(Data()))]),
            ("version 1", Data("1".utf8) + good.dropFirst(), keyFile.path, []),
        ]
        for (name, bytes, key, extra) in cases {
            try bytes.write(to: URL(fileURLWithPath: path("bad")))
            // Not an E3DB v3 file at all (another version) is malformed input; everything else fails to verify.
            let expected: Int32 = name == "version 1" ? 65 : 2
            let out = try await CLIRunner.run(
                ["file", "decrypt", "--access-key-file", key] + extra + [path("bad"), path("out")])
            #expect(out.status == expected, "\(name): \(out.stderr)")
            #expect(out.stderr.hasPrefix("e3dbkit: decrypting"), "\(name)")
            #expect(!FileManager.default.fileExists(atPath: path("out")), "\(name): output left behind")
            let toStdout = try await CLIRunner.run(
                ["file", "decrypt", "--access-key-file", key] + extra + [path("bad"), "-"])
            #expect(toStdout.status == expected && toStdout.stdout.isEmpty, "\(name): plaintext on stdout")
        }
        #expect(try entries() == ["bad", "enc", "key", "other", "plain"], "no temporary files left")
    }

    /// D13: a malformed --expected-checksum is a usage error (64) before anything is decrypted; an --expected-size
    /// shorter than the file is reported as such (2, "longer than its expected size"), not as a damaged file.
    @Test func expectedChecksumAndSizeArguments() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data([9]).write(to: URL(fileURLWithPath: path("plain")))
        _ = try await CLIRunner.run([
            "file", "encrypt", "-q", "--access-key-file", keyFile.path, path("plain"), path("enc"),
        ])
        let good = try Data(contentsOf: URL(fileURLWithPath: path("enc")))
        #expect(good.count == 142)
        for bad in ["garbage", "DPb7oJVFD4O0cXsAkVRltA", "0cf6fba095450f83b4717d910154", "-x"] {
            let out = try await CLIRunner.run(
                [
                    "file", "decrypt", "-q", "--access-key-file", keyFile.path, "--expected-checksum=\(bad)",
                    path("enc"),
                    path("out"),
                ])
            #expect(out.status == 64, "\(bad): \(out.stderr)")
            #expect(out.stderr.contains("--expected-checksum"), "\(bad): \(out.stderr)")
        }
        for size in [0, 50, 141] {
            let out = try await CLIRunner.run(
                [
                    "file", "decrypt", "-q", "--access-key-file", keyFile.path, "--expected-size", "\(size)",
                    path("enc"),
                    path("out"),
                ])
            #expect(out.status == 2, "\(size): \(out.stderr)")
            #expect(out.stderr.contains("longer than its expected size of \(size) bytes"), "\(size): \(out.stderr)")
        }
        let negative = try await CLIRunner.run(
            ["file", "decrypt", "--access-key-file", keyFile.path, "--expected-size=-1", path("enc"), path("out")])
        #expect(negative.status == 64)
        let right = try await CLIRunner.run(
            [
                "file", "decrypt", "--access-key-file", keyFile.path, "--expected-size", "142", "--expected-checksum",
                Base64.encode(Hashes.md5(good)), path("enc"), path("out"),
            ])
        #expect(right.status == 0, "\(right.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path("out"))) == Data([9]))
        #expect(try entries() == ["enc", "key", "out", "plain"])
    }

    /// `file decrypt … -` authenticates everything before writing a byte: a tampered last chunk leaves stdout
    /// empty (exit 2), from a regular file and from a pipe. A regular file needs no spool at all (TMPDIR points
    /// to a directory that does not exist); a pipe needs a writable TMPDIR for its ciphertext spool.
    @Test func standardOutputGetsNothingUnlessTheWholeFileAuthenticates() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        try plain.write(to: URL(fileURLWithPath: path("plain")))
        _ = try await CLIRunner.run([
            "file", "encrypt", "-q", "--access-key-file", keyFile.path, path("plain"), path("enc"),
        ])
        let good = try Data(contentsOf: URL(fileURLWithPath: path("enc")))
        var bad = good
        bad[bad.count - 3] ^= 0x40
        try bad.write(to: URL(fileURLWithPath: path("bad")))
        let noTmp = ["TMPDIR": path("missing-tmp")]
        let fromFile = try await CLIRunner.run(
            ["file", "decrypt", "-q", "--access-key-file", keyFile.path, path("bad"), "-"], environment: noTmp)
        #expect(fromFile.status == 2, "\(fromFile.stderr)")
        #expect(fromFile.stdout.isEmpty)
        let fromPipe = try await CLIRunner.run(
            ["file", "decrypt", "-q", "--access-key-file", keyFile.path, "-", "-"], stdin: bad,
            environment: ["TMPDIR": directory.path])
        #expect(fromPipe.status == 2, "\(fromPipe.stderr)")
        #expect(fromPipe.stdout.isEmpty)
        let goodFile = try await CLIRunner.run(
            ["file", "decrypt", "-q", "--access-key-file", keyFile.path, path("enc"), "-"], environment: noTmp)
        #expect(goodFile.status == 0, "\(goodFile.stderr)")
        #expect(goodFile.stdout == plain)
        let goodPipe = try await CLIRunner.run(
            ["file", "decrypt", "-q", "--access-key-file", keyFile.path, "-", "-"], stdin: good,
            environment: ["TMPDIR": directory.path])
        #expect(goodPipe.stdout == plain)
        #expect(try entries() == ["bad", "enc", "key", "plain"], "no spool file left behind")
    }

    @Test func rangeDecryption() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) })
        try plain.write(to: URL(fileURLWithPath: path("plain")))
        _ = try await CLIRunner.run([
            "file", "encrypt", "-q", "--access-key-file", keyFile.path, path("plain"), path("enc"),
        ])
        for (text, range) in [
            ("0-0", 0...0), ("65535-65536", 65_535...65_536), ("100000-", 100_000...199_999),
            ("0-199999", 0...199_999), ("199999-199999", 199_999...199_999),
        ] {
            let out = try await CLIRunner.run([
                "file", "decrypt", "--access-key-file", keyFile.path, "--range", text, path("enc"), "-",
            ])
            #expect(out.status == 0, "\(text): \(out.stderr)")
            #expect(out.stdout == plain[range], "\(text)")
        }
        let toFile = try await CLIRunner.run(
            ["file", "decrypt", "--access-key-file", keyFile.path, "--range", "70000-70099", path("enc"), path("part")])
        #expect(toFile.status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path("part"))) == plain[70_000...70_099])
        for malformed in ["", "5", "-5", "10-5", "a-b", "1-2-3", " 1-2", "1.0-2", "99999999999999999999-1"] {
            let out = try await CLIRunner.run(
                ["file", "decrypt", "--access-key-file", keyFile.path, "--range=\(malformed)", path("enc"), "-"])
            #expect(out.status == 64, "'\(malformed)': \(out.status) \(out.stderr)")
            #expect(out.stdout.isEmpty)
        }
        let stdin = try await CLIRunner.run([
            "file", "decrypt", "--access-key-file", keyFile.path, "--range", "0-1", "-", "-",
        ])
        #expect(stdin.status == 64)
        #if os(Linux)
            // A FIFO cannot be read at an offset: a usage error, not a hang or a partial read.
            #expect(mkfifo(path("fifo"), 0o600) == 0)
            let writer = Thread {
                if let handle = FileHandle(forWritingAtPath: path("fifo")) { try? handle.close() }
            }
            writer.start()
            let fifo = try await CLIRunner.run([
                "file", "decrypt", "--access-key-file", keyFile.path, "--range", "0-1", path("fifo"), "-",
            ])
            #expect(fifo.status == 64, "\(fifo.stderr)")
            #expect(fifo.stderr.contains("regular file"), "\(fifo.stderr)")
            try FileManager.default.removeItem(atPath: path("fifo"))
        #endif
        let outOfBounds = try await CLIRunner.run(
            ["file", "decrypt", "--access-key-file", keyFile.path, "--range", "199999-200000", path("enc"), "-"])
        #expect(outOfBounds.status == 64, "\(outOfBounds.stderr)")
        #expect(outOfBounds.stderr.contains("not within the plaintext of 200000 bytes"), "\(outOfBounds.stderr)")
        // A tampered chunk inside the range: exit 2, nothing on stdout, no output file.
        var bad = try Data(contentsOf: URL(fileURLWithPath: path("enc")))
        bad[124 + 65_553 + 1000] ^= 1
        try bad.write(to: URL(fileURLWithPath: path("bad")))
        let tampered = try await CLIRunner.run(
            ["file", "decrypt", "--access-key-file", keyFile.path, "--range", "0-70000", path("bad"), "-"])
        #expect(tampered.status == 2)
        #expect(tampered.stdout.isEmpty)
        let tamperedFile = try await CLIRunner.run(
            ["file", "decrypt", "--access-key-file", keyFile.path, "--range", "0-70000", path("bad"), path("out")])
        #expect(tamperedFile.status == 2)
        #expect(try entries() == ["bad", "enc", "key", "part", "plain"])
    }

    /// D2, D17: `file encrypt` and `file decrypt` to a path, interrupted mid-run (they wait on a pipe that has
    /// delivered 1 MiB of a larger input), leave no output and no temporary file. SIGINT, SIGTERM and SIGHUP end the
    /// process by that signal; SIGQUIT exits 131 without the runtime's crash report; SIGKILL cannot be handled,
    /// and on Linux the unnamed (O_TMPFILE) output leaves nothing either.
    @Test(arguments: [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGKILL])
    func interruptedCommandsLeaveNoFiles(signal signo: Int32) async throws {
        #if !os(Linux)
            if signo == SIGKILL { return }
        #endif
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = Data((0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 17) })
        let encrypted = try await CLIRunner.run(
            ["file", "encrypt", "-q", "--access-key-file", keyFile.path, "-", "-"], stdin: plain)
        #expect(encrypted.status == 0)
        for (command, input) in [("encrypt", plain), ("decrypt", encrypted.stdout)] {
            let process = try CLIRunner.start(
                ["file", command, "-q", "--access-key-file", keyFile.path, "-", path("out")],
                reading: .standardError, keepingInputOpen: true)
            // Returns once the CLI has read all but at most a pipe buffer of it: the run is under way.
            try await process.writeInput(input.prefix(1 << 20))
            try await Task.sleep(for: .milliseconds(200))
            process.signal(signo)
            let status = try await process.exit()
            process.closeInput()
            let message = String(decoding: try await process.readOutput(), as: UTF8.self)
            if signo == SIGQUIT {
                #expect(!process.uncaughtSignal && status == 131, "\(command)")
                #expect(!message.contains("crashed") && !message.contains("Backtrac"), "\(command): \(message)")
            } else {
                #expect(process.uncaughtSignal, "\(command)")
                #expect(status == signo, "\(command)")
            }
            #expect(try entries() == ["key"], "\(command) interrupted by signal \(signo) left files behind")
        }
    }

    /// D5, D10: when stdout cannot be written (/dev/full), `file encrypt` exits 1 without committing its output
    /// (the FileMeta values would be lost), and `file checksum` exits 1 instead of 0.
    @Test func unwritableStandardOutputFailsCleanly() async throws {
        #if os(Linux)
            defer { try? FileManager.default.removeItem(at: directory) }
            try Data(repeating: 3, count: 100_000).write(to: URL(fileURLWithPath: path("plain")))
            func runToDevFull(_ arguments: [String]) async throws -> (Int32, String) {
                let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
                let result = try await CLIRunner.run(arguments, standardOutput: full)
                return (result.status, result.stderr)
            }
            let (encryptStatus, encryptMessage) = try await runToDevFull(
                ["file", "encrypt", "-q", "--access-key-file", keyFile.path, path("plain"), path("enc")])
            #expect(encryptStatus == 1, "\(encryptMessage)")
            #expect(encryptMessage.contains("cannot write to standard output"), "\(encryptMessage)")
            #expect(try entries() == ["key", "plain"], "output committed although its FileMeta values were lost")
            _ = try await CLIRunner.run([
                "file", "encrypt", "-q", "--access-key-file", keyFile.path, path("plain"), path("enc"),
            ])
            let (checksumStatus, checksumMessage) = try await runToDevFull(["file", "checksum", path("enc")])
            #expect(checksumStatus == 1, "\(checksumMessage)")
        #endif
    }

    @Test func usageErrors() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let missing = try await CLIRunner.run([
            "file", "decrypt", "--access-key-file", keyFile.path, path("nope"), path("out"),
        ])
        #expect(missing.status == 66)
        try Data("not a key".utf8).write(to: URL(fileURLWithPath: path("badkey")))
        try Data("x".utf8).write(to: URL(fileURLWithPath: path("in")))
        let badKey = try await CLIRunner.run([
            "file", "encrypt", "--access-key-file", path("badkey"), path("in"), path("out"),
        ])
        #expect(badKey.status == 65)
        #expect(!badKey.stderr.contains("not a key"), "key material echoed")
    }
}
