import Dispatch
import E3DBKit
import E3DBTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

@testable import E3DBStore

/// The store's async API (GRDB's async database access): the same results as the synchronous one, and no
/// cooperative thread held while the database is busy.
@Suite("E3DBStore: the async API")
struct AsyncStoreTests {
    @Test(
        "put, get, find, update, delete, keyed records and rotation give through the async API what the sync API gives")
    func sameResults() async throws {
        let dir = try StoreDirectory()
        _ = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let store = try await EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        let one = try await store.put(
            collection: "c", type: "note", data: ["n": "0", "k": "a"], plain: ["day": "2026-12-06"])
        var batch: [(type: String, data: RecordData, plain: RecordData)] = []
        for i in 1..<30 {
            batch.append((i % 2 == 0 ? "note" : "task", ["n": "\(i)", "k": i % 3 == 0 ? "a" : "b"], [:]))
        }
        let many = try await store.put(collection: "c", records: batch)
        #expect(one.version == 1 && many.count == 29 && many.allSatisfy { $0.version == 1 })
        let keyed = try await store.put(collection: "c", key: "settings", type: "kv", data: ["theme": "dark"])
        #expect(keyed.id == (try store.recordID(forKey: "settings", in: "c")))

        // Reads: the async forms return exactly what the sync ones return.
        for reference in [one, keyed] + many {
            #expect(
                try await store.get(collection: "c", id: reference.id)
                    == store.getSync(collection: "c", id: reference.id))
        }
        #expect(try await store.get(collection: "c", key: "settings").data == ["theme": "dark"])
        _ = try await store.createIndex(collection: "c", fields: ["k"], bits: 16)
        let queries = [
            RecordQuery(collection: "c"),
            RecordQuery(collection: "c", types: ["task"]),
            RecordQuery(collection: "c", plain: [.equals("day", "2026-12-06")]),
            RecordQuery(collection: "c", fields: [.equals("k", "a")]),
            RecordQuery(collection: "c", fields: [.equals("k", "b")], limit: 4, descending: true),
        ]
        for query in queries {
            let sync = try store.findSync(query)
            #expect(!sync.isEmpty)
            #expect(try await store.find(query) == sync)
            var scanned: [StoredRecord] = []
            for try await record in store.records(matching: query, pageSize: 3) { scanned.append(record) }
            #expect(scanned == sync)
        }

