import E3DBKit
import Foundation
import GRDB
import Synchronization
import Testing

@testable import E3DBStore

@Suite("E3DBStore: bulk writes encrypted on every processor")
struct BulkWriteTests {
    /// Enough records that `put(collection:records:)` splits the encryption across threads.
    static let count = 300

    static func records() -> [(type: String, data: RecordData, plain: RecordData)] {
        (0..<count).map { i in
            (
                type: i % 2 == 0 ? "even" : "odd",
                data: ["n": String(i), "email": "user\(i)@example.com", "note": "Zoë \(i)"],
                plain: ["bucket": String(i % 7)]
            )
        }
    }

    @Test("a large batch keeps its order, ids and fields; every record authenticates and its index tokens find it")
    func largeBatch() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("bulk"), kdfParameters: testKDF)
        _ = try store.put(collection: "c", records: [])
        try store.createIndex(collection: "c", fields: ["email"], bits: 64)
        try store.createIndex(collection: "c", fields: ["note"], bits: 64)
        let input = BulkWriteTests.records()
        let refs = try store.put(collection: "c", records: input)
        #expect(refs.count == input.count)
        #expect(Set(refs.map(\.id)).count == input.count)
        // Random version 4 UUIDs (RFC 9562 variant).
        for ref in refs {
            let text = Array(ref.id.uuidString.lowercased())
            #expect(text[14] == "4" && "89ab".contains(text[19]), "\(ref.id)")
        }
        for (ref, record) in zip(refs, input) {
            let read = try store.get(collection: "c", id: ref.id)
            #expect(read.data == record.data)
            #expect(read.meta.type == record.type)
            #expect(read.meta.plain == record.plain)
        }
        // Written in batch order: a scan returns them in the order given.
        #expect(try store.find(RecordQuery(collection: "c")).map(\.id) == refs.map(\.id))
        // One token per record and index, each finding exactly its record (a non-ASCII value goes through NFC).
        for i in [0, 1, 150, BulkWriteTests.count - 1] {
            let byEmail = try store.find(
                RecordQuery(collection: "c", fields: [.equals("email", "user\(i)@example.com")]))
            #expect(byEmail.map(\.id) == [refs[i].id])
            let decomposed = "Zoe\u{0308} \(i)"
            let byNote = try store.find(RecordQuery(collection: "c", fields: [.equals("note", decomposed)]))
            #expect(byNote.map(\.id) == [refs[i].id])
        }
        let tokens = try DatabaseQueue(path: try store.databaseLocation()).read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM blind_index_entries")
        }
        #expect(tokens == 2 * BulkWriteTests.count)
        #expect(try store.verify().problems.isEmpty)
    }

    @Test("records are encrypted before the write transaction opens: a key mode set at its BEGIN reaches none")
    func encryptedBeforeTheTransaction() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("order"), kdfParameters: testKDF)
        _ = try store.put(collection: "c", records: [])
        // When the writer's connection begins a transaction, new records switch to one data key per record: a
        // record encrypted inside the transaction would share one `edk` across its fields.
        let begins = Mutex(0)
        store.pool.writeWithoutTransaction { db in
            db.trace(options: .statement) { event in
                guard case .statement(let statement) = event, statement.sql.hasPrefix("BEGIN") else { return }
                begins.withLock { $0 += 1 }
                store.fieldKeyMode = .perRecord
            }
        }
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        // A small batch (encrypted on the calling thread) and a large one (on every processor).
        for count in [3, BulkWriteTests.count] {
            store.fieldKeyMode = .perField
            let before = begins.withLock { $0 }
            let refs = try store.put(collection: "c", records: Array(BulkWriteTests.records().prefix(count)))
            #expect(begins.withLock { $0 } > before, "the put opened a write transaction")
            for ref in refs {
                let document = try #require(
                    try raw.read { db in
                        try Data.fetchOne(
                            db, sql: "SELECT document FROM records WHERE id = ?", arguments: [ref.id.lowercasedString])
                    })
                let json = try #require(try JSONSerialization.jsonObject(with: document) as? [String: Any])
                let fields = try #require(json["data"] as? [String: String])
                let dataKeys = Set(fields.values.map { $0.split(separator: ".").first ?? "" })
                #expect(
                    fields.count == 3 && dataKeys.count == 3,
                    "record \(ref.id) was encrypted inside the transaction (its fields share a data key)")
            }
        }
    }

    @Test("a paged scan of one collection among interleaved others returns its records once each, in either order")
    func pagedScanAmongCollections() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("scan"), kdfParameters: testKDF)
        var mine: [UUID] = []
        for i in 0..<40 {
            mine.append(try await store.put(collection: "mine", type: "t\(i % 3)", data: ["n": String(i)]).id)
            _ = try await store.put(
                collection: "other",
                records: Array(repeating: (type: "t", data: ["x": "y"], plain: RecordData()), count: i % 4))
        }
        var scanned: [UUID] = []
        for try await record in store.records(matching: RecordQuery(collection: "mine"), pageSize: 7) {
            scanned.append(record.id)
        }
        #expect(scanned == mine)
        var backwards: [UUID] = []
        for try await record in store.records(matching: RecordQuery(collection: "mine", descending: true), pageSize: 7)
        {
            backwards.append(record.id)
        }
        #expect(backwards == mine.reversed())
        let typed = try await store.find(RecordQuery(collection: "mine", types: ["t1"]))
        #expect(typed.map { $0.data["n"] } == stride(from: 1, to: 40, by: 3).map { String($0) })
    }

    @Test(
        "documents written by a bulk put are canonical E3DB JSON, also with keys that need escaping or sort by UTF-16")
    func canonicalDocuments() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("canon"), kdfParameters: testKDF)
        let data: RecordData = [
            "z": "last", "a\"b": "quote", "é": "accent", "\u{1F600}": "astral", "\u{FF61}": "bmp", "\u{7F}": "del",
            "tab\t": "tab", "": "empty key",
        ]
        let refs = try store.put(
            collection: "c", records: Array(repeating: (type: "t\"ype", data: data, plain: ["p\\": "v\n"]), count: 40))
        let documents = try DatabaseQueue(path: try store.databaseLocation()).read { db in
            try Data.fetchAll(db, sql: "SELECT document FROM records ORDER BY seq")
        }
        #expect(documents.count == refs.count)
        for bytes in documents {
            let document = try EncryptedDocument(jsonData: bytes)
            #expect(document.jsonData() == bytes)
            #expect(document.data.members.count == data.members.count)
        }
        for ref in refs { #expect(try store.get(collection: "c", id: ref.id).data == data) }
    }
}
