import E3DBKit
import E3DBStore
import E3DBTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

/// The store inside an encrypted SQLite file (E3DBSQLite, SQLCipher 4's format) and its key header: what the files
/// reveal, damage to the encrypted file, stores made before the key header, and SQLCipher reading the file.
@Suite("E3DBStore in an encrypted file: key header, no plaintext, damaged pages, upgrade, SQLCipher")
struct EncryptedFileTests {
    /// A store holding a collection name, a type, plain metadata, an indexed field and values that are all
    /// distinctive strings, and the strings.
    func populated(_ dir: StoreDirectory, _ encryption: DatabaseEncryption) throws -> (EncryptedStore, [String]) {
        let store = try EncryptedStore.create(
            at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        let collection = "COLLECTION-\(UUID().uuidString)"
        let type = "TYPE-\(UUID().uuidString)"
        let plainKey = "PLAINKEY-\(UUID().uuidString)"
        let plainValue = "PLAINVALUE-\(UUID().uuidString)"
        let field = "FIELD-\(UUID().uuidString)"
        let value = "VALUE-\(UUID().uuidString)"
        for i in 0..<50 {
            _ = try store.put(
                collection: collection, type: type, data: [field: "\(value)-\(i)"],
                plain: [plainKey: "\(plainValue)-\(i % 3)"])
        }
        try store.createIndex(collection: collection, fields: [field], bits: 32)
        _ = try store.find(RecordQuery(collection: collection, plain: [.equals(plainKey, "\(plainValue)-1")]))
        return (store, [collection, type, plainKey, plainValue, field, value])
    }

    /// Whether any file of the store directory (database, WAL, key header, bodies) holds `needle`.
    func found(_ needle: String, in directory: URL) throws -> Bool {
        guard let walker = FileManager.default.enumerator(atPath: directory.path) else { return false }
        for case let name as String in walker {
            let url = directory.appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue
            else { continue }
            if try Data(contentsOf: url).range(of: Data(needle.utf8)) != nil { return true }
        }
        return false
    }

    @Test("an encrypted store's files hold no collection name, type, plain key or value, index field or value")
    func noQueryTablesInTheFile() throws {
        for encryption in DatabaseEncryption.allCases {
            let dir = try StoreDirectory()
            let (store, needles) = try populated(dir, encryption)
            #expect(store.databaseEncryption == encryption)
            #expect(try store.statistics().databaseEncryption == encryption)
            let names = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
            #expect(names.contains(EncryptedStore.keyHeaderFileName) && names.contains(EncryptedStore.databaseFileName))
            // Scanned while the store is open (WAL and shared memory included) and after it is closed.
            for needle in needles {
                let visible = try found(needle, in: dir.url)
                // The plain file is the control: the same scan finds the query tables there.
                if encryption == .plain && needle != needles[5] {
                    #expect(visible, "\(needle) not found in the plain file")
                } else if encryption == .encrypted {
                    #expect(!visible, "\(needle) found in the encrypted store's files")
                }
            }
        }
    }

    @Test(
        "the header is read before the database: a wrong passphrase is wrongKey; another store's file is storeCorrupted"
    )
    func wrongKeyThenWrongFile() throws {
        let dir = try StoreDirectory()
        let other = try StoreDirectory()
        do {
            let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
            _ = try store.put(collection: "c", type: "t", data: ["k": "v"])
            let second = try EncryptedStore.create(at: other.url, credential: passphrase("p"), kdfParameters: testKDF)
            _ = try second.put(collection: "c", type: "t", data: ["k": "w"])
        }
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("q")) }
        // The other store's database under this header: the header's key does not open its pages.
        try FileManager.default.removeItem(atPath: dir.database)
        try FileManager.default.copyItem(atPath: other.database, toPath: dir.database)
        expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
        // A header without its database.
        try FileManager.default.removeItem(atPath: dir.database)
        expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
        // No header and no database: no store.
        try FileManager.default.removeItem(atPath: dir.keyHeader)
        expectStoreError(.storeNotFound) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
    }

    @Test("a byte changed in an encrypted page: storeCorrupted naming the page; verify reports it and goes on")
    func editedEncryptedPage() throws {
        let dir = try StoreDirectory()
        let page: Int
        let location: String
        do {
            let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
            let filler = String(repeating: "x", count: 300)
            _ = try store.put(collection: "c", records: (0..<400).map { ("t", ["n": String($0), "f": filler], [:]) })
            location = try store.databaseLocation()
        }
        let pages = try DatabaseQueue(path: location).writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            return try Int.fetchAll(
                db, sql: "SELECT pageno FROM dbstat WHERE name = 'records' AND pagetype = 'leaf' ORDER BY pageno")
        }
        page = try #require(pages.count > 10 ? pages[pages.count / 2] : nil)
        // Without the key, an edit is a change of ciphertext bytes: the page no longer authenticates.
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: dir.database))
        let offset = UInt64((page - 1) * 4096 + 100)
        try handle.seek(toOffset: offset)
        let byte = try #require(try handle.read(upToCount: 1)?.first)
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: Data([byte ^ 0x01]))
        try handle.close()
        let store = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        expectStoreError(.storeCorrupted) { _ = try store.find(RecordQuery(collection: "c")) }
        let report = try store.verify()
        let database = report.problems.filter { $0.code == .storeCorrupted && $0.context.item == "database" }
        #expect(
            database.contains { $0.message.contains("pages that did not authenticate: \(page)") }, "\(report.problems)")
        #expect(report.recordsChecked > 350 && report.recordsChecked < 400, "\(report.recordsChecked)")
    }

    @Test("lock forgets the page key and unlock gives it back: reads on new connections work after unlock")
    func lockAndUnlock() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let refs = try store.put(collection: "c", records: (0..<20).map { ("t", ["n": String($0)], [:]) })
        store.lock()
        expectStoreError(.storeLocked) { _ = try store.get(collection: "c", id: refs[0].id) }
        try store.unlock(passphrase("p"))
        // Several threads read at once: the store opens more read connections through its URI.
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            do {
                _ = try store.get(collection: "c", id: refs[i].id)
                _ = try store.find(RecordQuery(collection: "c"))
            } catch {
                failures.withLock { $0 += 1 }
            }
        }
        #expect(failures.withLock { $0 } == 0)
        #expect(try store.verify().problems.isEmpty)
    }

    /// Puts a store back into the layout before the key header: `store_meta` and `store_identities` in its (plain)
    /// database with the rows the header holds, no header, and the migration that dropped them not applied.
    func oldLayout(_ dir: StoreDirectory, keepHeader: Bool) throws {
        let header = try DatabaseQueue(path: dir.keyHeader)
        let meta = try header.read { db in try Row.fetchOne(db, sql: "SELECT * FROM store_meta") }
        let identities = try header.read { db in try Row.fetchAll(db, sql: "SELECT * FROM store_identities") }
        try header.close()
        let meta1 = try #require(meta)
        try DatabaseQueue(path: dir.database).write { db in
            try db.execute(
                sql: """
                    CREATE TABLE store_meta (
                        singleton INTEGER PRIMARY KEY CHECK (singleton = 1), format INTEGER NOT NULL,
                        store_id TEXT NOT NULL, kdf TEXT NOT NULL, kdf_ops INTEGER, kdf_mem INTEGER,
                        kdf_salt BLOB NOT NULL, wrapped_master BLOB NOT NULL, box_public BLOB NOT NULL,
                        wrapped_box_private BLOB NOT NULL, created TEXT NOT NULL) STRICT;
                    CREATE TABLE store_identities (
                        public_key BLOB PRIMARY KEY, client_id TEXT, eak_info TEXT NOT NULL,
                        created TEXT NOT NULL) STRICT;
                    DELETE FROM grdb_migrations WHERE identifier = 'v7-key-header';
                    """)
            try db.execute(
                sql: """
                    INSERT INTO store_meta (singleton, format, store_id, kdf, kdf_ops, kdf_mem, kdf_salt,
                        wrapped_master, box_public, wrapped_box_private, created)
                    VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    meta1["format"], meta1["store_id"], meta1["kdf"], meta1["kdf_ops"], meta1["kdf_mem"],
                    meta1["kdf_salt"], keepHeader ? Data([1, 2, 3]) : meta1["wrapped_master"], meta1["box_public"],
                    meta1["wrapped_box_private"], meta1["created"],
                ])
            for row in identities {
                try db.execute(
                    sql: "INSERT INTO store_identities VALUES (?, ?, ?, ?)",
                    arguments: [row["public_key"], row["client_id"], row["eak_info"], row["created"]])
            }
        }
        if !keepHeader { try FileManager.default.removeItem(atPath: dir.keyHeader) }
    }

    @Test("a store made before the key header opens: its key material moves into the header, its file stays plain")
    func upgradeOldLayout() throws {
        let dir = try StoreDirectory()
        let alice = ClientIdentity.generate(clientID: UUID())
        let reference: RecordReference
        do {
            let store = try EncryptedStore.create(
                at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: .plain)
            reference = try store.put(collection: "c", type: "t", data: ["k": "v"], plain: ["a": "b"])
            try store.addIdentity(publicKey: alice.publicKey, clientID: alice.clientID)
        }
        try oldLayout(dir, keepHeader: false)
        #expect(!FileManager.default.fileExists(atPath: dir.keyHeader))
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("q")) }
        let store = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(store.databaseEncryption == .plain)
        #expect(try store.get(collection: "c", id: reference.id).data == ["k": "v"])
        #expect(try store.identities().map(\.clientID) == [alice.clientID])
        #expect(FileManager.default.fileExists(atPath: dir.keyHeader))
        let tables = try DatabaseQueue(path: dir.database).read { db in
            try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE name IN ('store_meta', 'store_identities')")
        }
        #expect(tables.isEmpty)
        #expect(try store.verify().problems.isEmpty)
        let asAlice = try EncryptedStore.open(at: dir.url, credential: .identity(alice.boxKey))
        #expect(try asAlice.get(collection: "c", id: reference.id).data == ["k": "v"])
    }

    @Test("a crash after the header was written and before the old tables were dropped: open uses the header")
    func upgradeInterrupted() throws {
        let dir = try StoreDirectory()
        let reference: RecordReference
        do {
            let store = try EncryptedStore.create(
                at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: .plain)
            reference = try store.put(collection: "c", type: "t", data: ["k": "v"])
        }
        // The old table's wrapped master key is garbage: only the header's opens the store.
        try oldLayout(dir, keepHeader: true)
        let store = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(try store.get(collection: "c", id: reference.id).data == ["k": "v"])
        let tables = try DatabaseQueue(path: dir.database).read { db in
            try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE name IN ('store_meta', 'store_identities')")
        }
        #expect(tables.isEmpty)
    }

    @Test("the encrypted store.sqlite is a SQLCipher 4 file: SQLCipher opens it under the derived raw key")
    func sqlcipherReadsTheFile() async throws {
        let python = try await ChildProcess.makeProjectPython()
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        _ = try await store.put(collection: "secret-notes", records: (0..<25).map { ("note", ["n": String($0)], [:]) })
        let location = try store.databaseLocation()
        // Everything in the main file (SQLCipher would read the WAL too; this keeps the check to the file).
        try await DatabaseQueue(path: location).writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
        let key = try store.databasePageKey().withUnsafeBytes { Array($0) }
        let hex = key.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
            .joined()
        // The key goes on stdin, never in the arguments.
        let script = """
            import json, sys, sqlcipher3
            key = sys.stdin.read().strip()
            db = sqlcipher3.connect(sys.argv[1])
            db.execute('PRAGMA key = "x\\'%s\\'"' % key)
            names = [r[0] for r in db.execute("SELECT name FROM collections")]
            count = db.execute("SELECT COUNT(*) FROM records").fetchone()[0]
            check = [r[0] for r in db.execute("PRAGMA cipher_integrity_check")]
            print(json.dumps({"collections": names, "records": count, "bad": check}, separators=(",", ":"), sort_keys=True))
            """
        let result = try await ChildProcess.run(python, ["-c", script, dir.database], stdin: Data(hex.utf8))
        #expect(result.status == 0, "\(result.stderr)")
        let answer = try CanonicalJSON.parse(Data(result.stdoutText.utf8))
        #expect(
            answer
                == .object([
                    "collections": .array([.string("secret-notes")]), "records": .number(25), "bad": .array([]),
                ]), "\(result.stdoutText)")
        // The wrong key: SQLCipher refuses the file.
        let wrong = try await ChildProcess.run(
            python, ["-c", script, dir.database], stdin: Data(String(repeating: "ab", count: 32).utf8))
        #expect(wrong.status != 0)
    }
}
