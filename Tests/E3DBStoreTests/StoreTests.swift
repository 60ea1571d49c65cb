import E3DBKit
import E3DBStore
import E3DBTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

/// A fresh directory for one store, removed at the end of the test.
final class StoreDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbstore-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    var database: String { url.appendingPathComponent(EncryptedStore.databaseFileName).path }
    var keyHeader: String { url.appendingPathComponent(EncryptedStore.keyHeaderFileName).path }
}

/// Cheap Argon2id parameters so that tests do not spend seconds per open (the presets are measured elsewhere).
let testKDF = Argon2id.Parameters(opsLimit: 1, memoryLimit: 1 << 16)

func passphrase(_ text: String) -> StoreCredential { .passphrase(SecureBytes(copying: Array(text.utf8))) }

func expectStoreError(_ code: E3DBError.Code, item: String? = nil, _ body: () throws -> Void) {
    expect(Result { try body() }, failedWith: code, item: item)
}

/// `expectStoreError` for an async body.
func expectAsyncStoreError(_ code: E3DBError.Code, item: String? = nil, _ body: () async throws -> Void) async {
    do {
        try await body()
        expect(.success(()), failedWith: code, item: item)
    } catch {
        expect(.failure(error), failedWith: code, item: item)
    }
}

/// Makes the first `put` of `store` from now on run `rotate` (a key rotation through another connection, which deletes
/// the key the put's records are encrypted under, no record being left under it) after its records are encrypted and
/// before its write transaction opens. Returns the count of puts that reached that point: 2 when the put started over.
func rotateDuringFirstPut(_ store: EncryptedStore, _ rotate: @escaping @Sendable () throws -> Void) -> HookCount {
    let count = HookCount()
    store.setTestHook(.beforeInsertTransaction) {
        guard count.increment() == 1 else { return }
        #expect(throws: Never.self) { try rotate() }
    }
    return count
}

/// How many times a test hook ran.
final class HookCount: Sendable {
    private let count = Mutex(0)
    /// Counts one more run and returns the new count.
    func increment() -> Int {
        count.withLock { count in
            count += 1
            return count
        }
    }
    var value: Int { count.withLock { $0 } }
}

