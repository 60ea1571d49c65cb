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

// Safety: (`@safe`) `handle` is the `sqlite3*` that `init` opened; this object owns it, never hands it out, and closes
// it in `deinit`, so every `sqlite3_*` call below gets a live connection. It is opened with `SQLITE_OPEN_NOMUTEX` and
// the class is not `Sendable`: one thread uses it at a time. Strings SQLite returns (`sqlite3_errmsg`,
// `sqlite3_db_filename`, column names) are copied into Swift `String`s before the next call on the handle.
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
        // Resolved once: Foundation's path resolution is a visible part of an open.
        let canonical = E3DBSQLite.canonicalPath(path)
        if let key, path != ":memory:", !path.isEmpty {
            try key.validate()
            try settings.validate()
            try E3DBSQLite.register()
            let name = KeyRegistry.shared.register(key, settings: settings)
            handleName = name
            target = E3DBSQLite.uri(canonicalPath: canonical, parameters: ["vfs": CipherVFS.name, "e3db_key": name])
        } else if path != ":memory:" && !path.isEmpty {
            target = E3DBSQLite.uri(canonicalPath: canonical, parameters: [:])
        }
        var connection: OpaquePointer?
        let flags =
            (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_URI
            | SQLITE_OPEN_NOMUTEX
        FailureLog.clear(path: canonical)
        // Safety: `target` is lent as a NUL-terminated copy for the call and `connection` is a local out-parameter. On
        // failure SQLite may still return a handle (for its message): it is read, then closed, and never stored.
        let rc = unsafe sqlite3_open_v2(target, &connection, flags, nil)
        guard rc == SQLITE_OK, let connection = unsafe connection else {
            let message = unsafe connection.map { unsafe String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            unsafe sqlite3_close_v2(connection)
            if let handleName { KeyRegistry.shared.remove(handleName) }
            throw FailureLog.last(path: canonical)
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

    // Safety: the address is only a key of `FailureLog`, never dereferenced.
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
            FailureLog.clear(path: path)
            FailureLog.clear(connection: connectionID)
            // Safety: `remaining` is a NUL-terminated copy of `sql` (never empty, so `baseAddress` is set), borrowed
            // for the closure; `offset` stays at or before its NUL, since SQLite's `tail` points into the text it
            // was given. `tail` becomes an offset inside the closure and is never kept as a pointer.
            let rc = unsafe remaining.withUnsafeBufferPointer { buffer in
                var tail: UnsafePointer<CChar>?
                let rc = unsafe sqlite3_prepare_v2(handle, buffer.baseAddress! + offset, -1, &statement, &tail)
                if let tail = unsafe tail { offset = unsafe tail - buffer.baseAddress! }
                return rc
            }
            guard rc == SQLITE_OK else { throw failure(rc) }
            guard let prepared = unsafe statement else { return }  // only whitespace or comments left
            defer { unsafe sqlite3_finalize(prepared) }
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
                    throw E3DBError(.databaseError, "\(error)", cause: error)
                }
            }
            if let afterStatement {
                do {
                    try afterStatement()
                } catch let error as E3DBError {
                    throw error
                } catch {
                    throw E3DBError(.databaseError, "\(error)", cause: error)
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

    // Safety: SQLite's text and blob pointers are valid until the next step or finalize of `statement`, and are
    // copied here at once. `sqlite3_column_bytes` converts a UTF-16 value to UTF-8 before counting, so the
    // `sqlite3_column_text` after it returns that many bytes without converting (and moving) the value again.
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
        // Safety: both handles are live for the call (`source` is borrowed for it); `backup` is finished before
        // returning, on every path that created it.
        guard let backup = unsafe sqlite3_backup_init(handle, "main", source.handle, "main") else {
            throw failure(unsafe sqlite3_errcode(handle))
        }
        let step = unsafe sqlite3_backup_step(backup, -1)
        let finish = unsafe sqlite3_backup_finish(backup)
        guard step == SQLITE_DONE, finish == SQLITE_OK else {
            throw FailureLog.last(connection: source.connectionID) ?? failure(step == SQLITE_DONE ? finish : step)
        }
    }

    /// The typed error for a failed SQLite call: the VFS's record when it caused it, else SQLite's message
    /// (``E3DBError/Code/databaseMalformed`` for a database SQLite finds malformed or not a database).
    func failure(_ rc: Int32) -> E3DBError {
        if let recorded = FailureLog.last(connection: connectionID) ?? FailureLog.last(path: path) { return recorded }
        let message = unsafe String(cString: sqlite3_errmsg(handle))
        let code = unsafe sqlite3_extended_errcode(handle)
        let primary = (rc == SQLITE_OK ? code : rc) & 0xff
        return E3DBError(
            primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB ? .databaseMalformed : .databaseError, message,
            context: .init(actual: Int(code)))
    }

    // MARK: Schema text from another database

    /// What a schema entry of `sqlite_schema` must create: its `type`, and for a table, whether it is virtual.
    enum SchemaKind {
        case table, virtualTable, index, view, trigger

        /// The authorizer action that creating one in `main` reports.
        var action: Int32 {
            switch self {
            case .table: SQLITE_CREATE_TABLE
            case .virtualTable: SQLITE_CREATE_VTABLE
            case .index: SQLITE_CREATE_INDEX
            case .view: SQLITE_CREATE_VIEW
            case .trigger: SQLITE_CREATE_TRIGGER
            }
        }
    }

    /// Runs `sql`, the schema text of entry `name` of another database, as exactly one statement that creates
    /// `kind` named `name` in `main`, or, with `run` false, only checks that it is one (a virtual table's text is
    /// copied, not run). While it is prepared, an authorizer refuses ATTACH, DETACH, every PRAGMA and any other
    /// schema than `main`; the connection's defensive mode is on and `trusted_schema` off from the first call.
    /// - Throws: ``E3DBError/Code/databaseMalformed`` (item `name`, part `sqlite_schema`) for text that is not
    ///   one such statement; SQLite's typed errors when it runs.
    func executeSchemaEntry(_ sql: String, kind: SchemaKind, name: String, run: Bool = true) throws(E3DBError) {
        func refused(_ why: String) -> E3DBError {
            E3DBError(
                .databaseMalformed,
                "the schema entry \(String(reflecting: name)) is not one CREATE statement of its type: \(why)",
                context: .init(part: "sqlite_schema", item: name))
        }
        try harden()
        let guardian = SchemaGuard(kind: kind, name: name)
        // Safety: the retained box outlives every callback: the authorizer is removed (and no statement is prepared
        // after that) before the defer releases it; the callback only borrows it (`takeUnretainedValue`).
        let box = unsafe Unmanaged.passRetained(guardian)
        defer {
            unsafe sqlite3_set_authorizer(handle, nil, nil)
            unsafe box.release()
        }
        unsafe sqlite3_set_authorizer(
            handle,
            { context, action, first, second, database, _ in
                guard let context = unsafe context else { return SQLITE_DENY }
                let guardian = unsafe Unmanaged<SchemaGuard>.fromOpaque(context).takeUnretainedValue()
                return unsafe guardian.authorize(action, first, second, database)
            }, unsafe box.toOpaque())
        let text = Array(sql.utf8CString)
        var statement: OpaquePointer?
        var tailOffset = 0
        FailureLog.clear(connection: connectionID)
        let rc = unsafe text.withUnsafeBufferPointer { buffer -> Int32 in
            // Safety: the buffer is a NUL-terminated copy of `sql`; `tail` points into it.
            guard let base = buffer.baseAddress else { return SQLITE_MISUSE }
            var tail: UnsafePointer<CChar>?
            let rc = unsafe sqlite3_prepare_v2(handle, base, -1, &statement, &tail)
            if let tail = unsafe tail { tailOffset = unsafe tail - base }
            return rc
        }
        guard rc == SQLITE_OK, let prepared = unsafe statement else {
            unsafe sqlite3_finalize(statement)
            if let refusal = guardian.refusal { throw refused(refusal) }
            throw refused(rc == SQLITE_OK ? "no statement" : unsafe String(cString: sqlite3_errmsg(handle)))
        }
        defer { unsafe sqlite3_finalize(prepared) }
        if let refusal = guardian.refusal { throw refused(refusal) }
        guard Self.isBlank(text[min(tailOffset, text.count)...]) else { throw refused("more than one statement") }
        guard guardian.created else { throw refused("it does not create the \(kind) it names") }
        guard run else { return }
        let step = unsafe sqlite3_step(prepared)
        guard step == SQLITE_DONE else { throw failure(step) }
    }

    /// Whether what is left after a statement holds only whitespace, `;` and comments (and the terminating NUL).
    static func isBlank(_ rest: ArraySlice<CChar>) -> Bool {
        let bytes = rest.map { UInt8(bitPattern: $0) }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0 { return true }
            if [0x20, 0x09, 0x0a, 0x0c, 0x0d, UInt8(ascii: ";")].contains(byte) {
                index += 1
            } else if byte == UInt8(ascii: "-"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "-") {
                while index < bytes.count, bytes[index] != 0x0a, bytes[index] != 0 { index += 1 }
            } else if byte == UInt8(ascii: "/"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "*") {
                index += 2
                while index + 1 < bytes.count,
                    !(bytes[index] == UInt8(ascii: "*") && bytes[index + 1] == UInt8(ascii: "/"))
                {
                    index += 1
                }
                index += 2
            } else {
                return false
            }
        }
        return true
    }

    private var hardened = false

    /// Defensive mode and `trusted_schema = OFF`: schema text of another database cannot reach SQLite's internals
    /// (writable_schema, sqlite_dbpage, shadow tables) nor call functions not marked innocuous.
    func harden() throws(E3DBError) {
        guard !hardened else { return }
        let defensive = unsafe e3db_sqlite_db_config_flag(handle, SQLITE_DBCONFIG_DEFENSIVE, 1)
        let trusted = unsafe e3db_sqlite_db_config_flag(handle, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0)
        guard defensive == SQLITE_OK, trusted == SQLITE_OK else {
            throw E3DBError(.databaseError, "SQLite refused defensive mode", context: .init(actual: Int(defensive)))
        }
        hardened = true
    }

    /// Runs `body` with defensive mode off (the export's own `writable_schema` copy of virtual tables' rows).
    func withoutDefensiveMode(_ body: () throws(E3DBError) -> Void) throws(E3DBError) {
        guard hardened else { return try body() }
        _ = unsafe e3db_sqlite_db_config_flag(handle, SQLITE_DBCONFIG_DEFENSIVE, 0)
        defer { _ = unsafe e3db_sqlite_db_config_flag(handle, SQLITE_DBCONFIG_DEFENSIVE, 1) }
        try body()
    }
}

