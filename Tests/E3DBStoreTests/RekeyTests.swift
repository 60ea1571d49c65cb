import E3DBKit
import E3DBSQLite
import E3DBTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

@testable import E3DBStore

@Suite("E3DBStore: rekey (a new master key)")
struct RekeyTests {
    /// Everything a store holds, read back through the API: records (with their places), settings, files, a
    /// blind-index lookup and the identities.
    struct Snapshot: Equatable {
        var records: [String]
        var lookup: [UUID]
        var setting: [String]?
        var file: Data
        var identities: [String]
    }

    static func snapshot(_ store: EncryptedStore) throws -> Snapshot {
        var records: [String] = []
        for collection in ["notes", "people"] {
            for record in try store.find(RecordQuery(collection: collection)) {
                records.append(CanonicalJSON.serialize(record.jsonValue) + " in \(record.collection)")
            }
        }
        return Snapshot(
            records: records,
            lookup: try store.find(RecordQuery(collection: "people", fields: [.equals("email", "p7@example.com")]))
                .map(\.id),
            setting: try store.setting([String].self, forKey: "recent"),
            file: try store.readFile(at: "/docs/a.txt"),
            identities: try store.identities().map {
                "\($0.publicKey.base64URLEncoded) \($0.clientID?.uuidString ?? "")"
            })
    }