private func expect(_ outcome: Result<Void, any Error>, failedWith code: E3DBError.Code, item: String?) {
    switch outcome {
    case .success:
        Issue.record("expected \(code.rawValue), got success")
    case .failure(let error as E3DBError):
        #expect(error.code == code, "\(error)")
        if let item { #expect(error.context.item == item, "\(error)") }
    case .failure(let error):
        Issue.record("expected \(code.rawValue), got \(error)")
    }
}

@Suite("E3DBStore: keys, records and binding")
struct StoreTests {
    @Test("records round-trip; the store reopens with its passphrase and refuses a wrong one before reading data")
    func roundTripAndWrongKey() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(
            at: dir.url, credential: passphrase("correct horse"), kdfParameters: testKDF)
        let data: RecordData = ["name": "Ada", "note": "naïve ☃ \u{0}"]
        let reference = try store.put(collection: "people", type: "person", data: data, plain: ["team": "blue"])
        #expect(reference.version == 1)
        let record = try store.get(collection: "people", id: reference.id)
        #expect(record.data == data)
        #expect(record.meta.plain == ["team": "blue"])
        #expect(record.meta.type == "person")
        #expect(record.meta.writerID == store.storeID)

        let reopened = try EncryptedStore.open(at: dir.url, credential: passphrase("correct horse"))
        #expect(try reopened.get(collection: "people", id: reference.id).data == data)
        #expect(reopened.storeID == store.storeID)
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("wrong horse")) }
        expectStoreError(.wrongKey) {
            _ = try EncryptedStore.open(at: dir.url, credential: .key(SecureBytes(randomCount: 32)))
        }
        expectStoreError(.storeExists) {
            _ = try EncryptedStore.create(at: dir.url, credential: passphrase("x"), kdfParameters: testKDF)
        }
        let empty = try StoreDirectory()
        expectStoreError(.storeNotFound) { _ = try EncryptedStore.open(at: empty.url, credential: passphrase("x")) }
    }

    @Test("a raw-key store opens with its key only; keys of the wrong length are refused")
    func rawKey() throws {
        let dir = try StoreDirectory()
        let key = SecureBytes(randomCount: 32)
        let store = try EncryptedStore.create(at: dir.url, credential: .key(key))
        let reference = try store.put(collection: "c", type: "t", data: ["k": "v"])
        let reopened = try EncryptedStore.open(at: dir.url, credential: .key(key))
        #expect(try reopened.get(collection: "c", id: reference.id).data == ["k": "v"])
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("k")) }
        expectStoreError(.invalidKeyLength) {
            _ = try EncryptedStore.open(at: dir.url, credential: .key(SecureBytes(randomCount: 16)))
        }
    }

    @Test("updates and deletes are versioned: a stale version is a conflict, a deleted record is gone")
    func versions() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let first = try store.put(collection: "c", type: "t", data: ["a": "1"], plain: ["k": "v1"])
        let second = try store.update(
            collection: "c", id: first.id, expectedVersion: 1, data: ["a": "2"], plain: ["k": "v2"])
        #expect(second.version == 2)
        let read = try store.get(collection: "c", id: first.id)
        #expect(read.version == 2 && read.data == ["a": "2"] && read.meta.plain == ["k": "v2"])
        #expect(read.updated >= read.created)
        let id = first.id.uuidString.lowercased()
        expectStoreError(.versionConflict, item: id) {
            try store.update(collection: "c", id: first.id, expectedVersion: 1, data: ["a": "3"])
        }
        expectStoreError(.versionConflict, item: id) {
            try store.delete(collection: "c", id: first.id, expectedVersion: 1)
        }
        try store.delete(collection: "c", id: first.id, expectedVersion: 2)
        expectStoreError(.recordNotFound, item: id) { _ = try store.get(collection: "c", id: first.id) }
        expectStoreError(.recordNotFound) { try store.delete(collection: "c", id: first.id) }
        #expect(try store.find(RecordQuery(collection: "c", plain: [.equals("k", "v2")])).isEmpty)
    }

    @Test("two writers updating one record at one version: exactly one succeeds")
    func concurrentWriters() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let other = try await EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        let reference = try await store.put(collection: "c", type: "t", data: ["n": "0"])
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for (i, handle) in [store, other, store, other].enumerated() {
                group.addTask {
                    (try? await handle.update(
                        collection: "c", id: reference.id, expectedVersion: 1, data: ["n": "\(i)"]))
                        != nil
                }
            }
            var results: [Bool] = []
            for await outcome in group { results.append(outcome) }
            return results
        }
        #expect(outcomes.filter { $0 }.count == 1)
        #expect(try await store.get(collection: "c", id: reference.id).version == 2)
    }

    @Test("an edited, moved or re-versioned record is recordTampered naming it")
    func binding() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let a = try store.put(collection: "c", type: "t", data: ["secret": "alpha"])
        let b = try store.put(collection: "c", type: "t", data: ["secret": "bravo"])
        _ = try store.put(collection: "d", type: "t", data: ["secret": "charlie"])
        let aID = a.id.uuidString.lowercased()
        let bID = b.id.uuidString.lowercased()
        let raw = try DatabaseQueue(path: try store.databaseLocation())

        // Swap the two documents and their MACs: each row now holds the other's valid ciphertext.
        try raw.write { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT id, document, mac FROM records WHERE collection = 'c' ORDER BY seq")
            try db.execute(
                sql: "UPDATE records SET document = ?, mac = ? WHERE id = ?",
                arguments: [rows[1]["document"], rows[1]["mac"], aID])
            try db.execute(
                sql: "UPDATE records SET document = ?, mac = ? WHERE id = ?",
                arguments: [rows[0]["document"], rows[0]["mac"], bID])
        }
        expectStoreError(.recordTampered, item: aID) { _ = try store.get(collection: "c", id: a.id) }
        expectStoreError(.recordTampered, item: bID) { _ = try store.get(collection: "c", id: b.id) }

        // A fresh pair: edit one byte of a document.
        let c = try store.put(collection: "c", type: "t", data: ["secret": "delta"])
        let cID = c.id.uuidString.lowercased()
        try raw.write { db in
            var document: Data =
                try Data.fetchOne(db, sql: "SELECT document FROM records WHERE id = ?", arguments: [cID]) ?? Data()
            document[document.count / 2] ^= 0x01
            try db.execute(sql: "UPDATE records SET document = ? WHERE id = ?", arguments: [document, cID])
        }
        expectStoreError(.recordTampered, item: cID) { _ = try store.get(collection: "c", id: c.id) }

        // Another version number, another collection.
        let e = try store.put(collection: "c", type: "t", data: ["secret": "echo"])
        let eID = e.id.uuidString.lowercased()
        try raw.write { db in try db.execute(sql: "UPDATE records SET version = 7 WHERE id = ?", arguments: [eID]) }
        expectStoreError(.recordTampered, item: eID) { _ = try store.get(collection: "c", id: e.id) }
        let f = try store.put(collection: "c", type: "t", data: ["secret": "foxtrot"])
        let fID = f.id.uuidString.lowercased()
        try raw.write { db in try db.execute(sql: "UPDATE records SET collection = 'd' WHERE id = ?", arguments: [fID])
        }
        expectStoreError(.recordTampered, item: fID) { _ = try store.get(collection: "d", id: f.id) }
        // A scan stops at the first record that does not authenticate, naming it.
        expectStoreError(.recordTampered) { _ = try store.find(RecordQuery(collection: "c")) }
    }

    @Test("changing the passphrase rewrites one wrapped key and nothing else; the old one stops working")
    func changePassphrase() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("old"), kdfParameters: testKDF)
        var references: [RecordReference] = []
        for i in 0..<50 { references.append(try store.put(collection: "c", type: "t", data: ["i": "\(i)"])) }
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        let before = try raw.read { db in try Row.fetchAll(db, sql: "SELECT * FROM records ORDER BY seq") }
        try store.changeCredential(to: passphrase("new"), kdfParameters: testKDF)
        let after = try raw.read { db in try Row.fetchAll(db, sql: "SELECT * FROM records ORDER BY seq") }
        #expect(before == after, "records were rewritten by a passphrase change")
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("old")) }
        let reopened = try EncryptedStore.open(at: dir.url, credential: passphrase("new"))
        for (i, reference) in references.enumerated() {
            #expect(try reopened.get(collection: "c", id: reference.id).data == ["i": "\(i)"])
        }
        // To a raw key and back.
        let key = SecureBytes(randomCount: 32)
        try reopened.changeCredential(to: .key(key))
        expectStoreError(.wrongKey) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("new")) }
        #expect(try EncryptedStore.open(at: dir.url, credential: .key(key)).count() == 50)
    }

    @Test("lock() wipes the keys: every call fails until unlock with the right credential")
    func lockAndUnlock() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let reference = try store.put(collection: "c", type: "t", data: ["k": "v"])
        store.lock()
        #expect(store.isLocked)
        expectStoreError(.storeLocked) { _ = try store.get(collection: "c", id: reference.id) }
        expectStoreError(.storeLocked) { try store.put(collection: "c", type: "t", data: ["k": "v"]) }
        expectStoreError(.wrongKey) { try store.unlock(passphrase("q")) }
        #expect(store.isLocked)
        try store.unlock(passphrase("p"))
        #expect(try store.get(collection: "c", id: reference.id).data == ["k": "v"])
    }

    @Test("queries by type and plain (equality, prefix, range), ordered, limited and paged")
    func queries() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        var batch: [(type: String, data: RecordData, plain: RecordData)] = []
        for i in 0..<300 {
            let day = String(format: "2026-11-%02d", i % 30 + 1)
            batch.append((i % 3 == 0 ? "invoice" : "receipt", ["n": "\(i)"], ["day": day, "customer": "c\(i % 7)"]))
        }
        let references = try await store.put(collection: "ledger", records: batch)
        _ = try await store.put(collection: "other", type: "invoice", data: ["n": "x"])

        let invoices = try await store.find(RecordQuery(collection: "ledger", types: ["invoice"]))
        #expect(invoices.count == 100)
        #expect(invoices.map(\.data["n"]) == stride(from: 0, to: 300, by: 3).map { "\($0)" })
        let c3 = try await store.find(RecordQuery(collection: "ledger", plain: [.equals("customer", "c3")]))
        #expect(c3.count == (0..<300).filter { $0 % 7 == 3 }.count)
        #expect(c3.allSatisfy { $0.meta.plain["customer"] == "c3" })
        let early = try await store.find(
            RecordQuery(collection: "ledger", plain: [.between("day", lower: "2026-11-01", upper: "2026-11-05")]))
        #expect(early.count == (0..<300).filter { $0 % 30 < 5 }.count)
        let prefixed = try await store.find(RecordQuery(collection: "ledger", plain: [.hasPrefix("day", "2026-11-1")]))
        #expect(prefixed.count == (0..<300).filter { (10...19).contains($0 % 30 + 1) }.count)
        let both = try await store.find(
            RecordQuery(
                collection: "ledger", types: ["receipt"],
                plain: [.equals("customer", "c1"), .hasPrefix("day", "2026-11-0")]))
        #expect(both.count == (0..<300).filter { $0 % 3 != 0 && $0 % 7 == 1 && $0 % 30 + 1 <= 9 }.count)
        let newest = try await store.find(RecordQuery(collection: "ledger", limit: 5, descending: true))
        #expect(newest.map(\.id) == references.suffix(5).reversed().map(\.id))

        var streamed: [UUID] = []
        for try await record in store.records(matching: RecordQuery(collection: "ledger"), pageSize: 7) {
            streamed.append(record.id)
        }
        #expect(streamed == references.map(\.id))
        var limited = 0
        for try await _ in store.records(matching: RecordQuery(collection: "ledger", limit: 10), pageSize: 3) {
            limited += 1
        }
        #expect(limited == 10)
        #expect(try await store.collections() == ["ledger", "other"])
        #expect(try await store.count(collection: "ledger") == 300)
    }

    @Test("the stored document is an E3DB EncryptedDocument: meta in clear, every field edk.edkN.ef.efN")
    func recordsAreE3DBDocuments() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let reference = try store.put(collection: "c", type: "t", data: ["field": "value"], plain: ["p": "q"])
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        let bytes = try raw.read { db in
            try Data.fetchOne(
                db, sql: "SELECT document FROM records WHERE id = ?", arguments: [reference.id.uuidString.lowercased()])
        }
        let document = try EncryptedDocument(jsonData: try #require(bytes))
        #expect(document.meta.type == "t")
        #expect(document.meta.plain == ["p": "q"])
        for (_, field) in document.data { #expect(field.split(separator: ".").count == 4) }
    }

    @Test(
        "no plaintext value reaches any file of the store (database, WAL, shared memory, file bodies) after a workload")
    func noPlaintextOnDisk() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        var secrets: [String] = []
        var references: [RecordReference] = []
        for i in 0..<200 {
            let secret = "PLAINTEXT-\(i)-\(UUID().uuidString)"
            secrets.append(secret)
            references.append(
                try store.put(
                    collection: "c", type: "t", data: ["s": secret, "n": "\(i)"], plain: ["bucket": "\(i % 5)"]))
        }
        for (i, reference) in references.prefix(50).enumerated() {
            let secret = "UPDATED-\(i)-\(UUID().uuidString)"
            secrets.append(secret)
            try store.update(collection: "c", id: reference.id, expectedVersion: 1, data: ["s": secret])
        }
        for reference in references.suffix(20) { try store.delete(collection: "c", id: reference.id) }
        // Files and attachments: written, replaced, moved, read whole and by range, deleted.
        for i in 0..<20 {
            let secret = "FILE-\(i)-\(UUID().uuidString)"
            secrets.append(secret)
            let contents = Data(String(repeating: secret + "\n", count: 1 + i * 300).utf8)
            try store.putFile(at: "/dir\(i % 3)/f\(i)", data: contents, attachedTo: i % 2 == 0 ? references[i].id : nil)
            #expect(try store.readFile(at: "/dir\(i % 3)/f\(i)", range: 0...9) == contents.prefix(10))
        }
        let replacement = "REPLACED-\(UUID().uuidString)"
        secrets.append(replacement)
        try store.putFile(at: "/dir0/f0", data: Data(replacement.utf8), replace: true)
        try store.moveFile(from: "/dir1", to: "/moved")
        try store.deleteFile(at: "/dir2/f2")
        #expect(try store.readFile(at: "/dir0/f0") == Data(replacement.utf8))
        try store.changeCredential(to: passphrase("q"), kdfParameters: testKDF)
        _ = try store.find(RecordQuery(collection: "c", plain: [.equals("bucket", "3")]))
        #expect(try store.verify().problems.isEmpty)

        let names = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
        #expect(names.contains(EncryptedStore.databaseFileName) && names.contains(EncryptedStore.filesDirectoryName))
        // Every regular file under the store directory: the database, its WAL and shared memory, the file bodies.
        var files: [String] = []
        if let walker = FileManager.default.enumerator(atPath: dir.url.path) {
            for case let name as String in walker {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(
                    atPath: dir.url.appendingPathComponent(name).path, isDirectory: &isDirectory),
                    !isDirectory.boolValue
                {
                    files.append(name)
                }
            }
        }
        #expect(files.filter { $0.hasPrefix(EncryptedStore.filesDirectoryName + "/") }.count == 19)
        var scanned = 0
        for name in files {
            let contents = try Data(contentsOf: dir.url.appendingPathComponent(name))
            scanned += contents.count
            for secret in secrets {
                #expect(contents.range(of: Data(secret.utf8)) == nil, "\(secret) found in \(name)")
                // The distinctive part alone, in case SQLite split a value.
                #expect(contents.range(of: Data(secret.suffix(36).utf8)) == nil, "part of \(secret) found in \(name)")
            }
        }
        #expect(scanned > 0)
    }
}

