import Dispatch
import E3DBKit
import E3DBTestSupport
import Foundation
import Synchronization
import Testing

@testable import E3DBStore

/// The async forms of the store's file, setting, index, listing, identity, sharing and maintenance calls: the same
/// results as the synchronous forms (called through `Sync`, a synchronous context), and the file cipher's work on a
/// thread of its own, never a cooperative one.
@Suite("E3DBStore: the async forms of files, settings, indexes and maintenance")
struct AsyncCallsTests {
    @Test("files: async put, list, read, range read, move and delete give what the sync forms give")
    func files() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let sync = Sync(store: store)
        let record = try await store.put(collection: "c", type: "t", data: ["n": "1"])
        let big = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let a = try await store.putFile(at: "/docs/a.bin", data: big, attachedTo: record.id)
        var source = MemoryByteSource(Data("b".utf8))
        let b = try await store.putFile(at: "/docs/b.txt", from: &source)
        try sync.putFile("/other/c.txt", Data("c".utf8))
        await expectAsyncStoreError(.fileExists, item: "/docs/a.bin") {
            _ = try await store.putFile(at: "/docs/a.bin", data: Data())
        }

        #expect(try await store.file(at: "/docs/a.bin") == a)
        #expect(try await store.file(at: "/docs/a.bin") == sync.file("/docs/a.bin"))
        #expect(try await store.files(under: "/docs") == [a, b])
        #expect(try await store.files() == sync.files(under: "/"))
        #expect(try await store.files(attachedTo: record.id) == [a])
        #expect(try await store.files(attachedTo: record.id) == sync.files(attachedTo: record.id))
        #expect(try await store.readFile(at: "/docs/a.bin") == big)
        #expect(try await store.readFile(at: "/docs/a.bin") == sync.readFile("/docs/a.bin"))
        var sink = MemoryByteSink()
        #expect(try await store.readFile(at: "/docs/b.txt", to: &sink) == b)
        #expect(sink.committed == Data("b".utf8))
        #expect(try await store.readFile(at: "/docs/a.bin", range: 70_000...200_000) == big[70_000...200_000])
        #expect(
            try await store.readFile(at: "/docs/a.bin", range: 1...9) == sync.readFile("/docs/a.bin", range: 1...9))
        var rangeSink = MemoryByteSink()
        try await store.readFile(at: "/docs/a.bin", range: 0...2, to: &rangeSink)
        #expect(rangeSink.committed == big[0...2])
        await expectAsyncStoreError(.fileNotFound, item: "/nothing") { _ = try await store.readFile(at: "/nothing") }

        #expect(try await store.moveFile(from: "/docs", to: "/moved") == 2)
        #expect(try sync.files(under: "/moved").map(\.path) == ["/moved/a.bin", "/moved/b.txt"])
        #expect(try await store.readFile(at: "/moved/a.bin") == big)
        #expect(try await store.deleteFile(at: "/moved", recursive: true) == 2)
        #expect(try await store.files() == sync.files(under: "/"))
        #expect(try await store.files().map(\.path) == ["/other/c.txt"])
        #expect(try await store.removeOrphanFiles().isEmpty)
        let report = try await store.verify()
        #expect(report.problems.isEmpty && report.filesChecked == 1 && report.recordsChecked == 1)
    }

    @Test("settings, indexes, count, collections, statistics and identities: async forms give what the sync ones give")
    func databaseCalls() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let sync = Sync(store: store)
        try await store.setSetting(["theme": "dark"], forKey: "ui")
        try await store.setSetting(7, forKey: "n")
        #expect(try await store.setting([String: String].self, forKey: "ui") == ["theme": "dark"])
        #expect(try await store.setting(Int.self, forKey: "n") == sync.setting(Int.self, "n"))
        #expect(try await store.setting(Int.self, forKey: "none") == nil)
        await expectAsyncStoreError(.settingTypeMismatch, item: "ui") {
            _ = try await store.setting(Int.self, forKey: "ui")
        }
        #expect(try await store.settingKeys() == ["n", "ui"])
        try await store.removeSetting(forKey: "n")
        #expect(try await store.settingKeys() == sync.settingKeys())
        #expect(try sync.settingKeys() == ["ui"])

        let references = try await store.put(
            collection: "c", records: (0..<12).map { (type: "t", data: ["k": "\($0 % 3)"], plain: RecordData()) })
        _ = try await store.put(collection: "d", type: "t", data: ["k": "x"])
        let created = try await store.createIndex(collection: "c", fields: ["k"], bits: 12)
        #expect(created.index == BlindIndex(name: "k", fields: ["k"], bits: 12) && created.records == 12)
        await expectAsyncStoreError(.storeExists, item: "k") {
            _ = try await store.createIndex(collection: "c", fields: ["k"], bits: 12)
        }
        await expectAsyncStoreError(.collectionNotFound) {
            _ = try await store.createIndex(collection: "none", fields: ["k"])
        }
        #expect(try await store.indexes(collection: "c") == [created.index])
        #expect(try await store.indexes(collection: "c") == sync.indexes("c"))
        #expect(try await store.find(RecordQuery(collection: "c", fields: [.equals("k", "1")])).count == 4)
        try await store.dropIndex(collection: "c", name: "k")
        #expect(try await store.indexes(collection: "c").isEmpty)
        await expectAsyncStoreError(.invalidParameter, item: "k") {
            try await store.dropIndex(collection: "c", name: "k")
        }

        #expect(try await store.count(collection: "c") == references.count)
        #expect(try await store.count() == sync.count(nil))
        #expect(try await store.collections() == ["c", "d"])
        #expect(try await store.collections() == sync.collections())
        let statistics = try await store.statistics()
        let syncStatistics = try sync.statistics()
        #expect(statistics.recordsPerCollection == ["c": 12, "d": 1])
        #expect(statistics.recordsPerCollection == syncStatistics.recordsPerCollection)
        #expect(statistics.databaseBytes == syncStatistics.databaseBytes && statistics.databaseBytes > 0)

        let alice = ClientIdentity.generate(clientID: UUID())
        let enrolled = try await store.addIdentity(publicKey: alice.publicKey, clientID: alice.clientID)
        let identities = try await store.identities()
        #expect(identities.map(\.publicKey) == [alice.publicKey] && identities.map(\.clientID) == [alice.clientID])
        #expect(enrolled.publicKey == alice.publicKey)
        #expect(try identities == sync.identities())
        let asAlice = try await EncryptedStore.open(at: dir.url, credential: .identity(alice.boxKey))
        #expect(try await asAlice.count() == 13)
        try await store.removeIdentity(publicKey: alice.publicKey)
        #expect(try await store.identities().isEmpty)
        await expectAsyncStoreError(.invalidParameter) { try await store.removeIdentity(publicKey: alice.publicKey) }
        store.lock()
        await expectAsyncStoreError(.storeLocked) { _ = try await store.settingKeys() }
        await expectAsyncStoreError(.storeLocked) { _ = try await store.files() }
        await expectAsyncStoreError(.storeLocked) { _ = try await store.count() }
    }

    @Test("create with Argon2id parameters or an identity, and writeCounter: async forms give what the sync ones give")
    func createAndWriteCounter() async throws {
        let (asyncDir, syncDir) = (try StoreDirectory(), try StoreDirectory())
        let store = try await EncryptedStore.create(
            at: asyncDir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let syncStore = try Sync.create(syncDir.url, passphrase("p"))
        let sync = Sync(store: store)
        #expect(try await store.writeCounter() == Sync(store: syncStore).writeCounter())
        #expect(try await store.writeCounter() == sync.writeCounter())
        let before = try await store.writeCounter()
        _ = try await store.put(collection: "c", type: "t", data: ["k": "v"])
        #expect(try await store.writeCounter() > before, "a write moves the counter on")
        #expect(try await store.writeCounter() == sync.writeCounter())
        await expectAsyncStoreError(.storeExists) {
            _ = try await EncryptedStore.create(at: asyncDir.url, credential: passphrase("q"), kdfParameters: testKDF)
        }
        expectStoreError(.storeExists) { _ = try Sync.create(asyncDir.url, passphrase("q")) }
        #expect(try await EncryptedStore.open(at: asyncDir.url, credential: passphrase("p")).count() == 1)
        store.lock()
        await expectAsyncStoreError(.storeLocked) { _ = try await store.writeCounter() }
        expectStoreError(.storeLocked) { _ = try sync.writeCounter() }

        let alice = ClientIdentity.generate(clientID: UUID())
        let (aliceDir, aliceSyncDir) = (try StoreDirectory(), try StoreDirectory())
        let asAlice = try await EncryptedStore.create(at: aliceDir.url, identity: alice, databaseEncryption: .plain)
        let asAliceSync = try Sync.create(aliceSyncDir.url, identity: alice)
        #expect(try await asAlice.identities().map(\.clientID) == [alice.clientID])
        #expect(
            try await asAlice.identities().map(\.publicKey) == Sync(store: asAliceSync).identities().map(\.publicKey))
        #expect(asAlice.databaseEncryption == .plain)
        let reopened = try await EncryptedStore.open(at: aliceDir.url, credential: .identity(alice.boxKey))
        #expect(try await reopened.writeCounter() == asAlice.writeCounter())
        await expectAsyncStoreError(.storeExists) {
            _ = try await EncryptedStore.create(at: aliceDir.url, identity: alice)
        }
    }

    @Test("a task cancelled before an async changeCredential: cancelled, and the old credential still opens the store")
    func preCancelledCredentialChange() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let change = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await store.changeCredential(to: passphrase("q"), kdfParameters: testKDF)
        }
        await expectAsyncStoreError(.cancelled) { try await change.value }
        #expect(try await Sync.open(dir.url, passphrase("p")).count() == 0)
        expectStoreError(.wrongKey) { _ = try Sync.open(dir.url, passphrase("q")) }
    }

    @Test("share, export, import, credential change, rekey and stale-file removal through the async forms")
    func maintenance() async throws {
        let dir = try StoreDirectory()
        try await Self.shareExportImport(dir)
        // The store of `shareExportImport` is closed: rekey refuses while another connection has the store open.
        let rekeyed = try await EncryptedStore.rekey(
            at: dir.url, credential: passphrase("q"), newCredential: passphrase("r"), kdfParameters: testKDF)
        #expect(try await rekeyed.count() == 10)
        #expect(try await rekeyed.verify().problems.isEmpty)
        #expect(try await rekeyed.removeStaleDatabaseFiles() == [])
        expectStoreError(.wrongKey) { _ = try Sync.open(dir.url, passphrase("q")) }
    }

    static func shareExportImport(_ dir: StoreDirectory) async throws {
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let sync = Sync(store: store)
        _ = try await store.put(
            collection: "shared", records: (0..<5).map { (type: "t", data: ["n": "\($0)"], plain: RecordData()) })
        let reader = ClientIdentity.generate(clientID: UUID())
        let info = try await store.share(collection: "shared", with: reader.publicKey)
        let syncInfo = try sync.share("shared", reader.publicKey)
        let storeKey = try store.publicKey
        #expect(info.authorizerID == syncInfo.authorizerID && info.authorizerPublicKey == storeKey)
        #expect(throws: Never.self) { _ = try info.unwrap(with: reader.boxKey) }
        await expectAsyncStoreError(.collectionNotFound) {
            _ = try await store.share(collection: "no", with: reader.publicKey)
        }

        let exportDir = dir.url.appendingPathComponent("export")
        let export = try await store.export(collection: "shared", to: exportDir, readerPublicKey: reader.publicKey)
        #expect(export.recordCount == 5)
        let imported = try await store.importCollection(from: exportDir, reader: reader.boxKey, as: "inbox")
        #expect(imported.count == 5)
        let inbox = try await store.find(RecordQuery(collection: "inbox")).map { $0.data["n"] ?? "" }
        #expect(inbox.sorted() == (0..<5).map { "\($0)" })

        try await store.changeCredential(to: passphrase("q"), kdfParameters: testKDF)
        expectStoreError(.wrongKey) { _ = try Sync.open(dir.url, passphrase("p")) }
        #expect(try await Sync.open(dir.url, passphrase("q")).count() == 10)
    }

    /// The structural property (not a timing): the async put's source and the async read's sink are called outside any
    /// task (so not on a cooperative thread: on the store's own file thread), and while as many puts as there are cooperative threads (twice over) are inside their
    /// sources, which wait for a plain task to run first, that task runs. A synchronous put called from those tasks
    /// would hold every cooperative thread and the gate would time out.
    @Test("async file calls run the file cipher on a thread of their own: no cooperative thread waits for it")
    func fileWorkLeavesThePool() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        // As many as may run at once: at least twice the cooperative pool (one thread per processor) and no more
        // than the store's limit, beyond which puts wait for a permit, not at the gate.
        let puts = EncryptedStore.blockingLimit
        let gate = Gate()
        let threads = TaskSightings()
        let writes = Task {
            try await withThrowingTaskGroup(of: StoredFile.self) { group in
                for i in 0..<puts {
                    group.addTask {
                        var source = GatedSource(gate: gate, threads: threads, size: 200_000)
                        return try await store.putFile(at: "/f\(i)", from: &source)
                    }
                }
                return try await group.reduce(into: [StoredFile]()) { $0.append($1) }
            }
        }
        // Every put is inside its source, waiting for the gate: none of them holds a cooperative thread.
        try await offCooperativePool { for _ in 0..<puts { try gate.entered() } }
        let answer = await Task.detached { 42 }.value
        #expect(answer == 42)
        gate.open(puts)
        let written = try await writes.value
        #expect(written.count == puts && written.allSatisfy { $0.size == 200_000 })
        #expect(threads.seen == [false])

        var sink = ThreadRecordingSink(threads: threads)
        threads.reset()
        #expect(try await store.readFile(at: "/f0", to: &sink).size == 200_000)
        #expect(sink.bytes == 200_000 && sink.finished)
        #expect(threads.seen == [false])
    }

    @Test("200 concurrent async file reads complete, never more than the store's limit at once; a queued one cancels")
    func blockingCallsAreBounded() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        _ = try await store.putFile(at: "/small", data: Data("small".utf8))
        let limit = EncryptedStore.blockingLimit
        let running = RunningCount()
        let total = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<200 {
                group.addTask {
                    var sink = CountingSink(running: running)
                    try await store.readFile(at: "/small", to: &sink)
                    return sink.bytes
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(total == 200 * 5)
        // Each sink holds its thread for 10 ms: uncapped, far more than the limit overlap.
        #expect(running.peak <= limit)
        #expect(running.peak > 1)
        #expect(store.blockingPermits.snapshot == (limit, 0))

        // Every permit held by a read waiting at the gate: one more call queues, and its cancellation ends it with
        // `cancelled` before any thread runs it (its sink is never called).
        let gate = Gate()
        let threads = TaskSightings()
        let holders = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<limit {
                    group.addTask {
                        var sink = GatedSink(gate: gate)
                        try await store.readFile(at: "/small", to: &sink)
                    }
                }
                try await group.waitForAll()
            }
        }
        try await offCooperativePool { for _ in 0..<limit { try gate.entered() } }
        let queued = Task {
            var sink = ThreadRecordingSink(threads: threads)
            return try await store.readFile(at: "/small", to: &sink)
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while store.blockingPermits.snapshot.waiting < 1 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(store.blockingPermits.snapshot == (0, 1))
        queued.cancel()
        await expectAsyncStoreError(.cancelled) { _ = try await queued.value }
        #expect(threads.seen.isEmpty)
        gate.open(limit)
        try await holders.value
        #expect(store.blockingPermits.snapshot == (limit, 0))
    }

    @Test("cancelling an async putFile stops the encryption between chunks: cancelled, nothing stored, no body left")
    func cancelledPutFile() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let gate = Gate()
        let threads = TaskSightings()
        // 64 MiB, more than the test waits for: a put that ignored cancellation would store it all and succeed.
        let put = Task {
            var source = GatedSource(gate: gate, threads: threads, size: 64 << 20)
            return try await store.putFile(at: "/big", from: &source)
        }
        try await offCooperativePool { try gate.entered() }
        put.cancel()
        gate.open(1)
        await expectAsyncStoreError(.cancelled) { _ = try await put.value }
        #expect(try await store.files().isEmpty)
        let bodies = dir.url.appendingPathComponent(EncryptedStore.filesDirectoryName)
        #expect((try? FileManager.default.contentsOfDirectory(atPath: bodies.path))?.isEmpty ?? true)
        #expect(try await store.removeOrphanFiles().isEmpty)
    }

    @Test("cancelling an async verify or export ends it with cancelled at its next page; the export publishes nothing")
    func cancelledVerifyAndExport() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        _ = try await store.put(collection: "c", type: "t", data: ["n": "1"])
        let reader = ClientIdentity.generate(clientID: UUID())
        let exportDir = dir.url.appendingPathComponent("export")
        // Each call runs in a task cancelled before it starts: it ends with `cancelled` before any thread starts
        // (its permit is not taken).
        let verify = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await store.verify()
        }
        await expectAsyncStoreError(.cancelled) { _ = try await verify.value }
        let export = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await store.export(collection: "c", to: exportDir, readerPublicKey: reader.publicKey)
        }
        await expectAsyncStoreError(.cancelled) { _ = try await export.value }
        #expect((try? FileManager.default.contentsOfDirectory(atPath: exportDir.path))?.isEmpty ?? true)
        // Cancelled mid-run, after the first page is written: the check before the next page stops it, and nothing
        // is published.
        let running = Mutex<Task<StoreExport, any Error>?>(nil)
        store.setTestHook(.afterExportPage) {
            // On the export's own thread: waits (at most 5 s) until the test has registered the task.
            for _ in 0..<1000 {
                if let task = running.withLock({ $0 }) { return task.cancel() }
                Thread.sleep(forTimeInterval: 0.005)
            }
        }
        let started = Task {
            try await store.export(collection: "c", to: exportDir, readerPublicKey: reader.publicKey)
        }
        running.withLock { $0 = started }
        await expectAsyncStoreError(.cancelled) { _ = try await started.value }
        store.setTestHook(.afterExportPage, nil)
        #expect((try? FileManager.default.contentsOfDirectory(atPath: exportDir.path))?.isEmpty ?? true)
        // Not cancelled, both run to their end.
        #expect(try await store.verify().recordsChecked == 1)
        #expect(
            try await store.export(collection: "c", to: exportDir, readerPublicKey: reader.publicKey).recordCount == 1)
    }
}

