import E3DBCanonicalJSON
// Fuzz target FuzzKeyHeader: E3DBStore's key header (`keys.sqlite`, a plain file anyone who can write the store's
// directory can edit, restore or swap; security review 3: H1, M2, M4, L9) through `EncryptedStore.open`. Two small
// stores (raw key; one with a plain database, one encrypted; a record each) are made once per process. Each input
// works on a fresh copy of one of them, beside a file outside the store (`outside/victim.txt`) and a stale database
// file (`store-0badf00d.sqlite`) inside it:
//
// Byte 0 picks the form (mod 3):
// - 0: the rest of the input is the whole key header file (plain-database store);
// - 1, 2: edits of the plain (1) or encrypted (2) store's header: the header's tables lose `STRICT`, `NOT NULL` and
//   `CHECK`, then each edit is a column byte (the 13 columns of `store_meta`, and `rekey_pending`'s database file
//   and sealed master key, whose row the first such edit creates), a kind byte (NULL, a 64-bit integer, text, a blob,
//   or one of a list of telling names: store names, `keys.sqlite`, `../outside/victim.txt`, …), a length byte and
//   that many bytes.
//
// The store is then opened with its raw key (no Argon2id runs for a raw key, whatever the header says); when it
// opens, `count`, `verify()` and `removeStaleDatabaseFiles()` run.
//
// Invariants: every failure is a typed `E3DBError`; `open` deletes nothing (every file of the store is there after
// it, success or not); nothing outside the store is created, changed or removed (`removeStaleDatabaseFiles` included);
// a store that opens opens the database file and encryption its master key sealed (the template's), whatever the
// header says; `removeStaleDatabaseFiles` removes only the stale copy and never the live database or the header.
import E3DBPrimitives
import E3DBStore
import E3DBTestSupport
import Foundation
import GRDB

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzKeyHeader invariant violated: \(message())") }
}

private struct KeyHeaderFixture {
    let root: URL
    let key: SecureBytes
    /// The two template stores, by encryption.
    let plain: URL
    let encrypted: URL

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("fuzzkeyheader-\(UUID().uuidString)")
        key = SecureBytes(randomCount: 32)
        plain = root.appendingPathComponent("template-plain")
        encrypted = root.appendingPathComponent("template-encrypted")
        for (url, encryption) in [(plain, DatabaseEncryption.plain), (encrypted, .encrypted)] {
            let store = try EncryptedStore.create(at: url, credential: .key(key), databaseEncryption: encryption)
            try store.put(collection: "c", type: "t", data: ["k": "v"])
        }
    }
}

nonisolated(unsafe) private var keyHeaderRoot: URL?

// libFuzzer calls the target from one thread, one input at a time.
private let keyHeaderFixture: KeyHeaderFixture = {
    do {
        let made = try KeyHeaderFixture()
        unsafe keyHeaderRoot = made.root
        atexit {
            if let root = unsafe keyHeaderRoot { try? FileManager.default.removeItem(at: root) }
        }
        return made
    } catch {
        fatalError("FuzzKeyHeader: cannot make the fixture stores: \(error)")
    }
}()

private let headerColumns = [
    "format", "store_id", "kdf", "kdf_ops", "kdf_mem", "kdf_salt", "wrapped_master", "box_public",
    "wrapped_box_private", "created", "database_file", "database_encryption", "singleton",
]

private let tellingValues = [
    "store.sqlite", "store-0badf00d.sqlite", "store-0BADF00D.sqlite", "keys.sqlite", "../outside/victim.txt",
    "store-0badf00d.sqlite/..", "encrypted", "plain", "argon2id13", "raw", "none", "", ".", "..",
]

