import E3DBFiles
import E3DBKit
import E3DBStore
import Foundation
import GRDB
import Testing

/// Deterministic bytes: byte i of the stream seeded with `seed`, without holding them all.
struct PatternSource: FileByteSource {
    let total: Int
    let seed: UInt8
    var produced = 0

    static func byte(_ index: Int, seed: UInt8) -> UInt8 { UInt8(truncatingIfNeeded: index &* 31 &+ index >> 9) ^ seed }

    static func bytes(_ count: Int, seed: UInt8) -> Data { Data((0..<count).map { byte($0, seed: seed) }) }

    mutating func read(into buffer: inout MutableRawSpan) throws -> Int {
        let n = min(buffer.byteCount, total - produced)
        for i in 0..<n { buffer.storeBytes(of: Self.byte(produced + i, seed: seed), toByteOffset: i, as: UInt8.self) }
        produced += n
        return n
    }

    var totalByteCount: Int? { total }
}

/// Checks every byte against the pattern and counts them (constant memory).
struct PatternCheckingSink: FileByteSink {
    let seed: UInt8
    var count = 0
    var mismatches = 0
    var finished = false

    mutating func write(_ bytes: RawSpan) throws {
        let (count, seed) = (count, seed)
        mismatches += bytes.withUnsafeBytes { bytes in
            bytes.enumerated().count { i, byte in byte != PatternSource.byte(count + i, seed: seed) }
        }
        self.count += bytes.byteCount
    }

    mutating func finish() throws { finished = true }
    mutating func abort() {}
}

@Suite("E3DBStore: the encrypted file tree and attachments")
struct FileTreeTests {
    static func store(_ dir: StoreDirectory) throws -> EncryptedStore {
        try EncryptedStore.create(at: dir.url, credential: .key(SecureBytes(randomCount: 32)))
    }

    @Test("put, list, move, delete; paths are normalized; files and directories do not collide")
    func tree() throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        let a = try store.putFile(at: "docs/a.txt", data: Data("alpha".utf8))
        #expect(a.path == "/docs/a.txt" && a.size == 5 && a.recordID == nil && a.checksum.count == 64)
        try store.putFile(at: "/docs//sub/b.txt/", data: Data("beta".utf8))
        try store.putFile(at: "/top", data: Data())
        #expect(try store.files().map(\.path) == ["/docs/a.txt", "/docs/sub/b.txt", "/top"])
        #expect(try store.files(under: "/docs").map(\.path) == ["/docs/a.txt", "/docs/sub/b.txt"])
        #expect(try store.files(under: "/doc").isEmpty)
        #expect(try store.readFile(at: "/docs/a.txt") == Data("alpha".utf8))
        #expect(try store.readFile(at: "/top") == Data())
        #expect(try store.file(at: "/docs/sub/b.txt").size == 4)
        #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent(a.bodyName).path))

        expectStoreError(.fileExists, item: "/docs/a.txt") {
            try store.putFile(at: "/docs/a.txt", data: Data("x".utf8))
        }
        expectStoreError(.fileExists, item: "/docs") { try store.putFile(at: "/docs", data: Data("x".utf8)) }
        expectStoreError(.fileExists, item: "/top/x") { try store.putFile(at: "/top/x", data: Data("x".utf8)) }
        for bad in ["", "/", "/a/../b", "/./a", "/a\u{0}b", "/a\nb"] {
            expectStoreError(.invalidParameter) { try store.putFile(at: bad, data: Data("x".utf8)) }
        }
        expectStoreError(.fileNotFound, item: "/nope") { _ = try store.readFile(at: "/nope") }