@Suite("E3DBStore: sharing, export and import with Tozny's Python SDK")
struct StoreSharingTests {
    static func python() -> String? { ChildProcess.projectPython?.path }

    static func run(_ executable: String, _ arguments: [String]) async throws -> (
        status: Int32, out: String, err: String
    ) {
        let result = try await ChildProcess.run(URL(fileURLWithPath: executable), arguments)
        return (result.status, result.stdoutText, result.stderr)
    }

    static var script: String {
        VectorLocations.projectRoot.appendingPathComponent("Tests/E3DBStoreTests/store_interop.py").path
    }

    static func lines(_ text: String) throws -> [JSONValue] {
        try text.split(separator: "\n").map { try CanonicalJSON.parse(Data($0.utf8)) }
    }

    @Test("an export decrypts in the Python SDK with the reader's key; an import of it reads back the same records")
    func exportToPython() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        var expected: [JSONValue] = []
        for i in 0..<25 {
            let data: RecordData = ["n": "\(i)", "text": "naïve ☃ \(i) \u{1F600}"]
            let plain: RecordData = ["i": "\(i)"]
            try await store.put(collection: "shared", type: "memo", data: data, plain: plain)
            expected.append(.object(["data": data.signableJSON, "plain": plain.signableJSON, "type": .string("memo")]))
        }
        try await store.put(collection: "private", type: "memo", data: ["secret": "not exported"])
        let reader = ClientIdentity.generate(clientID: UUID())
        let exportDir = dir.url.appendingPathComponent("export")
        let export = try await store.export(collection: "shared", to: exportDir, readerPublicKey: reader.publicKey)
        #expect(export.recordCount == 25)
        expectStoreError(.storeExists) {
            try store.export(collection: "shared", to: exportDir, readerPublicKey: reader.publicKey)
        }
        expectStoreError(.collectionNotFound) {
            try store.export(
                collection: "missing", to: dir.url.appendingPathComponent("x"), readerPublicKey: reader.publicKey)
        }