    /// The database files in the store's directory (`store*.sqlite*`: databases and their journals).
    static func databaseFiles(_ dir: StoreDirectory) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir.url.path).filter { $0.hasPrefix("store") }.sorted()
    }

    /// The copy an unfinished rekey names in the key header.
    static func pendingCopy(_ dir: StoreDirectory) throws -> String? {
        try DatabaseQueue(path: dir.keyHeader).read { db in
            try db.tableExists("rekey_pending")
                ? String.fetchOne(db, sql: "SELECT database_file FROM rekey_pending") : nil
        }.map { dir.url.appendingPathComponent($0).path }
    }

    @Test(
        "after a rekey every record, setting, file, index lookup and identity works, verify is clean",
        arguments: DatabaseEncryption.allCases)
    func keepsEverything(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let identity = ClientIdentity.generate(clientID: UUID())
        let before: Snapshot
        let oldVersions: Int
        let oldCounter: Int
        do {
            let store = try EncryptedStore.create(
                at: dir.url, credential: passphrase("old"), kdfParameters: testKDF, databaseEncryption: encryption)
            var batch: [(type: String, data: RecordData, plain: RecordData)] = []
            for i in 0..<130 { batch.append(("note", ["body": "note \(i)"], ["day": "\(i % 7)"])) }
            let notes = try store.put(collection: "notes", records: batch)
            for i in 0..<20 {
                try store.put(
                    collection: "people", type: "person", data: ["email": "p\(i)@example.com", "name": "P \(i)"])
            }
            try store.createIndex(collection: "people", fields: ["email"], bits: 16)
            try store.update(
                collection: "notes", id: notes[3].id, expectedVersion: 1, type: "memo", data: ["body": "changed"],
                plain: ["day": "x"])
            try store.delete(collection: "notes", id: notes[4].id)
            try store.rotateKey(collection: "notes", batchSize: 50)
            try store.setSetting(["a", "b"], forKey: "recent")
            try store.putFile(at: "/docs/a.txt", data: Data("file body".utf8), attachedTo: notes[0].id)
            try store.addIdentity(publicKey: identity.publicKey, clientID: identity.clientID)
            before = try Self.snapshot(store)
            oldVersions = try store.keyStatus(collection: "notes").keyVersion
            oldCounter = try store.writeCounter
        }
        let seen = Mutex<[Int]>([])
        let store = try EncryptedStore.rekey(
            at: dir.url, credential: passphrase("old"), newCredential: passphrase("new"), kdfParameters: testKDF,
            batchSize: 40
        ) { progress in
            #expect(progress.recordsTotal == 149 && !progress.resumed)
            seen.withLock { $0.append(progress.recordsDone) }
        }
        #expect(seen.withLock { $0 } == [40, 80, 120, 149])
        // The write counter goes on from the old store's: a counter an app keeps outside the file stays valid.
        #expect(try store.writeCounter > oldCounter)
        #expect(
            try EncryptedStore.open(at: dir.url, credential: passphrase("new"), expectedMinimumWriteCounter: oldCounter)
                .storeID == store.storeID)
        #expect(try Self.snapshot(store) == before)
        #expect(try store.keyStatus(collection: "notes") == (oldVersions + 1, 0))
        #expect(try store.keyStatus(collection: "people") == (2, 0))
        let report = try store.verify()
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.recordsChecked == 149 && report.filesChecked == 1)
        // A new database file, in the same mode, the only one left: the key header names it.
        #expect(store.databaseEncryption == encryption)
        let name = URL(fileURLWithPath: store.databasePath).lastPathComponent
        #expect(name != EncryptedStore.databaseFileName && name.hasPrefix("store-"))
        #expect(try Self.databaseFiles(dir).filter { !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") } == [name])
        #expect(try Self.pendingCopy(dir) == nil)
        // New writes, and every way to open it: the new passphrase and the identity; not the old passphrase.
        try store.put(collection: "notes", type: "note", data: ["body": "after"])
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("old")) }
        let byIdentity = try EncryptedStore.open(at: dir.url, credential: .identity(identity.boxKey))
        #expect(try byIdentity.count(collection: "notes") == 130)
        let reopened = try EncryptedStore.open(at: dir.url, credential: passphrase("new"))
        #expect(reopened.storeID == store.storeID)
        #expect(try reopened.verify().problems.isEmpty)
    }

    @Test(
        "the old master key material (an old backup and the old passphrase) opens nothing written after the rekey",
        arguments: DatabaseEncryption.allCases)
    func oldKeyMaterial(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let backup = try StoreDirectory()
        let oldMaster: SecretBox.Key
        let oldPageKey: SecureBytes
        let oldAccess: String
        do {
            let store = try EncryptedStore.create(
                at: dir.url, credential: passphrase("same"), kdfParameters: testKDF, databaseEncryption: encryption)
            try store.put(collection: "c", type: "t", data: ["secret": "before"])
            try store.setSetting("old", forKey: "s")
            oldMaster = try store.currentKeys().master
            oldPageKey = try store.databasePageKey()
            oldAccess = try store.accessKey(for: "c", create: false).key.base64URLEncoded
        }
        // The backup: the key header and the database copied aside (its WAL folded in when the last connection
        // closed).
        for name in [EncryptedStore.keyHeaderFileName, EncryptedStore.databaseFileName] {
            let from = dir.url.appendingPathComponent(name).path
            for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: from + suffix) {
                try FileManager.default.copyItem(
                    atPath: from + suffix, toPath: backup.url.appendingPathComponent(name).path + suffix)
            }
        }
        let oldMeta = try DatabaseQueue(path: backup.keyHeader).read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM store_meta") ?? Row()
        }

        // The same passphrase before and after: only the master key changes.
        let store = try EncryptedStore.rekey(at: dir.url, credential: passphrase("same"), kdfParameters: testKDF)
        let written = try store.put(collection: "c", type: "t", data: ["secret": "after"])
        #expect(try store.currentKeys().master.base64URLEncoded != oldMaster.base64URLEncoded)
        #expect(try store.accessKey(for: "c", create: false).key.base64URLEncoded != oldAccess)
        let database = store.databasePath

        // An encrypted store's new file does not open under the old page key (derived from the old master key).
        if encryption == .encrypted {
            #expect(
                try store.databasePageKey().withUnsafeBytes { Array($0) } != oldPageKey.withUnsafeBytes { Array($0) })
            let uri = try E3DBSQLite.uri(forDatabaseAt: database, key: .rawKey(oldPageKey), settings: .v4)
            defer { E3DBSQLite.forgetKey(inURI: uri) }
            #expect(throws: DatabaseError.self) {
                try DatabaseQueue(path: uri).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM records") }
            }
        }

        // Every wrapped collection key of the new file fails to open under the old master key.
        let newKeys = try DatabaseQueue(path: try store.databaseLocation()).read { db in
            try Row.fetchAll(db, sql: "SELECT collection, version, wrapped_key FROM collection_keys")
        }
        #expect(!newKeys.isEmpty)
        for row in newKeys {
            #expect(throws: E3DBError.self) {
                try StoreKeys.unwrap(
                    row["wrapped_key"], under: oldMaster, failure: E3DBError(.recordTampered, "does not open"))
            }
        }

        // The new record's row and keys pasted into the old copy, opened with the old passphrase: it does not open.
        let newRow = try DatabaseQueue(path: try store.databaseLocation()).read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM records WHERE id = ?", arguments: [written.id.lowercasedString])
        }
        let old = try EncryptedStore.open(at: backup.url, credential: passphrase("same"))
        let pasted = try DatabaseQueue(path: try old.databaseLocation())
        try pasted.write { db in
            guard let newRow else { return }
            try db.execute(
                sql: """
                    INSERT INTO records (id, collection, type, version, key_version, created, updated, document, mac)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    newRow["id"] as DatabaseValue, newRow["collection"] as DatabaseValue,
                    newRow["type"] as DatabaseValue, newRow["version"] as DatabaseValue,
                    newRow["key_version"] as DatabaseValue,
                    newRow["created"] as DatabaseValue, newRow["updated"] as DatabaseValue,
                    newRow["document"] as DatabaseValue, newRow["mac"] as DatabaseValue,
                ])
            for row in newKeys {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO collection_keys (collection, version, wrapped_key) VALUES (?, ?, ?)",
                    arguments: [
                        row["collection"] as DatabaseValue, row["version"] as DatabaseValue,
                        row["wrapped_key"] as DatabaseValue,
                    ])
            }
        }
        try pasted.close()
        do {
            _ = try old.get(collection: "c", id: written.id)
            Issue.record("the old master key opened a record written after the rekey")
        } catch {
            #expect(error.code == .recordTampered, "\(error)")
        }

        // The old key material pasted into the new key header: the old passphrase opens it (the old master key),
        // whose sealed box key names the old database file, not the new one the header names: the store refuses at
        // once, before opening any database (and the new database would not open under that key either).
        let edited = try DatabaseQueue(path: dir.keyHeader)
        try edited.write { db in
            try db.execute(
                sql: """
                    UPDATE store_meta SET kdf = ?, kdf_ops = ?, kdf_mem = ?, kdf_salt = ?, wrapped_master = ?,
                        wrapped_box_private = ?
                    """,
                arguments: [
                    oldMeta["kdf"] as DatabaseValue, oldMeta["kdf_ops"] as DatabaseValue,
                    oldMeta["kdf_mem"] as DatabaseValue, oldMeta["kdf_salt"] as DatabaseValue,
                    oldMeta["wrapped_master"] as DatabaseValue, oldMeta["wrapped_box_private"] as DatabaseValue,
                ])
        }
        try edited.close()
        expectStoreError(.storeTampered) {
            _ = try EncryptedStore.open(at: dir.url, credential: passphrase("same"))
        }
    }

    @Test(
        "an interrupted rekey leaves the old store; the next one resumes it, or starts again after a change",
        arguments: DatabaseEncryption.allCases)
    func resume(encryption: DatabaseEncryption) async throws {
        let dir = try StoreDirectory()
        var batch: [(type: String, data: RecordData, plain: RecordData)] = []
        for i in 0..<100 { batch.append(("t", ["n": "\(i)"], [:])) }
        var references: [RecordReference] = []
        do {
            let store = try await EncryptedStore.create(
                at: dir.url, credential: passphrase("a"), kdfParameters: testKDF, databaseEncryption: encryption)
            references = try await store.put(collection: "c", records: batch)
        }
        let url = dir.url
        func interrupt() async throws {
            let task = Task {
                try EncryptedStore.rekey(
                    at: url, credential: passphrase("a"), newCredential: passphrase("b"), kdfParameters: testKDF,
                    batchSize: 10
                ) { progress in
                    if progress.recordsDone >= 30 { withUnsafeCurrentTask { $0?.cancel() } }
                }
            }
            do {
                _ = try await task.value
                Issue.record("the rekey was not interrupted")
            } catch let error as E3DBError {
                #expect(error.code == .cancelled)
            }
            #expect(try Self.pendingCopy(dir).map { FileManager.default.fileExists(atPath: $0) } == true)
        }

        try await interrupt()
        let copy = try Self.pendingCopy(dir)
        // The old store, whole, with the old passphrase only.
        do {
            let old = try await EncryptedStore.open(at: dir.url, credential: passphrase("a"))
            #expect(try await old.count(collection: "c") == 100)
            expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("b")) }
        }
        let resumedRuns = Mutex<[Bool]>([])
        let first = Mutex<Int?>(nil)
        do {
            let store = try await EncryptedStore.rekey(
                at: dir.url, credential: passphrase("a"), newCredential: passphrase("b"), kdfParameters: testKDF,
                batchSize: 10
            ) { progress in
                resumedRuns.withLock { $0.append(progress.resumed) }
                first.withLock { if $0 == nil { $0 = progress.recordsDone } }
            }
            #expect(try await store.verify().problems.isEmpty)
            #expect(try await store.count(collection: "c") == 100)
            // The resumed copy is the store's database now.
            #expect(store.databasePath == copy)
        }
        #expect(resumedRuns.withLock { $0.allSatisfy { $0 } } && first.withLock { $0 } == 40)

        // Interrupted again, then the store changes (an update of a record already copied): it starts again.
        try await interruptAgain(dir)
        do {
            let store = try await EncryptedStore.open(at: dir.url, credential: passphrase("b"))
            try await store.update(collection: "c", id: references[0].id, expectedVersion: 1, data: ["n": "changed"])
        }
        resumedRuns.withLock { $0 = [] }
        let store = try await EncryptedStore.rekey(
            at: dir.url, credential: passphrase("b"), newCredential: passphrase("c"), kdfParameters: testKDF,
            batchSize: 10
        ) { progress in resumedRuns.withLock { $0.append(progress.resumed) } }
        #expect(resumedRuns.withLock { $0.allSatisfy { !$0 } && $0.count == 10 })
        #expect(try await store.get(collection: "c", id: references[0].id).data == ["n": "changed"])
        #expect(try await store.get(collection: "c", id: references[0].id).version == 2)
        #expect(try await store.verify().problems.isEmpty)
    }

    func interruptAgain(_ dir: StoreDirectory) async throws {
        let url = dir.url
        let task = Task {
            try EncryptedStore.rekey(
                at: url, credential: passphrase("b"), newCredential: passphrase("c"), kdfParameters: testKDF,
                batchSize: 10
            ) { progress in
                if progress.recordsDone >= 50 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        await #expect(throws: E3DBError.self) { _ = try await task.value }
        #expect(try Self.pendingCopy(dir).map { FileManager.default.fileExists(atPath: $0) } == true)
    }

    @Test(
        "a crash after the commit point leaves the old file: open keeps it; store gc removes it, and only such files")
    func orphanRemoved() throws {
        let dir = try StoreDirectory()
        do {
            let store = try EncryptedStore.create(at: dir.url, credential: passphrase("a"), kdfParameters: testKDF)
            try store.put(collection: "c", type: "t", data: ["n": "1"])
        }
        // The old file and its journals as a rekey stopped after its commit point leaves them, and other files.
        let old = try Data(contentsOf: URL(fileURLWithPath: dir.database))
        let store = try EncryptedStore.rekey(at: dir.url, credential: passphrase("a"), kdfParameters: testKDF)
        let current = URL(fileURLWithPath: store.databasePath).lastPathComponent
        for name in [
            EncryptedStore.databaseFileName, EncryptedStore.databaseFileName + "-wal", "store-0badf00d.sqlite-shm",
        ] {
            try old.write(to: dir.url.appendingPathComponent(name))
        }
        for name in ["notes.sqlite", "stored.txt", "store.sqlite.bak", "store-1.sqlite"] {
            try Data("keep".utf8).write(to: dir.url.appendingPathComponent(name))
        }
        let reopened = try EncryptedStore.open(at: dir.url, credential: passphrase("a"))
        #expect(try reopened.count(collection: "c") == 1)
        #expect(FileManager.default.fileExists(atPath: dir.database), "open removed a file")
        #expect(
            try reopened.removeStaleDatabaseFiles() == [
                "store-0badf00d.sqlite-shm", EncryptedStore.databaseFileName, EncryptedStore.databaseFileName + "-wal",
            ])
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.url.path).filter {
            !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm")
        }
        #expect(
            Set(left) == [
                EncryptedStore.keyHeaderFileName, current, "notes.sqlite", "stored.txt", "store.sqlite.bak",
                "store-1.sqlite",
            ], "\(left)")
        #expect(!FileManager.default.fileExists(atPath: dir.database + "-wal"))
    }

    @Test("a rekey refuses to swap while another connection has the store open; nothing changes")
    func busy() throws {
        let dir = try StoreDirectory()
        do {
            let store = try EncryptedStore.create(at: dir.url, credential: passphrase("a"), kdfParameters: testKDF)
            try store.put(collection: "c", type: "t", data: ["n": "1"])
        }
        do {
            let other = try EncryptedStore.open(at: dir.url, credential: passphrase("a"))
            expectStoreError(.storeBusy) {
                _ = try EncryptedStore.rekey(
                    at: dir.url, credential: passphrase("a"), newCredential: passphrase("b"), kdfParameters: testKDF)
            }
            #expect(try other.count(collection: "c") == 1)
        }
        let store = try EncryptedStore.rekey(
            at: dir.url, credential: passphrase("a"), newCredential: passphrase("b"), kdfParameters: testKDF)
        #expect(try store.count(collection: "c") == 1)
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("a")) }
    }

    @Test("while a rekey copies, a writer in another connection waits, then fails with storeBusy; nothing is lost")
    func writerWaits() throws {
        let dir = try StoreDirectory()
        do {
            let store = try EncryptedStore.create(at: dir.url, credential: passphrase("a"), kdfParameters: testKDF)
            var batch: [(type: String, data: RecordData, plain: RecordData)] = []
            for i in 0..<30 { batch.append(("t", ["n": "\(i)"], [:])) }
            _ = try store.put(collection: "c", records: batch)
        }
        let url = dir.url
        let outcome = Mutex<E3DBError.Code?>(nil)
        let store = try EncryptedStore.rekey(
            at: url, credential: passphrase("a"), newCredential: passphrase("b"), kdfParameters: testKDF,
            batchSize: 10
        ) { progress in
            guard progress.recordsDone == 10 else { return }
            // Another connection, released before the swap; the copy holds the write lock.
            do {
                let other = try EncryptedStore.open(at: url, credential: passphrase("a"))
                try other.put(collection: "c", type: "t", data: ["n": "lost?"])
            } catch let error as E3DBError {
                outcome.withLock { $0 = error.code }
            } catch {
                Issue.record("\(error)")
            }
        }
        #expect(outcome.withLock { $0 } == .storeBusy)
        #expect(try store.count(collection: "c") == 30)
        #expect(try store.verify().problems.isEmpty)
    }

    @Test("a store created for an identity is rekeyed with that identity; an identity cannot replace a passphrase")
    func identityStore() throws {
        let dir = try StoreDirectory()
        let me = ClientIdentity.generate(clientID: UUID())
        do {
            let store = try EncryptedStore.create(at: dir.url, identity: me)
            try store.put(collection: "c", type: "t", data: ["n": "1"])
        }
        let store = try EncryptedStore.rekey(at: dir.url, credential: .identity(me.boxKey))
        #expect(try store.count(collection: "c") == 1)
        let other = try StoreDirectory()
        do { _ = try EncryptedStore.create(at: other.url, credential: passphrase("p"), kdfParameters: testKDF) }
        expectStoreError(.invalidParameter) {
            _ = try EncryptedStore.rekey(
                at: other.url, credential: passphrase("p"), newCredential: .identity(me.boxKey))
        }
    }
}
