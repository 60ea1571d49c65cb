import E3DBKit
import E3DBStore
import E3DBTestSupport
import Foundation
import GRDB
import Testing

/// Records named by a key the app chooses (YapDatabase's `setObject:forKey:inCollection:`).
@Suite("E3DBStore keyed records")
struct KeyedRecordTests {
    @Test("put by key creates, then replaces; get and delete by key; the id is derived from store, collection and key")
    func putGetDelete() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let first = try store.put(collection: "prefs", key: "theme", type: "pref", data: ["v": "dark"])
        #expect(first.version == 1)
        #expect(first.id == (try store.recordID(forKey: "theme", in: "prefs")))
        let second = try store.put(collection: "prefs", key: "theme", type: "pref", data: ["v": "light"])
        #expect(second == RecordReference(id: first.id, version: 2))
        #expect(try store.get(collection: "prefs", key: "theme").data == ["v": "light"])
        #expect(try store.get(collection: "prefs", id: first.id).version == 2)
        #expect(try store.count(collection: "prefs") == 1)

        // Another collection, another key, another store: other ids.
        #expect(try store.recordID(forKey: "theme", in: "other") != first.id)
        #expect(try store.recordID(forKey: "Theme", in: "prefs") != first.id)
        let otherDir = try StoreDirectory()
        let other = try EncryptedStore.create(at: otherDir.url, credential: passphrase("p"), kdfParameters: testKDF)
        #expect(try other.recordID(forKey: "theme", in: "prefs") != first.id)

        expectStoreError(.versionConflict) {
            try store.put(collection: "prefs", key: "theme", type: "pref", data: ["v": "x"], expectedVersion: 1)
        }
        expectStoreError(.versionConflict) {
            try store.put(collection: "prefs", key: "new", type: "pref", data: ["v": "x"], expectedVersion: 3)
        }
        #expect(
            try store.put(collection: "prefs", key: "new", type: "pref", data: ["v": "x"], expectedVersion: 0).version
                == 1)
        #expect(
            try store.put(collection: "prefs", key: "theme", type: "pref", data: ["v": "y"], expectedVersion: 2)
                .version == 3)
        expectStoreError(.invalidParameter) { try store.put(collection: "prefs", key: "", type: "p", data: [:]) }

        expectStoreError(.versionConflict) { try store.delete(collection: "prefs", key: "theme", expectedVersion: 1) }
        try store.delete(collection: "prefs", key: "theme")
        expectStoreError(.recordNotFound) { _ = try store.get(collection: "prefs", key: "theme") }
        expectStoreError(.recordNotFound) { try store.delete(collection: "prefs", key: "theme") }
        #expect(try store.put(collection: "prefs", key: "theme", type: "pref", data: ["v": "again"]).version == 1)
        #expect(try store.verify().problems.isEmpty)
    }

    @Test("concurrent puts of one key from many tasks: every write lands as its own version, none is lost")
    func concurrentPuts() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let writers = 8
        let each = 5
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<writers {
                group.addTask {
                    for i in 0..<each {
                        try await store.put(collection: "c", key: "counter", type: "n", data: ["by": "\(w)-\(i)"])
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await store.get(collection: "c", key: "counter").version == writers * each)
        #expect(try await store.count(collection: "c") == 1)
    }

    @Test("a keyed record's row moved to another key's id does not authenticate there")
    func movedRow() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let alice = try store.put(collection: "users", key: "alice", type: "u", data: ["role": "admin"])
        let bob = try store.put(collection: "users", key: "bob", type: "u", data: ["role": "guest"])
        // Give bob's id to alice's row (admin): a read of "bob" must not return alice's data.
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        try raw.write { db in
            try db.execute(sql: "DELETE FROM records WHERE id = ?", arguments: [bob.id.lowercasedString])
            try db.execute(
                sql: "UPDATE records SET id = ? WHERE id = ?",
                arguments: [bob.id.lowercasedString, alice.id.lowercasedString])
        }
        expectStoreError(.recordTampered, item: bob.id.lowercasedString) {
            _ = try store.get(collection: "users", key: "bob")
        }
    }
}