        // Another store imports it with the reader's key.
        let otherDir = try StoreDirectory()
        let other = try await EncryptedStore.create(
            at: otherDir.url, credential: passphrase("q"), kdfParameters: testKDF)
        let imported = try await other.importCollection(from: exportDir, reader: reader.boxKey, as: "inbox")
        #expect(imported.count == 25)
        let records = try await other.find(RecordQuery(collection: "inbox"))
        #expect(
            records.map {
                JSONValue.object([
                    "data": $0.data.signableJSON, "plain": $0.meta.plain.signableJSON, "type": .string($0.meta.type),
                ])
            } == expected)
        #expect(records.allSatisfy { $0.meta.writerID == store.storeID })
        expectStoreError(.storeExists) {
            try other.importCollection(from: exportDir, reader: reader.boxKey, as: "inbox")
        }
        let stranger = ClientIdentity.generate(clientID: UUID())
        expectStoreError(.authenticationFailed, item: "eak.json") {
            try other.importCollection(from: exportDir, reader: stranger.boxKey, as: "stolen")
        }

        guard let python = Self.python() else {
            Issue.record("the project's Python environment (.venv, scripts/python-env.sh) is missing")
            return
        }
        let result = try await Self.run(
            python, [Self.script, "decrypt", exportDir.path, reader.boxKey.base64URLEncoded])
        #expect(result.status == 0, "\(result.err)")
        #expect(try Self.lines(result.out) == expected)
    }

    @Test("records the Python SDK wrote for a client import into a store and read back")
    func importFromPython() async throws {
        guard let python = Self.python() else {
            Issue.record("the project's Python environment (.venv, scripts/python-env.sh) is missing")
            return
        }
        let dir = try StoreDirectory()
        let reader = ClientIdentity.generate(clientID: UUID())
        let pyDir = dir.url.appendingPathComponent("python")
        let result = try await Self.run(
            python, [Self.script, "write", pyDir.path, reader.publicKey.base64URLEncoded, "12"])
        #expect(result.status == 0, "\(result.err)")
        let expected = try Self.lines(result.out)
        let store = try await EncryptedStore.create(
            at: dir.url.appendingPathComponent("store"), credential: passphrase("p"), kdfParameters: testKDF)
        let references = try await store.importCollection(from: pyDir, reader: reader.boxKey, as: "from-python")
        #expect(references.count == 12)
        let records = try await store.find(RecordQuery(collection: "from-python", plain: [.equals("source", "python")]))
        #expect(
            records.map {
                JSONValue.object([
                    "data": $0.data.signableJSON, "plain": $0.meta.plain.signableJSON, "type": .string($0.meta.type),
                ])
            } == expected)
        #expect(try await store.find(RecordQuery(collection: "from-python", plain: [.equals("i", "3")])).count == 1)
    }
}

