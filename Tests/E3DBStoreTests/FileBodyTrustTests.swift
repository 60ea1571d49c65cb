import E3DBKit
import E3DBStore
import E3DBTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Someone who can write the store directory replaces `files/` or a body with something else (security review 3:
/// M3, L6): the store never follows it out of the store, never blocks on it, and deletes only its own bodies.
@Suite("E3DBStore: file bodies someone else could have written")
struct FileBodyTrustTests {
    static func store(_ dir: StoreDirectory) throws -> EncryptedStore {
        try EncryptedStore.create(at: dir.url, credential: .key(SecureBytes(randomCount: 32)))
    }

    /// A directory outside the store holding two files of the user (the review's `victimdir`).
    final class Victim {
        let url: URL
        let contents: [String: Data] = ["thesis.tex": Data("important notes\n".utf8), "photo.jpg": Data("x\n".utf8)]

        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbstore-victim-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            for (name, data) in contents { try data.write(to: url.appendingPathComponent(name)) }
        }

        deinit { try? FileManager.default.removeItem(at: url) }

        /// Whether the directory holds exactly its two files, unchanged.
        func isIntact() throws -> Bool {
            let names = try FileManager.default.contentsOfDirectory(atPath: url.path)
            guard Set(names) == Set(contents.keys) else { return false }
            return try contents.allSatisfy { try Data(contentsOf: url.appendingPathComponent($0.key)) == $0.value }
        }
    }

    /// Every message and item of `problems`, for checking that nothing outside the store is named.
    static func text(_ problems: [E3DBError]) -> String {
        problems.map { "\($0.message) \($0.context.item ?? "") \($0.context.part ?? "")" }.joined(separator: "\n")
    }

    @Test("a files symlink out of the store: verify, gc, attach and cat refuse it (storeTampered naming files)")
    func filesSymlink() throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        try store.putFile(at: "/docs/a.txt", data: Data("alpha".utf8))
        let victim = try Victim()
        let files = dir.url.appendingPathComponent(EncryptedStore.filesDirectoryName)
        try FileManager.default.moveItem(at: files, to: dir.url.appendingPathComponent("files.real"))
        try FileManager.default.createSymbolicLink(atPath: files.path, withDestinationPath: victim.url.path)

        let report = try store.verify()
        #expect(report.problems.contains { $0.code == .storeTampered && $0.context.item == "files" }, "\(report)")
        #expect(!Self.text(report.problems).contains("thesis") && !Self.text(report.problems).contains("photo"))
        #expect(!report.problems.contains { $0.code == .fileBodyOrphaned })
        expectStoreError(.storeTampered, item: "files") { _ = try store.removeOrphanFiles() }
        expectStoreError(.storeTampered, item: "files") { try store.putFile(at: "/new.txt", data: Data("new".utf8)) }
        expectStoreError(.storeTampered, item: "files") { _ = try store.readFile(at: "/docs/a.txt") }
        #expect(try store.files().map(\.path) == ["/docs/a.txt"])
        #expect(try victim.isIntact())

        // A regular file in place of files/ is refused the same way.
        try FileManager.default.removeItem(at: files)
        try Data("not a directory".utf8).write(to: files)
        expectStoreError(.storeTampered, item: "files") { _ = try store.removeOrphanFiles() }
        expectStoreError(.storeTampered, item: "files") { try store.putFile(at: "/new.txt", data: Data("new".utf8)) }
        #expect(try store.verify().problems.contains { $0.code == .storeTampered && $0.context.item == "files" })

        // Put back, the store reads and verifies again.
        try FileManager.default.removeItem(at: files)
        try FileManager.default.moveItem(at: dir.url.appendingPathComponent("files.real"), to: files)
        #expect(try store.readFile(at: "/docs/a.txt") == Data("alpha".utf8))
        #expect(try store.verify().problems.isEmpty)
    }

    @Test("gc removes only <uuid>.e3f names no row names (a link itself, never its target); verify lists only those")
    func onlyBodyNames() throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        let kept = try store.putFile(at: "/kept", data: Data("kept".utf8))
        let victim = try Victim()
        let files = dir.url.appendingPathComponent(EncryptedStore.filesDirectoryName)
        let orphan = "0badc0de-0000-4000-8000-000000000000.e3f"
        try Data("orphan".utf8).write(to: files.appendingPathComponent(orphan))
        // A link with a body's name pointing out of the store: an orphan, whose link (not target) gc removes.
        let linkOrphan = "0badc0de-0000-4000-8000-000000000001.e3f"
        try FileManager.default.createSymbolicLink(
            atPath: files.appendingPathComponent(linkOrphan).path,
            withDestinationPath: victim.url.appendingPathComponent("thesis.tex").path)
        // Names that are not bodies: left alone, not reported.
        let foreign = [
            "notes.txt", "README", "0BADC0DE-0000-4000-8000-000000000000.e3f", "\(orphan).bak", "x.e3f",
            "0badc0de-0000-4000-8000-00000000000.e3f", ".e3dbkit-0011223344556677.tmp",
        ]
        for name in foreign { try Data("keep me".utf8).write(to: files.appendingPathComponent(name)) }
        try FileManager.default.createDirectory(
            at: files.appendingPathComponent("sub"), withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(
            atPath: files.appendingPathComponent("victim").path, withDestinationPath: victim.url.path)

        let report = try store.verify()
        let orphans = report.problems.filter { $0.code == .fileBodyOrphaned }.compactMap(\.context.item)
        #expect(Set(orphans) == ["files/\(orphan)", "files/\(linkOrphan)"], "\(report.problems)")
        #expect(report.problems.count == 2, "\(report.problems)")
        #expect(try store.removeOrphanFiles() == ["files/\(orphan)", "files/\(linkOrphan)"])
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: files.path))
        #expect(left == Set(foreign + ["sub", "victim", "\(kept.id.uuidString.lowercased()).e3f"]))
        #expect(try victim.isIntact())
        #expect(try store.readFile(at: "/kept") == Data("kept".utf8))
        #expect(try store.verify().problems.isEmpty)
    }

    /// Runs `body` on a thread of its own. If it has not returned `seconds` after the call, opens `fifo` for
    /// writing once and closes it (a read-only open blocked on it then returns), so that a hang fails the test
    /// instead of stopping the run.
    /// - Returns: whether it had to be unblocked, and what `body` threw.
    static func bounded(unblocking fifo: String, after seconds: Int, _ body: @escaping @Sendable () throws -> Void)
        async throws -> (hung: Bool, error: (any Error)?)
    {
        let state = Mutex((done: false, hung: false))
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) {
            let unblock = state.withLock { state in
                state.hung = !state.done
                return state.hung
            }
            guard unblock else { return }
            let writer = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
            if writer >= 0 { close(writer) }
        }
        let error = try await offCooperativePool { () -> (any Error)? in
            defer { state.withLock { $0.done = true } }
            do {
                try body()
                return nil
            } catch {
                return error
            }
        }
        return (state.withLock { $0.hung }, error)
    }

    @Test("a FIFO, a directory or a symlink (to /dev/zero, to a copy outside) in place of a body is fileTampered")
    func bodyNotARegularFile() async throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        let contents = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        var bodies: [String: URL] = [:]
        for name in ["fifo", "zero", "outside", "directory"] {
            let stored = try await store.putFile(at: "/\(name)", data: contents)
            bodies[name] = dir.url.appendingPathComponent(stored.bodyName)
        }
        let fifo = try #require(bodies["fifo"])
        try FileManager.default.removeItem(at: fifo)
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let zero = try #require(bodies["zero"])
        try FileManager.default.removeItem(at: zero)
        try FileManager.default.createSymbolicLink(atPath: zero.path, withDestinationPath: "/dev/zero")
        // The outside copy is the real body, so following the link would read it successfully.
        let elsewhere = try StoreDirectory()
        let outside = try #require(bodies["outside"])
        let copy = elsewhere.url.appendingPathComponent("copy.e3f")
        try FileManager.default.moveItem(at: outside, to: copy)
        let copyBytes = try Data(contentsOf: copy)
        try FileManager.default.createSymbolicLink(atPath: outside.path, withDestinationPath: copy.path)
        let directory = try #require(bodies["directory"])
        try FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)

        let path = fifo.path
        let (hung, error) = try await Self.bounded(unblocking: path, after: 10) {
            _ = try store.readFile(at: "/fifo")
        }
        #expect(!hung, "readFile blocked on a FIFO body")
        let typed = error as? E3DBError
        #expect(typed?.code == .fileTampered && typed?.context.item == "/fifo", "\(String(describing: error))")
        let (rangeHung, rangeError) = try await Self.bounded(unblocking: path, after: 10) {
            _ = try store.readFile(at: "/fifo", range: 0...9)
        }
        #expect(!rangeHung && (rangeError as? E3DBError)?.code == .fileTampered, "\(String(describing: rangeError))")
        for name in ["zero", "outside", "directory"] {
            expectStoreError(.fileTampered, item: "/\(name)") { _ = try store.readFile(at: "/\(name)") }
            expectStoreError(.fileTampered, item: "/\(name)") { _ = try store.readFile(at: "/\(name)", range: 0...9) }
        }
        let (verifyHung, verifyError) = try await Self.bounded(unblocking: path, after: 10) {
            let report = try store.verify()
            let tampered = Set(report.problems.filter { $0.code == .fileTampered }.compactMap(\.context.item))
            guard tampered == ["/fifo", "/zero", "/outside", "/directory"], report.problems.count == 4 else {
                throw E3DBError(.invalidParameter, "unexpected report: \(report.problems)")
            }
        }
        #expect(!verifyHung && verifyError == nil, "\(String(describing: verifyError))")
        #expect(try await store.removeOrphanFiles().isEmpty)
        #expect(try Data(contentsOf: copy) == copyBytes)
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.url.path) == ["copy.e3f"])
    }

    @Test("files/ is created 0700 and bodies 0600 whatever the umask; a missing files/ is created on the next put")
    func modes() throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        let files = dir.url.appendingPathComponent(EncryptedStore.filesDirectoryName)
        if FileManager.default.fileExists(atPath: files.path) { try FileManager.default.removeItem(at: files) }
        #expect(try store.removeOrphanFiles().isEmpty)
        let stored = try store.putFile(at: "/a", data: Data("a".utf8))
        func mode(_ url: URL) throws -> Int {
            try #require(FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int)
        }
        #expect(try mode(files) == 0o700)
        #expect(try mode(dir.url.appendingPathComponent(stored.bodyName)) == 0o600)
        #expect(try store.readFile(at: "/a") == Data("a".utf8))
    }
}
