import Foundation
internal import GRDBSQLite
import Synchronization

/// One read-only SQL statement run on SQLite connections of its own, on the calling thread, with no queue, pool
/// or transaction machinery around it: for the point read a record read costs (``SQLiteStorage``'s
/// `readableRecordNow`), where GRDB's reader pool costs more than the statement (a queue hop per read, a lock, a
/// schema check).
///
/// Connections are opened on demand (one per thread that reads at the same time: a handful) with the database's
/// file, `query_only`, and no busy timeout: a caller that cannot read at once (a database locked for recovery or
/// a schema change) gets an error at once and takes the ordinary path rather than blocking an event loop. Each read binds text arguments, steps once and resets the
/// statement, which ends its read transaction: every read sees the last commit, as a GRDB read does.
final class SQLiteStatementReader: Sendable {
    private final class Connection: @unchecked Sendable {
        // @unchecked: used by one thread at a time, between taking it from `idle` and putting it back.
        let database: OpaquePointer
        let statement: OpaquePointer

        init(database: OpaquePointer, statement: OpaquePointer) {
            self.database = database
            self.statement = statement
        }

        func close() {
            sqlite3_finalize(statement)
            sqlite3_close_v2(database)
        }
    }

    /// The row being read: typed accessors by column index, valid only inside the `map` of ``first(_:_:)``.
    struct Columns: SQLiteColumns {
        fileprivate let statement: OpaquePointer

        func int64(_ i: Int32) -> Int64 { sqlite3_column_int64(statement, i) }

        func text(_ i: Int32) -> String { optionalText(i) ?? "" }

        func optionalText(_ i: Int32) -> String? {
            guard sqlite3_column_type(statement, i) != SQLITE_NULL, let bytes = sqlite3_column_text(statement, i)
            else { return nil }
            return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, i))),
                          as: UTF8.self)
        }
    }

    private let path: String
    private let sql: String
    private let idle = Mutex<(connections: [Connection], closed: Bool)>(([], false))

    /// - Parameters:
    ///   - path: the database file (it must exist: the storage creates and migrates it).
    ///   - sql: one `SELECT` with `?` parameters.
    init(path: String, sql: String) {
        self.path = path
        self.sql = sql
    }

    /// Runs the statement with `arguments` bound as text and maps its first row; `nil` when it has none.
    /// - Throws: `StorageError(.unavailable)` when the database cannot be opened or read (busy, closed, I/O).
    func first<T>(_ arguments: [String], _ map: (Columns) -> T) throws -> T? {
        let connection = try take()
        defer { give(connection) }
        let statement = connection.statement
        defer { sqlite3_reset(statement) }  // ends the read transaction; the next read binds every parameter
        for (i, argument) in arguments.enumerated() {
            let bound = argument.withCString { sqlite3_bind_text(statement, Int32(i + 1), $0, -1, transient) }
            guard bound == SQLITE_OK else { throw failure(connection.database, "binding an argument") }
        }
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return map(Columns(statement: statement))
        case SQLITE_DONE: return nil
        default: throw failure(connection.database, "reading")
        }
    }

    /// Closes every connection; reads after this throw.
    func close() {
        let connections = idle.withLock { idle in
            idle.closed = true
            defer { idle.connections = [] }
            return idle.connections
        }
        for connection in connections { connection.close() }
    }

    private func take() throws -> Connection {
        let taken: Connection? = try idle.withLock { idle in
            guard !idle.closed else { throw StorageError(.unavailable, "the SQLite storage is closed") }
            return idle.connections.popLast()
        }
        return try taken ?? open()
    }

    private func give(_ connection: Connection) {
        let kept = idle.withLock { idle in
            guard !idle.closed else { return false }
            idle.connections.append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    private func open() throws -> Connection {
        var database: OpaquePointer?
        let opened = sqlite3_open_v2(path, &database, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil)
        guard opened == SQLITE_OK, let database else {
            if let database { sqlite3_close_v2(database) }
            throw StorageError(.unavailable, "cannot open the SQLite database for reading (code \(opened))")
        }
        var statement: OpaquePointer?
        guard sqlite3_exec(database, "PRAGMA query_only = 1", nil, nil, nil) == SQLITE_OK,
              sqlite3_prepare_v3(database, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK,
              let statement else {
            let error = failure(database, "preparing a statement")
            sqlite3_close_v2(database)
            throw error
        }
        return Connection(database: database, statement: statement)
    }

    private func failure(_ database: OpaquePointer, _ doing: String) -> StorageError {
        StorageError(.unavailable, "SQLite failed \(doing): \(String(cString: sqlite3_errmsg(database)))")
    }
}

/// Typed column access by index, so that one mapping reads a row whether GRDB or ``SQLiteStatementReader`` read it.
protocol SQLiteColumns {
    func int64(_ i: Int32) -> Int64
    func text(_ i: Int32) -> String
    func optionalText(_ i: Int32) -> String?
}

/// SQLite copies a bound value before `sqlite3_bind_text` returns (`SQLITE_TRANSIENT`).
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