/// The synchronous forms, called from a synchronous context (in an async one the async overloads win).
private struct Sync {
    let store: EncryptedStore

    static func open(_ directory: URL, _ credential: StoreCredential) throws -> EncryptedStore {
        try EncryptedStore.open(at: directory, credential: credential)
    }
    static func create(_ directory: URL, _ credential: StoreCredential) throws -> EncryptedStore {
        try EncryptedStore.create(at: directory, credential: credential, kdfParameters: testKDF)
    }
    static func create(_ directory: URL, identity: ClientIdentity) throws -> EncryptedStore {
        try EncryptedStore.create(at: directory, identity: identity)
    }
    func writeCounter() throws -> Int { try store.writeCounter }
    func putFile(_ path: String, _ data: Data) throws { _ = try store.putFile(at: path, data: data) }
    func file(_ path: String) throws -> StoredFile { try store.file(at: path) }
    func files(under directory: String) throws -> [StoredFile] { try store.files(under: directory) }
    func files(attachedTo id: UUID) throws -> [StoredFile] { try store.files(attachedTo: id) }
    func readFile(_ path: String) throws -> Data { try store.readFile(at: path) }
    func readFile(_ path: String, range: ClosedRange<Int>) throws -> Data { try store.readFile(at: path, range: range) }
    func setting<T: Decodable>(_ type: T.Type, _ key: String) throws -> T? { try store.setting(type, forKey: key) }
    func settingKeys() throws -> [String] { try store.settingKeys() }
    func indexes(_ collection: String) throws -> [BlindIndex] { try store.indexes(collection: collection) }
    func count(_ collection: String?) throws -> Int { try store.count(collection: collection) }
    func collections() throws -> [String] { try store.collections() }
    func statistics() throws -> StoreStatistics { try store.statistics() }
    func identities() throws -> [StoreIdentity] { try store.identities() }
    func share(_ collection: String, _ reader: Box.PublicKey) throws -> EAKInfo {
        try store.share(collection: collection, with: reader)
    }
}

