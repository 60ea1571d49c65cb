import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Security review 3, M3, L6 and L10 through the binary: someone who can write the store directory points `files`
/// out of the store or puts a FIFO in place of a body; the store's own files follow no umask.
extension StoreFileCLITests {
    /// Whether `directory` holds exactly `contents`.
    static func holds(_ directory: URL, _ contents: [String: Data]) throws -> Bool {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        guard Set(names) == Set(contents.keys) else { return false }
        return try contents.allSatisfy { try Data(contentsOf: directory.appendingPathComponent($0.key)) == $0.value }
    }

    @Test("the review's M3 reproduction: files -> ../victimdir; verify, gc and attach leave victimdir intact")
    func filesSymlink() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await storeRun("init", []).status == 0)
        #expect(try await storeRun("attach", ["/docs/a.txt", "-"], stdin: Data("alpha".utf8)).status == 0)
        let files = URL(fileURLWithPath: store).appendingPathComponent("files")
        try FileManager.default.moveItem(at: files, to: URL(fileURLWithPath: store + "/files.real"))
        let victim = dir.appendingPathComponent("victimdir")
        try FileManager.default.createDirectory(at: victim, withIntermediateDirectories: false)
        let contents = ["thesis.tex": Data("important notes\n".utf8), "photo.jpg": Data("x\n".utf8)]
        for (name, data) in contents { try data.write(to: victim.appendingPathComponent(name)) }
        try FileManager.default.createSymbolicLink(atPath: files.path, withDestinationPath: "../victimdir")

        let verify = try await storeRun("verify", [])
        #expect(verify.status == 2, "\(verify.stderr)")
        #expect(verify.stderr.contains("files: storeTampered"), "\(verify.stderr)")
        #expect(!verify.stderr.contains("thesis") && !verify.stderr.contains("photo"), "\(verify.stderr)")
        #expect(!verify.stderr.contains("fileBodyOrphaned"), "\(verify.stderr)")
        let gc = try await storeRun("gc", [])
        #expect(gc.status == 2 && gc.stdout.isEmpty && gc.stderr.contains("symbolic link"), "\(gc.stderr)")
        let input = dir.appendingPathComponent("new.txt")
        try Data("new".utf8).write(to: input)
        let attach = try await storeRun("attach", ["/nb.txt", input.path])
        #expect(attach.status == 2 && attach.stderr.contains("symbolic link"), "\(attach.stderr)")
        let cat = try await storeRun("cat", ["/docs/a.txt"])
        #expect(cat.status == 2 && cat.stdout.isEmpty, "\(cat.stderr)")
        #expect(try Self.holds(victim, contents))

        // The real directory back: everything reads and verifies, nothing was attached meanwhile.
        try FileManager.default.removeItem(at: files)
        try FileManager.default.moveItem(at: URL(fileURLWithPath: store + "/files.real"), to: files)
        #expect(try await storeRun("cat", ["/docs/a.txt"]).stdout == Data("alpha".utf8))
        #expect(try await storeRun("verify", []).status == 0)
        #expect(try await storeRun("cat", ["/nb.txt"]).status == 64)
    }

    @Test("a FIFO in place of a body: cat and verify exit 2 naming the file, without blocking")
    func fifoBody() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await storeRun("init", []).status == 0)
        let attached = try await storeRun("attach", ["/docs/a.txt", "-"], stdin: Data("alpha".utf8))
        guard case .string(let id)? = try CanonicalJSON.parse(attached.stdout)["id"] else {
            Issue.record("no id: \(attached.stderr)")
            return
        }
        let body = store + "/files/\(id).e3f"
        try FileManager.default.removeItem(atPath: body)
        #expect(mkfifo(body, 0o600) == 0)
        // Both commands at once, each killed if it still runs after 15 s.
        let commands = [["cat", "/docs/a.txt"], ["verify"]]
        let processes = try commands.map { command in
            try CLIRunner.start(
                ["store", command[0], "--store", store, "--key-file", key] + command.dropFirst(),
                reading: .standardError)
        }
        async let catKilled = processes[0].signal(SIGKILL, after: .seconds(15))
        async let verifyKilled = processes[1].signal(SIGKILL, after: .seconds(15))
        for (command, process) in zip(commands, processes) {
            let stderr = String(decoding: try await process.readOutput(), as: UTF8.self)
            let status = try await process.exit()
            #expect(!process.uncaughtSignal, "store \(command[0]) blocked on a FIFO body")
            #expect(status == 2, "\(command): \(stderr)")
            #expect(stderr.contains("/docs/a.txt") && stderr.contains("FIFO"), "\(command): \(stderr)")
        }
        let killed = await [catKilled, verifyKilled]
        #expect(killed == [false, false])
    }

    @Test("with umask 000, files/ is created 0700 and bodies 0600")
    func modes() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await storeRun("init", []).status == 0)
        let script = "umask 000 && exec \"$0\" store attach --store \"$1\" --key-file \"$2\" /a -"
        let run = try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", script, CLIRunner.binary.path, store, key], stdin: Data("a".utf8))
        #expect(run.status == 0, "\(run.stderr)")
        guard case .string(let id)? = try CanonicalJSON.parse(run.stdout)["id"] else {
            Issue.record("no id: \(run.stderr)")
            return
        }
        func mode(_ path: String) throws -> Int {
            try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        }
        #expect(try mode(store + "/files") == 0o700)
        #expect(try mode(store + "/files/\(id).e3f") == 0o600)
    }
}
