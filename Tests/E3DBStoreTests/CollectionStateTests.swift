import E3DBKit
import E3DBTestSupport
import Foundation
import GRDB
import Testing

@testable import E3DBStore

/// Deleted, resurrected and rolled-back record rows (store audit B5, B6), edited state rows, and the write counter
/// (B6c), each made with SQL or file copies on a real store file: `verify` names the collection, `open` refuses an
/// edited state and a counter below the caller's minimum.
@Suite("E3DBStore collection state: deleted, resurrected and rolled-back rows, the write counter")
struct CollectionStateTests {
    /// Runs `sql` on the store's file outside the store, as `QueryIntegrityTests` edits it (an encrypted file
    /// through E3DBSQLite under the page key).
    func edit(_ store: EncryptedStore, _ sql: String, _ arguments: StatementArguments = []) throws {
        try QueryIntegrityTests().edit(store, sql, arguments)
    }

    /// The columns of a record row, as an attacker would copy them.
    func recordRow(_ store: EncryptedStore, _ id: UUID) throws -> Row? {
        try DatabaseQueue(path: try store.databaseLocation()).read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM records WHERE id = ?", arguments: [id.lowercasedString])
        }
    }

    func storeTampered(_ report: StoreVerificationReport) -> [String] {
        report.problems.filter { $0.code == .storeTampered }.compactMap(\.context.item).sorted()
    }

    func open(_ dir: StoreDirectory, minimum: Int? = nil) throws -> EncryptedStore {
        try EncryptedStore.open(at: dir.url, credential: passphrase("p"), expectedMinimumWriteCounter: minimum)
    }

    /// A store with three records in `c` and one in `d`.
    func filledStore(_ dir: StoreDirectory, _ encryption: DatabaseEncryption) throws -> (
        EncryptedStore, [RecordReference]
    ) {
        let store = try EncryptedStore.create(
            at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        let refs = try (0..<3).map { n in
            try store.put(collection: "c", type: "t", data: ["n": String(n)], plain: ["n": String(n)])
        }
        try store.put(collection: "d", type: "t", data: ["n": "other"])
        #expect(try store.verify().problems.isEmpty)
        return (store, refs)
    }

    @Test(
        "a deleted record row (with its plain rows) is reported by verify, naming its collection (B5)",
        arguments: DatabaseEncryption.allCases)
    func deletedRow(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let (store, refs) = try filledStore(dir, encryption)
        let id = refs[1].id.lowercasedString
        try edit(store, "DELETE FROM record_plain WHERE record_seq = (SELECT seq FROM records WHERE id = ?)", [id])
        try edit(store, "DELETE FROM records WHERE id = ?", [id])
        let report = try store.verify()
        #expect(storeTampered(report) == ["c"], "\(report.problems)")
        #expect(report.problems.count == 1, "\(report.problems)")
        #expect(report.problems.first?.message.contains("2 authenticated records where its state counts 3") == true)
        // A fresh open checks only the state rows (O(collections)); verify still finds the deletion.
        #expect(storeTampered(try open(dir).verify()) == ["c"])
    }

    @Test(
        "a deleted record put back (its old row re-inserted) is reported by verify; get returns it (B6a, B6b)",
        arguments: DatabaseEncryption.allCases)
    func resurrectedRow(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let (store, refs) = try filledStore(dir, encryption)
        let old = try #require(try recordRow(store, refs[0].id))
        try store.delete(collection: "c", id: refs[0].id)
        #expect(try store.verify().problems.isEmpty)
        try edit(
            store,
            """
            INSERT INTO records (id, collection, type, version, key_version, created, updated, document, mac)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                old["id"], old["collection"], old["type"], old["version"], old["key_version"], old["created"],
                old["updated"], old["document"], old["mac"],
            ] as StatementArguments)
        try edit(
            store, "INSERT INTO record_plain (record_seq, key, value) SELECT seq, 'n', '0' FROM records WHERE id = ?",
            [refs[0].id.lowercasedString])
        // Its MAC is its own, so a point read returns it (per-record detection would be O(n) per read).
        #expect(try store.get(collection: "c", id: refs[0].id).data["n"] == "0")
        let report = try store.verify()
        #expect(storeTampered(report) == ["c"], "\(report.problems)")
        #expect(report.problems.count == 1, "\(report.problems)")
    }

    @Test(
        "an older version of a row restored after an update is reported by verify (B6a, version rollback)",
        arguments: DatabaseEncryption.allCases)
    func olderVersionRestored(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let (store, refs) = try filledStore(dir, encryption)
        let old = try #require(try recordRow(store, refs[2].id))
        try store.update(collection: "c", id: refs[2].id, expectedVersion: 1, data: ["n": "new"], plain: ["n": "2"])
        #expect(try store.verify().problems.isEmpty)
        try edit(
            store,
            "UPDATE records SET version = ?, key_version = ?, updated = ?, document = ?, mac = ? WHERE id = ?",
            [
                old["version"], old["key_version"], old["updated"], old["document"], old["mac"],
                refs[2].id.lowercasedString,
            ] as StatementArguments)
        #expect(try store.get(collection: "c", id: refs[2].id).version == 1)
        let report = try store.verify()
        #expect(storeTampered(report) == ["c"], "\(report.problems)")
        #expect(report.problems.count == 1, "\(report.problems)")
        #expect(report.problems.first?.message.contains("older version") == true)
    }

    @Test(
        "an edited or deleted state row is refused at open and reported by verify, naming the collection",
        arguments: DatabaseEncryption.allCases)
    func editedStateRows(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let (store, _) = try filledStore(dir, encryption)
        // The count made to match a deleted row.
        try edit(store, "UPDATE collection_state SET record_count = 2 WHERE collection = 'c'")
        #expect(storeTampered(try store.verify()) == ["c"])
        expectStoreError(.storeTampered, item: "c") { _ = try open(dir) }
        // A write to the collection does not re-MAC the edited state.
        expectStoreError(.storeTampered, item: "c") { try store.put(collection: "c", type: "t", data: ["n": "x"]) }

        let dir2 = try StoreDirectory()
        let (store2, _) = try filledStore(dir2, encryption)
        try edit(store2, "DELETE FROM collection_state WHERE collection = 'd'")
        #expect(storeTampered(try store2.verify()) == ["d"])
        expectStoreError(.storeTampered, item: "d") { _ = try open(dir2) }

        let dir3 = try StoreDirectory()
        let (store3, _) = try filledStore(dir3, encryption)
        try edit(store3, "UPDATE store_state SET write_counter = write_counter + 100")
        #expect(storeTampered(try store3.verify()) == ["store"])
        expectStoreError(.storeTampered, item: "store") { _ = try open(dir3) }
        expectStoreError(.storeTampered, item: "store") { _ = try store3.writeCounter }
    }

    @Test(
        "a collection rolled back with its own state row (records and state from an older copy) is refused at open",
        arguments: DatabaseEncryption.allCases)
    func collectionRolledBackWithItsState(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let (store, _) = try filledStore(dir, encryption)
        let oldState = try #require(
            try DatabaseQueue(path: try store.databaseLocation()).read { db in
                try Row.fetchOne(db, sql: "SELECT * FROM collection_state WHERE collection = 'c'")
            })
        let added = try store.put(collection: "c", type: "t", data: ["n": "3"])
        try edit(store, "DELETE FROM records WHERE id = ?", [added.id.lowercasedString])
        try edit(
            store,
            "UPDATE collection_state SET record_count = ?, digest = ?, write_counter = ?, mac = ? WHERE collection = 'c'",
            [oldState["record_count"], oldState["digest"], oldState["write_counter"], oldState["mac"]]
                as StatementArguments)
        // The collection's rows and state agree with each other, but not with the store row.
        expectStoreError(.storeTampered, item: "store") { _ = try open(dir) }
        #expect(storeTampered(try store.verify()) == ["store"])
    }

    @Test("state stays exact through put, bulk put, update, delete, rotation, import, indexes, settings and files")
    func writesKeepState() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        var counter = try store.writeCounter
        func advanced() throws {
            let now = try store.writeCounter
            #expect(now > counter, "the write counter did not advance")
            counter = now
            let report = try store.verify()
            #expect(report.problems.isEmpty, "\(report.problems)")
        }
        let first = try store.put(collection: "c", type: "t", data: ["n": "1"])
        try advanced()
        // More than one chunk: encrypted in parallel, inserted in one transaction.
        let bulk = try store.put(
            collection: "c", records: (0..<600).map { ("t", ["n": String($0)], ["k": String($0 % 7)]) })
        try advanced()
        try store.update(collection: "c", id: first.id, expectedVersion: 1, data: ["n": "2"])
        try advanced()
        try store.delete(collection: "c", id: bulk[5].id)
        try advanced()
        try store.createIndex(collection: "c", fields: ["n"])
        try advanced()
        try store.rotateKey(collection: "c", batchSize: 100)
        try advanced()
        try store.setSetting("v", forKey: "k")
        try advanced()
        try store.removeSetting(forKey: "k")
        try advanced()
        try store.putFile(at: "/a.txt", data: Data("body".utf8))
        try advanced()
        try store.moveFile(from: "/a.txt", to: "/b.txt")
        try advanced()
        try store.deleteFile(at: "/b.txt")
        try advanced()
        let reader = ClientIdentity.generate(clientID: UUID())
        let exportDir = dir.url.appendingPathComponent("export")
        try store.export(collection: "c", to: exportDir, readerPublicKey: reader.publicKey)
        let imported = try store.importCollection(from: exportDir, reader: reader.boxKey, as: "copy")
        #expect(imported.count == 600)
        try advanced()
        #expect(try store.count(collection: "c") == 600)
        // A reopened store agrees, and the counter is the same.
        let reopened = try open(dir, minimum: counter)
        #expect(try reopened.writeCounter == counter)
        #expect(try reopened.verify().problems.isEmpty)
    }

    @Test(
        "a store made before the state gets it at its first open, from its authenticated records only",
        arguments: DatabaseEncryption.allCases)
    func upgradedStore(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let (store, refs) = try filledStore(dir, encryption)
        // What a store of the previous format looks like (its box key sealed without the state promise, no state
        // tables, and so neither migration v6 nor the later v7 in GRDB's log: a log with a gap is refused as
        // edited), plus one record whose MAC does not verify.
        let keys = try store.currentKeys()
        try setWrappedBoxKey(dir, StoreKeys.wrap(keys.boxKey, under: keys.master, promisingState: false, binding: nil))
        try edit(
            store,
            """
            DROP TABLE collection_state; DROP TABLE store_state;
            DELETE FROM grdb_migrations WHERE identifier IN ('v6-collection-state', 'v7-key-header');
            UPDATE records SET mac = zeroblob(32) WHERE id = '\(refs[0].id.lowercasedString)'
            """)
        let upgraded = try open(dir)
        #expect(try upgraded.writeCounter == 1)
        let report = try upgraded.verify()
        // The forged record is tampered; the state counts the authenticated ones, so it reports nothing else.
        #expect(report.problems.map(\.code) == [.recordTampered], "\(report.problems)")
        #expect(report.problems.first?.context.item == refs[0].id.lowercasedString)
        let counts = try DatabaseQueue(path: try upgraded.databaseLocation()).read { db in
            try Row.fetchAll(db, sql: "SELECT collection, record_count FROM collection_state ORDER BY collection")
                .map { "\($0["collection"] as String):\($0["record_count"] as Int)" }
        }
        #expect(counts == ["c:2", "d:1"])
        // The upgrade sealed the state promise with the box key: deleting every state row now does not pass for an
        // old store (whose state would be rebuilt from what is left); the store refuses to open.
        #expect(try open(dir).writeCounter == 1)
        try upgraded.put(collection: "c", type: "t", data: ["n": "more"])
        let counter = try upgraded.writeCounter
        try edit(upgraded, "DELETE FROM records WHERE id = ?", [refs[1].id.lowercasedString])
        try edit(upgraded, "DELETE FROM collection_state; DELETE FROM store_state")
        expectStoreError(.storeTampered, item: "store") { _ = try open(dir) }
        // Only an old copy of the key header (from before the upgrade) takes the promise back: the old-backup
        // attacker, whom the write counter kept outside the file catches.
        try setWrappedBoxKey(dir, StoreKeys.wrap(keys.boxKey, under: keys.master, promisingState: false, binding: nil))
        expectStoreError(.storeRolledBack) { _ = try open(dir, minimum: counter) }
    }

    /// Replaces the sealed box key in the store's key header.
    func setWrappedBoxKey(_ dir: StoreDirectory, _ sealed: Data) throws {
        let header = try DatabaseQueue(path: dir.url.appendingPathComponent(EncryptedStore.keyHeaderFileName).path)
        try header.write { db in
            try db.execute(sql: "UPDATE store_meta SET wrapped_box_private = ?", arguments: [sealed])
        }
        try header.close()
    }

    @Test(
        "whole-store rollback: an older copy is refused with the newer counter and opens with the older (B6c)",
        arguments: DatabaseEncryption.allCases)
    func wholeStoreRollback(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let copy = dir.url.deletingLastPathComponent().appendingPathComponent("e3dbstore-copy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: copy) }
        let older: Int
        do {
            let (store, _) = try filledStore(dir, encryption)
            older = try store.writeCounter
        }
        try FileManager.default.copyItem(at: dir.url, to: copy)
        let newer: Int
        do {
            let store = try open(dir, minimum: older)
            try store.put(collection: "c", type: "t", data: ["n": "after the copy"])
            newer = try store.writeCounter
        }
        #expect(newer > older)
        try FileManager.default.removeItem(at: dir.url)
        try FileManager.default.moveItem(at: copy, to: dir.url)
        do {
            _ = try open(dir, minimum: newer)
            Issue.record("an older copy opened")
        } catch let error as E3DBError {
            #expect(error.code == .storeRolledBack, "\(error)")
            #expect(error.context.expected == newer)
            #expect(error.context.actual == older)
        } catch {
            Issue.record("expected storeRolledBack, got \(error)")
        }
        let restored = try open(dir, minimum: older)
        #expect(try restored.writeCounter == older)
        #expect(try restored.verify().problems.isEmpty)
    }
}
