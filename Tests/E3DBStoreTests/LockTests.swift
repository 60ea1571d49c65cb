import Dispatch
import E3DBKit
import E3DBSQLite
import E3DBTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

@testable import E3DBStore

/// `lock()` and `unlock(_:)`: one state that every call and every new connection reads; a lock never waits for an unlock.
@Suite("E3DBStore: lock and unlock")
struct LockTests {
    /// A store with something in every kind of table, and connections open: record readers and the pool's.
    static func usedStore(_ dir: StoreDirectory) throws -> (EncryptedStore, RecordReference) {
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let record = try store.put(collection: "c", type: "t", data: ["k": "v"], plain: ["p": "1"])
        try store.put(collection: "c", key: "kept", type: "t", data: ["k": "v"])
        _ = try store.createIndex(collection: "c", fields: ["k"], bits: 16)
        try store.setSetting(["x"], forKey: "s")
        _ = try store.putFile(at: "/a.txt", data: Data("a".utf8), attachedTo: record.id)
        _ = try store.get(collection: "c", id: record.id)
        _ = try store.find(RecordQuery(collection: "c"))
        _ = try store.indexes(collection: "c")
        _ = try store.settingKeys()
        _ = try store.count()
        return (store, record)
    }

    @Test("lock() closes the idle record readers; a locked store refuses every call, synchronous and async")
    func lockedStoreRefusesEveryCall() async throws {
        let dir = try StoreDirectory()
        let (store, record) = try Self.usedStore(dir)
        _ = try await store.get(collection: "c", id: record.id)
        #expect(store.readers.openConnections.now >= 1)
        store.lock()
        #expect(store.isLocked)
        #expect(store.readers.openConnections.now == 0, "lock() closed the idle record readers")
        Self.synchronousCallsRefuse(store, record)
        await expectAsyncStoreError(.storeLocked) { _ = try await store.get(collection: "c", id: record.id) }
        await expectAsyncStoreError(.storeLocked) { _ = try await store.get(collection: "c", key: "kept") }
        await expectAsyncStoreError(.storeLocked) { try await store.put(collection: "c", type: "t", data: [:]) }
        await expectAsyncStoreError(.storeLocked) {
            _ = try await store.put(collection: "c", records: [("t", [:], [:])])
        }
        await expectAsyncStoreError(.storeLocked) {
            try await store.put(collection: "c", key: "kept", type: "t", data: [:])
        }
        await expectAsyncStoreError(.storeLocked) {
            try await store.update(collection: "c", id: record.id, expectedVersion: 1, data: [:])
        }
        await expectAsyncStoreError(.storeLocked) { try await store.delete(collection: "c", id: record.id) }
        await expectAsyncStoreError(.storeLocked) { try await store.delete(collection: "c", key: "kept") }
        await expectAsyncStoreError(.storeLocked) { _ = try await store.find(RecordQuery(collection: "c")) }
        await expectAsyncStoreError(.storeLocked) { try await store.rotateKey(collection: "c") }
        await expectAsyncStoreError(.storeLocked) { _ = try await store.keyStatus(collection: "c") }
        await expectAsyncStoreError(.storeLocked) {
            for try await _ in store.records(matching: RecordQuery(collection: "c")) {}
        }
        await expectAsyncStoreError(.storeLocked) {
            for try await _ in store.observe(RecordQuery(collection: "c")) {}
        }
        #expect(store.readers.openConnections.now == 0)
        try await store.unlock(passphrase("p"))
        #expect(!store.isLocked)
        #expect(try await store.get(collection: "c", id: record.id).data == ["k": "v"])
    }