        // Replace: a new body, the old one removed after the commit; created is kept.
        let replaced = try store.putFile(at: "/docs/a.txt", data: Data("alpha 2".utf8), replace: true)
        #expect(replaced.id != a.id && replaced.created == a.created)
        #expect(try store.readFile(at: "/docs/a.txt") == Data("alpha 2".utf8))
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent(a.bodyName).path))

        // Move a file, then a directory (one transaction); bodies stay where they are.
        #expect(try store.moveFile(from: "/docs/a.txt", to: "/docs/sub/c.txt") == 1)
        expectStoreError(.fileExists, item: "/top") { try store.moveFile(from: "/docs", to: "/top") }
        expectStoreError(.invalidParameter) { try store.moveFile(from: "/docs", to: "/docs/sub/x") }
        expectStoreError(.fileNotFound) { try store.moveFile(from: "/missing", to: "/m") }
        #expect(try store.moveFile(from: "/docs", to: "/archive/2026") == 2)
        #expect(try store.files().map(\.path) == ["/archive/2026/sub/b.txt", "/archive/2026/sub/c.txt", "/top"])
        #expect(try store.readFile(at: "/archive/2026/sub/c.txt") == Data("alpha 2".utf8))
        #expect(try store.file(at: "/archive/2026/sub/c.txt").id == replaced.id)

        // Delete: a file, then a directory with -r; the bodies go too.
        #expect(try store.deleteFile(at: "/top") == 1)
        expectStoreError(.fileNotFound) { try store.deleteFile(at: "/archive") }
        #expect(try store.deleteFile(at: "/archive", recursive: true) == 2)
        #expect(try store.files().isEmpty)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir.url.appendingPathComponent("files").path).isEmpty)
        let report = try store.verify()
        #expect(report.problems.isEmpty && report.filesChecked == 0)
    }

    @Test("attachments belong to an existing record and are listed by it")
    func attachments() throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        let record = try store.put(collection: "c", type: "t", data: ["k": "v"])
        try store.putFile(at: "/r/photo.jpg", data: Data("jpeg".utf8), attachedTo: record.id)
        try store.putFile(at: "/r/other", data: Data("x".utf8))
        let attached = try store.files(attachedTo: record.id)
        #expect(attached.map(\.path) == ["/r/photo.jpg"] && attached.first?.recordID == record.id)
        let unknown = UUID()
        expectStoreError(.recordNotFound, item: unknown.uuidString.lowercased()) {
            try store.putFile(at: "/r/x", data: Data("x".utf8), attachedTo: unknown)
        }
        // Moving keeps the attachment; the record id is bound into the row's MAC.
        try store.moveFile(from: "/r/photo.jpg", to: "/p.jpg")
        #expect(try store.files(attachedTo: record.id).map(\.path) == ["/p.jpg"])
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        try raw.write { db in try db.execute(sql: "UPDATE files SET record_id = NULL WHERE path = '/p.jpg'") }
        expectStoreError(.fileTampered, item: "/p.jpg") { _ = try store.readFile(at: "/p.jpg") }
    }

    @Test("streamed and ranged reads agree with the whole file at chunk boundaries")
    func ranges() throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        let size = 3 * 65_536 + 1_234
        var source = PatternSource(total: size, seed: 7)
        let stored = try store.putFile(at: "/r.bin", from: &source)
        #expect(stored.size == size)
        let whole = try store.readFile(at: "/r.bin")
        #expect(whole == PatternSource.bytes(size, seed: 7))
        var checking = PatternCheckingSink(seed: 7)
        try store.readFile(at: "/r.bin", to: &checking)
        #expect(checking.count == size && checking.mismatches == 0 && checking.finished)
        let points = [0, 1, 65_535, 65_536, 65_537, 131_071, 131_072, 196_607, 196_608, size - 1]
        for start in points {
            for end in points where end >= start {
                #expect(try store.readFile(at: "/r.bin", range: start...end) == whole[start...end], "\(start)-\(end)")
            }
        }
        do {
            _ = try store.readFile(at: "/r.bin", range: 0...size)
            Issue.record("a range past the end was read")
        } catch {
            #expect(error.code == .rangeNotSatisfiable && error.context.item == "/r.bin")
        }
    }

    @Test("64 MiB in and out through streams: bytes checked as they come, nothing held in memory")
    func large() throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        let size = 64 << 20
        var source = PatternSource(total: size, seed: 3)
        let stored = try store.putFile(at: "/big", from: &source)
        #expect(stored.size == size && stored.encryptedSize > size)
        var checking = PatternCheckingSink(seed: 3)
        try store.readFile(at: "/big", to: &checking)
        #expect(checking.count == size && checking.mismatches == 0 && checking.finished)
        let tail = try store.readFile(at: "/big", range: (size - 100)...(size - 1))
        #expect(tail == Data(((size - 100)..<size).map { PatternSource.byte($0, seed: 3) }))
    }

    @Test(
        "damaged, cut, missing and swapped bodies and edited rows are fileTampered naming the file; verify lists each")
    func tampering() throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        var paths: [String: StoredFile] = [:]
        for name in ["edit", "cut", "missing", "swapA", "swapB", "path", "size", "key", "good"] {
            var source = PatternSource(total: 2 * 65_536 + 10, seed: UInt8(paths.count))
            paths[name] = try store.putFile(at: "/\(name)", from: &source)
        }
        func body(_ name: String) throws -> URL { dir.url.appendingPathComponent(try #require(paths[name]).bodyName) }
        func expectTampered(_ name: String, range: ClosedRange<Int>? = nil) {
            expectStoreError(.fileTampered, item: "/\(name)") {
                if let range {
                    _ = try store.readFile(at: "/\(name)", range: range)
                } else {
                    _ = try store.readFile(at: "/\(name)")
                }
            }
        }
        // One byte of the second chunk flipped: whole reads and ranges over that chunk fail; the first chunk reads.
        var edited = try Data(contentsOf: try body("edit"))
        edited[85_536] ^= 0x01  // inside the second chunk (bytes 65,677-131,229)
        try edited.write(to: try body("edit"))
        expectTampered("edit")
        expectTampered("edit", range: 65_536...65_540)
        #expect(try store.readFile(at: "/edit", range: 0...9) == PatternSource.bytes(10, seed: 0))
        // Cut at a chunk boundary (the size in the row catches it before any chunk is opened).
        let cut = try Data(contentsOf: try body("cut"))
        try cut.prefix(cut.count - 27).write(to: try body("cut"))
        expectTampered("cut")
        expectTampered("cut", range: 0...1)
        try FileManager.default.removeItem(at: try body("missing"))
        expectTampered("missing")
        // Two bodies of one size swapped: each file's own key refuses the other's header, before any plaintext.
        let a = try body("swapA")
        let b = try body("swapB")
        let t = a.appendingPathExtension("t")
        try FileManager.default.moveItem(at: a, to: t)
        try FileManager.default.moveItem(at: b, to: a)
        try FileManager.default.moveItem(at: t, to: b)
        expectTampered("swapA")
        expectTampered("swapB", range: 0...0)
        // Row edits: a path swapped between rows, a size, a wrapped key from another row.
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        try raw.write { db in
            try db.execute(sql: "UPDATE files SET path = '/tmp' WHERE path = '/path'")
            try db.execute(sql: "UPDATE files SET path = '/path' WHERE path = '/good'")
            try db.execute(sql: "UPDATE files SET path = '/good' WHERE path = '/tmp'")
            try db.execute(sql: "UPDATE files SET size = size - 1 WHERE path = '/size'")
            try db.execute(
                sql:
                    "UPDATE files SET wrapped_key = (SELECT wrapped_key FROM files WHERE path = '/path') WHERE path = '/key'"
            )
        }
        for name in ["path", "good", "size", "key"] { expectTampered(name) }
        expectStoreError(.fileTampered) { _ = try store.files() }

        // An orphan body, as a crash between naming a body and committing its row leaves.
        let orphan = dir.url.appendingPathComponent("files/0badc0de-0000-4000-8000-000000000000.e3f")
        try Data("orphan".utf8).write(to: orphan)
        let report = try store.verify()
        #expect(report.filesChecked == 9)
        let items = Set(report.problems.compactMap(\.context.item))
        #expect(
            items == [
                "/edit", "/cut", "/missing", "/swapA", "/swapB", "/path", "/good", "/size", "/key",
                "files/0badc0de-0000-4000-8000-000000000000.e3f",
            ], "\(report.problems)")
        #expect(report.problems.filter { $0.code == .fileTampered }.count == 9)
        #expect(try store.removeOrphanFiles() == ["files/0badc0de-0000-4000-8000-000000000000.e3f"])
        #expect(!FileManager.default.fileExists(atPath: orphan.path))
        // Deleting the damaged files leaves a store that verifies.
        for name in ["edit", "cut", "missing", "swapA", "swapB", "path", "good", "size", "key"] {
            try store.deleteFile(at: "/\(name)")
        }
        #expect(try store.verify().problems.isEmpty)
    }

    @Test("a failing source leaves no row and no body; a locked store refuses file calls")
    func failures() throws {
        struct Failing: FileByteSource {
            var sent = 0
            mutating func read(into buffer: inout MutableRawSpan) throws -> Int {
                if sent > 100_000 { throw CocoaError(.fileReadUnknown) }
                sent += buffer.byteCount
                for i in 0..<buffer.byteCount { buffer.storeBytes(of: 0x41, toByteOffset: i, as: UInt8.self) }
                return buffer.byteCount
            }
        }
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        var failing = Failing()
        expectStoreError(.fileIOFailed) { try store.putFile(at: "/f", from: &failing) }
        #expect(try store.files().isEmpty)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.url.appendingPathComponent("files").path)
        #expect(names.isEmpty, "\(names)")
        try store.putFile(at: "/ok", data: Data("ok".utf8))
        store.lock()
        expectStoreError(.storeLocked) { _ = try store.readFile(at: "/ok") }
        expectStoreError(.storeLocked) { _ = try store.files() }
        expectStoreError(.storeLocked) { try store.putFile(at: "/x", data: Data()) }
    }
}
