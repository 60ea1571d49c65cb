internal import CE3DBSQLite3
public import E3DBPageCodec
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    internal import FoundationEssentials
#else
    internal import Foundation
#endif

/// A value of a SQLite result column.
public enum SQLiteValue: Sendable, Equatable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    public var description: String {
        switch self {
        case .null: "NULL"
        case .integer(let value): String(value)
        case .real(let value): String(value)
        case .text(let value): String(reflecting: value)
        case .blob(let value): "blob(\(value.count) bytes)"
        }
    }
}

/// One result row: column names in order and their values.
public struct SQLiteRow: Sendable, Equatable {
    public let columns: [String]
    public let values: [SQLiteValue]
}

/// A minimal connection on the system SQLite, through E3DBSQLite's VFS when it has a key: what the CLI and the
/// maintenance operations (encrypt, decrypt, rekey, verify) use. Apps use their own SQLite layer (GRDB,
/// SQLite.swift, the C API) with ``E3DBSQLite/uri(forDatabaseAt:key:settings:)``.
///
/// Errors are typed: a wrong key, a tampered page (with its number), a page size or reserve mismatch come from the
/// VFS's record of the failure, not from SQLite's generic message.
@safe public final class SQLiteConnection {
    private let handle: OpaquePointer
    private let keyHandle: String?
    /// The database file's full path as SQLite resolved it.
    public let path: String