        // Writes: update, a version conflict, keyed replace, deletes, each seen by the sync API and another store.
        #expect(try await store.update(collection: "c", id: one.id, expectedVersion: 1, data: ["n": "0'"]).version == 2)
        await expectAsyncStoreError(.versionConflict, item: one.id.uuidString.lowercased()) {
            _ = try await store.update(collection: "c", id: one.id, expectedVersion: 1, data: ["n": "lost"])
        }
        #expect(
            try await store.put(
                collection: "c", key: "settings", type: "kv", data: ["theme": "light"], expectedVersion: 1
            )
            .version == 2)
        try await store.delete(collection: "c", id: many[0].id, expectedVersion: 1)
        try await store.delete(collection: "c", key: "settings")
        await expectAsyncStoreError(.recordNotFound) { _ = try await store.get(collection: "c", id: many[0].id) }
        await expectAsyncStoreError(.recordNotFound) { _ = try await store.get(collection: "c", key: "settings") }
        let other = try EncryptedStore.openSync(at: dir.url, credential: passphrase("p"))
        #expect(try other.getSync(collection: "c", id: one.id).data == ["n": "0'"])
        #expect(try await other.count(collection: "c") == 29)

        // Rotation, with progress, then everything reads under the new key in both APIs.
        let seen = Mutex<[Int]>([])
        let rotation = try await store.rotateKey(collection: "c", batchSize: 10) { progress in
            seen.withLock { $0.append(progress.recordsDone) }
        }
        #expect(rotation.keyVersion == 2 && rotation.recordsDone == 29)
        #expect(seen.withLock { $0 } == [10, 20, 29])
        let status = try await store.keyStatus(collection: "c")
        let otherStatus = try other.keyStatusSync(collection: "c")
        #expect(status.keyVersion == 2 && status.recordsUnderOlderKeys == 0)
        #expect(otherStatus.keyVersion == 2 && otherStatus.recordsUnderOlderKeys == 0)
        let all = try await store.find(RecordQuery(collection: "c"))
        let otherAll = try other.findSync(RecordQuery(collection: "c"))
        #expect(all.count == 29 && all == otherAll)
        #expect(try await other.verify().problems.isEmpty)
        await expectAsyncStoreError(.wrongKey) {
            _ = try await EncryptedStore.open(at: dir.url, credential: passphrase("not it"))
        }
    }

    /// The scenario runs in a child process of its own (an exit test), so that its reads compete only with its own
    /// writers for the cooperative threads: in the full parallel run the other suites' work kept these reads from
    /// running for longer than the lock can be held (the store's 10 s busy timeout), which said nothing about the
    /// store.
    @Test("many concurrent async callers wait for a write lock another connection holds without holding a thread")
    func concurrentCallersKeepThePoolUsable() async {
        await #expect(processExitsWith: .success) { try await Self.lockScenario() }
    }

    /// Why the child process of an exit test failed (it exits with a failure when the body throws).
    struct ScenarioFailure: Error {
        let what: String
        init(_ what: String) { self.what = what }
    }

    static func lockScenario() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let seed = try await store.put(collection: "c", type: "t", data: ["n": "seed"])
        // Another connection takes the store's write lock on a thread of its own and keeps it until released (by
        // the test, or by a watchdog after 8 s, inside the store's 10 s busy timeout).
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let watchdogFired = Atomic<Bool>(false)
        let holder = Task {
            try await offCooperativePool {
                try raw.writeWithoutTransaction { db in
                    try db.execute(sql: "BEGIN IMMEDIATE")
                    held.signal()
                    release.wait()
                    try db.execute(sql: "ROLLBACK")
                }
            }
        }
        try await offCooperativePool { held.wait() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 8) {
            watchdogFired.store(true, ordering: .sequentiallyConsistent)
            release.signal()
        }
        // Four times more writers than any machine's cooperative threads: with a blocking API they would hold
        // every one of them, and nothing below could run until the lock is released.
        let writers = 4 * max(8, ProcessInfo.processInfo.activeProcessorCount)
        let puts = Task {
            try await withThrowingTaskGroup(of: RecordReference.self) { group in
                for i in 0..<writers {
                    group.addTask { try await store.put(collection: "c", type: "t", data: ["n": "\(i)"]) }
                }
                return try await group.reduce(into: [RecordReference]()) { $0.append($1) }
            }
        }
        // Meanwhile the pool runs other work: reads (WAL readers do not wait for the writer) and plain tasks.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<writers {
                group.addTask {
                    let record = try await store.get(collection: "c", id: seed.id)
                    guard record.data == ["n": "seed"] else { throw ScenarioFailure("a read: \(record.data)") }
                    let answer = await Task.detached { 42 }.value
                    guard answer == 42 else { throw ScenarioFailure("a detached task") }
                }
            }
            try await group.waitForAll()
        }
        guard !watchdogFired.load(ordering: .sequentiallyConsistent) else {
            throw ScenarioFailure("the reads waited for the write lock's release: the writers held the threads")
        }
        release.signal()
        try await holder.value
        let written = try await puts.value
        guard Set(written.map(\.id)).count == writers else { throw ScenarioFailure("writers: \(written.count)") }
        guard try await store.find(RecordQuery(collection: "c")).count == writers + 1 else {
            throw ScenarioFailure("the records found")
        }
        guard try await store.verify().problems.isEmpty else { throw ScenarioFailure("verify") }
    }

    @Test("an async put whose key is rotated away before its transaction starts over with the new key")
    func rotationDuringAsyncPut() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let first = try await store.put(collection: "c", type: "t", data: ["n": "first"])
        // Another connection rotates the key (and, no record being left under it, deletes key 1) while the batch is
        // encrypted under key 1 and its write transaction is not open yet.
        let other = try EncryptedStore.openSync(at: dir.url, credential: passphrase("p"))
        let attempts = rotateDuringFirstPut(store) { try other.rotateKeySync(collection: "c") }
        let references = try await store.put(
            collection: "c", records: [("t", ["n": "a"], [:]), ("t", ["n": "b"], [:])])
        #expect(attempts.value == 2, "the put started over once")
        #expect(try other.keyStatusSync(collection: "c") == (2, 0))
        #expect(try await store.get(collection: "c", id: first.id).data == ["n": "first"])
        for (reference, n) in zip(references, ["a", "b"]) {
            #expect(try other.getSync(collection: "c", id: reference.id).data == ["n": n])
        }
        #expect(try await other.verify().problems.isEmpty)
    }

    @Test("an async update or keyed put under a key another connection rotated away starts over with the new key")
    func rotationBeforeAsyncUpdate() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let record = try await store.put(collection: "c", type: "t", data: ["n": "first"])
        let keyed = try await store.put(collection: "c", key: "k", type: "t", data: ["n": "keyed"])
        // `store` keeps collection c's key 1 in memory; another connection rotates to key 2 and, no record being left
        // under key 1, deletes it.
        let other = try EncryptedStore.openSync(at: dir.url, credential: passphrase("p"))
        #expect(try other.rotateKeySync(collection: "c").keyVersion == 2)
        #expect(
            try await store.update(collection: "c", id: record.id, expectedVersion: 1, data: ["n": "second"]).version
                == 2)
        #expect(
            try await store.put(collection: "c", key: "k", type: "t", data: ["n": "keyed 2"]).version
                == keyed.version + 1)
        // Written under key 2, so every connection reads them, and nothing is left under a deleted key.
        #expect(try other.getSync(collection: "c", id: record.id).data == ["n": "second"])
        #expect(try other.getSync(collection: "c", id: keyed.id).data == ["n": "keyed 2"])
        #expect(try other.keyStatusSync(collection: "c") == (2, 0))
        #expect(try await other.verify().problems.isEmpty)
    }

    @Test("many more concurrent async reads than the record readers' bound all complete within the bound")
    func readersAreBounded() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let written = try await store.put(
            collection: "c", records: (0..<16).map { (type: "t", data: ["n": "\($0)"], plain: RecordData()) })
        // No cache: every get decrypts again, so the reads overlap for longer.
        store.setCacheCapacity(0)
        let readers = 64 * RecordReaders.maximumOpen
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<readers {
                group.addTask {
                    if i % 8 == 0 {
                        let found = try await store.find(RecordQuery(collection: "c", limit: 4))
                        #expect(found.count == 4)
                    } else {
                        let record = try await store.get(collection: "c", id: written[i % written.count].id)
                        #expect(record.version == 1)
                    }
                }
            }
            try await group.waitForAll()
        }
        let open = store.readers.openConnections
        #expect(
            open.peak >= 1 && open.peak <= RecordReaders.maximumOpen, "\(open.peak) record readers were open at once")
        #expect(open.now <= RecordReaders.keptIdle)
    }

    @Test("an async read cancelled while it waits for a permit leaves the queue at once, before any permit frees")
    func cancelledReaderLeavesTheQueue() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let record = try await store.put(collection: "c", type: "t", data: ["n": "1"])
        // Every permit held by a read whose body waits (on its connection's GRDB queue, not a cooperative thread).
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holders = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<RecordReaders.maximumOpen {
                    group.addTask {
                        try await store.readers.read { _ in
                            inside.signal()
                            release.wait()
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        defer { for _ in 0..<RecordReaders.maximumOpen { release.signal() } }
        for _ in 0..<RecordReaders.maximumOpen { try await offCooperativePool { inside.wait() } }
        #expect(store.readers.permits.snapshot == (0, 0), "every permit is held")
        let waiter = Task { try await store.get(collection: "c", id: record.id) }
        // Until the read is queued (a condition, not a time: the wait bounds only a regression).
        let queuedBy = ContinuousClock.now + .seconds(60)
        while store.readers.permits.snapshot != (0, 1), ContinuousClock.now < queuedBy {
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(store.readers.permits.snapshot == (0, 1), "the read waits in the queue for a permit")
        waiter.cancel()
        // The cancellation handler takes the waiter out of the queue before `cancel()` returns.
        #expect(store.readers.permits.snapshot == (0, 0), "the cancelled read left the queue at once")
        // It ends while every permit is still held.
        await expectAsyncStoreError(.cancelled) { _ = try await waiter.value }
        #expect(store.readers.permits.snapshot == (0, 0), "it took no permit")
        for _ in 0..<RecordReaders.maximumOpen { release.signal() }
        try await holders.value
        #expect(store.readers.permits.snapshot == (RecordReaders.maximumOpen, 0), "every permit came back")
        // Every permit came back: as many reads as permits run at once again.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<(2 * RecordReaders.maximumOpen) {
                group.addTask {
                    let read = try await store.get(collection: "c", id: record.id)
                    #expect(read.data == ["n": "1"])
                }
            }
            try await group.waitForAll()
        }
    }

    /// In a child process of its own (an exit test), so that the cooperative threads are only this scenario's: a
    /// synchronous read blocks its thread while it waits for a permit, so with every cooperative thread in such a
    /// wait, an async reader's permit must come back without its task resuming first.
    @Test(
        "synchronous reads waiting for a permit on every cooperative thread do not stop async readers giving theirs back"
    )
    func syncAndAsyncReadersShareThePermits() async {
        await #expect(processExitsWith: .success) { try await Self.mixedReaders() }
    }

    static func mixedReaders() async throws {
        // A deadlock is this scenario's failure: the child process ends with a failure after a minute.
        DispatchQueue.global().asyncAfter(deadline: .now() + 60) { exit(3) }
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let written = try await store.put(
            collection: "c", records: (0..<16).map { (type: "t", data: ["n": "\($0)"], plain: RecordData()) })
        store.setCacheCapacity(0)
        let blockingTasks = 2 * ProcessInfo.processInfo.activeProcessorCount
        for _ in 0..<20 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<(4 * RecordReaders.maximumOpen) {
                    group.addTask {
                        _ = try await store.get(collection: "c", id: written[i % written.count].id)
                    }
                }
                for i in 0..<blockingTasks {
                    group.addTask { _ = try store.getSync(collection: "c", id: written[i % written.count].id) }
                }
                try await group.waitForAll()
            }
        }
    }
}

extension EncryptedStore {
    // The synchronous forms, named apart so that an async test can call them beside the async ones.
    fileprivate static func openSync(at directory: URL, credential: StoreCredential) throws -> EncryptedStore {
        try open(at: directory, credential: credential)
    }
    fileprivate func getSync(collection: String, id: UUID) throws -> StoredRecord {
        try get(collection: collection, id: id)
    }
    fileprivate func findSync(_ query: RecordQuery) throws -> [StoredRecord] { try find(query) }
    @discardableResult
    fileprivate func rotateKeySync(collection: String) throws -> RotationProgress {
        try rotateKey(collection: collection)
    }
    fileprivate func keyStatusSync(collection: String) throws -> (keyVersion: Int, recordsUnderOlderKeys: Int) {
        try keyStatus(collection: collection)
    }
}
