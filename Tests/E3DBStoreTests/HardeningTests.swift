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

    @Test("a collection whose current key row was deleted is storeCorrupted naming the collection and key version")
    func missingCurrentKey() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let record = try store.put(collection: "c", type: "t", data: ["k": "v"])
        try store.put(collection: "c", key: "kept", type: "t", data: ["k": "v"])
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        try raw.write { db in try db.execute(sql: "DELETE FROM collection_keys WHERE collection = 'c'") }
        // A store opened after the edit: no key of collection c in memory. A write must not go on under a key of its
        // own making (the records it wrote would be unreadable).
        let edited = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        func expectMissingKey(_ what: String, _ outcome: Result<Void, any Error>) {
            guard case .failure(let error as E3DBError) = outcome else {
                Issue.record("\(what): expected storeCorrupted, got \(outcome)")
                return
            }
            #expect(error.code == .storeCorrupted, "\(what): \(error)")
            #expect(error.context.item == "c", "\(what): \(error)")
            #expect(error.context.expected == 1, "\(what): \(error)")
            #expect(error.context.part == "collection_keys", "\(what): \(error)")
            #expect(error.message.contains("key version 1"), "\(what): \(error)")
        }
        expectMissingKey("put", Result { _ = try edited.put(collection: "c", type: "t", data: ["k": "w"]) })
        expectMissingKey(
            "update",
            Result { _ = try edited.update(collection: "c", id: record.id, expectedVersion: 1, data: ["k": "w"]) })
        expectMissingKey("keyed put", Result { _ = try edited.put(collection: "c", key: "kept", type: "t", data: [:]) })
        expectMissingKey(
            "share", Result { _ = try edited.share(collection: "c", with: Box.PrivateKey().publicKey) })
        #expect(try edited.count(collection: "c") == 2, "nothing was written")
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

    @Test("a field condition picks blind indexes by field names compared by code units (\"é\", \"e\\u{301}\")")
    func indexFieldNamesByCodeUnits() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let nfc = "\u{e9}"
        let nfd = "e\u{301}"
        _ = try store.put(collection: "c", records: [])
        try store.createIndex(collection: "c", fields: [nfc], bits: 64)
        let precomposed = try store.put(collection: "c", type: "t", data: [nfc: "x"])
        let decomposed = try store.put(collection: "c", type: "t", data: [nfd: "x"])
        // A condition on "e\u{301}" once looked up the index on "é" (the names are equal as Swift `String`s) and
        // missed the record that holds it.
        #expect(try store.find(RecordQuery(collection: "c", fields: [.equals(nfd, "x")])).map(\.id) == [decomposed.id])
        #expect(try store.find(RecordQuery(collection: "c", fields: [.equals(nfc, "x")])).map(\.id) == [precomposed.id])
    }

    @Test("a compound index's fields are distinct by code units: \"é\" and \"e\\u{301}\" are two fields")
    func compoundIndexFieldsByCodeUnits() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let nfc = "\u{e9}"
        let nfd = "e\u{301}"
        let record = try store.put(collection: "c", type: "t", data: [nfc: "x", nfd: "y"])
        _ = try store.put(collection: "c", type: "t", data: [nfc: "x", nfd: "z"])
        // Set(fields) called them one field (equal as Swift `String`s) and refused the index.
        let created = try store.createIndex(collection: "c", fields: [nfc, nfd], bits: 64)
        #expect(created.records == 2)
        let query = RecordQuery(collection: "c", fields: [.equals(nfc, "x"), .equals(nfd, "y")])
        #expect(try store.find(query).map(\.id) == [record.id])
        expectStoreError(.invalidParameter) { try store.createIndex(collection: "c", fields: ["k", "k"]) }
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