/// The authorizer of one schema entry's preparation: only the creation of the entry itself in `main` (and what it
/// reads and writes there), never ATTACH, DETACH, a PRAGMA or another schema.
private final class SchemaGuard {
    let kind: SQLiteConnection.SchemaKind
    let name: String
    private(set) var created = false
    private(set) var refusal: String?

    init(kind: SQLiteConnection.SchemaKind, name: String) {
        self.kind = kind
        self.name = name
    }

    func authorize(
        _ action: Int32, _ first: UnsafePointer<CChar>?, _ second: UnsafePointer<CChar>?,
        _ database: UnsafePointer<CChar>?
    ) -> Int32 {
        // Safety: SQLite passes NUL-terminated strings (or NULL) valid for the duration of the callback; they are
        // copied into Strings here.
        func text(_ pointer: UnsafePointer<CChar>?) -> String? { unsafe pointer.map { unsafe String(cString: $0) } }
        func deny(_ why: String) -> Int32 {
            if refusal == nil { refusal = why }
            return SQLITE_DENY
        }
        switch action {
        case SQLITE_ATTACH, SQLITE_DETACH: return deny("it attaches or detaches a database")
        case SQLITE_PRAGMA: return deny("it runs PRAGMA \(unsafe text(first) ?? "")")
        case SQLITE_TRANSACTION, SQLITE_SAVEPOINT: return deny("it controls the transaction")
        default: break
        }
        if let database = unsafe text(database), database != "main" {
            return deny("it uses the schema \(String(reflecting: database))")
        }
        if action == kind.action {
            guard unsafe text(first)?.lowercased() == name.lowercased(), !created else {
                return deny("it creates \(String(reflecting: unsafe text(first) ?? "")), not the entry's name")
            }
            created = true
        } else if kind == .table, action == SQLITE_CREATE_INDEX,
            unsafe text(first)?.hasPrefix("sqlite_autoindex_") == true
        {
            // The index of a PRIMARY KEY or UNIQUE constraint of the table.
        } else if [
            SQLITE_CREATE_TABLE, SQLITE_CREATE_VTABLE, SQLITE_CREATE_INDEX, SQLITE_CREATE_VIEW, SQLITE_CREATE_TRIGGER,
            SQLITE_CREATE_TEMP_TABLE, SQLITE_CREATE_TEMP_INDEX, SQLITE_CREATE_TEMP_VIEW, SQLITE_CREATE_TEMP_TRIGGER,
        ].contains(action) {
            return deny("it creates another kind of object than its type")
        }
        return SQLITE_OK
    }
}