/// A gate the sources wait at: each signals `entered` on its first read, then waits until the test opens the gate.
private final class Gate: Sendable {
    private let arrivals = DispatchSemaphore(value: 0)
    private let opening = DispatchSemaphore(value: 0)

    struct Timeout: Error {}

    /// Waits (off the cooperative pool) for one more source to arrive; a minute bounds a regression.
    func entered() throws {
        guard arrivals.wait(timeout: .now() + 60) == .success else { throw Timeout() }
    }
    func arrive() throws {
        arrivals.signal()
        // Long: `entered()` already bounds the test; this only ends a source a failed test left waiting.
        guard opening.wait(timeout: .now() + 300) == .success else { throw Timeout() }
    }
    func open(_ count: Int) { for _ in 0..<count { opening.signal() } }
}

/// `size` bytes, the first read waiting at the gate; records the name of every thread it is read on.
private struct GatedSource: FileByteSource, Sendable {
    let gate: Gate
    let threads: TaskSightings
    var size: Int
    var arrived = false

    mutating func read(into buffer: inout MutableRawSpan) throws -> Int {
        threads.record()
        if !arrived {
            arrived = true
            try gate.arrive()
        }
        let count = min(size, buffer.byteCount)
        for i in 0..<count { buffer.storeBytes(of: UInt8(truncatingIfNeeded: i), toByteOffset: i, as: UInt8.self) }
        size -= count
        return count
    }
}