@Suite("E3DBStore: blind indexes")
struct BlindIndexTests {
    @Test("verify checks every blind-index entry: a changed, missing or orphaned entry is reported with its record")
    func verifyIndexEntries() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let a = try store.put(collection: "users", type: "t", data: ["email": "a@example.com"])
        let b = try store.put(collection: "users", type: "t", data: ["email": "b@example.com"])
        _ = try store.put(collection: "users", type: "t", data: ["email": "c@example.com"])
        _ = try store.createIndex(collection: "users", fields: ["email"], bits: 32)
        #expect(try store.verify().problems.isEmpty)
        // Someone editing the file with their own SQLite does not enforce the store's foreign keys.
        var unchecked = Configuration()
        unchecked.foreignKeysEnabled = false
        let raw = try DatabaseQueue(path: try store.databaseLocation(), configuration: unchecked)
        let aID = a.id.uuidString.lowercased()
        let bID = b.id.uuidString.lowercased()
        try raw.write { db in
            // a's token replaced by b's; b's entry deleted; an entry for a record that does not exist.
            let seqA = try Int64.fetchOne(db, sql: "SELECT seq FROM records WHERE id = ?", arguments: [aID]) ?? -1
            let seqB = try Int64.fetchOne(db, sql: "SELECT seq FROM records WHERE id = ?", arguments: [bID]) ?? -1
            let tokenB = try Data.fetchOne(
                db, sql: "SELECT token FROM blind_index_entries WHERE record_seq = ?",
                arguments: [seqB])
            try db.execute(
                sql: "UPDATE blind_index_entries SET token = ? WHERE record_seq = ?", arguments: [tokenB, seqA])
            try db.execute(sql: "DELETE FROM blind_index_entries WHERE record_seq = ?", arguments: [seqB])
            try db.execute(
                sql:
                    "INSERT INTO blind_index_entries (collection, name, token, record_seq) VALUES ('users', 'email', x'00000000', 999999)"
            )
        }
        let problems = try store.verify().problems
        #expect(problems.allSatisfy { $0.code == .indexEntryMismatch }, "\(problems)")
        #expect(Set(problems.compactMap(\.context.item)) == [aID, bID, "email"])
    }

    @Test("equality search through simple and compound indexes returns exactly the matches, also with 1-bit tokens")
    func search() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        var batch: [(type: String, data: RecordData, plain: RecordData)] = []
        for i in 0..<400 {
            batch.append(("t", ["email": "user\(i % 50)@example.com", "city": "city\(i % 4)", "n": "\(i)"], [:]))
        }
        _ = try store.put(collection: "users", records: batch)
        let (email, covered) = try store.createIndex(collection: "users", fields: ["email"], bits: 16)
        #expect(covered == 400)
        #expect(email.name == "email")
        _ = try store.createIndex(collection: "users", fields: ["city"], name: "coarse", bits: 1)
        _ = try store.createIndex(collection: "users", fields: ["email", "city"], bits: 24)
        #expect(try store.indexes(collection: "users").map(\.name) == ["coarse", "email", "email+city"])
        expectStoreError(.storeExists) { _ = try store.createIndex(collection: "users", fields: ["email"]) }
        expectStoreError(.invalidParameter) { _ = try store.createIndex(collection: "users", fields: ["x"], bits: 0) }
        expectStoreError(.collectionNotFound) { _ = try store.createIndex(collection: "nobody", fields: ["x"]) }

        // Records written after the index get tokens too.
        try store.put(
            collection: "users", type: "t", data: ["email": "user7@example.com", "city": "city3", "n": "new"])

        let byEmail = try store.find(RecordQuery(collection: "users", fields: [.equals("email", "user7@example.com")]))
        #expect(byEmail.count == 9)
        #expect(byEmail.allSatisfy { $0.data["email"] == "user7@example.com" })
        let byCity = try store.find(RecordQuery(collection: "users", fields: [.equals("city", "city2")]))
        #expect(byCity.count == 100, "1-bit tokens match about half the records; the false positives are removed")
        #expect(byCity.allSatisfy { $0.data["city"] == "city2" })
        let both = try store.find(
            RecordQuery(
                collection: "users", fields: [.equals("email", "user7@example.com"), .equals("city", "city3")]))
        let bothNumbers: [String] = both.map { $0.data["n"] ?? "" }.sorted()
        var expectedNumbers: [String] = (0..<400).filter { $0 % 50 == 7 && $0 % 4 == 3 }.map { String($0) }
        expectedNumbers.append("new")
        #expect(bothNumbers == expectedNumbers.sorted())
        #expect(
            try store.find(RecordQuery(collection: "users", fields: [.equals("email", "nobody@example.com")])).isEmpty)

        // Updates move a record's tokens; deletes remove them.
        let target = try #require(byEmail.first)
        try store.update(
            collection: "users", id: target.id, expectedVersion: 1,
            data: ["email": "moved@example.com", "city": "city0"])
        #expect(
            try store.find(RecordQuery(collection: "users", fields: [.equals("email", "user7@example.com")])).count == 8
        )
        #expect(
            try store.find(RecordQuery(collection: "users", fields: [.equals("email", "moved@example.com")])).map(\.id)
                == [target.id])
        try store.delete(collection: "users", id: target.id)
        #expect(
            try store.find(RecordQuery(collection: "users", fields: [.equals("email", "moved@example.com")])).isEmpty)

        // The tokens in the file: truncated to the index's bits, distinct keys per index, no plaintext.
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        let tokens = try raw.read { db in
            try Row.fetchAll(db, sql: "SELECT name, token FROM blind_index_entries")
        }
        #expect(tokens.count == 400 * 3)
        for row in tokens {
            let token: Data = row["token"]
            switch row["name"] as String {
            case "email": #expect(token.count == 2)
            case "coarse": #expect(token.count == 1 && token[0] & 0x7F == 0)
            default: #expect(token.count == 3)
            }
        }
        // The index is what selects the candidates: a damaged record outside them is never read by an indexed
        // search, while a search without an index reads (and stops at) it.
        let victim = try #require(
            try store.find(RecordQuery(collection: "users", fields: [.equals("email", "user8@example.com")])).first)
        try raw.write { db in
            try db.execute(
                sql: "UPDATE records SET version = 9 WHERE id = ?", arguments: [victim.id.uuidString.lowercased()])
        }
        #expect(
            try store.find(RecordQuery(collection: "users", fields: [.equals("email", "user9@example.com")])).count == 8
        )
        expectStoreError(.recordTampered) {
            _ = try store.find(RecordQuery(collection: "users", fields: [.equals("n", "5")]))
        }
        try raw.write { db in
            try db.execute(
                sql: "UPDATE records SET version = 1 WHERE id = ?", arguments: [victim.id.uuidString.lowercased()])
        }
        try store.dropIndex(collection: "users", name: "coarse")
        #expect(try store.indexes(collection: "users").map(\.name) == ["email", "email+city"])
        #expect(try store.find(RecordQuery(collection: "users", fields: [.equals("city", "city1")])).count == 100)
    }
}

