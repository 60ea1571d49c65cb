// E3DBStore throughput beside plain SQLite (GRDB), in one process and run. scripts/store-benchmark.sh runs it with
// the SQLCipher 4 side (Benchmarks/StoreBaseline/store_baseline.py) on the same records and prints the table.
//
//   StoreThroughput RECORDS.ndjson WORKDIR [--change-records M]
//   STORE_ONLY=insert|read|lookup StoreThroughput RECORDS.ndjson WORKDIR   (one store phase alone, for perf record)
//   STORE_FIELD_KEYS=record StoreThroughput …     (the store writes one data key per record instead of per field)
//   STORE_DATABASE=plain StoreThroughput …         (the store's database in a plain file; default: encrypted file)
//   StoreThroughput scan STOREDIR KEYFILE       (the child process that scans and reports its peak memory)
//
// RECORDS.ndjson holds one record a line, a JSON object of strings (store_baseline.py generate). Each measurement is
// printed as one JSON object on stdout: {"name": …, "seconds": …, "count": …}.
import E3DBCanonicalJSON
import E3DBDocuments
import E3DBPrimitives
import E3DBStore
import Foundation
import GRDB
import Synchronization

/// The indexed field (distinct values), as in store_baseline.py.
let indexedField = "field01"
let collection = "bench"

func emit(_ name: String, _ seconds: Double, count: Int, extra: [String: Int] = [:]) {
    var object: [String: Any] = ["name": name, "seconds": seconds, "count": count]
    for (key, value) in extra { object[key] = value }
    let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("StoreThroughput: \(message)\n".utf8))
    exit(1)
}

func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// A value of /proc/self/status in KiB (VmRSS, VmHWM), 0 where there is none.
func statusKiB(_ key: String) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix(key + ":") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// A deterministic shuffle (SplitMix64), so both sides of a run read in a fixed random order.
func shuffled(_ count: Int, seed: UInt64) -> [Int] {
    var order = Array(0..<count)
    var state = seed
    func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    for i in stride(from: count - 1, to: 0, by: -1) { order.swapAt(i, Int(next() % UInt64(i + 1))) }
    return order
}

func rawKey() -> SecureBytes { SecureBytes(randomCount: 32) }

func freshDirectory(_ url: URL) -> URL {
    try? FileManager.default.removeItem(at: url)
    return url
}

// MARK: Scan child

/// Opens the store with the key in `keyFile`, scans every record through the AsyncSequence and prints the time, the
/// resident memory after opening and the peak (VmHWM).
func scanChild(store path: String, keyFile: String) async {
    do {
        let key = try Data(contentsOf: URL(fileURLWithPath: keyFile))
        let store = try EncryptedStore.open(at: URL(fileURLWithPath: path), credential: .key(SecureBytes(copying: key)))
        store.setCacheCapacity(0)
        let before = statusKiB("VmRSS")
        var count = 0
        var bytes = 0
        let start = ContinuousClock.now
        for try await record in store.records(matching: RecordQuery(collection: collection)) {
            count += 1
            bytes += record.data.members.count
        }
        let elapsed = ContinuousClock.now - start
        guard bytes == count * 10 else { fail("the scan returned records with missing fields") }
        emit(
            "store_scan", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            count: count, extra: ["rss_open_kib": before, "peak_kib": statusKiB("VmHWM")])
    } catch {
        fail("scan: \(error)")
    }
}

// MARK: E3DBStore

struct Input {
    var lines: [String] = []
    var records: [RecordData] = []
}

func loadInput(_ path: String) -> Input {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { fail("cannot read \(path)") }
    var input = Input()
    for line in text.split(separator: "\n") {
        do {
            input.records.append(try RecordData(jsonValue: try CanonicalJSON.parse(String(line))))
        } catch {
            fail("bad record line: \(error)")
        }
        input.lines.append(String(line))
    }
    return input
}

/// Creates a store in `directory` with a raw key (no KDF) and an optional blind index on the indexed field, and
/// times `put(collection:records:)` of all records in one call (one transaction).
func storeInsert(_ input: Input, directory: URL, key: SecureBytes, indexed: Bool) throws -> (EncryptedStore, [UUID], Double) {
    let store = try EncryptedStore.create(
        at: freshDirectory(directory), credential: .key(key), databaseEncryption: databaseEncryption)
    if fieldKeysPerRecord { store.fieldKeyMode = .perRecord }
    if indexed {
        _ = try store.put(collection: collection, records: [])  // creates the collection and its key
        try store.createIndex(collection: collection, fields: [indexedField])
    }
    let batch = input.records.map { (type: "bench", data: $0, plain: RecordData()) }
    var refs: [RecordReference] = []
    let time = try seconds { refs = try store.put(collection: collection, records: batch) }
    return (store, refs.map(\.id), time)
}

