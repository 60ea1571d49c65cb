// Fuzz target FuzzStore: the decoders E3DBStore adds, through its public read paths, on a real store. A small store (raw
// key) is made once per process in a temporary directory: one record, one setting, one file (two chunks). Each
// input corrupts one stored thing with its bytes, reads it back, then puts the original back.
//
// Byte 0 picks the surface (mod 6), byte 1 a column where one is needed; the rest is the value:
// - 0: the record's `document` (EncryptedDocument JSON) replaced by the bytes;
// - 1: another column of the record row (id, version, key_version, created, updated, mac) set to the bytes (as
//   text, integer or blob as the column takes);
// - 2: the setting's sealed value replaced by the bytes;
// - 3: a column of the file row (id, path, record_id, size, encrypted_size, checksum, wrapped_key, created,
//   updated, mac) set to the bytes;
// - 4: the file's body replaced by the bytes;
// - 5: the bytes XORed into the body at the offset given by bytes 1-2 (so that mutations reach the chunk layer).
//
// Invariants: every read either throws an E3DBError or returns exactly what was stored (never other data); a
// failing read of the file names it (`context.item`); a whole read that succeeds leaves its sink finished, a
// failing one aborted; `verify()` reports no problem when the reads succeed, and one when a record or file read fails.
//
// LeakSanitizer is off for this target (run.sh): the store, its GRDB pool and SQLite's caches live for the whole
// process in a global, which LeakSanitizer cannot trace through Swift globals and reports as leaks.
import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBPrimitives
import E3DBStore
import Foundation
import GRDB

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzStore invariant violated: \(message())") }
}

private struct Fixture {
    let directory: URL
    let store: EncryptedStore
    let raw: DatabaseQueue
    let recordID: UUID
    let recordData: RecordData
    let recordRow: Row
    let sealedSetting: Data
    let filePath: String
    let fileContents: Data
    let fileRow: Row
    let bodyURL: URL
    let body: Data

    static let settingValue = "setting value ✓"

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fuzzstore-\(UUID().uuidString)")
        // A plain database file: the target edits its rows with SQL (an encrypted file's pages refuse any edit).
        store = try EncryptedStore.create(
            at: directory, credential: .key(SecureBytes(randomCount: 32)), databaseEncryption: .plain)
        recordData = ["name": "Ada", "note": "fuzz ☃"]
        recordID = try store.put(collection: "c", type: "t", data: recordData, plain: ["p": "q"]).id
        try store.setSetting(Fixture.settingValue, forKey: "s")
        filePath = "/dir/file.bin"
        fileContents = Data((0..<(65_536 + 300)).map { UInt8(truncatingIfNeeded: $0 &* 11 &+ $0 >> 8) })
        let stored = try store.putFile(at: filePath, data: fileContents, attachedTo: recordID)
        bodyURL = directory.appendingPathComponent(stored.bodyName)
        body = try Data(contentsOf: bodyURL)
        raw = try DatabaseQueue(path: directory.appendingPathComponent(EncryptedStore.databaseFileName).path)
        (recordRow, sealedSetting, fileRow) = try raw.read { db in
            guard let record = try Row.fetchOne(db, sql: "SELECT * FROM records"),
                let sealed = try Data.fetchOne(db, sql: "SELECT sealed FROM settings WHERE key = 's'"),
                let file = try Row.fetchOne(db, sql: "SELECT * FROM files")
            else { fatalError("FuzzStore: the fixture's rows are missing") }
            return (record, sealed, file)
        }
    }

    func restore() throws {
        try raw.write { db in
            try db.execute(
                sql:
                    "UPDATE records SET id = ?, version = ?, key_version = ?, created = ?, updated = ?, document = ?, mac = ?",
                arguments: [
                    recordRow["id"], recordRow["version"], recordRow["key_version"], recordRow["created"],
                    recordRow["updated"], recordRow["document"], recordRow["mac"],
                ])
            try db.execute(sql: "UPDATE settings SET sealed = ?", arguments: [sealedSetting])
            try db.execute(
                sql: """
                    UPDATE files SET id = ?, path = ?, record_id = ?, size = ?, encrypted_size = ?, checksum = ?,
                        wrapped_key = ?, created = ?, updated = ?, mac = ?
                    """,
                arguments: [
                    fileRow["id"], fileRow["path"], fileRow["record_id"], fileRow["size"], fileRow["encrypted_size"],
                    fileRow["checksum"], fileRow["wrapped_key"], fileRow["created"], fileRow["updated"], fileRow["mac"],
                ])
        }
        try body.write(to: bodyURL)
    }
}

nonisolated(unsafe) private var fixtureDirectory: URL?

// libFuzzer calls the target from one thread, one input at a time.
nonisolated(unsafe) private let fixture: Fixture = {
    do {
        let made = try Fixture()
        unsafe fixtureDirectory = made.directory
        atexit {
            if let directory = unsafe fixtureDirectory { try? FileManager.default.removeItem(at: directory) }
        }
        return made
    } catch {
        fatalError("FuzzStore: cannot make the fixture store: \(error)")
    }
}()

