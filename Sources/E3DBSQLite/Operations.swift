internal import CE3DBSQLite3
public import E3DBPageCodec
public import E3DBPrimitives
internal import Foundation

/// What ``E3DBSQLite/verify(databaseAt:key:settings:)`` found.
public struct SQLiteVerification: Sendable, Equatable {
    /// The first pages of the database file that did not authenticate (1-based), in order: at most
    /// ``listedBadPages``.
    public let badPages: [UInt32]
    /// How many pages did not authenticate (``badPages`` lists the first ones).
    public let badPageCount: Int
    /// Bytes of the file after the last page the header counts (a file extended by someone else): one problem,
    /// however many they are. Zero for a sound file.
    public let trailingBytes: Int64
    /// The database's page count.
    public let pageCount: Int
    /// SQLite's `PRAGMA integrity_check` lines, `["ok"]` for a sound b-tree (empty when pages are bad: SQLite
    /// cannot read them).
    public let integrity: [String]

    /// How many bad pages are listed at most.
    public static let listedBadPages = 100

    /// Whether every page authenticated, nothing follows the last page and the b-tree is sound.
    public var isIntact: Bool { badPageCount == 0 && trailingBytes == 0 && integrity == ["ok"] }
}

extension E3DBSQLite {
    /// Encrypts a plaintext SQLite database into a new file (what SQLCipher's `sqlcipher_export` does): the schema,
    /// every row, `user_version` and `application_id`; rowids of tables without an `INTEGER PRIMARY KEY` are kept.
    /// The new file is created 0600.
    ///
    /// The source may come from anyone: each entry of its schema runs as exactly one statement creating that entry
    /// (see ``E3DBError/Code/databaseMalformed``), never ATTACH, DETACH or a PRAGMA, with SQLite's defensive mode on
    /// and `trusted_schema` off.
    /// - Throws: ``E3DBError/Code/invalidParameter`` when `destination` exists; ``E3DBError/Code/databaseMalformed``
    ///   for a schema entry that is not one statement of its type (item: its name) or a source that is not a
    ///   database; SQLite's errors, typed. A partial destination is removed.
    public static func encrypt(
        plaintextDatabaseAt source: String, to destination: String, key: SQLCipherKey, settings: SQLCipherSettings = .v4
    ) throws(E3DBError) {
        try copy(
            into: destination, key: key, settings: settings, from: source,
            parameters: ["vfs": baseVFSName, "mode": "ro"])
    }

    /// Decrypts an encrypted database into a new plaintext SQLite file, created 0600. The source's schema is
    /// copied as ``encrypt(plaintextDatabaseAt:to:key:settings:)`` does.
    /// - Throws: ``E3DBError/Code/wrongKey``, ``E3DBError/Code/databaseMalformed`` and the other typed errors of the
    ///   source; a partial destination is removed.
    public static func decrypt(
        databaseAt source: String, key: SQLCipherKey, settings: SQLCipherSettings = .v4, to destination: String
    ) throws(E3DBError) {
        try register()
        let handle = KeyRegistry.shared.register(key, settings: settings)
        defer { KeyRegistry.shared.remove(handle) }
        try copy(
            into: destination, key: nil, settings: settings, from: source,
            parameters: ["vfs": vfsName, "e3db_key": handle, "mode": "ro"])
    }

