import E3DBPrimitives
internal import E3DBRows
package import Foundation
internal import GRDB

/// The embedded backend: one SQLite database in WAL mode through GRDB (a pool: concurrent readers, one writer),
/// versioned migrations (``migrate()``, `SQLiteSchema.swift`), cached statements.
///
/// Every call goes through GRDB's `async` API, so that the statement runs on GRDB's own reader or writer queue
/// and no cooperative thread waits for SQLite. Record inserts of concurrent requests share one transaction
/// (`GroupCommit`). WAL checkpoints run on a connection of their own in the background (`run()`, every
/// `checkpointEvery`), so that a request pays for one only at the WAL's backstop size, and then for little.
package final class SQLiteStorage: ServerStorage {
    let pool: DatabasePool
    /// `DIR/server.sqlite.migrate-lock`: held (`flock`) while migrating, so that processes starting together on
    /// one data directory migrate one after the other (GRDB reads which migrations ran outside the transaction that
    /// runs them: two processes could both see none and both create the tables).
    let migrationLockPath: String
    /// Record inserts of concurrent requests, one transaction per group.
    let recordInserts: GroupCommit<RecordRow, RecordRow>
    /// Record reads (with their read check) of concurrent requests, one read transaction per group, two groups at
    /// once on GRDB's readers: a group pays once for the hop to a reader and its `BEGIN`/`COMMIT`.
    let readableRecords: GroupCommit<(RecordID, ClientID), RecordRow?>
    /// The connection that checkpoints the WAL, beside the pool's writer (a `PASSIVE` checkpoint takes no write
    /// lock: writers append to the WAL while it copies committed pages into the database).
    private let checkpointer: DatabaseQueue
    /// The database file, for the checkpoints' `fdatasync` (nil: left to SQLite).
    private let databaseFile: DatabaseFileSync?

    /// How often ``run()`` checkpoints the WAL: often enough that each checkpoint's sync of the WAL is
    /// small (a sync that has more to write holds the writer's appends longer: 1 s gave a write p99 of 36-55 ms,
    /// 100 ms 5-16 ms; docs/performance.md).
    static let checkpointEvery: Duration = .milliseconds(100)
    /// The WAL size (pages of 4 KiB) at which a committing writer checkpoints by itself: 256 MiB. While writes
    /// never pause, this is the checkpoint that completes and lets the WAL start over (the background ones copy
    /// all but the last commits); it also bounds the WAL when a reader holds an old snapshot for long.
    static let autocheckpointBackstop = 65_536

    /// Opens (creating if needed) `DIR/server.sqlite`; ``run()`` checkpoints it in the background.
    /// - Parameter directory: the data directory (created with mode 0700 if missing).
    /// - Throws: `E3DBError` `.storageUnavailable` when the database cannot be opened.
    package init(directory: URL) throws {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            var config = Configuration()
            config.busyMode = .timeout(10)
            config.prepareDatabase { db in
                // Durability: `synchronous = NORMAL` in WAL mode. A commit appends to the WAL without an fsync and
                // survives a crash of the process; a power loss may lose the last commits but never corrupts the
                // database, and the fsyncs happen at checkpoints, which run in the background (below). `FULL`
                // would add an fsync of the WAL to every request's commit, the latency this design keeps out of
                // the request path. This is the durability the server has always had.
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // Writers do not checkpoint (the background task does) unless the WAL grows past the backstop.
                try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.autocheckpointBackstop)")
            }
            let path = directory.appendingPathComponent("server.sqlite").path
            pool = try DatabasePool(path: path, configuration: config)
            checkpointer = try DatabaseQueue(path: path, configuration: config)
            migrationLockPath = directory.appendingPathComponent("server.sqlite.migrate-lock").path
        } catch {
            throw E3DBError(
                .storageUnavailable, "cannot open the SQLite database in the data directory: \(error)", cause: error)
        }
        let pool = self.pool
        recordInserts = GroupCommit { rows in
            do {
                return try await pool.write { db in try rows.map { try Self.insert($0, db) } }
            } catch {
                throw Self.storageError(error)
            }
        }
        readableRecords = GroupCommit(maxBatch: 64, lanes: 2) { reads in
            do {
                return try await pool.read { db in
                    try reads.map { id, reader in try Self.record(id: id, readableBy: reader, db) }
                }
            } catch {
                throw Self.storageError(error)
            }
        }
        databaseFile = DatabaseFileSync(path: directory.appendingPathComponent("server.sqlite").path)
    }

    package var answersOnlyWhileRunning: Bool { false }

    /// Checkpoints the WAL every `checkpointEvery` until cancelled, then closes the checkpointing connection.
    package func run() async throws {
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.checkpointEvery)
            guard !Task.isCancelled else { break }
            // PASSIVE: copies what no reader still needs and never waits for readers or writers. A failure
            // (another process checkpointing, a busy database) is retried at the next tick; the WAL keeps every
            // commit meanwhile, so nothing is lost by skipping one. Then the pages it copied are written to
            // disk here: under a steady stream of writes the checkpoints never catch up with the writer, so
            // the one that completes (and lets the WAL start over) is the writer's own at the backstop, and
            // its sync of the database file, inside a request, then has little left to write.
            _ = try? await checkpointer.writeWithoutTransaction { [databaseFile] db in
                try db.checkpoint(.passive)
                databaseFile?.sync()
            }
        }
        try checkpointer.close()
    }

    /// Waits for the grouped inserts in progress, then closes the pool's connections (SQLite checkpoints the WAL
    /// when the last one closes; the checkpointing connection is closed by `run()` when it ends).
    package func close() async throws {
        await recordInserts.idle()
        await readableRecords.idle()
        try pool.close()
    }

    // MARK: Running statements

    /// `body` in a read transaction on one of GRDB's readers (GRDB's `async` API: the caller suspends, no
    /// cooperative thread waits for SQLite); a failure becomes a storage failure (``storageError(_:)``).
    func read<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        do { return try await pool.read(body) } catch { throw Self.storageError(error) }
    }

    /// `body` in a write transaction on GRDB's writer, as ``read(_:)``.
    func write<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        do { return try await pool.write(body) } catch { throw Self.storageError(error) }
    }

    /// `error` as a storage failure: a uniqueness conflict, a database that cannot be used now (busy, locked, I/O,
    /// full, cannot open), corrupted data, or a refusal of this operation alone. The message is SQLite's (it names
    /// columns, never values).
    static func storageError(_ error: any Error) -> E3DBError {
        switch error {
        case let error as E3DBError:
            return error
        case let error as DatabaseError:
            let message = "SQLite refused the operation: \(error.message ?? "no message") (\(error.extendedResultCode))"
            switch error.resultCode {
            case .SQLITE_CONSTRAINT
            where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE
                || error.extendedResultCode == .SQLITE_CONSTRAINT_PRIMARYKEY:
                return E3DBError(.storageConflict, message)
            case .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_IOERR, .SQLITE_FULL, .SQLITE_CANTOPEN, .SQLITE_NOMEM,
                .SQLITE_READONLY, .SQLITE_PROTOCOL:
                return E3DBError(.storageUnavailable, message)
            case .SQLITE_CORRUPT, .SQLITE_NOTADB:
                return E3DBError(.storageCorrupted, message)
            default:
                return E3DBError(.storageFailed, message)
            }
        case is CancellationError:
            return E3DBError(.storageUnavailable, "the SQLite call was cancelled")
        case is RowDecodingError:
            // GRDB's description holds the row's values: only say what happened.
            return E3DBError(.storageCorrupted, "a value in the server database is of the wrong type")
        default:
            return E3DBError(.storageFailed, "SQLite failed: \(type(of: error))")
        }
    }

    package func serverSecret() async throws -> Data {
        try await read { db in
            guard let d = try Data.fetchOne(db, sql: "SELECT value FROM server_settings WHERE key = 'secret'"),
                d.count == 32
            else { throw E3DBError(.storageCorrupted, "the server secret is missing; run migrate") }
            return d
        }
    }

    // MARK: Registration tokens

    package func createRegistrationToken(hash: Data, uses: Int?, created: Int64) async throws {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO registration_tokens (token_hash, uses_left, created) VALUES (?, ?, ?)",
                arguments: [hash, uses, created])
        }
    }

    package func registerClient(_ c: ClientRow) async throws -> Bool {
        try await write { db in
            let hash = c.registrationTokenHash
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT uses_left FROM registration_tokens WHERE token_hash = ?"),
                    arguments: [hash])
            else { return false }
            let left: Int? = try UntrustedRow(server: row, table: "registration_tokens").optional(at: 0, "uses_left")
            if let left {
                guard left > 0 else { return false }
                try db.cachedStatement(
                    sql: "UPDATE registration_tokens SET uses_left = uses_left - 1 WHERE token_hash = ?"
                )
                .execute(arguments: [hash])
            }
            try db.execute(
                sql: "INSERT INTO clients (\(Self.clientColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: [
                    c.clientID.text, c.name, c.publicKey, c.signingKey, c.apiKeyID, c.apiSecretHash,
                    c.enabled, c.hasBackup, c.registrationTokenHash, c.created,
                ])
            return true
        }
    }

    package func registrationTokenExists(hash: Data) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM registration_tokens WHERE token_hash = ?", arguments: [hash])
                ?? false
        }
    }

    package func backupClientID() async throws -> ClientID? {
        try await read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM server_settings WHERE key = 'backup_client'")
                .map { value in try ClientID(stored: String(decoding: value, as: UTF8.self)) }
        }
    }

    package func setBackupClientID(_ id: ClientID) async throws {
        try await write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO server_settings (key, value) VALUES ('backup_client', ?)",
                arguments: [Data(id.text.utf8)])
        }
    }

    // MARK: Clients

    private static let clientColumns =
        "client_id, name, public_key, signing_key, api_key_id, api_secret_hash, enabled, has_backup, registration_token_hash, created"

    private static func client(_ row: Row) throws -> ClientRow {
        let r = UntrustedRow(server: row, table: "clients")
        return ClientRow(
            clientID: try ClientID(stored: r.value(at: 0, "client_id")), name: try r.value(at: 1, "name"),
            publicKey: try r.value(at: 2, "public_key"), signingKey: try r.optional(at: 3, "signing_key"),
            apiKeyID: try r.value(at: 4, "api_key_id"), apiSecretHash: try r.value(at: 5, "api_secret_hash"),
            enabled: try r.value(at: 6, "enabled"), hasBackup: try r.value(at: 7, "has_backup"),
            registrationTokenHash: try r.value(at: 8, "registration_token_hash"), created: try r.value(at: 9, "created")
        )
    }

    package func client(id: ClientID) async throws -> ClientRow? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT \(Self.clientColumns) FROM clients WHERE client_id = ?"),
                arguments: [id.text]
            ).map(Self.client)
        }
    }

    package func client(apiKeyID: String) async throws -> ClientRow? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT \(Self.clientColumns) FROM clients WHERE api_key_id = ?"),
                arguments: [apiKeyID]
            ).map(Self.client)
        }
    }

    package func setHasBackup(clientID: ClientID) async throws {
        try await write { db in
            try db.execute(sql: "UPDATE clients SET has_backup = 1 WHERE client_id = ?", arguments: [clientID.text])
        }
    }

    package func setClientEnabled(id: ClientID, _ enabled: Bool) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE clients SET enabled = ? WHERE client_id = ?", arguments: [enabled, id.text])
            return db.changesCount == 1
        }
    }

    // MARK: Tokens and nonces

    package func insertAccessToken(hash: Data, clientID: ClientID, expires: Int64) async throws {
        try await write { db in
            try db.cachedStatement(sql: "INSERT INTO access_tokens (token_hash, client_id, expires) VALUES (?, ?, ?)")
                .execute(arguments: [hash, clientID.text, expires])
        }
    }

    package func accessToken(hash: Data, now: Int64) async throws -> (clientID: ClientID, expires: Int64)? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT client_id, expires FROM access_tokens WHERE token_hash = ? AND expires > ?"),
                arguments: [hash, now]
            ).map { row in
                let r = UntrustedRow(server: row, table: "access_tokens")
                return (
                    try ClientID(stored: r.value(at: 0, "client_id")), try r.value(at: 1, "expires", as: Int64.self)
                )
            }
        }
    }

    package func useNonce(_ nonce: String, expires: Int64, now: Int64) async throws -> Bool {
        try await write { db in
            if let old = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT expires FROM tsv1_nonces WHERE nonce = ?"),
                arguments: [nonce])
            {
                guard old < now else { return false }
                try db.execute(sql: "UPDATE tsv1_nonces SET expires = ? WHERE nonce = ?", arguments: [expires, nonce])
                return true
            }
            try db.cachedStatement(sql: "INSERT INTO tsv1_nonces (nonce, expires) VALUES (?, ?)")
                .execute(arguments: [nonce, expires])
            return true
        }
    }

    // MARK: Access keys

    package func accessKey(_ t: AccessTuple) async throws -> AccessKeyRow? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT eak, authorizer_id, authorizer_public_key, signer_id, signer_signing_key FROM access_keys
                        WHERE writer_id = ? AND user_id = ? AND reader_id = ? AND type = ?
                        """), arguments: [t.writerID.text, t.userID.text, t.readerID.text, t.type]
            ).map { row in
                let r = UntrustedRow(server: row, table: "access_keys")
                return AccessKeyRow(
                    tuple: t, eak: try r.value(at: 0, "eak"),
                    authorizerID: try ClientID(stored: r.value(at: 1, "authorizer_id")),
                    authorizerPublicKey: try r.value(at: 2, "authorizer_public_key"),
                    signerID: try r.optional(at: 3, "signer_id", as: String.self).map { text in
                        try ClientID(stored: text)
                    },
                    signerSigningKey: try r.optional(at: 4, "signer_signing_key"))
            }
        }
    }

    package func insertAccessKey(_ r: AccessKeyRow) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT OR IGNORE INTO access_keys (writer_id, user_id, reader_id, type, eak, authorizer_id,
                        authorizer_public_key, signer_id, signer_signing_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    r.tuple.writerID.text, r.tuple.userID.text, r.tuple.readerID.text, r.tuple.type, r.eak,
                    r.authorizerID.text, r.authorizerPublicKey, r.signerID?.text, r.signerSigningKey,
                ])
            return db.changesCount == 1
        }
    }

    package func deleteAccessKey(_ t: AccessTuple) async throws {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM access_keys WHERE writer_id = ? AND user_id = ? AND reader_id = ? AND type = ?",
                arguments: [t.writerID.text, t.userID.text, t.readerID.text, t.type])
        }
    }

    // MARK: Policies

    private static func policy(_ row: Row) throws -> PolicyRow {
        let r = UntrustedRow(server: row, table: "policies")
        return PolicyRow(
            tuple: AccessTuple(
                writerID: try ClientID(stored: r.value(at: 1, "writer_id")),
                userID: try ClientID(stored: r.value(at: 0, "user_id")),
                readerID: try ClientID(stored: r.value(at: 2, "reader_id")), type: try r.value(at: 3, "type")),
            canRead: try r.value(at: 4, "can_read"), canAuthorize: try r.value(at: 5, "can_authorize"),
            authorizedBy: try r.optional(at: 6, "authorized_by", as: String.self).map { text in
                try ClientID(stored: text)
            })
    }
    private static let policyColumns = "user_id, writer_id, reader_id, type, can_read, can_authorize, authorized_by"

    package func policy(_ t: AccessTuple) async throws -> PolicyRow? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT \(Self.policyColumns) FROM policies
                        WHERE user_id = ? AND writer_id = ? AND reader_id = ? AND type = ?
                        """), arguments: [t.userID.text, t.writerID.text, t.readerID.text, t.type]
            ).map(Self.policy)
        }
    }

    package func changePolicy(_ t: AccessTuple, read: Bool?, authorize: Bool?, by: ClientID?) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO policies (\(Self.policyColumns))
                    VALUES (:user, :writer, :reader, :type, coalesce(:read, 0), coalesce(:authorize, 0),
                            CASE WHEN :authorize THEN :by END)
                    ON CONFLICT (user_id, writer_id, reader_id, type) DO UPDATE SET
                        rowid = (SELECT max(rowid) + 1 FROM policies),
                        can_read = coalesce(:read, can_read), can_authorize = coalesce(:authorize, can_authorize),
                        authorized_by = CASE WHEN :authorize IS NULL THEN authorized_by WHEN :authorize THEN :by END
                    """,
                arguments: [
                    "user": t.userID.text, "writer": t.writerID.text, "reader": t.readerID.text, "type": t.type,
                    "read": read, "authorize": authorize, "by": by?.text,
                ])
        }
    }

    package func removeAuthorizations(userID: ClientID, writerID: ClientID, readerID: ClientID) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE policies SET can_authorize = 0, authorized_by = NULL
                    WHERE user_id = ? AND writer_id = ? AND reader_id = ?
                    """, arguments: [userID.text, writerID.text, readerID.text])
        }
    }

    package func listPolicies(_ listing: PolicyListing, clientID: ClientID) async throws -> [PolicyRow] {
        let (column, permission) = listing.filter
        let condition = "\(column) = ? AND \(permission) = 1"
        return try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT \(Self.policyColumns) FROM policies WHERE \(condition) ORDER BY rowid",
                arguments: [clientID.text]
            ).map(Self.policy)
        }
    }

    package func statistics() async throws -> [String: Int] {
        try await read { db in
            var out: [String: Int] = [:]
            for table in [
                "clients", "registration_tokens", "access_keys", "policies", "records", "pending_files",
                "notes", "access_tokens", "tsv1_nonces", "file_body_deletions",
            ] {
                out[table] = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
            }
            return out
        }
    }
}

/// A read-only descriptor of the database file, for the checkpoint task's `fdatasync`; closed with the last
/// reference to it.
private final class DatabaseFileSync: Sendable {
    let descriptor: Int32

    /// Opens `path`; nil when it cannot (the checkpoints then leave every sync to SQLite).
    init?(path: String) {
        // Safety: the path is lent to `open` as a NUL-terminated copy for the call only; the descriptor belongs to this
        // object, which closes it in `deinit`.
        let descriptor = unsafe open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    /// Writes the file's dirty pages to disk. A failure is left to SQLite's own sync of the file, which reports it.
    func sync() { _ = fdatasync(descriptor) }

    deinit { close(descriptor) }
}

extension UntrustedRow {
    /// A row of the server's SQLite database: a value of the wrong type, a NULL where a value belongs or a missing
    /// column is `storageCorrupted` naming `table.column`.
    init(server row: Row, table: String) {
        self.init(row, table: table, failure: .storageCorrupted, owner: "the server database's")
    }
}
