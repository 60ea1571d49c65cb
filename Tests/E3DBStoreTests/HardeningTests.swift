import E3DBKit
import E3DBStore
import E3DBTestSupport
import Foundation
import GRDB
import Testing

/// Edits of the database file that the read path must refuse, and the lock rule for queries.
@Suite("E3DBStore hardening: locked queries, id spelling, damaged index definitions")
struct HardeningTests {
    @Test("a locked store refuses a query that matches nothing")
    func lockedEmptyQuery() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        _ = try store.put(collection: "c", type: "t", data: ["k": "v"])
        store.lock()
        expectStoreError(.storeLocked) { _ = try store.find(RecordQuery(collection: "nothing-here")) }
        expectStoreError(.storeLocked) { _ = try store.find(RecordQuery(collection: "c")) }
    }

    @Test("a copy of a row under its id in upper case is recordTampered, not a second record")
    func idSpelling() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let a = try store.put(collection: "c", type: "t", data: ["secret": "alpha"])
        #expect(try store.find(RecordQuery(collection: "c")).count == 1)
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        try raw.write { db in
            let columns = try String.fetchAll(
                db, sql: "SELECT name FROM pragma_table_info('records') WHERE name != 'seq'")
            let list = columns.joined(separator: ", ")
            let values = columns.map { $0 == "id" ? "upper(id)" : $0 }.joined(separator: ", ")
            try db.execute(
                sql: "INSERT INTO records (\(list)) SELECT \(values) FROM records WHERE id = ?",
                arguments: [a.id.uuidString.lowercased()])
        }
        expectStoreError(.recordTampered) { _ = try store.find(RecordQuery(collection: "c")) }
    }

    @Test("an index definition edited to a wrong type or impossible bits is storeCorrupted, not a crash")
    func damagedIndexDefinition() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        _ = try store.put(collection: "c", type: "t", data: ["email": "a@example.com"])
        try store.createIndex(collection: "c", fields: ["email"], bits: 32)
        #expect(try store.find(RecordQuery(collection: "c", fields: [.equals("email", "a@example.com")])).count == 1)
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        for edit in [
            "UPDATE blind_indexes SET bits = -20", "UPDATE blind_indexes SET bits = 32, fields = 42",
            "UPDATE blind_indexes SET fields = 'not json', bits = 32",
        ] {
            try raw.write { db in try db.execute(sql: edit) }
            expectStoreError(.storeCorrupted) {
                _ = try store.find(RecordQuery(collection: "c", fields: [.equals("email", "a@example.com")]))
            }
        }
    }
}
