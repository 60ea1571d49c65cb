// Fuzz target FuzzSQLiteExport: `E3DBSQLite.encrypt` (the export that encrypt, decrypt and rekey to other settings
// share) of a plaintext database whose schema carries the input, as a database handed over by someone else would.
//
// Each input makes a fresh plaintext database in a fresh directory (the working directory while the input runs, so
// a relative ATTACH lands there): tables t (with rows) and u, index i, view v and trigger g; then, through writable_schema, one
// schema entry gets the input's text.
// - byte 0 (mod 5): the entry: t, i, v, g, or a new rootpage-0 entry vt (the virtual-table path);
// - byte 1 (mod 6): its `type`: kept, or table, index, view, trigger, or a made-up one;
// - byte 2 (mod 8): its `name` (and `tbl_name`): kept, or another, an upper-case one, sqlite_x, main, source, temp,
//   or the empty name;
// - the rest: its `sql` (UTF-8, invalid bytes replaced).
// The database is then encrypted into `out.db` of the same directory.
// Invariants: no trap; success, or a typed E3DBError with no output left behind; in either case no file in the
// directory but the source and (on success) the output: nothing the schema text attached, created or wrote.
import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzSQLiteExport invariant violated: \(message())") }
}

/// The process's working directory for the run (each input's directory is made in it, and entered).
private let exportRoot: URL = {
    // In memory where there is a tmpfs (each input makes and syncs two databases: on a disk, fsync dominates).
    let base =
        FileManager.default.isWritableFile(atPath: "/dev/shm")
        ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
    let root = base.appendingPathComponent("fuzzexport-\(UUID().uuidString)")
    do {
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    } catch {
        fatalError("FuzzSQLiteExport: cannot make \(root.path): \(error)")
    }
    unsafe exportRootPath = root.path
    atexit {
        if let path = unsafe exportRootPath { try? FileManager.default.removeItem(atPath: path) }
    }
    return root
}()
nonisolated(unsafe) private var exportRootPath: String?

/// `FUZZ_EXPORT_TRACE=1` prints each input's outcome (to see what the seeds reach).
private let traceOutcomes = ProcessInfo.processInfo.environment["FUZZ_EXPORT_TRACE"] == "1"

private let exportKey = SQLCipherKey.rawKey(SecureBytes(copying: [UInt8](repeating: 0x5a, count: 32)))

func fuzzSQLiteExport(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    guard bytes.count >= 3 else { return 0 }
    let entries = ["t", "i", "v", "g", "vt"]
    let types = ["", "table", "index", "view", "trigger", "module"]
    let names = ["", "w", "T", "sqlite_x", "main", "source", "temp", "''"]
    let entry = entries[Int(bytes[0]) % entries.count]
    let type = types[Int(bytes[1]) % types.count]
    let name = names[Int(bytes[2]) % names.count]
    let sql = String(decoding: bytes.dropFirst(3), as: UTF8.self)

    let directory = exportRoot.appendingPathComponent(UUID().uuidString)
    // The caller's working directory comes back after the input (the replay tool's paths may be relative to it).
    let callerDirectory = FileManager.default.currentDirectoryPath
    guard (try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)) != nil,
        FileManager.default.changeCurrentDirectoryPath(directory.path)
    else { return 0 }
    defer {
        _ = FileManager.default.changeCurrentDirectoryPath(callerDirectory)
        try? FileManager.default.removeItem(at: directory)
    }
    let source = directory.appendingPathComponent("source.db").path
    let output = directory.appendingPathComponent("out.db").path
    func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
    do {
        let connection = try SQLiteConnection(path: source, key: nil)
        try connection.execute(
            """
            PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
            CREATE TABLE t(a, b); INSERT INTO t VALUES (1, 'one'), (2, 'two'); CREATE TABLE u(x);
            CREATE INDEX i ON t(a); CREATE VIEW v AS SELECT a FROM t;
            CREATE TRIGGER g AFTER INSERT ON t BEGIN INSERT INTO u VALUES (new.a); END;
            PRAGMA writable_schema = ON;
            """)
        if entry == "vt" {
            try connection.execute(
                "INSERT INTO sqlite_schema (type, name, tbl_name, rootpage, sql) VALUES ('table', 'vt', 'vt', 0, "
                    + "\(literal(sql)))")
        } else {
            try connection.execute("UPDATE sqlite_schema SET sql = \(literal(sql)) WHERE name = '\(entry)'")
        }
        let target = entry == "vt" ? "vt" : entry
        if !type.isEmpty {
            try connection.execute("UPDATE sqlite_schema SET type = '\(type)' WHERE name = '\(target)'")
        }
        if !name.isEmpty {
            try connection.execute(
                "UPDATE sqlite_schema SET name = \(literal(name)), tbl_name = \(literal(name)) WHERE name = '\(target)'"
            )
        }
        try connection.execute("PRAGMA writable_schema = OFF")
    } catch {
        // The crafted schema may already be refused by SQLite here (a source that cannot be made is not an input).
        if traceOutcomes { print("FuzzSQLiteExport: no source: \(error)") }
        return 0
    }
    var failed = false
    do {
        try E3DBSQLite.encrypt(plaintextDatabaseAt: source, to: output, key: exportKey)
        if traceOutcomes { print("FuzzSQLiteExport: encrypted") }
    } catch {
        // Typed by construction (encrypt throws E3DBError); a trap would have ended the run.
        failed = true
        if traceOutcomes { print("FuzzSQLiteExport: \(error)") }
    }
    let left = Set((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
    let allowed: Set<String> = failed ? ["source.db"] : ["source.db", "out.db"]
    require(left == allowed, "files after the export (\(failed ? "failed" : "succeeded")): \(left.sorted())")
    let rootLeft = Set((try? FileManager.default.contentsOfDirectory(atPath: exportRoot.path)) ?? [])
    require(rootLeft == [directory.lastPathComponent], "files beside the input's directory: \(rootLeft.sorted())")
    return 0
}
