// E3DBSQLite's side of scripts/sqlite-benchmark.sh: the SQL of Benchmarks/SQLiteBaseline/workloads.sql through
// SQLiteConnection, encrypted (E3DBSQLite's VFS, passphrase) in the SQLCipher 4 format (mode "encrypted") and in
// SQLite3 Multiple Ciphers' chacha20 format (mode "chacha20"), and plaintext (the system SQLite's own VFS), with the
// default page cache and with 128 MiB. Benchmarks/SQLiteBaseline/sqlite_baseline.py runs the
// same SQL through SQLCipher 4; the script prints the table of both.
//
//   SQLiteThroughput WORKDIR [ROWS] [--rekey-mib M] [--sql PATH]
//   SQLiteThroughput WORKDIR [ROWS] --only point_reads|scan|insert [--mode encrypted|chacha20|plaintext]
//       [--cache default|128MiB]
//
// The second form (for `perf record`) runs the insert that builds the database and then only the named workload,
// in the named mode and cache (both of each unless given); no open or rekey measurements. `--only opens` runs only
// the plaintext and raw-key opens (of the named mode), 2,000 times each instead of 5.
// ROWS: 500000 unless given. --rekey-mib (or REKEY_MIB): the size of the database the rekey is timed on (0, the
// default, skips it). --sql: workloads.sql (default: the one beside this file's source, ../SQLiteBaseline).
//
// Each workload runs in a fresh connection after a first read (which derives the key), with `PRAGMA cache_size`
// at SQLite's default (-2000) or -131072, journal mode DELETE (the default); only its statement is timed, with
// ContinuousClock. Prints one JSON object a line:
// {"engine": "e3dbkit", "name": …, "mode": "encrypted"|"chacha20"|"plaintext", "cache": "default"|"128MiB", "seconds": …,
//  "count": …, "result": …}
import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import Foundation

let passphrase = "benchmark passphrase"
let newPassphrase = "another benchmark passphrase"
/// The same bytes as sqlite_baseline.py's RAW_KEY.
let rawKeyBytes = (0..<32).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) }
let caches: [(name: String, size: Int)] = [("default", -2000), ("128MiB", -131072)]
let scans = 3
/// Bytes per row of the rekey database (table and index, 4 KiB encrypted pages), to turn --rekey-mib into rows.
let rekeyBytesPerRow = 134

func key(_ text: String) -> SQLCipherKey { .passphrase(SecureBytes(copying: Array(text.utf8))) }
func rawKey() -> SQLCipherKey { .rawKey(SecureBytes(copying: rawKeyBytes)) }

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("SQLiteThroughput: \(message)\n".utf8))
    exit(1)
}

func emit(_ name: String, _ seconds: Double, count: Int, mode: String = "encrypted", cache: String = "default", extra: [String: Any] = [:]) {
    var object: [String: Any] = ["engine": "e3dbkit", "name": name, "mode": mode, "cache": cache, "seconds": seconds, "count": count]
    for (key, value) in extra { object[key] = value }
    let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// The named statements of workloads.sql (sections start with `-- @name`; other `--` lines are dropped), $ROWS
/// replaced by `rows`.
func sections(_ path: String, rows: Int) -> [String: String] {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { fail("cannot read \(path)") }
    var found: [String: [String]] = [:]
    var name: String?
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.hasPrefix("-- @") {
            let header = line.dropFirst(4).trimmingCharacters(in: .whitespaces)
            name = header
            found[header] = []
        } else if let name, !line.hasPrefix("--") {
            found[name, default: []].append(String(line))
        }
    }
    return found.mapValues {
        $0.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "$ROWS", with: String(rows))
    }
}

func remove(_ path: String) {
    for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
}

/// The cipher settings of each encrypted mode.
func settings(_ mode: String) -> SQLCipherSettings { mode == "chacha20" ? .chacha20 : .v4 }

func connect(_ path: String, _ key: SQLCipherKey?, settings: SQLCipherSettings = .v4, cache: Int = -2000) throws
    -> SQLiteConnection
{
    let connection = try SQLiteConnection(path: path, key: key, settings: settings)
    try connection.execute("PRAGMA cache_size = \(cache)")
    return connection
}

/// The rows of `sql` as text, comma-separated (as sqlite_baseline.py prints them).
func result(_ connection: SQLiteConnection, _ sql: String) throws -> String {
    try connection.rows(sql).map { $0.values.map(\.description).joined(separator: ",") }.joined(separator: ",")
}

func timed(_ connection: SQLiteConnection, _ sql: String) throws -> (Double, String) {
    let start = ContinuousClock.now
    let value = try result(connection, sql)
    return (seconds(ContinuousClock.now - start), value)
}