    /// Every synchronous call, on a locked store (a function of its own, so that the synchronous forms are chosen).
    static func synchronousCallsRefuse(_ store: EncryptedStore, _ record: RecordReference) {
        let reader = Box.PrivateKey()
        let elsewhere = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbstore-\(UUID().uuidString)")
        let calls: [(String, () throws -> Void)] = [
            ("get", { _ = try store.get(collection: "c", id: record.id) }),
            ("get key", { _ = try store.get(collection: "c", key: "kept") }),
            ("put", { try store.put(collection: "c", type: "t", data: [:]) }),
            ("put records", { _ = try store.put(collection: "c", records: [("t", [:], [:])]) }),
            ("put key", { try store.put(collection: "c", key: "kept", type: "t", data: [:]) }),
            ("update", { try store.update(collection: "c", id: record.id, expectedVersion: 1, data: [:]) }),
            ("delete", { try store.delete(collection: "c", id: record.id) }),
            ("delete key", { try store.delete(collection: "c", key: "kept") }),
            ("find", { _ = try store.find(RecordQuery(collection: "c")) }),
            ("count", { _ = try store.count() }),
            ("collections", { _ = try store.collections() }),
            ("rotate", { try store.rotateKey(collection: "c") }),
            ("key status", { _ = try store.keyStatus(collection: "c") }),
            ("create index", { _ = try store.createIndex(collection: "c", fields: ["other"]) }),
            ("indexes", { _ = try store.indexes(collection: "c") }),
            ("drop index", { try store.dropIndex(collection: "c", name: "k") }),
            ("set setting", { try store.setSetting(["y"], forKey: "s") }),
            ("setting", { _ = try store.setting([String].self, forKey: "s") }),
            ("remove setting", { try store.removeSetting(forKey: "s") }),
            ("setting keys", { _ = try store.settingKeys() }),
            ("put file", { _ = try store.putFile(at: "/b.txt", data: Data("b".utf8)) }),
            ("file", { _ = try store.file(at: "/a.txt") }),
            ("files", { _ = try store.files(under: "/") }),
            ("files of a record", { _ = try store.files(attachedTo: record.id) }),
            ("read file", { _ = try store.readFile(at: "/a.txt") }),
            ("move file", { _ = try store.moveFile(from: "/a.txt", to: "/c.txt") }),
            ("delete file", { _ = try store.deleteFile(at: "/a.txt") }),
            ("remove orphan files", { _ = try store.removeOrphanFiles() }),
            ("remove stale database files", { _ = try store.removeStaleDatabaseFiles() }),
            ("share", { _ = try store.share(collection: "c", with: reader.publicKey) }),
            ("public key", { _ = try store.publicKey }),
            ("export", { try store.export(collection: "c", to: elsewhere, readerPublicKey: reader.publicKey) }),
            ("import", { try store.importCollection(from: elsewhere, reader: reader, as: "d") }),
            ("verify", { _ = try store.verify() }),
            ("statistics", { _ = try store.statistics() }),
            ("write counter", { _ = try store.writeCounter }),
            ("identities", { _ = try store.identities() }),
            ("add identity", { _ = try store.addIdentity(publicKey: reader.publicKey) }),
            ("remove identity", { try store.removeIdentity(publicKey: reader.publicKey) }),
            ("change credential", { try store.changeCredential(to: passphrase("q"), kdfParameters: testKDF) }),
        ]
        for (what, call) in calls {
            do {
                try call()
                Issue.record("\(what): a locked store answered")
            } catch let error as E3DBError {
                #expect(error.code == .storeLocked, "\(what): \(error)")
            } catch {
                Issue.record("\(what): \(error)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: elsewhere.path), "the export wrote nothing")
    }

    /// A `lock()` on another thread at `point` inside an unlock (through the async unlock, which runs on a thread of
    /// its own): the lock returns without waiting for the unlock, the unlock fails with `storeLocked`, and the store
    /// ends locked, its page key forgotten and no reader open; a second unlock opens it again.
    @Test(
        "lock() during an unlock does not wait for it, and the store ends locked",
        arguments: [EncryptedStore.TestPoint.unlockAfterKeyDerivation, .unlockBeforeStateCheck, .unlockBeforeCommit])
    func lockDuringUnlock(_ point: EncryptedStore.TestPoint) async throws {
        let dir = try StoreDirectory()
        let (store, record) = try Self.usedStore(dir)
        store.lock()
        let lockReturned = Mutex<Bool?>(nil)
        store.setTestHook(point) {
            store.setTestHook(point, nil)
            let done = DispatchSemaphore(value: 0)
            let locker = Thread {
                store.lock()
                done.signal()
            }
            locker.start()
            // Bounded only so that a lock that waits for this unlock (a regression) fails instead of hanging: it
            // returns at once otherwise.
            let returned = done.wait(timeout: .now() + 60) == .success
            lockReturned.withLock { $0 = returned }
        }
        await expectAsyncStoreError(.storeLocked) { try await store.unlock(passphrase("p")) }
        #expect(lockReturned.withLock { $0 } == true, "lock() returned while the unlock was running")
        #expect(store.isLocked)
        expectStoreError(.storeLocked) { _ = try store.get(collection: "c", id: record.id) }
        await expectAsyncStoreError(.storeLocked) { _ = try await store.get(collection: "c", id: record.id) }
        expectStoreError(.storeLocked) { _ = try store.indexes(collection: "c") }
        #expect(store.readers.openConnections.now == 0)
        #expect(store.cachedRecordCount == 0)
        if let uri = store.databaseURI { #expect(E3DBSQLite.isKeyMissing(inURI: uri), "the page key is forgotten") }
        try await store.unlock(passphrase("p"))
        #expect(!store.isLocked)
        #expect(try await store.get(collection: "c", id: record.id).data == ["k": "v"])
        #expect(try await store.verify().problems.isEmpty)
    }

    /// An unlock whose state check fails leaves a locked store locked: calls refuse, its page key stays forgotten.
    @Test("an unlock that finds an edited state row leaves the store locked")
    func failedUnlockStaysLocked() throws {
        let dir = try StoreDirectory()
        let (store, record) = try Self.usedStore(dir)
        // A connection of the test's own (its own key handle), made while the store is unlocked.
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        store.lock()
        try raw.write { db in
            try db.execute(sql: "UPDATE collection_state SET record_count = record_count + 1 WHERE collection = 'c'")
        }
        expectStoreError(.storeTampered) { try store.unlock(passphrase("p")) }
        #expect(store.isLocked)
        expectStoreError(.storeLocked) { _ = try store.get(collection: "c", id: record.id) }
        expectStoreError(.storeLocked) { _ = try store.indexes(collection: "c") }
        if let uri = store.databaseURI { #expect(E3DBSQLite.isKeyMissing(inURI: uri), "the page key is forgotten") }
    }

    /// A read that got its keys before a `lock()` decrypts its record after it: the record is returned to it, but
    /// does not enter the cache, which stays empty while the store is locked.
    @Test("a record decrypted across a lock() stays out of the cache")
    func decryptedAcrossLockIsNotCached() throws {
        let dir = try StoreDirectory()
        let (store, record) = try Self.usedStore(dir)
        store.setCacheCapacity(16)
        store.setTestHook(.beforeCacheInsert) {
            store.setTestHook(.beforeCacheInsert, nil)
            store.lock()
        }
        #expect(try store.get(collection: "c", id: record.id).data == ["k": "v"])
        #expect(store.isLocked)
        #expect(store.cachedRecordCount == 0, "a decrypted record entered the cache of a locked store")
        try store.unlock(passphrase("p"))
        #expect(try store.get(collection: "c", id: record.id).data == ["k": "v"])
        #expect(store.cachedRecordCount == 1, "an unlocked store caches its reads")
    }
}
