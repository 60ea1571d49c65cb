import E3DBKit
import E3DBStore
import E3DBTestSupport
import Foundation
import GRDB
import Testing

/// Edits of the plaintext query tables (store audit B4) and damage to the database file (B9), made with SQL on a
/// real store file: a query never returns a record that does not match it, the edit is reported as tampering, and
/// `verify` reports each edit and each damaged page and goes on.
@Suite("E3DBStore query integrity: edited query tables, damaged files")
struct QueryIntegrityTests {
    /// Runs `sql` on the store's file outside the store (foreign keys off, as a hand edit would be).
    /// An encrypted file is opened through E3DBSQLite under the page key (a test-only handle to it).
    func edit(_ store: EncryptedStore, _ sql: String, _ arguments: StatementArguments = []) throws {
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        try raw.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA foreign_keys = OFF")
            try db.execute(sql: sql, arguments: arguments)
        }
    }

    func items(_ report: StoreVerificationReport, _ code: E3DBError.Code) -> [String] {
        report.problems.filter { $0.code == code }.compactMap(\.context.item).sorted()
    }

    @Test(
        "an edited type column: find by type reports the record as tampered; verify reports it (B4a)",
        arguments: DatabaseEncryption.allCases)
    func editedType(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(
            at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        let note = try store.put(collection: "c", type: "note", data: ["body": "a"])
        let memo = try store.put(collection: "c", type: "memo", data: ["body": "b"])
        #expect(try store.verify().problems.isEmpty)
        try edit(store, "UPDATE records SET type = 'memo' WHERE id = ?", [note.id.lowercasedString])
        expectStoreError(.recordTampered, item: note.id.lowercasedString) {
            _ = try store.find(RecordQuery(collection: "c", types: ["memo"]))
        }
        // A query that does not read the edited column still answers.
        #expect(try store.find(RecordQuery(collection: "c")).map(\.id) == [note.id, memo.id])
        let report = try store.verify()
        #expect(items(report, .recordTampered) == [note.id.lowercasedString])
        #expect(report.problems.count == 1)
    }

    @Test(
        "edited or deleted record_plain rows: plain queries never answer with a non-matching record; verify reports each (B4b, B4c)",
        arguments: DatabaseEncryption.allCases)
    func editedPlain(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(
            at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        let first = try store.put(collection: "c", type: "t", data: ["k": "1"], plain: ["day": "2026-11-25"])
        let second = try store.put(collection: "c", type: "t", data: ["k": "2"], plain: ["day": "2026-11-26"])
        let third = try store.put(collection: "c", type: "t", data: ["k": "3"], plain: ["day": "2026-11-27"])
        try edit(
            store,
            "UPDATE record_plain SET value = '2026-11-26' WHERE record_seq = (SELECT seq FROM records WHERE id = ?)",
            [first.id.lowercasedString])
        for condition in [
            PlainCondition.equals("day", "2026-11-26"), .hasPrefix("day", "2026-11-26"),
            .between("day", lower: "2026-11-26", upper: "2026-11-26"),
        ] {
            expectStoreError(.recordTampered, item: first.id.lowercasedString) {
                _ = try store.find(RecordQuery(collection: "c", plain: [condition]))
            }
        }
        try edit(
            store, "DELETE FROM record_plain WHERE record_seq = (SELECT seq FROM records WHERE id = ?)",
            [third.id.lowercasedString])
        // An extra row for a key the record does not have, and a row for no record.
        try edit(
            store,
            "INSERT INTO record_plain (record_seq, key, value) SELECT seq, 'team', 'x' FROM records WHERE id = ?",
            [second.id.lowercasedString])
        try edit(store, "INSERT INTO record_plain (record_seq, key, value) VALUES (9999, 'day', '2026-11-25')")
        let report = try store.verify()
        #expect(report.recordsChecked == 3)
        let tampered = report.problems.filter { $0.code == .recordTampered }
        #expect(
            tampered.compactMap(\.context.item).sorted()
                == ([first, second, third].map { $0.id.lowercasedString } + ["seq 9999"]).sorted(), "\(tampered)")
        #expect(
            tampered.contains { $0.context.item == first.id.lowercasedString && $0.message.contains("different: day") })
        #expect(
            tampered.contains { $0.context.item == second.id.lowercasedString && $0.message.contains("extra: team") })
        #expect(
            tampered.contains { $0.context.item == third.id.lowercasedString && $0.message.contains("missing: day") })
    }

    @Test(
        "an edited blind-index entry: find reports indexEntryMismatch, a truncated-token collision is only filtered; verify reports each (B4d)",
        arguments: DatabaseEncryption.allCases)
    func editedIndexEntry(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(
            at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        let a = try store.put(collection: "c", type: "t", data: ["ssn": "123-45-6789"])
        let b = try store.put(collection: "c", type: "t", data: ["ssn": "987-65-4321"])
        let c = try store.put(collection: "c", type: "t", data: ["ssn": "123-45-6789"])
        try store.createIndex(collection: "c", fields: ["ssn"], bits: 64)
        let wanted = RecordQuery(collection: "c", fields: [.equals("ssn", "123-45-6789")])
        #expect(try store.find(wanted).map(\.id) == [a.id, c.id])
        // b's entry given a's token: the index now selects b for a's value.
        try edit(
            store,
            """
            UPDATE blind_index_entries SET token = (SELECT token FROM blind_index_entries WHERE record_seq =
              (SELECT seq FROM records WHERE id = ?)) WHERE record_seq = (SELECT seq FROM records WHERE id = ?)
            """, [a.id.lowercasedString, b.id.lowercasedString])
        expectStoreError(.indexEntryMismatch, item: b.id.lowercasedString) { _ = try store.find(wanted) }
        // c's entry deleted: hidden from the index (only verify can see that).
        try edit(
            store, "DELETE FROM blind_index_entries WHERE record_seq = (SELECT seq FROM records WHERE id = ?)",
            [c.id.lowercasedString])
        let report = try store.verify()
        #expect(items(report, .indexEntryMismatch) == [b.id.lowercasedString, c.id.lowercasedString].sorted())
        #expect(report.problems.count == 2)
        #expect(report.problems.contains { $0.message.contains("different: ssn") })
        #expect(report.problems.contains { $0.message.contains("missing: ssn") })

        // A one-bit index: tokens collide by design, so candidates that do not match are dropped without an error.
        let other = try StoreDirectory()
        let small = try EncryptedStore.create(
            at: other.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        for value in 0..<16 { _ = try small.put(collection: "c", type: "t", data: ["v": String(value)]) }
        try small.createIndex(collection: "c", fields: ["v"], bits: 1)
        let found = try small.find(RecordQuery(collection: "c", fields: [.equals("v", "7")]))
        #expect(found.map { $0.data["v"] } == ["7"])
        #expect(try small.verify().problems.isEmpty)
    }

    @Test("an observation of an edited type column ends with recordTampered", arguments: DatabaseEncryption.allCases)
    func observedTamper(encryption: DatabaseEncryption) async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(
            at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        let note = try await store.put(collection: "c", type: "note", data: ["body": "a"])
        try edit(store, "UPDATE records SET type = 'memo' WHERE id = ?", [note.id.lowercasedString])
        var iterator = store.observe(RecordQuery(collection: "c", types: ["memo"])).makeAsyncIterator()
        do {
            _ = try await iterator.next()
            Issue.record("the observation answered with a record that does not match")
        } catch let error as E3DBError {
            #expect(error.code == .recordTampered)
            #expect(error.context.item == note.id.lowercasedString)
        }
    }

    /// A store of `count` records, closed (its WAL checkpointed into the file), the database file's size, and what
    /// opens its file outside the store (the path, or an E3DBSQLite URI under the page key).
    func closedStore(_ dir: StoreDirectory, count: Int, encryption: DatabaseEncryption) throws -> (Int, String) {
        let location: String
        do {
            let store = try EncryptedStore.create(
                at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
            let filler = String(repeating: "x", count: 300)
            _ = try store.put(
                collection: "c", records: (0..<count).map { ("t", ["n": String($0), "f": filler], ["n": String($0)]) })
            location = try store.databaseLocation()
        }
        // Everything in the main file, so that the edits below are what SQLite reads.
        try DatabaseQueue(path: location).writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
        return (try FileManager.default.attributesOfItem(atPath: dir.database)[.size] as? Int ?? 0, location)
    }

    @Test(
        "a truncated file is storeCorrupted; verify reports the damage and the unreadable records, and goes on (B9a)",
        arguments: DatabaseEncryption.allCases)
    func truncatedFile(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let (size, _) = try closedStore(dir, count: 400, encryption: encryption)
        #expect(size > 100_000)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: dir.database))
        try handle.truncate(atOffset: UInt64(size / 2))
        try handle.close()
        // Opening reads the schema and the header; where the cut falls decides whether that already fails.
        let store: EncryptedStore
        do {
            store = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        } catch {
            #expect(error.code == .storeCorrupted, "\(error)")
            return
        }
        expectStoreError(.storeCorrupted) { _ = try store.find(RecordQuery(collection: "c")) }
        // verify reports the damage instead of stopping at it.
        let report = try store.verify()
        #expect(items(report, .storeCorrupted).contains("database"))
        #expect(report.recordsChecked < 400, "\(report.recordsChecked)")
    }

    @Test(
        "a zeroed page is storeCorrupted; verify reports it and checks the other records (B9d)",
        arguments: DatabaseEncryption.allCases)
    func zeroedPage(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        let (_, location) = try closedStore(dir, count: 400, encryption: encryption)
        // A leaf page of the records table, from the middle of the collection.
        let pages = try DatabaseQueue(path: location).read { db in
            try Int.fetchAll(
                db, sql: "SELECT pageno FROM dbstat WHERE name = 'records' AND pagetype = 'leaf' ORDER BY pageno")
        }
        let page = try #require(pages.count > 10 ? pages[pages.count / 2] : nil)
        let pageSize = try DatabaseQueue(path: location).read { db in try Int.fetchOne(db, sql: "PRAGMA page_size")
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: dir.database))
        try handle.seek(toOffset: UInt64((page - 1) * (pageSize ?? 4096)))
        try handle.write(contentsOf: Data(count: 4096))
        try handle.close()
        let store = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        expectStoreError(.storeCorrupted) { _ = try store.find(RecordQuery(collection: "c")) }
        let report = try store.verify()
        #expect(items(report, .storeCorrupted).contains("database"))
        #expect(report.recordsChecked > 350, "\(report.recordsChecked)")
        #expect(report.recordsChecked < 400, "\(report.recordsChecked)")
        // The records on the zeroed page are reported one by one, by id (read from the id index).
        let unreadable = report.problems.filter { $0.code == .storeCorrupted && $0.context.item != "database" }
        #expect(unreadable.count == 400 - report.recordsChecked, "\(report.problems)")
        #expect(unreadable.allSatisfy { UUID(uuidString: $0.context.item ?? "") != nil }, "\(unreadable)")
    }

    @Test("a file whose header is not SQLite's is storeCorrupted at open (B9c)", arguments: DatabaseEncryption.allCases)
    func notADatabase(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        _ = try closedStore(dir, count: 10, encryption: encryption)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: dir.database))
        try handle.write(contentsOf: Data((0..<100).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }))
        try handle.close()
        expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
    }
}