    /// Re-encrypts a database under a new key (and, optionally, new settings): a copy under the new key next to it,
    /// then an atomic rename over it, O(database) like SQLCipher's `PRAGMA rekey`. With the same page size the copy
    /// is page by page (SQLite's backup API: each page decrypted and encrypted again); with another page size or
    /// reserve, the schema and rows are exported. The source is checkpointed and held with an exclusive lock for the
    /// copy; no other connection may use it meanwhile (their writes would be lost with the old file).
    public static func rekey(
        databaseAt path: String, from oldKey: SQLCipherKey, settings oldSettings: SQLCipherSettings = .v4,
        to newKey: SQLCipherKey, newSettings: SQLCipherSettings? = nil
    ) throws(E3DBError) {
        let settings = newSettings ?? oldSettings
        // Fold a WAL into the file and leave WAL mode, so that no -wal of the old key outlives the rename; the copy
        // goes back to WAL mode if the database was in it.
        var wasWAL = false
        do {
            let old = try SQLiteConnection(path: path, key: oldKey, settings: oldSettings)
            wasWAL = try old.rows("PRAGMA journal_mode").first?.values.first == .text("wal")
            try old.execute("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE")
        }
        let temporary = AtomicFile.temporaryPath(in: FileIO.directory(of: path))
        var info = stat()
        // Safety: `stat` gets a NUL-terminated copy of the path and the address of the local `info`, both for the call
        // only.
        let mode = unsafe stat(path, &info) == 0 ? info.st_mode & 0o777 : 0o600
        let replace = { () throws(E3DBError) in
            do throws(FileIOError) { try AtomicFile.replace(path, with: temporary) } catch {
                throw E3DBError(.databaseError, "the rekeyed copy could not replace \(path): \(error)")
            }
        }
        if settings.pageSize == oldSettings.pageSize && settings.reserveByteCount <= oldSettings.reserveByteCount {
            do throws(E3DBError) {
                let source = try SQLiteConnection(path: path, key: oldKey, settings: oldSettings)
                // Exclusive locking mode keeps the lock this empty write transaction takes until the connection closes.
                try source.execute("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; COMMIT")
                try createNew(temporary, mode: mode)
                let copy = try SQLiteConnection(path: temporary, key: newKey, settings: settings)
                try copy.restore(from: source)
                try replace()
            } catch {
                removeDatabase(temporary)
                throw error
            }
        } else {
            try register()
            let handle = KeyRegistry.shared.register(oldKey, settings: oldSettings)
            defer { KeyRegistry.shared.remove(handle) }
            try copy(
                into: temporary, key: newKey, settings: settings, from: path,
                parameters: ["vfs": vfsName, "e3db_key": handle], mode: mode, lockSource: true, commit: replace)
        }
        // Back to WAL mode on the renamed file (a connection to the copy's old name would leave its -wal and -shm).
        if wasWAL {
            try SQLiteConnection(path: path, key: newKey, settings: settings).execute("PRAGMA journal_mode = WAL")
        }
    }

    /// Removes a database file and its journals.
    private static func removeDatabase(_ path: String) {
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// Authenticates every page of the database file up to the header's page count, reports bytes after it, and
    /// runs SQLite's `integrity_check` (SQLCipher's `cipher_integrity_check` and `integrity_check` together). The
    /// cost follows the header's page count, not the file's apparent size.
    /// - Throws: ``E3DBError/Code/wrongKey`` (page 1 does not authenticate), ``E3DBError/Code/pageSizeMismatch``,
    ///   ``E3DBError/Code/databaseNotEncrypted``.
    public static func verify(databaseAt path: String, key: SQLCipherKey, settings: SQLCipherSettings = .v4)
        throws(E3DBError) -> SQLiteVerification
    {
        let connection = try SQLiteConnection(path: path, key: key, settings: settings, readOnly: true)
        var pages = PageVerification()
        for row in try connection.rows("PRAGMA cipher_integrity_check") {
            if case .text(let text) = row.values.first { pages = PageVerification(parsing: text) }
        }
        let bad = pages.bad
        var pageCount = 0
        if case .integer(let count) = try connection.rows("PRAGMA page_count").first?.values.first {
            pageCount = Int(count)
        }
        var integrity: [String] = []
        if bad.isEmpty {
            do throws(E3DBError) {
                integrity = try connection.rows("PRAGMA integrity_check").compactMap { row in
                    if case .text(let line) = row.values.first { line } else { nil }
                }
            } catch  where error.code == .pageTampered {
                integrity = [error.message]
            }
        }
        return SQLiteVerification(
            badPages: bad, badPageCount: pages.badCount, trailingBytes: pages.trailingBytes, pageCount: pageCount,
            integrity: integrity)
    }

    // MARK: The copy

    /// Creates `path` empty with exactly `mode` (not following a symlink); SQLite then takes it as a new database,
    /// and its journals get the same mode.
    /// - Throws: ``E3DBError/Code/invalidParameter`` when `path` exists.
    private static func createNew(_ path: String, mode: mode_t) throws(E3DBError) {
        // Safety: the path is lent to `open` as a NUL-terminated copy for the call only; the descriptor is closed
        // below. `strerror` returns a NUL-terminated message that is copied at once.
        let descriptor = unsafe open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            let code = errno
            if code == EEXIST {
                throw E3DBError(
                    .invalidParameter, "\(path) exists; the output must be a new file", context: .init(item: path))
            }
            throw E3DBError(.databaseError, unsafe "cannot create \(path): \(String(cString: strerror(code)))")
        }
        _ = fchmod(descriptor, mode)
        _ = close(descriptor)
    }