/// Sets `column` of every row of `table` to `value` read as the column's type; false when SQLite refuses it (a
/// STRICT table, a UNIQUE or NOT NULL constraint), in which case nothing changed.
private func corrupt(_ table: String, _ column: String, kind: Character, _ value: Data) -> Bool {
    let argument: (any DatabaseValueConvertible)?
    switch kind {
    case "i": argument = value.prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
    case "t": argument = String(decoding: value, as: UTF8.self)
    default: argument = value
    }
    do {
        try unsafe fixture.raw.write { db in
            try db.execute(sql: "UPDATE \(table) SET \(column) = ?", arguments: [argument])
        }
        return true
    } catch {
        return false
    }
}

/// Reads the record; true when it read back (as stored).
private func readRecord() -> Bool {
    do {
        let record = try unsafe fixture.store.get(collection: "c", id: fixture.recordID)
        unsafe require(
            record.data == fixture.recordData && record.id == fixture.recordID, "a tampered record read as other data")
        return true
    } catch {
        return false
    }
}

private func readSetting() -> Bool {
    do {
        let value = try unsafe fixture.store.setting(String.self, forKey: "s")
        require(value == Fixture.settingValue, "a tampered setting read as \(String(describing: value))")
        return true
    } catch {
        return false
    }
}

/// Reads the file whole and by range; true when both read back exactly (and the listing authenticates).
private func readFile() -> Bool {
    var sink = MemoryByteSink()
    var whole = false
    do {
        try unsafe fixture.store.readFile(at: fixture.filePath, to: &sink)
        unsafe require(sink.committed == fixture.fileContents, "a tampered file read as other bytes")
        whole = true
    } catch {
        require(sink.committed == nil && sink.aborted, "a failed read committed its sink")
        require(error.context.item != nil, "a file error does not name the file: \(error)")
    }
    do {
        let range = 65_530...65_540
        let bytes = try unsafe fixture.store.readFile(at: fixture.filePath, range: range)
        unsafe require(bytes == fixture.fileContents[range], "a tampered file's range read as other bytes")
    } catch {
        require(error.context.item != nil, "a range error does not name the file: \(error)")
    }
    do {
        let files = try unsafe fixture.store.files()
        require(
            files.allSatisfy { unsafe $0.path == fixture.filePath && $0.size == fixture.fileContents.count },
            "listing changed"
        )
    } catch {
        require(error.context.item != nil, "a listing error does not name the file: \(error)")
    }
    return whole
}

func fuzzStore(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let input = unsafe Data(bytes: data, count: size)
    let surface = input[0] % 6
    let selector = Int(input[1])
    let value = input.dropFirst(2)
    let fine: Bool
    switch surface {
    case 0:
        guard corrupt("records", "document", kind: "b", value) else { return 0 }
        fine = readRecord()
    case 1:
        let columns: [(String, Character)] = [
            ("id", "t"), ("version", "i"), ("key_version", "i"), ("created", "t"), ("updated", "t"), ("mac", "b"),
        ]
        let (column, kind) = columns[selector % columns.count]
        guard corrupt("records", column, kind: kind, value) else { return 0 }
        fine = readRecord()
    case 2:
        guard corrupt("settings", "sealed", kind: "b", value) else { return 0 }
        fine = readSetting()
    case 3:
        let columns: [(String, Character)] = [
            ("id", "t"), ("path", "t"), ("record_id", "t"), ("size", "i"), ("encrypted_size", "i"), ("checksum", "b"),
            ("wrapped_key", "b"), ("created", "t"), ("updated", "t"), ("mac", "b"),
        ]
        let (column, kind) = columns[selector % columns.count]
        guard corrupt("files", column, kind: kind, value) else { return 0 }
        fine = readFile()
    case 4:
        do { try unsafe Data(value).write(to: fixture.bodyURL) } catch {
            fatalError("FuzzStore: cannot write the body: \(error)")
        }
        fine = readFile()
    default:
        var body = unsafe fixture.body
        let offset = (selector << 8 | Int(value.first ?? 0)) % body.count
        for (i, byte) in value.dropFirst().enumerated() where offset + i < body.count { body[offset + i] ^= byte }
        do { try unsafe body.write(to: fixture.bodyURL) } catch {
            fatalError("FuzzStore: cannot write the body: \(error)")
        }
        fine = readFile()
    }
    do {
        let report = try unsafe fixture.store.verify()
        // What read back whole is intact, so verify finds nothing; a record or file that does not read is damage
        // verify must report (settings are not part of verify, and a record id changed only in letter case no
        // longer matches its lookup but still authenticates).
        if fine { require(report.problems.isEmpty, "verify reports \(report.problems) for a store that reads") }
        if !fine && surface != 1 && surface != 2 {
            require(!report.problems.isEmpty, "verify found nothing wrong with a store that fails to read")
        }
    } catch {
        require(!fine, "verify failed (\(error)) on a store that reads")
    }
    do { try unsafe fixture.restore() } catch { fatalError("FuzzStore: cannot restore the fixture: \(error)") }
    return 0
}