@Suite("E3DBStore: collection key rotation")
struct RotationTests {
    @Test("rotation re-encrypts every record under a new key, keeps the data and the indexes, and drops the old key")
    func rotate() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        var batch: [(type: String, data: RecordData, plain: RecordData)] = []
        for i in 0..<120 { batch.append(("t", ["n": "\(i)", "k": "k\(i % 10)"], [:])) }
        let references = try store.put(collection: "c", records: batch)
        _ = try store.createIndex(collection: "c", fields: ["k"], bits: 16)
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        let before = try raw.read { db in try Data.fetchAll(db, sql: "SELECT document FROM records ORDER BY seq") }
        let seen = Mutex<[Int]>([])
        let result = try store.rotateKey(collection: "c", batchSize: 50) { progress in
            seen.withLock { $0.append(progress.recordsDone) }
            #expect(progress.recordsTotal == 120)
        }
        #expect(result.keyVersion == 2 && result.recordsDone == 120)
        #expect(seen.withLock { $0 } == [50, 100, 120])
        let after = try raw.read { db in try Data.fetchAll(db, sql: "SELECT document FROM records ORDER BY seq") }
        #expect(zip(before, after).allSatisfy { $0 != $1 }, "every ciphertext changed")
        #expect(try raw.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM collection_keys") } == 1)
        #expect(try store.keyStatus(collection: "c") == (2, 0))
        for (i, reference) in references.enumerated() {
            #expect(try store.get(collection: "c", id: reference.id).data == ["n": "\(i)", "k": "k\(i % 10)"])
        }
        #expect(try store.find(RecordQuery(collection: "c", fields: [.equals("k", "k3")])).count == 12)
        let reopened = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(try reopened.verify().problems.isEmpty)
        #expect(try reopened.rotateKey(collection: "c").keyVersion == 3)
    }

    @Test("a put whose key is rotated away between its encryption and its transaction starts over with the new key")
    func rotationDuringPut() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let first = try store.put(collection: "c", type: "t", data: ["n": "first"])
        // Another connection rotates the key (and, no record being left under it, deletes key 1) while the batch
        // is encrypted under key 1 and its write transaction is not open yet.
        let other = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        let attempts = rotateDuringFirstPut(store) { try other.rotateKey(collection: "c") }
        let references = try store.put(
            collection: "c", records: [("t", ["n": "a"], [:]), ("t", ["n": "b"], [:])])
        #expect(attempts.value == 2, "the put started over once")
        #expect(try store.keyStatus(collection: "c") == (2, 0))
        #expect(try store.get(collection: "c", id: first.id).data == ["n": "first"])
        #expect(try references.map { try store.get(collection: "c", id: $0.id).data } == [["n": "a"], ["n": "b"]])
        #expect(try other.verify().problems.isEmpty)
    }

    @Test("an update under a key that another connection rotated away starts over with the new key")
    func rotationBeforeUpdate() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let record = try store.put(collection: "c", type: "t", data: ["n": "first"])
        let keyed = try store.put(collection: "c", key: "k", type: "t", data: ["n": "keyed"])
        // `store` keeps collection c's key 1 in memory; another connection rotates to key 2 and, no record being
        // left under key 1, deletes it.
        let other = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(try other.rotateKey(collection: "c").keyVersion == 2)
        #expect(
            try store.update(collection: "c", id: record.id, expectedVersion: 1, data: ["n": "second"]).version == 2)
        #expect(
            try store.put(collection: "c", key: "k", type: "t", data: ["n": "keyed 2"]).version == keyed.version + 1)
        // Written under key 2, so every connection reads them, and nothing is left under a deleted key.
        #expect(try other.get(collection: "c", id: record.id).data == ["n": "second"])
        #expect(try other.get(collection: "c", key: "k").data == ["n": "keyed 2"])
        #expect(try other.keyStatus(collection: "c") == (2, 0))
        #expect(try other.verify().problems.isEmpty)
    }

    @Test("share and export give the collection's current key, not one another connection rotated away")
    func exportAfterRotationElsewhere() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let references = try store.put(collection: "c", records: [("t", ["n": "a"], [:]), ("t", ["n": "b"], [:])])
        // `store` keeps key 1 in memory; another connection rotates to key 2 and deletes key 1.
        let other = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(try other.rotateKey(collection: "c").keyVersion == 2)
        let reader = ClientIdentity.generate(clientID: UUID())
        let exportDir = dir.url.appendingPathComponent("export")
        #expect(try store.export(collection: "c", to: exportDir, readerPublicKey: reader.publicKey).recordCount == 2)
        // The EAK opens the exported records (under key 2), and share gives the same key.
        let target = try StoreDirectory()
        let importer = try EncryptedStore.create(at: target.url, credential: passphrase("q"), kdfParameters: testKDF)
        #expect(try importer.importCollection(from: exportDir, reader: reader.boxKey, as: "inbox").count == 2)
        #expect(try importer.find(RecordQuery(collection: "inbox")).map(\.data) == [["n": "a"], ["n": "b"]])
        let shared = try store.share(collection: "c", with: reader.publicKey).unwrap(with: reader.boxKey)
        let lines = try Data(contentsOf: exportDir.appendingPathComponent("records.ndjson")).split(separator: 0x0A)
        #expect(lines.count == references.count)
        for (line, n) in zip(lines, ["a", "b"]) {
            let document = try EncryptedDocument(jsonData: Data(line))
            let decrypted = try document.decrypt(
                accessKey: shared, verifyingKey: nil,
                verification: RecordVerification(policy: .ignore, requireWriterIsSigner: false))
            #expect(decrypted.data == ["n": n])
        }
    }

    @Test("a rotation between two pages of an export is versionConflict and publishes nothing; the export then works")
    func rotationDuringExport() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        // More records than one page of the export (512).
        let records = (0..<600).map { (type: "t", data: ["n": "\($0)"] as RecordData, plain: RecordData()) }
        _ = try store.put(collection: "c", records: records)
        let other = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        let pages = HookCount()
        store.setTestHook(.afterExportPage) {
            guard pages.increment() == 1 else { return }
            // Another connection rotates the key (re-encrypting every record and deleting key 1) after the first page
            // was written under key 1.
            #expect(throws: Never.self) { try other.rotateKey(collection: "c") }
        }
        let reader = ClientIdentity.generate(clientID: UUID())
        let exportDir = dir.url.appendingPathComponent("export")
        expectStoreError(.versionConflict, item: "c") {
            try store.export(collection: "c", to: exportDir, readerPublicKey: reader.publicKey)
        }
        #expect(pages.value == 1, "the export stopped at the page after the rotation")
        // Nothing published, nothing left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: exportDir.path) == [])
        store.setTestHook(.afterExportPage, nil)
        let export = try store.export(collection: "c", to: exportDir, readerPublicKey: reader.publicKey)
        #expect(export.recordCount == 600)
        let target = try StoreDirectory()
        let importer = try EncryptedStore.create(at: target.url, credential: passphrase("q"), kdfParameters: testKDF)
        #expect(try importer.importCollection(from: exportDir, reader: reader.boxKey, as: "inbox").count == 600)
    }

    @Test("an export publishes eak.json before records.ndjson: whoever sees the records finds their key")
    func exportPublicationOrder() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        _ = try store.put(collection: "c", records: [("t", ["n": "a"], [:]), ("t", ["n": "b"], [:])])
        let exportDir = dir.url.appendingPathComponent("export")
        let seen = Mutex<[String]?>(nil)
        store.setTestHook(.betweenExportFiles) {
            // Without O_TMPFILE, the unpublished records file has a temporary name (`.e3dbkit-…`) until it is linked.
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: exportDir.path)) ?? [])
                .filter { !$0.hasPrefix(".e3dbkit-") }
            seen.withLock { $0 = names.sorted() }
        }
        let reader = ClientIdentity.generate(clientID: UUID())
        #expect(try store.export(collection: "c", to: exportDir, readerPublicKey: reader.publicKey).recordCount == 2)
        #expect(seen.withLock { $0 } == ["eak.json"], "published first")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: exportDir.path).sorted() == [
                "eak.json", "records.ndjson",
            ])
    }

    /// Another export to the same directory publishes both its files while this one reads its pages: this one
    /// replaces nothing (`storeExists`), and the directory holds the other's key beside the other's records.
    @Test("an export never replaces the files of another export that published meanwhile")
    func concurrentExports() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        _ = try store.put(collection: "c", records: [("t", ["n": "a"], [:]), ("t", ["n": "b"], [:])])
        let exportDir = dir.url.appendingPathComponent("export")
        let first = ClientIdentity.generate(clientID: UUID())
        let second = ClientIdentity.generate(clientID: UUID())
        let published = Mutex<(eak: Data, records: Data)?>(nil)
        store.setTestHook(.afterExportPage) {
            store.setTestHook(.afterExportPage, nil)
            do {
                let other = try store.export(collection: "c", to: exportDir, readerPublicKey: second.publicKey)
                let files = (try Data(contentsOf: other.eakFile), try Data(contentsOf: other.recordsFile))
                published.withLock { $0 = files }
            } catch {
                Issue.record("the second export: \(error)")
            }
        }
        expectStoreError(.storeExists) {
            try store.export(collection: "c", to: exportDir, readerPublicKey: first.publicKey)
        }
        let files = try #require(published.withLock { $0 })
        #expect(try Data(contentsOf: exportDir.appendingPathComponent("eak.json")) == files.eak, "the other's key")
        #expect(try Data(contentsOf: exportDir.appendingPathComponent("records.ndjson")) == files.records)
        #expect(throws: Never.self, "the key is the second reader's") {
            _ = try EAKInfo(jsonData: files.eak).unwrap(with: second.boxKey)
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: exportDir.path).sorted() == [
                "eak.json", "records.ndjson",
            ])
    }

    /// A records.ndjson that another writer put in the directory after this export published its eak.json: the
    /// export is refused and takes its own eak.json back, so no key of its stands beside records that are not its.
    @Test("an export refused at its second file removes its own eak.json and leaves the other records.ndjson")
    func foreignRecordsFile() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        _ = try store.put(collection: "c", records: [("t", ["n": "a"], [:])])
        let exportDir = dir.url.appendingPathComponent("export")
        let foreign = Data("not this export's\n".utf8)
        store.setTestHook(.betweenExportFiles) {
            store.setTestHook(.betweenExportFiles, nil)
            #expect(throws: Never.self) { try foreign.write(to: exportDir.appendingPathComponent("records.ndjson")) }
        }
        expectStoreError(.storeExists) {
            try store.export(
                collection: "c", to: exportDir, readerPublicKey: ClientIdentity.generate(clientID: UUID()).publicKey)
        }
        #expect(try Data(contentsOf: exportDir.appendingPathComponent("records.ndjson")) == foreign)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: exportDir.path).filter { !$0.hasPrefix(".e3dbkit-") }
                == ["records.ndjson"])
    }

    @Test("an interrupted rotation leaves every record readable and resumes with the same key")
    func resume() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        var batch: [(type: String, data: RecordData, plain: RecordData)] = []
        for i in 0..<60 { batch.append(("t", ["n": "\(i)"], [:])) }
        let references = try await store.put(collection: "c", records: batch)
        let interrupted = Task {
            try await store.rotateKey(collection: "c", batchSize: 10) { progress in
                if progress.recordsDone >= 20 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        do {
            _ = try await interrupted.value
            Issue.record("the rotation was not interrupted")
        } catch let error as E3DBError {
            #expect(error.code == .cancelled)
        }
        let status = try await store.keyStatus(collection: "c")
        #expect(status.keyVersion == 2 && status.recordsUnderOlderKeys == 40)
        // Both key versions read; new writes use the new key; export waits for the rotation.
        for (i, reference) in references.enumerated() {
            #expect(try await store.get(collection: "c", id: reference.id).data == ["n": "\(i)"])
        }
        try await store.put(collection: "c", type: "t", data: ["n": "during"])
        expectStoreError(.invalidParameter) {
            try store.export(
                collection: "c", to: dir.url.appendingPathComponent("x"), readerPublicKey: Box.PrivateKey().publicKey)
        }
        let other = try await EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        let resumed = try await other.rotateKey(collection: "c", batchSize: 7)
        #expect(resumed.keyVersion == 2 && resumed.recordsDone == 40)
        #expect(try await other.keyStatus(collection: "c") == (2, 0))
        #expect(try await other.verify().recordsChecked == 61)
        #expect(try await other.verify().problems.isEmpty)
    }
}

