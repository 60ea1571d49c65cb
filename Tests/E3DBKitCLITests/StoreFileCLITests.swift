import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

/// `e3dbkit store attach/cat/ls/mv/rm/gc` through the binary, with their failure exits.
@Suite("CLI: e3dbkit store file tree")
struct StoreFileCLITests {
    let dir: URL
    let key: String
    let store: String

    init() throws {
        dir = try CLIRunner.temporaryDirectory()
        key = dir.appendingPathComponent("key").path
        try Data((Base64URL.encode(Data((0..<32).map { UInt8($0 * 7 % 256) })) + "\n").utf8).write(
            to: URL(fileURLWithPath: key))
        store = dir.appendingPathComponent("store").path
    }

    func storeRun(_ command: String, _ arguments: [String], key: String? = nil, stdin: Data? = nil) async throws
        -> CLIRunner.Result
    {
        try await CLIRunner.run(
            ["store", command, "--store", store, "--key-file", key ?? self.key] + arguments, stdin: stdin)
    }

    func lines(_ result: CLIRunner.Result) throws -> [JSONValue] {
        try result.stdoutText.split(separator: "\n").map { try CanonicalJSON.parse(Data($0.utf8)) }
    }

    @Test("attach, ls, cat (whole, range, --out), mv, rm, verify and gc, with their exit codes")
    func commands() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await storeRun("init", []).status == 0)
        let plain = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 8) })
        let input = dir.appendingPathComponent("in.bin")
        try plain.write(to: input)
        let attached = try await storeRun("attach", ["/docs/in.bin", input.path])
        #expect(attached.status == 0, "\(attached.stderr)")
        #expect(try lines(attached).first?["size"] == .number(200_000))
        #expect(try await storeRun("attach", ["docs/note.txt", "-"], stdin: Data("note\n".utf8)).status == 0)
        let put = try await storeRun("put", ["--collection", "c", "-"], stdin: Data(#"{"k":"v"}"#.utf8))
        guard case .string(let recordID)? = try CanonicalJSON.parse(put.stdout)["id"] else {
            Issue.record("no id")
            return
        }
        #expect(try await storeRun("attach", ["--record", recordID, "/att/a", "-"], stdin: Data("A".utf8)).status == 0)

        #expect(
            try await lines(try storeRun("ls", [])).compactMap { $0["path"] } == [
                "/att/a", "/docs/in.bin", "/docs/note.txt",
            ])
        #expect(try await lines(try storeRun("ls", ["/docs"])).count == 2)
        let byRecord = try await lines(try storeRun("ls", ["--record", recordID]))
        #expect(byRecord.count == 1 && byRecord.first?["record_id"] == .string(recordID))
        #expect(try await storeRun("ls", ["--record", recordID, "/docs"]).status == 64)

        let cat = try await storeRun("cat", ["/docs/in.bin"])
        #expect(cat.status == 0 && cat.stdout == plain, "\(cat.stderr)")
        #expect(try await storeRun("cat", ["--range", "65530-65545", "/docs/in.bin"]).stdout == plain[65_530...65_545])
        #expect(try await storeRun("cat", ["--range", "199990-", "/docs/in.bin"]).stdout == plain[199_990...])
        let out = dir.appendingPathComponent("out.bin")
        #expect(try await storeRun("cat", ["--out", out.path, "/docs/in.bin"]).status == 0)
        #expect(try Data(contentsOf: out) == plain)

        // Usage errors exit 64, a wrong key 77.
        #expect(try await storeRun("cat", ["/nope"]).status == 64)
        #expect(try await storeRun("attach", ["/docs/note.txt", "-"], stdin: Data()).status == 64)
        #expect(try await storeRun("attach", ["--record", UUID().uuidString, "/x", "-"], stdin: Data()).status == 64)
        #expect(try await storeRun("attach", ["--record", "not-a-uuid", "/x", "-"], stdin: Data()).status == 64)
        #expect(try await storeRun("cat", ["--range", "0-200000", "/docs/in.bin"]).status == 64)
        let wrongKey = dir.appendingPathComponent("wrong").path
        try Data((Base64URL.encode(Data(repeating: 1, count: 32)) + "\n").utf8).write(
            to: URL(fileURLWithPath: wrongKey))
        #expect(try await storeRun("cat", ["/docs/in.bin"], key: wrongKey).status == 77)
        #expect(
            try await storeRun("attach", ["/docs/note.txt", "-", "--replace"], stdin: Data("new".utf8)).status == 0)
        #expect(try await storeRun("cat", ["/docs/note.txt"]).stdout == Data("new".utf8))

        #expect(try await lines(try storeRun("mv", ["/docs", "/archive"])).first?["moved"] == .number(2))
        #expect(try await storeRun("mv", ["/archive", "/att/a"]).status == 64)
        #expect(try await lines(try storeRun("rm", ["/att/a"])).first?["deleted"] == .number(1))
        #expect(try await storeRun("rm", ["/archive"]).status == 64)

        // A damaged body: cat exits 2 naming the file and writes nothing to stdout; verify lists it.
        guard case .string(let id)? = try await lines(try storeRun("ls", ["/archive"])).first?["id"] else {
            Issue.record("no id")
            return
        }
        let body = URL(fileURLWithPath: store).appendingPathComponent("files/\(id).e3f")
        var bytes = try Data(contentsOf: body)
        bytes[bytes.count - 5] ^= 0x80
        try bytes.write(to: body)
        let damaged = try await storeRun("cat", ["/archive/in.bin"])
        #expect(
            damaged.status == 2 && damaged.stdout.isEmpty && damaged.stderr.contains("/archive/in.bin"),
            "\(damaged.stderr)")
        #expect(try await storeRun("cat", ["--range", "0-9", "/archive/in.bin"]).stdout == plain.prefix(10))
        try Data("orphan".utf8).write(
            to: URL(fileURLWithPath: store).appendingPathComponent("files/0badc0de-0000-4000-8000-00000000000f.e3f"))
        let verify = try await storeRun("verify", [])
        #expect(verify.status == 2)
        #expect(
            verify.stderr.contains("/archive/in.bin: fileTampered")
                && verify.stderr.contains("files/0badc0de-0000-4000-8000-00000000000f.e3f: fileBodyOrphaned"),
            "\(verify.stderr)")
        #expect(try CanonicalJSON.parse(verify.stdout)["files"] == .number(2))
        #expect(
            try await lines(try storeRun("gc", [])).first?["removed"]
                == .array(["files/0badc0de-0000-4000-8000-00000000000f.e3f"]))
        #expect(try await storeRun("rm", ["-r", "/archive"]).status == 0)
        #expect(try await storeRun("verify", []).status == 0)
    }

    /// Runs `e3dbkit` with stdout to /dev/null; its exit status and peak resident set in KiB.
    ///
    /// The child is started by a small Python process, which reports its children's `ru_maxrss`. Started from this
    /// process directly, the figure would be wrong: Linux starts a new program's `ru_maxrss` at the peak of the memory
    /// it replaced, which for `posix_spawn` (a vfork) is this test process's, hundreds of MiB in a full parallel run.
    /// Python's own few MiB are that floor instead. (macOS reports bytes, Linux KiB.)
    static func peakMemory(_ arguments: [String]) async throws -> (status: Int32, kibibytes: Int) {
        guard CLIRunner.isAvailable else { throw CLIRunner.MissingBinary(path: CLIRunner.binary.path) }
        let script = """
            import resource, subprocess, sys
            status = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            print(status, peak // 1024 if sys.platform == "darwin" else peak)
            """
        let python = ChildProcess.projectPython ?? URL(fileURLWithPath: "/usr/bin/python3")
        let run = try await ChildProcess.run(python, ["-c", script, CLIRunner.binary.path] + arguments)
        let fields = run.stdoutText.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard run.status == 0, fields.count == 2 else {
            Issue.record("the memory probe failed: \(run.status) \(run.stdoutText) \(run.stderr)")
            return (-1, Int.max)
        }
        return (Int32(fields[0]), fields[1])
    }

    @Test("a 64 MiB file is attached and read back in constant memory (peak RSS within 16 MiB of a stats call)")
    func constantMemory() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await storeRun("init", []).status == 0)
        let input = dir.appendingPathComponent("big")
        #expect(FileManager.default.createFile(atPath: input.path, contents: nil))
        let handle = try FileHandle(forWritingTo: input)
        let block = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        for _ in 0..<64 { try handle.write(contentsOf: block) }
        try handle.close()
        let common = ["--store", store, "--key-file", key]
        let baseline = try await Self.peakMemory(["store", "stats"] + common)
        let attach = try await Self.peakMemory(["store", "attach"] + common + ["/big", input.path])
        let cat = try await Self.peakMemory(["store", "cat"] + common + ["/big"])
        #expect(baseline.status == 0 && attach.status == 0 && cat.status == 0)
        #expect(
            attach.kibibytes < baseline.kibibytes + 16 * 1024,
            "attach: \(attach.kibibytes) KiB vs \(baseline.kibibytes)")
        #expect(cat.kibibytes < baseline.kibibytes + 16 * 1024, "cat: \(cat.kibibytes) KiB vs \(baseline.kibibytes)")
        let verify = try await storeRun("verify", [])
        let files = try CanonicalJSON.parse(verify.stdout)["files"]
        #expect(verify.status == 0 && files == .number(1))
    }

    @Test("store attach killed at random moments: no half-written file is ever listed; gc clears what is left")
    func attachKilled() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await storeRun("init", []).status == 0)
        let input = dir.appendingPathComponent("big")
        let size = 24 << 20
        try Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 5 &+ $0 >> 16) }).write(to: input)
        var generator = SystemRandomNumberGenerator()
        var killed = 0
        // Kill moments within the time one whole attach takes here, so that most runs die mid-way on a quiet
        // machine as on a loaded one.
        // The time is the child's own, not including the wait for this task to resume.
        let first = try CLIRunner.start(
            ["store", "attach", "--store", store, "--key-file", key, "/whole", input.path], reading: nil)
        #expect(try await first.exit() == 0)
        let whole = max((first.runningTime ?? .zero) / .seconds(1), 0.02)
        for round in 0..<10 {
            let delay = Double.random(in: (whole * 0.05)...(whole * 0.8), using: &generator)
            let arguments = ["store", "attach", "--store", store, "--key-file", key, "/r\(round)", input.path]
            if try await !StoreCrashTests.runAndKill(arguments, input: input, delay: delay) { killed += 1 }
            // Every listed file is whole: its size is the input's and it reads back (authenticated) in full.
            for entry in try await lines(try storeRun("ls", [])) {
                #expect(entry["size"] == .number(Double(size)), "round \(round): \(entry)")
                guard case .string(let path)? = entry["path"] else { continue }
                let read = try await storeRun("cat", ["--range", "\(size - 4)-", path])
                #expect(read.status == 0 && read.stdout.count == 4, "round \(round): \(path): \(read.stderr)")
            }
        }
        #expect(try await storeRun("gc", []).status == 0)
        let verify = try await storeRun("verify", [])
        #expect(verify.status == 0, "\(verify.stderr)")
        // Nothing is left in files/ but the listed bodies.
        let bodies = try FileManager.default.contentsOfDirectory(atPath: store + "/files")
        let listed = try await lines(try storeRun("ls", []))
        #expect(bodies.count == listed.count, "\(bodies)")
        #expect(killed > 0, "no attach was killed mid-way")
    }
}