/// Whether a source or sink was called inside a task (true) or outside any (false).
private final class TaskSightings: Sendable {
    private let names = Mutex<Set<Bool>>([])

    /// Records whether a task runs on the current thread (a cooperative one runs tasks; the store's file thread
    /// does not).
    func record() {
        let inTask = withUnsafeCurrentTask { $0 != nil }
        names.withLock { _ = $0.insert(inTask) }
    }
    var seen: Set<Bool> { names.withLock { $0 } }
    func reset() { names.withLock { $0 = [] } }
}

/// How many sinks are between their first write and their end, and the most at once.
private final class RunningCount: Sendable {
    private let counts = Mutex<(now: Int, peak: Int)>((0, 0))

    func enter() { counts.withLock { $0 = ($0.now + 1, max($0.peak, $0.now + 1)) } }
    func leave() { counts.withLock { $0.now -= 1 } }
    var peak: Int { counts.withLock { $0.peak } }
}

/// Counts the bytes written to it; counted as running (for 10 ms at least) from its first write to its end.
private struct CountingSink: FileByteSink, Sendable {
    let running: RunningCount
    var bytes = 0
    var entered = false

    mutating func write(_ bytes: RawSpan) throws {
        if !entered {
            entered = true
            running.enter()
            Thread.sleep(forTimeInterval: 0.01)  // the store's own thread, not a cooperative one
        }
        self.bytes += bytes.byteCount
    }
    mutating func finish() throws { if entered { running.leave() } }
    mutating func abort() { if entered { running.leave() } }
}

/// Waits at the gate on its first write.
private struct GatedSink: FileByteSink, Sendable {
    let gate: Gate
    var arrived = false

    mutating func write(_ bytes: RawSpan) throws {
        if !arrived {
            arrived = true
            try gate.arrive()
        }
    }
    mutating func finish() throws {}
    mutating func abort() {}
}

/// Counts the bytes written to it and records the threads it is called on.
private struct ThreadRecordingSink: FileByteSink, Sendable {
    let threads: TaskSightings
    var bytes = 0
    var finished = false

    mutating func write(_ bytes: RawSpan) throws {
        threads.record()
        self.bytes += bytes.byteCount
    }
    mutating func finish() throws { finished = true }
    mutating func abort() {}
}