@Suite("E3DBStore: settings, cache and observation")
struct StoreExtrasTests {
    struct Preferences: Codable, Equatable {
        var theme: String
        var fontSize: Int
        var recent: [String]
    }

    @Test("settings: typed Codable values sealed under the master key, bound to their key name")
    func settings() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        let preferences = Preferences(theme: "dark SECRET-THEME", fontSize: 14, recent: ["a", "b"])
        try store.setSetting(preferences, forKey: "preferences")
        try store.setSetting(42, forKey: "answer")
        #expect(try store.setting(Preferences.self, forKey: "preferences") == preferences)
        #expect(try store.setting(Int.self, forKey: "answer") == 42)
        #expect(try store.setting(Int.self, forKey: "missing") == nil)
        expectStoreError(.settingTypeMismatch, item: "answer") {
            _ = try store.setting(Preferences.self, forKey: "answer")
        }
        #expect(try store.settingKeys() == ["answer", "preferences"])
        let reopened = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(try reopened.setting(Preferences.self, forKey: "preferences") == preferences)

        // A sealed value moved to another key name does not open there.
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        try raw.write { db in
            try db.execute(
                sql:
                    "UPDATE settings SET sealed = (SELECT sealed FROM settings WHERE key = 'preferences') WHERE key = 'answer'"
            )
        }
        expectStoreError(.recordTampered, item: "answer") { _ = try store.setting(Int.self, forKey: "answer") }
        try store.removeSetting(forKey: "answer")
        #expect(try store.settingKeys() == ["preferences"])
        let contents = try Data(contentsOf: URL(fileURLWithPath: dir.database))
        #expect(contents.range(of: Data("SECRET-THEME".utf8)) == nil)
    }

    @Test("the cache serves repeated reads, never a changed or tampered row, and empties on lock")
    func cache() throws {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        store.setCacheCapacity(8)
        var references: [RecordReference] = []
        for i in 0..<20 { references.append(try store.put(collection: "c", type: "t", data: ["n": "\(i)"])) }
        for reference in references { _ = try store.get(collection: "c", id: reference.id) }
        #expect(store.cachedRecordCount <= 8 && store.cachedRecordCount > 0)
        let last = try #require(references.last)
        #expect(try store.get(collection: "c", id: last.id).data == ["n": "19"])
        // Another connection updates the record: the next read sees the new version.
        let other = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        try other.update(collection: "c", id: last.id, expectedVersion: 1, data: ["n": "changed"])
        #expect(try store.get(collection: "c", id: last.id).data == ["n": "changed"])
        // Tampering is caught even for a cached record.
        let raw = try DatabaseQueue(path: try store.databaseLocation())
        try raw.write { db in
            try db.execute(
                sql: "UPDATE records SET version = 5 WHERE id = ?", arguments: [last.id.uuidString.lowercased()])
        }
        expectStoreError(.recordTampered) { _ = try store.get(collection: "c", id: last.id) }
        store.lock()
        #expect(store.cachedRecordCount == 0)
    }

    @Test(
        "observation: a new result after each committed change to the query's records (changes elsewhere are skipped)")
    func observation() async throws {
        let dir = try StoreDirectory()
        let store = try await EncryptedStore.create(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
        try await store.put(collection: "c", type: "todo", data: ["title": "first"], plain: ["list": "home"])
        var iterator = store.observe(RecordQuery(collection: "c", plain: [.equals("list", "home")])).makeAsyncIterator()
        let initial = try await iterator.next()
        #expect(initial?.map { $0.data["title"] } == ["first"])
        let second = try await store.put(
            collection: "c", type: "todo", data: ["title": "second"], plain: ["list": "home"])
        let afterInsert = try await iterator.next()
        #expect(afterInsert?.map { $0.data["title"] } == ["first", "second"])
        try await store.put(collection: "c", type: "todo", data: ["title": "elsewhere"], plain: ["list": "work"])
        try await store.update(
            collection: "c", id: second.id, expectedVersion: 1, data: ["title": "second, edited"],
            plain: ["list": "home"])
        let afterUpdate = try await iterator.next()
        #expect(afterUpdate?.map { $0.data["title"] } == ["first", "second, edited"])
        try await store.delete(collection: "c", id: second.id)
        let afterDelete = try await iterator.next()
        #expect(afterDelete?.map { $0.data["title"] } == ["first"])
    }
}
