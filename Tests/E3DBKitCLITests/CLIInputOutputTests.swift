import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The command line's inputs, outputs and exit codes: any readable path, checked writes, output files that are
/// complete or absent and never replace what they should not, one exit-code table.
@Suite("CLI: inputs, outputs and exit codes")
struct CLIInputOutputTests {
    func run(_ arguments: [String], stdin: Data? = nil, in directory: URL? = nil) async throws -> CLIRunner.Result {
        try await CLIRunner.run(arguments, stdin: stdin, in: directory)
    }

    /// Runs `e3dbkit` with stdout sent to `stdoutPath` (for example /dev/full) or, when nil, to a pipe whose
    /// reading end is closed before the child starts (EPIPE).
    func runWithBrokenStdout(_ arguments: [String], stdoutPath: String?) async throws -> (status: Int32, stderr: String)
    {
        let output: FileHandle
        if let stdoutPath {
            guard let handle = FileHandle(forWritingAtPath: stdoutPath) else {
                throw CLIRunner.MissingBinary(path: stdoutPath)
            }
            output = handle
        } else {
            output = try ChildProcess.brokenPipe()
        }
        let result = try await CLIRunner.run(arguments, standardOutput: output)
        return (result.status, result.stderr)
    }

    func keygen(_ dir: URL, _ name: String) async throws -> String {
        let path = dir.appendingPathComponent(name).path
        let r = try await run(["keygen", "--out", path, "--client-id", UUID().uuidString])
        #expect(r.status == 0, "\(r.stderr)")
        return path
    }