/// STORE_DATABASE=plain keeps the store's database in a plain SQLite file (the layout before the encrypted file).
let databaseEncryption: DatabaseEncryption =
    ProcessInfo.processInfo.environment["STORE_DATABASE"] == "plain" ? .plain : .encrypted

/// STORE_FIELD_KEYS=record writes with one data key per record (`FieldKeyMode.perRecord`) instead of per field.
let fieldKeysPerRecord = ProcessInfo.processInfo.environment["STORE_FIELD_KEYS"] == "record"

/// The store phase named by STORE_ONLY (for profiling one phase), or nil for all.
let onlyPhase = ProcessInfo.processInfo.environment["STORE_ONLY"]

func storeSide(_ input: Input, work: URL, changeRecords: Int) async throws {
    let n = input.records.count
    let key = rawKey()
    if onlyPhase == "insert" {
        emit("store_insert_indexed", try storeInsert(input, directory: work.appendingPathComponent("store"), key: key, indexed: true).2, count: n)
        return
    }
    var best = Double.infinity
    for _ in 0..<(onlyPhase == nil ? 2 : 0) {
        let (_, _, time) = try storeInsert(input, directory: work.appendingPathComponent("store-plain"), key: key, indexed: false)
        best = min(best, time)
    }
    if onlyPhase == nil { emit("store_insert", best, count: n) }
    best = .infinity
    var store: EncryptedStore?
    var ids: [UUID] = []
    for _ in 0..<(onlyPhase == nil ? 2 : 1) {
        store = nil
        let made = try storeInsert(input, directory: work.appendingPathComponent("store"), key: key, indexed: true)
        if made.2 < best { best = made.2 }
        (store, ids) = (made.0, made.1)
    }
    emit("store_insert_indexed", best, count: n)
    guard let store else { fail("no store") }
    try? FileManager.default.removeItem(at: work.appendingPathComponent("store-plain"))

    // Point reads by id in a random order, every one decrypted and compared; no cache.
    store.setCacheCapacity(0)
    let order = shuffled(n, seed: 20_261_125)
    if onlyPhase != "lookup" { emit("store_point_read", try seconds {
        for i in order {
            let record = try store.get(collection: collection, id: ids[i])
            guard record.data == input.records[i] else { fail("record \(i) read back different") }
        }
    }, count: n) }
    // The same reads split across two threads (the store is thread-safe; SQLite's WAL lets readers run together).
    if onlyPhase == nil {
        let failures = Mutex(0)
        let readIDs = ids
        emit("store_point_read_2threads", seconds {
            DispatchQueue.concurrentPerform(iterations: 2) { half in
                for i in order[(half * n / 2)..<((half + 1) * n / 2)] {
                    let record = try? store.get(collection: collection, id: readIDs[i])
                    if record?.data != input.records[i] { failures.withLock { $0 += 1 } }
                }
            }
        }, count: n)
        guard failures.withLock({ $0 }) == 0 else { fail("a read on two threads failed") }
    }
    if onlyPhase == "read" { return }

    // Blind-index lookups: find(fields: equals) on the indexed field, decrypted and matched.
    emit("store_index_lookup", try seconds {
        for i in order {
            let value = input.records[i][indexedField] ?? ""
            let found = try store.find(RecordQuery(collection: collection, fields: [.equals(indexedField, value)]))
            guard found.count == 1, found[0].id == ids[i] else { fail("lookup \(i) found \(found.count) records") }
        }
    }, count: n)
    if onlyPhase != nil { return }

    // Full scan in a child process, for its own peak memory.
    let keyFile = work.appendingPathComponent("store.key")
    try key.withUnsafeBytes { try Data($0).write(to: keyFile, options: .atomic) }
    let child = Process()
    child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    child.arguments = ["scan", work.appendingPathComponent("store").path, keyFile.path]
    try child.run()
    child.waitUntilExit()
    guard child.terminationStatus == 0 else { fail("the scan child failed") }

    try changeCredentials(store, records: n)

    // The same on a store of `changeRecords` records (the records repeated), written in batches of 100,000.
    if changeRecords > n {
        let big = try EncryptedStore.create(
            at: freshDirectory(work.appendingPathComponent("store-big")), credential: .key(key),
            databaseEncryption: databaseEncryption)
        var written = 0
        while written < changeRecords {
            let count = min(100_000, changeRecords - written)
            let batch = (0..<count).map { (type: "bench", data: input.records[(written + $0) % n], plain: RecordData()) }
            _ = try big.put(collection: collection, records: batch)
            written += count
        }
        guard try big.count(collection: collection) == changeRecords else { fail("the big store is short") }
        try changeCredentials(big, records: changeRecords)
        try? FileManager.default.removeItem(at: work.appendingPathComponent("store-big"))
    }
}