    /// Copies the database at `source` (opened with URI `parameters`) into the new database `destination`
    /// (encrypted with `key`, or plain; created with `mode`), in one transaction; runs `commit` after it, before
    /// the connections close; removes `destination` on failure.
    private static func copy(
        into destination: String, key: SQLCipherKey?, settings: SQLCipherSettings, from source: String,
        parameters: [String: String], mode: mode_t = 0o600, lockSource: Bool = false,
        commit: () throws(E3DBError) -> Void = {}
    ) throws(E3DBError) {
        try createNew(destination, mode: mode)
        do throws(E3DBError) {
            let target = try SQLiteConnection(path: destination, key: key, settings: settings)
            try target.harden()
            try attach(source, parameters: parameters, to: target)
            if lockSource { try target.execute("PRAGMA source.locking_mode = EXCLUSIVE") }
            try target.execute(lockSource ? "BEGIN EXCLUSIVE" : "BEGIN")
            try export(target)
            try target.execute("COMMIT")
            try target.execute("DETACH DATABASE source")
            try commit()
        } catch {
            removeDatabase(destination)
            throw error
        }
    }

    /// Attaches `source` as schema `source` of `target`; a failure to open it is the VFS's typed record, or
    /// SQLite's reason without the URI (which holds the key handle).
    private static func attach(_ source: String, parameters: [String: String], to target: SQLiteConnection)
        throws(E3DBError)
    {
        let sourceURI = uri(path: source, parameters: parameters)
        FailureLog.clear(path: canonicalPath(source))
        do throws(E3DBError) {
            try target.execute("ATTACH DATABASE '\(sourceURI.replacingOccurrences(of: "'", with: "''"))' AS source")
        } catch {
            if let recorded = FailureLog.last(path: canonicalPath(source)) { throw recorded }
            var reason = error.message.replacingOccurrences(of: sourceURI, with: source)
            if reason.contains("e3db_key") || reason.contains("file:") {
                // Safety: `sqlite3_errstr` returns a static NUL-terminated string for any code; it is copied.
                reason = unsafe String(cString: sqlite3_errstr(Int32(truncatingIfNeeded: error.context.actual ?? 1)))
            }
            throw E3DBError(
                error.code, "cannot open \(source): \(reason)",
                context: .init(actual: error.context.actual, item: (source as NSString).lastPathComponent))
        }
    }

    /// SQL-level export of schema `source` into `main` (empty): tables, rows (with rowids), sqlite_sequence,
    /// indexes, virtual tables, views and triggers, user_version and application_id. Each schema entry runs as one
    /// statement creating it (``SQLiteConnection/executeSchemaEntry(_:kind:name:run:)``).
    private static func export(_ connection: SQLiteConnection) throws(E3DBError) {
        func text(_ value: SQLiteValue?) -> String? { if case .text(let text) = value { text } else { nil } }
        func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        func literal(_ name: String) -> String { "'" + name.replacingOccurrences(of: "'", with: "''") + "'" }
        let entries = try connection.rows(
            "SELECT type, name, sql, rootpage FROM source.sqlite_schema WHERE sql IS NOT NULL ORDER BY rowid")
        let tables = entries.filter {
            text($0.values[0]) == "table" && $0.values[3] != .integer(0)
                && !(text($0.values[1]) ?? "").hasPrefix("sqlite_")
        }
        for table in tables {
            guard let sql = text(table.values[2]), let name = text(table.values[1]) else { continue }
            try connection.executeSchemaEntry(sql, kind: .table, name: name)
        }
        for table in tables {
            guard let name = text(table.values[1]) else { continue }
            let columns = try connection.rows("SELECT name, hidden FROM pragma_table_xinfo(\(literal(name)), 'source')")
            let names = columns.filter { $0.values[1] == .integer(0) }.compactMap { text($0.values[0]) }
            let hasRowid =
                (try? connection.rows("SELECT rowid FROM source.\(quoted(name)) LIMIT 0")) != nil
                && !names.contains { ["rowid", "_rowid_", "oid"].contains($0.lowercased()) }
            let list = (hasRowid ? ["rowid"] : []) + names.map(quoted)
            let joined = list.joined(separator: ", ")
            try connection.execute(
                "INSERT INTO main.\(quoted(name)) (\(joined)) SELECT \(joined) FROM source.\(quoted(name))")
        }
        if try !connection.rows("SELECT 1 FROM source.sqlite_schema WHERE name = 'sqlite_sequence'").isEmpty,
            try !connection.rows("SELECT 1 FROM main.sqlite_schema WHERE name = 'sqlite_sequence'").isEmpty
        {
            try connection.execute(
                "DELETE FROM main.sqlite_sequence; INSERT INTO main.sqlite_sequence SELECT * FROM source.sqlite_sequence"
            )
        }
        for entry in entries where text(entry.values[0]) == "index" {
            if let sql = text(entry.values[2]), let name = text(entry.values[1]) {
                try connection.executeSchemaEntry(sql, kind: .index, name: name)
            }
        }
        let virtual = entries.filter { text($0.values[0]) == "table" && $0.values[3] == .integer(0) }
        if !virtual.isEmpty {
            // Their text is copied, not run (a virtual table's module makes its shadow tables, copied above): each
            // must still be one CREATE VIRTUAL TABLE statement.
            for entry in virtual {
                if let sql = text(entry.values[2]), let name = text(entry.values[1]) {
                    try connection.executeSchemaEntry(sql, kind: .virtualTable, name: name, run: false)
                }
            }
            try connection.withoutDefensiveMode { () throws(E3DBError) in
                try connection.execute(
                    """
                    PRAGMA main.writable_schema = ON;
                    INSERT INTO main.sqlite_schema (type, name, tbl_name, rootpage, sql)
                        SELECT type, name, tbl_name, rootpage, sql FROM source.sqlite_schema WHERE type = 'table' AND rootpage = 0;
                    PRAGMA main.writable_schema = OFF
                    """)
            }
        }
        for entry in entries {
            let kinds: [String: SQLiteConnection.SchemaKind] = ["view": .view, "trigger": .trigger]
            if let kind = kinds[text(entry.values[0]) ?? ""], let sql = text(entry.values[2]),
                let name = text(entry.values[1])
            {
                try connection.executeSchemaEntry(sql, kind: kind, name: name)
            }
        }
        for pragma in ["user_version", "application_id"] {
            if case .integer(let value) = try connection.rows("PRAGMA source.\(pragma)").first?.values.first {
                try connection.execute("PRAGMA main.\(pragma) = \(value)")
            }
        }
    }
}