    @Test(
        "a lost write to stdout is one line and exit 1 (full disk), or quiet with 141 (closed pipe); never a crash or 0"
    )
    func stdoutFailures() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let identity = try await keygen(dir, "id.json")
        let input = dir.appendingPathComponent("in.bin")
        try Data(repeating: 7, count: 300_000).write(to: input)
        let encrypted = dir.appendingPathComponent("in.e3db").path
        let key = dir.appendingPathComponent("ak.txt").path
        try Data((AccessKey().base64URLEncoded + "\n").utf8).write(to: URL(fileURLWithPath: key))
        #expect(try await run(["file", "encrypt", "-q", "--access-key-file", key, input.path, encrypted]).status == 0)
        let commands: [[String]] = [
            ["keygen", "--out", "-"],
            ["hash", input.path],
            ["file", "checksum", encrypted],
            ["eak", "wrap", "--identity", identity],
            ["canonicalize", identity],
            ["file", "decrypt", "-q", "--access-key-file", key, encrypted, "-"],
            ["vectors", "--help"],
        ]
        for command in commands {
            for target in ["/dev/full", nil] as [String?] {
                let (status, stderr) = try await runWithBrokenStdout(command, stdoutPath: target)
                let what = "\(command.joined(separator: " ")) > \(target ?? "closed pipe")"
                if target == nil {
                    // `… | head`: the reader is gone; quiet, with the status of a program SIGPIPE ended.
                    #expect(status == 141 && stderr.isEmpty, "\(what): \(status) \(stderr)")
                    continue
                }
                #expect(status == 1, "\(what): \(status) \(stderr)")
                #expect(stderr.contains("No space left on device"), "\(what): \(stderr)")
                #expect(!stderr.contains("Fatal error") && !stderr.contains("crashed"), "\(what): \(stderr)")
                #expect(stderr.split(separator: "\n").count == 1, "\(what): \(stderr)")
            }
        }
    }

    @Test("secrets and documents are read from FIFOs, /dev/stdin and process substitution (D8)")
    func nonRegularInputs() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let identity = try await keygen(dir, "id.json")
        let eak = try await run(["eak", "wrap", "--identity", identity])
        #expect(eak.status == 0, "\(eak.stderr)")
        let eakPath = dir.appendingPathComponent("eak.json")
        try eak.stdout.write(to: eakPath)
        let direct = try await run(["eak", "unwrap", "--identity", identity, eakPath.path])
        #expect(direct.status == 0)

        // /dev/stdin
        let viaDevStdin = try await run(
            ["eak", "unwrap", "--identity", "/dev/stdin", eakPath.path],
            stdin: try Data(contentsOf: URL(fileURLWithPath: identity)))
        #expect(viaDevStdin.status == 0, "\(viaDevStdin.stderr)")
        #expect(viaDevStdin.stdout == direct.stdout)

        // A FIFO, written by another thread.
        let fifo = dir.appendingPathComponent("identity.fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let identityBytes = try Data(contentsOf: URL(fileURLWithPath: identity))
        let writer = Thread {
            if let handle = FileHandle(forWritingAtPath: fifo) {
                try? handle.write(contentsOf: identityBytes)
                try? handle.close()
            }
        }
        writer.start()
        let viaFIFO = try await run(["eak", "unwrap", "--identity", fifo, eakPath.path])
        #expect(viaFIFO.status == 0, "\(viaFIFO.stderr)")
        #expect(viaFIFO.stdout == direct.stdout)

        // Process substitution, through bash when it is there.
        if FileManager.default.isExecutableFile(atPath: "/bin/bash") {
            let bash = try await ChildProcess.run(
                URL(fileURLWithPath: "/bin/bash"),
                [
                    "-c", "\"$0\" eak unwrap --identity <(cat \"$1\") \"$2\"",
                    CLIRunner.binary.path, identity, eakPath.path,
                ])
            #expect(bash.status == 0)
            #expect(bash.stdout == direct.stdout)
        }
    }

    @Test("a note's --expiration naming a date that does not exist is a usage error (64), not a later date")
    func impossibleExpirationIsRefused() async throws {
        let fields = Data(#"{"f":"x"}"#.utf8)
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let absent = dir.appendingPathComponent("absent.json").path
        func write(expiring date: String) async throws -> CLIRunner.Result {
            try await run(
                [
                    "client", "note", "write", "--config", absent, "--recipient", UUID().uuidString, "--expiration",
                    date, "-",
                ], stdin: fields)
        }
        for date in ["2026-02-31T00:00:00Z", "2026-02-29T00:00:00Z", "2026-04-31T12:00:00Z"] {
            let r = try await write(expiring: date)
            #expect(r.status == 64 && r.stderr.contains("--expiration"), "\(date): \(r.status) \(r.stderr)")
        }
        // A real date passes the check (and the command then fails for want of its identity file).
        let leap = try await write(expiring: "2028-02-29T00:00:00Z")
        #expect(leap.status == 66 && !leap.stderr.contains("--expiration"), "\(leap.stderr)")
    }

    @Test("'-' can be standard input only once per command (D19)")
    func stdinOnce() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let identity = try await keygen(dir, "id.json")
        let r = try await run(
            ["eak", "unwrap", "--identity", "-", "-"], stdin: try Data(contentsOf: URL(fileURLWithPath: identity)))
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains("standard input"))
    }

    @Test(
        "access-key files: whitespace around the key is ignored by every command; raw bytes are refused without echoing them (D12, D20)"
    )
    func accessKeyFiles() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let identity = try await keygen(dir, "id.json")
        let key = AccessKey()
        let spaced = dir.appendingPathComponent("spaced.txt")
        try Data((" \t" + key.base64URLEncoded + "\t \r\n\n").utf8).write(to: spaced)
        let wrapped = try await run(["eak", "wrap", "--identity", identity, "--access-key", spaced.path])
        #expect(wrapped.status == 0, "\(wrapped.stderr)")
        let eakPath = dir.appendingPathComponent("eak.json")
        try wrapped.stdout.write(to: eakPath)
        let unwrapped = try await run(["eak", "unwrap", "--identity", identity, eakPath.path])
        #expect(unwrapped.stdoutText == key.base64URLEncoded + "\n")

        let plain = dir.appendingPathComponent("p.txt")
        try Data("hello".utf8).write(to: plain)
        let encrypted = dir.appendingPathComponent("p.e3db").path
        #expect(
            try await run(["file", "encrypt", "-q", "--access-key-file", spaced.path, plain.path, encrypted]).status
                == 0)

        let raw = dir.appendingPathComponent("raw.bin")
        let rawBytes: [UInt8] = (0..<32).map { UInt8(0xC0 + $0 % 32) }
        try Data(rawBytes).write(to: raw)
        for command in [
            ["eak", "wrap", "--identity", identity, "--access-key", raw.path],
            ["file", "encrypt", "-q", "--access-key-file", raw.path, plain.path, dir.appendingPathComponent("x").path],
        ] {
            let r = try await run(command)
            #expect(r.status == 65, "\(r.stderr)")
            #expect(r.stderr.contains("does not hold a 32-byte access key"))
            for byte in rawBytes {
                #expect(!r.stderr.lowercased().contains(String(format: "0x%02x", byte)))
            }
            #expect(!r.stderr.contains("offset"))
        }
    }

    @Test(
        "--out refuses existing files and symlinks without --force and replaces the link, not its target, with it (D11, D15, D21)"
    )
    func outputFiles() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let identity = try await keygen(dir, "id.json")
        let eak = try await run(["eak", "wrap", "--identity", identity])
        let eakPath = dir.appendingPathComponent("eak.json")
        try eak.stdout.write(to: eakPath)
        let before = try Data(contentsOf: URL(fileURLWithPath: identity))

        // eak unwrap onto the identity it was given: refused, the identity unchanged.
        let onto = try await run(["eak", "unwrap", "--identity", identity, eakPath.path, "--out", identity])
        #expect(onto.status == 1)
        #expect(onto.stderr.contains("--force"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: identity)) == before)

        // A symlink (to a victim, and dangling) is refused; with --force the link is replaced, the victim kept.
        let victim = dir.appendingPathComponent("victim")
        try Data("victim".utf8).write(to: victim)
        let link = dir.appendingPathComponent("link").path
        let dangling = dir.appendingPathComponent("dangling").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: victim.path)
        try FileManager.default.createSymbolicLink(
            atPath: dangling, withDestinationPath: dir.appendingPathComponent("nowhere").path)
        for path in [link, dangling] {
            let refused = try await run(["keygen", "--out", path])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("symlink"))
        }
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("nowhere").path))
        let forced = try await run(["eak", "unwrap", "--identity", identity, eakPath.path, "--out", link, "--force"])
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(try Data(contentsOf: victim) == Data("victim".utf8))
        let attributes = try FileManager.default.attributesOfItem(atPath: link)
        #expect(attributes[.type] as? FileAttributeType == .typeRegular)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)

        // Names up to NAME_MAX work (the temporary name is short), and nothing is left beside them.
        let long = dir.appendingPathComponent(String(repeating: "n", count: 250)).path
        let longResult = try await run(["keygen", "--out", long])
        #expect(longResult.status == 0, "\(longResult.stderr)")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty)

        // generate-swift-vectors (the same output-file code) replaces a symlinked output, never its target.
        let generated = dir.appendingPathComponent("vg")
        try FileManager.default.createDirectory(at: generated, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: generated.appendingPathComponent("eak.json").path, withDestinationPath: victim.path)
        let vg = try await ChildProcess.run(CLIRunner.vectorGenerator, [generated.path])
        #expect(vg.status == 0, "\(vg.stderr)")
        #expect(try Data(contentsOf: victim) == Data("victim".utf8))
    }

    @Test("one exit-code table: usage 64, malformed 65, unreadable input 66, verification 2 (D6, D16, D19)")
    func exitCodes() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let identity = try await keygen(dir, "id.json")
        #expect(try await run([]).status == 64)
        for group in ["file", "eak", "record", "note", "vectors"] {
            let r = try await run([group])
            #expect(r.status == 64, "\(group)")
            #expect(r.stderr.contains("missing subcommand"))
        }
        #expect(try await run(["eak", "wrap", "--identity", identity, "--shape", "bogus"]).status == 64)
        #expect(
            try await run([
                "record", "encrypt", "--type", "t", "--identity", identity, "--eak-info", identity, "--order", "x",
            ]).status == 64)
        let both = try await run(
            ["verify", "--public-key", "AAAA", "--identity", identity, "-"], stdin: Data("{}".utf8))
        #expect(both.status == 64)
        #expect(try await run(["verify", "-"], stdin: Data("{}".utf8)).status == 64)
        #expect(try await run(["hash", dir.appendingPathComponent("missing").path]).status == 66)
        #expect(try await run(["hash", dir.path]).status == 66)
        #expect(try await run(["canonicalize", dir.appendingPathComponent("missing").path]).status == 66)
        #expect(try await run(["canonicalize", "-"], stdin: Data("{".utf8)).status == 65)
        #expect(
            try await run(["eak", "unwrap", "--identity", dir.appendingPathComponent("missing").path, "-"]).status == 66
        )
        let notJSON = dir.appendingPathComponent("bad.json")
        try Data("{".utf8).write(to: notJSON)
        #expect(try await run(["eak", "unwrap", "--identity", identity, notJSON.path]).status == 65)
        let key = dir.appendingPathComponent("ak.txt")
        try Data(AccessKey().base64URLEncoded.utf8).write(to: key)
        let notE3DB = try await run(["file", "decrypt", "-q", "--access-key-file", key.path, notJSON.path, "-"])
        #expect(notE3DB.status == 65, "\(notE3DB.stderr)")
        let noSigningKey = dir.appendingPathComponent("nosig.json")
        let boxKey = Box.PrivateKey()
        let noSigningJSON: JSONValue = .object([
            "version": .number(1), "client_id": .string("11111111-2222-3333-4444-555555555555"),
            "public_key": .string(boxKey.publicKey.base64URLEncoded), "private_key": .string(boxKey.base64URLEncoded),
        ])
        try Data(CanonicalJSON.serializedBytes(noSigningJSON)).write(to: noSigningKey)
        let verifyNoKey = try await run(["verify", "--identity", noSigningKey.path, "-"], stdin: Data("{}".utf8))
        #expect(verifyNoKey.status == 64, "\(verifyNoKey.stderr)")
    }
}