/// changeCredential to a raw key and to a passphrase with each KDF preset but `sensitive`, timed.
func changeCredentials(_ store: EncryptedStore, records: Int) throws {
    let passphrase = SecureBytes(copying: Data("another benchmark passphrase".utf8))
    emit("store_change_key", try seconds { try store.changeCredential(to: .key(rawKey())) }, count: records)
    for preset in [KDFPreset.interactive, .moderate] {
        emit("store_change_passphrase_\(preset.rawValue)", try seconds {
            try store.changeCredential(to: .passphrase(passphrase), kdf: preset)
        }, count: records)
    }
}

// MARK: Plain SQLite (GRDB), the floor

/// The same table as the SQLCipher side: (id TEXT PRIMARY KEY, data TEXT, f TEXT), data the record's JSON text.
func sqliteInsert(_ input: Input, path: String, ids: [String], indexed: Bool) throws -> (DatabasePool, Double) {
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    let pool = try DatabasePool(path: path)
    try pool.write { db in
        try db.execute(sql: "CREATE TABLE records (id TEXT PRIMARY KEY, data TEXT NOT NULL, f TEXT NOT NULL)")
        if indexed { try db.execute(sql: "CREATE INDEX records_f ON records(f)") }
    }
    let time = try seconds {
        try pool.write { db in
            let statement = try db.cachedStatement(sql: "INSERT INTO records (id, data, f) VALUES (?, ?, ?)")
            for (i, line) in input.lines.enumerated() {
                try statement.execute(arguments: [ids[i], line, input.records[i][indexedField] ?? ""])
            }
        }
    }
    return (pool, time)
}

func sqliteSide(_ input: Input, work: URL) throws {
    let n = input.lines.count
    let ids = (0..<n).map { _ in UUID().uuidString.lowercased() }
    let path = work.appendingPathComponent("plain.sqlite").path
    for indexed in [false, true] {
        var best = Double.infinity
        for _ in 0..<2 { best = min(best, try sqliteInsert(input, path: path, ids: ids, indexed: indexed).1) }
        emit(indexed ? "sqlite_insert_indexed" : "sqlite_insert", best, count: n)
    }
    let pool = try DatabasePool(path: path)
    let order = shuffled(n, seed: 20_261_125)
    // One read (a GRDB read transaction) per lookup, as EncryptedStore.get does; statements cached.
    for (name, column) in [("sqlite_point_read", "id"), ("sqlite_indexed_lookup", "f")] {
        emit(name, try seconds {
            for i in order {
                let key = column == "id" ? ids[i] : input.records[i][indexedField] ?? ""
                let text = try pool.read { db in
                    try String.fetchOne(db.cachedStatement(sql: "SELECT data FROM records WHERE \(column) = ?"), arguments: [key])
                }
                guard text == input.lines[i] else { fail("SQLite row \(i) read back different") }
            }
        }, count: n)
    }
}

// MARK: Main

let arguments = CommandLine.arguments
if arguments.count == 4, arguments[1] == "scan" {
    await scanChild(store: arguments[2], keyFile: arguments[3])
    exit(0)
}
guard arguments.count == 3 || (arguments.count == 5 && arguments[3] == "--change-records") else {
    fail("usage: StoreThroughput RECORDS.ndjson WORKDIR [--change-records M]")
}
let input = loadInput(arguments[1])
let work = URL(fileURLWithPath: arguments[2])
let changeRecords = arguments.count == 5 ? Int(arguments[4]) ?? 0 : 0
do {
    if onlyPhase == nil { try sqliteSide(input, work: work) }
    try await storeSide(input, work: work, changeRecords: changeRecords)
} catch {
    fail("\(error)")
}