func run() throws {
    var arguments = Array(CommandLine.arguments.dropFirst())
    func option(_ name: String) -> String? {
        guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
        let value = arguments[index + 1]
        arguments.removeSubrange(index...(index + 1))
        return value
    }
    let sqlPath = option("--sql")
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("SQLiteBaseline/workloads.sql").path
    let rekeyMiB = Int(option("--rekey-mib") ?? ProcessInfo.processInfo.environment["REKEY_MIB"] ?? "0") ?? 0
    let only = option("--only")
    let opensOnly = only == "opens"
    let opens = opensOnly ? 2000 : 5
    let onlyMode = option("--mode")
    let onlyCache = option("--cache")
    guard let work = arguments.first else {
        fail("usage: SQLiteThroughput WORKDIR [ROWS] [--rekey-mib M] [--sql PATH]")
    }
    let rows = arguments.count > 1 ? Int(arguments[1]) ?? 500_000 : 500_000
    let sql = sections(sqlPath, rows: rows)
    let path = work + "/e3dbkit.db"

    // (SQLiteConnection takes ":memory:" as a file name, so the version comes from a file in WORKDIR.)
    let probe = work + "/version.db"
    let version = try SQLiteConnection(path: probe, key: nil).rows("SELECT sqlite_version()").first?.values.first?.description ?? "?"
    remove(probe)
    emit("version", 0, count: 0, extra: ["sqlite": version.replacingOccurrences(of: "\"", with: "")])

    for cache in caches where !opensOnly && (onlyCache == nil || onlyCache == cache.name) {
        for mode in ["plaintext", "encrypted", "chacha20"] where onlyMode == nil || onlyMode == mode {
            let databaseKey = mode == "plaintext" ? nil : key(passphrase)
            let modeSettings = settings(mode)
            remove(path)
            do {
                let db = try connect(path, databaseKey, settings: modeSettings, cache: cache.size)
                try db.execute(sql["table"]!)
                try db.execute(sql["index"]!)
                let statement = "BEGIN; " + sql["insert"]! + "; COMMIT"
                let start = ContinuousClock.now
                try db.execute(statement)
                let time = seconds(ContinuousClock.now - start)
                emit("insert", time, count: rows, mode: mode, cache: cache.name, extra: ["bytes": fileSize(path)])
            }
            if only == nil || only == "point_reads" {
                let db = try connect(path, databaseKey, settings: modeSettings, cache: cache.size)
                _ = try result(db, sql["first_read"]!)
                let (time, value) = try timed(db, sql["point_reads"]!)
                emit("point_reads", time, count: rows, mode: mode, cache: cache.name, extra: ["result": value])
            }
            if only == nil || only == "scan" {
                let db = try connect(path, databaseKey, settings: modeSettings, cache: cache.size)
                _ = try result(db, sql["first_read"]!)
                var total = 0.0
                var values = Set<String>()
                for _ in 0..<scans {
                    let (time, value) = try timed(db, sql["scan"]!)
                    total += time
                    values.insert(value)
                }
                emit("scan", total, count: rows * scans, mode: mode, cache: cache.name, extra: ["result": values.sorted().joined(separator: ";")])
            }
        }
    }
    remove(path)
    if only != nil && !opensOnly { return }

    // Open + first read, best of `opens`, on a small database made with each key form (and without a key). The
    // codec cache is emptied before each open, so the passphrase is stretched every time (`open_passphrase_cached`:
    // a second connection in the same process, which takes the derived key from PageCodecCache).
    let forms: [(String, SQLCipherKey?, String)] = [
        ("plaintext", nil, "plaintext"), ("passphrase", key(passphrase), "encrypted"), ("raw_key", rawKey(), "encrypted"),
        ("passphrase", key(passphrase), "chacha20"), ("raw_key", rawKey(), "chacha20"),
    ]
    for (form, formKey, mode) in forms
    where (onlyMode == nil || onlyMode == mode) && !(opensOnly && form == "passphrase") {
        let small = work + "/open-\(form)-\(mode).db"
        remove(small)
        do { try connect(small, formKey, settings: settings(mode)).execute(sql["table"]!) }
        var best = Double.infinity
        var cached = Double.infinity
        for _ in 0..<opens {
            E3DBSQLite.forgetAllKeys()
            let start = ContinuousClock.now
            do {
                let db = try SQLiteConnection(path: small, key: formKey, settings: settings(mode))
                _ = try result(db, sql["first_read"]!)
            }
            best = min(best, seconds(ContinuousClock.now - start))
            let again = ContinuousClock.now
            do {
                let db = try SQLiteConnection(path: small, key: formKey, settings: settings(mode))
                _ = try result(db, sql["first_read"]!)
            }
            cached = min(cached, seconds(ContinuousClock.now - again))
        }
        emit("open_" + form, best, count: 1, mode: mode)
        if form == "passphrase" { emit("open_passphrase_cached", cached, count: 1, mode: mode) }
        remove(small)
    }

    // E3DBSQLite.rekey (a copy under the new key, then a rename) of a database of about rekeyMiB MiB (table, then
    // the index), built with a 128 MiB cache. As on the SQLCipher side, the old key is derived before the timing
    // (here: by the connection that built the database, through PageCodecCache); the new one is derived inside it.
    if rekeyMiB > 0 && !opensOnly {
        let bigRows = rekeyMiB * 1_048_576 / rekeyBytesPerRow
        let bigSQL = sections(sqlPath, rows: bigRows)
        let big = work + "/rekey.db"
        remove(big)
        do {
            let db = try connect(big, key(passphrase), cache: -131072)
            try db.execute(bigSQL["table"]!)
            try db.execute("BEGIN; " + bigSQL["insert"]! + "; COMMIT")
            try db.execute(bigSQL["index"]!)
        }
        let size = fileSize(big)
        do { _ = try result(try connect(big, key(passphrase)), sql["first_read"]!) }
        let start = ContinuousClock.now
        try E3DBSQLite.rekey(databaseAt: big, from: key(passphrase), to: key(newPassphrase))
        let time = seconds(ContinuousClock.now - start)
        let count = try result(try connect(big, key(newPassphrase)), "SELECT count(*) FROM t")
        guard count == String(bigRows) else { fail("the rekeyed database does not open with the new passphrase (\(count) rows)") }
        emit("rekey", time, count: bigRows, extra: ["bytes": size])
        remove(big)
    }
}

do {
    try run()
} catch {
    fail("\(error)")
}
