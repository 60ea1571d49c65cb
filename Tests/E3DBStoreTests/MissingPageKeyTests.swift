import E3DBKit
import E3DBSQLite
import Foundation
import GRDB
import Testing

@testable import E3DBStore

/// A store whose encrypted database's page key is no longer in this process's E3DBSQLite key registry (forgotten
/// through `E3DBSQLite.forgetKey` on the store's URI) when it needs a new connection.
@Suite("E3DBStore: the page key missing from the process")
struct MissingPageKeyTests {
    @Test("every operation that needs a new connection says the page key is missing, and unlock gives it back")
    func newConnectionWithoutTheKey() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let record = try await store.put(collection: "c", type: "t", data: ["f": "one"])
        E3DBSQLite.forgetKey(inURI: try #require(store.databaseURI))
        // The pool's idle readers are closed, and the record readers are new: every read needs a new connection.
        store.pool.releaseMemory()
        let fresh = try await EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        E3DBSQLite.forgetKey(inURI: try #require(fresh.databaseURI))
        fresh.pool.releaseMemory()
        for target in [store, fresh] {
            expectStoreError(.keyMissing) { _ = try target.count(collection: "c") }
            expectStoreError(.keyMissing) { _ = try target.get(collection: "c", id: record.id) }
            expectStoreError(.keyMissing) { _ = try target.find(RecordQuery(collection: "c")) }
            await expectAsyncStoreError(.keyMissing) { _ = try await target.get(collection: "c", id: record.id) }
            await expectAsyncStoreError(.keyMissing) { _ = try await target.find(RecordQuery(collection: "c")) }
        }
        expectStoreError(.keyMissing) { _ = try store.put(collection: "c", type: "t", data: ["f": "two"]) }
        await expectAsyncStoreError(.keyMissing) {
            for try await _ in store.observe(RecordQuery(collection: "c")) { break }
        }
        // Unlocking registers the key again under the store's URI.
        store.lock()
        try await store.unlock(passphrase("p"))
        #expect(try await store.get(collection: "c", id: record.id).data == ["f": "one"])
        #expect(try await store.count(collection: "c") == 1)
    }

    @Test(
        "a locked store is storeLocked in every call, on an idle connection or a new one, never keyMissing",
        arguments: [DatabaseEncryption.encrypted, .plain])
    func lockedStore(_ encryption: DatabaseEncryption) async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(
            at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        let record = try await store.put(collection: "c", type: "t", data: ["f": "one"])
        _ = try await store.count(collection: "c")
        store.lock()
        // First with the pool's idle connections (they still answer SQL), then with none: every read needs a new one.
        for newConnections in [false, true] {
            if newConnections { store.pool.releaseMemory() }
            expectStoreError(.storeLocked) { _ = try store.count(collection: "c") }
            expectStoreError(.storeLocked) { _ = try store.count() }
            expectStoreError(.storeLocked) { _ = try store.collections() }
            expectStoreError(.storeLocked) { _ = try store.keyStatus(collection: "c") }
            await expectAsyncStoreError(.storeLocked) { _ = try await store.keyStatus(collection: "c") }
            expectStoreError(.storeLocked) { _ = try store.get(collection: "c", id: record.id) }
            await expectAsyncStoreError(.storeLocked) { _ = try await store.find(RecordQuery(collection: "c")) }
            await expectAsyncStoreError(.storeLocked) {
                for try await _ in store.observe(RecordQuery(collection: "c")) { break }
            }
            if newConnections {
                // A connection the pool opens now (for a caller that passed its lock check first) is storeLocked.
                expectStoreError(.storeLocked) { _ = try databaseCall("reading") { try store.pool.read { _ in 0 } } }
            }
        }
        try await store.unlock(passphrase("p"))
        #expect(try await store.count(collection: "c") == 1)
        #expect(try await store.collections() == ["c"])
        #expect(try await store.keyStatus(collection: "c") == (1, 0))
        for try await records in store.observe(RecordQuery(collection: "c")) {
            #expect(records.map(\.data) == [["f": "one"]])
            break
        }
    }
}