/// Every regular file below `url`, with its bytes.
private func snapshot(_ url: URL) -> [String: Data] {
    var files: [String: Data] = [:]
    guard let walker = FileManager.default.enumerator(atPath: url.path) else { return files }
    while let name = walker.nextObject() as? String {
        let path = url.appendingPathComponent(name).path
        let type = (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType
        if type != .typeDirectory { files[name] = FileManager.default.contents(atPath: path) ?? Data() }
    }
    return files
}

/// Applies the edits in `input` to the header at `path`; false when the input describes no edit SQLite accepts.
private func applyEdits(_ input: ArraySlice<UInt8>, to path: String) -> Bool {
    var bytes = input
    var applied = false
    do {
        try SQLiteEdits.loosen(path, table: "store_meta")
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        while bytes.count >= 3 {
            let columnByte = Int(bytes.removeFirst())
            let kind = bytes.removeFirst() % 5
            let length = Int(bytes.removeFirst())
            let payload = Array(bytes.prefix(length))
            bytes = bytes.dropFirst(length)
            let value: DatabaseValue
            switch kind {
            case 0: value = .null
            case 1: value = payload.prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }.databaseValue
            case 2: value = String(decoding: payload, as: UTF8.self).databaseValue
            case 3: value = Data(payload).databaseValue
            default: value = tellingValues[(payload.first.map(Int.init) ?? 0) % tellingValues.count].databaseValue
            }
            let index = columnByte % (headerColumns.count + 2)
            try queue.write { db in
                if index < headerColumns.count {
                    try db.execute(sql: "UPDATE store_meta SET \(headerColumns[index]) = ?", arguments: [value])
                } else {
                    try db.execute(
                        sql: """
                            CREATE TABLE IF NOT EXISTS rekey_pending (singleton INTEGER PRIMARY KEY, database_file,
                                sealed_master);
                            INSERT OR IGNORE INTO rekey_pending VALUES (1, 'store-12345678.sqlite', x'00');
                            """)
                    let column = index == headerColumns.count ? "database_file" : "sealed_master"
                    try db.execute(sql: "UPDATE rekey_pending SET \(column) = ?", arguments: [value])
                }
            }
            applied = true
        }
    } catch {
        return applied
    }
    return applied
}

func fuzzKeyHeader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let input = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    let fixture = keyHeaderFixture
    let form = input[0] % 3
    let template = form == 2 ? fixture.encrypted : fixture.plain
    let work = fixture.root.appendingPathComponent("work-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: work) }
    let store = work.appendingPathComponent("store")
    let outside = work.appendingPathComponent("outside")
    do {
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: template, to: store)
        try Data("victim".utf8).write(to: outside.appendingPathComponent("victim.txt"))
        try Data("stale".utf8).write(to: store.appendingPathComponent("store-0badf00d.sqlite"))
    } catch {
        fatalError("FuzzKeyHeader: cannot copy the fixture: \(error)")
    }
    let header = store.appendingPathComponent(EncryptedStore.keyHeaderFileName)
    if form == 0 {
        do { try Data(input.dropFirst()).write(to: header) } catch { fatalError("FuzzKeyHeader: \(error)") }
    } else if !applyEdits(input.dropFirst(), to: header.path) {
        return 0
    }
    let outsideBefore = snapshot(outside)
    let storeBefore = Set(snapshot(store).keys)
    var opened: EncryptedStore?
    do {
        opened = try EncryptedStore.open(at: store, credential: .key(fixture.key))
    } catch {
        // Typed by construction (`throws(E3DBError)`); what matters is what it left.
    }
    let storeAfter = Set(snapshot(store).keys)
    let missing = storeBefore.subtracting(storeAfter).filter { !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
    require(missing.isEmpty, "open removed \(missing.sorted())")
    if let opened {
        let expected = template == fixture.plain ? DatabaseEncryption.plain : .encrypted
        require(opened.databaseEncryption == expected, "opened as \(opened.databaseEncryption), not \(expected)")
        _ = try? opened.count(collection: "c")
        _ = try? opened.verify()
        if let removed = try? opened.removeStaleDatabaseFiles() {
            require(
                removed.allSatisfy { $0.hasPrefix("store-0badf00d.sqlite") },
                "removeStaleDatabaseFiles removed \(removed)")
        }
        require(
            FileManager.default.fileExists(atPath: store.appendingPathComponent("store.sqlite").path)
                && FileManager.default.fileExists(atPath: header.path), "the live database or the header is gone")
    }
    require(snapshot(outside) == outsideBefore, "something outside the store changed")
    let besides = (try? FileManager.default.contentsOfDirectory(atPath: work.path)) ?? []
    require(Set(besides) == ["store", "outside"], "new files beside the store: \(besides)")
    return 0
}