    /// Opens (or creates) the database at `path`.
    /// - Parameters:
    ///   - path: The database file (`:memory:` or an empty path: SQLite's in-memory or temporary database, which
    ///     never reach the disk, so the key is not used).
    ///   - key: The key of an encrypted database; nil opens a plaintext database with SQLite's own VFS.
    ///   - settings: The cipher settings (SQLCipher 4 defaults).
    ///   - readOnly: Opens without write access (and never creates).
    /// - Throws: ``E3DBError/Code/wrongKey``, ``E3DBError/Code/pageSizeMismatch``,
    ///   ``E3DBError/Code/databaseNotEncrypted``, ``E3DBError/Code/databaseError`` (SQLite's message).
    public init(path: String, key: SQLCipherKey?, settings: SQLCipherSettings = .v4, readOnly: Bool = false)
        throws(E3DBError)
    {
        var target = path
        var handleName: String?
        if let key, path != ":memory:", !path.isEmpty {
            try key.validate()
            try settings.validate()
            try E3DBSQLite.register()
            let name = KeyRegistry.shared.register(key, settings: settings)
            handleName = name
            target = E3DBSQLite.uri(path: path, parameters: ["vfs": CipherVFS.name, "e3db_key": name])
        } else if path != ":memory:" && !path.isEmpty {
            target = E3DBSQLite.uri(path: path, parameters: [:])
        }
        var connection: OpaquePointer?
        let flags =
            (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_URI
            | SQLITE_OPEN_NOMUTEX
        FailureLog.clear(path: E3DBSQLite.canonicalPath(path))
        let rc = unsafe sqlite3_open_v2(target, &connection, flags, nil)
        guard rc == SQLITE_OK, let connection = unsafe connection else {
            let message = unsafe connection.map { unsafe String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            unsafe sqlite3_close_v2(connection)
            if let handleName { KeyRegistry.shared.remove(handleName) }
            throw FailureLog.last(path: E3DBSQLite.canonicalPath(path))
                ?? E3DBError(.databaseError, "cannot open \(path): \(message)", context: .init(actual: Int(rc)))
        }
        unsafe handle = connection
        keyHandle = handleName
        self.path = unsafe sqlite3_db_filename(connection, "main").map { unsafe String(cString: $0) } ?? path
        unsafe sqlite3_extended_result_codes(connection, 1)
        // Temporary tables and indexes in memory (the VFS keeps temporary files in memory as well).
        try execute("PRAGMA temp_store = MEMORY")
        if handleName != nil {
            // Reads page 1 now, so that a wrong key is reported at open.
            try execute("SELECT count(*) FROM sqlite_schema")
        }
    }

    private var connectionID: Int { unsafe Int(bitPattern: handle) }

    deinit {
        FailureLog.clear(connection: connectionID)
        unsafe sqlite3_close_v2(handle)
        if let keyHandle { KeyRegistry.shared.remove(keyHandle) }
    }

    /// Runs every statement of `sql` (separated by `;`) in order, calling `row` for each result row and
    /// `afterStatement` when a statement has finished.
    /// - Throws: the typed error of the first statement that fails; `row`'s errors are rethrown as they are.
    public func execute(
        _ sql: String, row: ((SQLiteRow) throws -> Void)? = nil, afterStatement: (() throws -> Void)? = nil
    ) throws(E3DBError) {
        let remaining = Array(sql.utf8CString)
        var offset = 0
        while true {
            var statement: OpaquePointer?
            var tail: UnsafePointer<CChar>?
            FailureLog.clear(path: path)
            FailureLog.clear(connection: connectionID)
            let rc = unsafe remaining.withUnsafeBufferPointer { buffer in
                unsafe sqlite3_prepare_v2(handle, buffer.baseAddress! + offset, -1, &statement, &tail)
            }
            guard rc == SQLITE_OK else { throw failure(rc) }
            guard let prepared = unsafe statement else { return }  // only whitespace or comments left
            defer { unsafe sqlite3_finalize(prepared) }
            unsafe remaining.withUnsafeBufferPointer { buffer in
                if let tail = unsafe tail { offset = unsafe tail - buffer.baseAddress! }
            }
            let columnCount = unsafe sqlite3_column_count(prepared)
            let names = (0..<columnCount).map {
                unsafe sqlite3_column_name(prepared, $0).map { unsafe String(cString: $0) } ?? ""
            }
            while true {
                let step = unsafe sqlite3_step(prepared)
                if step == SQLITE_DONE { break }
                guard step == SQLITE_ROW else { throw failure(step) }
                guard let row else { continue }
                let values = (0..<columnCount).map { unsafe Self.value(prepared, $0) }
                do {
                    try row(SQLiteRow(columns: names, values: values))
                } catch let error as E3DBError {
                    throw error
                } catch {
                    throw E3DBError(.databaseError, "\(error)")
                }
            }
            if let afterStatement {
                do {
                    try afterStatement()
                } catch let error as E3DBError {
                    throw error
                } catch {
                    throw E3DBError(.databaseError, "\(error)")
                }
            }
            if offset >= remaining.count - 1 { return }
        }
    }

    /// The rows of `sql` (one statement or several).
    public func rows(_ sql: String) throws(E3DBError) -> [SQLiteRow] {
        var rows: [SQLiteRow] = []
        try execute(sql) { rows.append($0) }
        return rows
    }

    private static func value(_ statement: OpaquePointer, _ column: Int32) -> SQLiteValue {
        switch unsafe sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: return .integer(unsafe sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: return .real(unsafe sqlite3_column_double(statement, column))
        case SQLITE_TEXT:
            let count = Int(unsafe sqlite3_column_bytes(statement, column))
            guard let text = unsafe sqlite3_column_text(statement, column) else { return .text("") }
            return .text(unsafe String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(unsafe sqlite3_column_bytes(statement, column))
            guard count > 0, let blob = unsafe sqlite3_column_blob(statement, column) else { return .blob([]) }
            return .blob(unsafe Array(UnsafeRawBufferPointer(start: blob, count: count)))
        default: return .null
        }
    }

    /// Replaces this database's content with `source`'s, page by page (SQLite's backup API, in one step).
    func restore(from source: SQLiteConnection) throws(E3DBError) {
        FailureLog.clear(connection: connectionID)
        guard let backup = unsafe sqlite3_backup_init(handle, "main", source.handle, "main") else {
            throw failure(unsafe sqlite3_errcode(handle))
        }
        let step = unsafe sqlite3_backup_step(backup, -1)
        let finish = unsafe sqlite3_backup_finish(backup)
        guard step == SQLITE_DONE, finish == SQLITE_OK else {
            throw FailureLog.last(connection: source.connectionID) ?? failure(step == SQLITE_DONE ? finish : step)
        }
    }

    /// The typed error for a failed SQLite call: the VFS's record when it caused it, else SQLite's message.
    func failure(_ rc: Int32) -> E3DBError {
        if let recorded = FailureLog.last(connection: connectionID) ?? FailureLog.last(path: path) { return recorded }
        let message = unsafe String(cString: sqlite3_errmsg(handle))
        return E3DBError(.databaseError, message, context: .init(actual: Int(unsafe sqlite3_extended_errcode(handle))))
    }
}
