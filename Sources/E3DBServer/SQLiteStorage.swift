public import Foundation
internal import GRDB
import E3DBPrimitives

/// The embedded backend: one SQLite database in WAL mode through GRDB (a pool: concurrent readers, one writer),
/// versioned migrations, cached statements.
public final class SQLiteStorage: ServerStorage {
    private let pool: DatabasePool
    /// `DIR/server.sqlite.migrate-lock`: held (`flock`) while migrating, so that processes starting together on
    /// one data directory migrate one after the other (GRDB reads which migrations ran outside the transaction that
    /// runs them: two processes could both see none and both create the tables).
    private let migrationLockPath: String
    /// Record inserts of concurrent requests, one transaction per group.
    private let recordInserts: GroupCommit<RecordRow, RecordRow>
    /// The readable-record statement on connections of its own (`readableRecordNow(id:readerID:)`).
    private let readableRecords: SQLiteStatementReader

    /// Opens (creating if needed) `DIR/server.sqlite`.
    /// - Parameter directory: the data directory (created with mode 0700 if missing).
    /// - Throws: `StorageError(.unavailable)` when the database cannot be opened.
    public init(directory: URL) throws {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            var config = Configuration()
            config.busyMode = .timeout(10)
            config.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // Checkpoint every 8192 WAL pages (32 MiB) rather than 1000: each checkpoint costs the committing
                // writer two fdatasyncs and copies every page once however often it was rewritten, so under a
                // stream of writes fewer, larger checkpoints leave the write path mostly to the WAL appends.
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 8192")
            }
            let path = directory.appendingPathComponent("server.sqlite").path
            pool = try DatabasePool(path: path, configuration: config)
            readableRecords = SQLiteStatementReader(path: path, sql: Self.readableRecordSQL)
            migrationLockPath = directory.appendingPathComponent("server.sqlite.migrate-lock").path
        } catch {
            throw StorageError(.unavailable, "cannot open the SQLite database in the data directory: \(error)")
        }
        let pool = self.pool
        recordInserts = GroupCommit { rows in try Self.insertNow(rows, pool) }
    }

    /// Waits for the grouped inserts in progress (those of pipeline writes whose client left have no other
    /// waiter), then closes the connections.
    public func close() async throws {
        await recordInserts.idle()
        readableRecords.close()
        try pool.close()
    }

    /// Inserts a group of records in one transaction on the calling thread: GRDB's synchronous write runs the
    /// transaction on the caller's thread while the writer is idle (a serial queue's `sync`), where the `async`
    /// write would hop to the writer's queue and back. The transaction is short (a few inserts and a commit).
    private static func insertNow(_ rows: [RecordRow], _ pool: DatabasePool) throws -> [RecordRow] {
        try pool.write { db in try rows.map { try Self.insert($0, db) } }
    }

    /// A one-statement read on the calling thread, from the pool's readers: no hop to a reader's queue and no
    /// transaction (one statement reads one snapshot). Only for indexed point reads, which take microseconds; in
    /// WAL mode a reader never waits for the writer. The hot paths (token, client, record, policy) use it.
    private func pointRead<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.unsafeRead(body)
    }

    private static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE server_settings (key TEXT PRIMARY KEY, value BLOB NOT NULL);
                CREATE TABLE registration_tokens (token_hash BLOB PRIMARY KEY, uses_left INTEGER, created INTEGER NOT NULL);
                CREATE TABLE clients (
                    client_id TEXT PRIMARY KEY, name TEXT NOT NULL, public_key TEXT NOT NULL, signing_key TEXT,
                    api_key_id TEXT NOT NULL UNIQUE, api_secret_hash BLOB NOT NULL, enabled INTEGER NOT NULL,
                    has_backup INTEGER NOT NULL, registration_token_hash BLOB NOT NULL, created INTEGER NOT NULL);
                CREATE TABLE access_tokens (token_hash BLOB PRIMARY KEY, client_id TEXT NOT NULL, expires INTEGER NOT NULL);
                CREATE TABLE tsv1_nonces (nonce TEXT PRIMARY KEY, expires INTEGER NOT NULL);
                CREATE TABLE access_keys (
                    writer_id TEXT NOT NULL, user_id TEXT NOT NULL, reader_id TEXT NOT NULL, type TEXT NOT NULL,
                    eak TEXT NOT NULL, authorizer_id TEXT NOT NULL, authorizer_public_key TEXT NOT NULL,
                    signer_id TEXT, signer_signing_key TEXT,
                    PRIMARY KEY (writer_id, user_id, reader_id, type));
                CREATE TABLE policies (
                    user_id TEXT NOT NULL, writer_id TEXT NOT NULL, reader_id TEXT NOT NULL, type TEXT NOT NULL,
                    can_read INTEGER NOT NULL, can_authorize INTEGER NOT NULL, authorized_by TEXT,
                    PRIMARY KEY (user_id, writer_id, reader_id, type));
                CREATE INDEX policies_reader ON policies (reader_id);
                CREATE INDEX policies_writer ON policies (writer_id);
                CREATE TABLE records (
                    idx INTEGER PRIMARY KEY AUTOINCREMENT, record_id TEXT NOT NULL UNIQUE, writer_id TEXT NOT NULL,
                    user_id TEXT NOT NULL, type TEXT NOT NULL, plain TEXT NOT NULL, data TEXT NOT NULL, rec_sig TEXT,
                    file_meta TEXT, created INTEGER NOT NULL, last_modified INTEGER NOT NULL, version TEXT NOT NULL);
                CREATE INDEX records_writer ON records (writer_id, idx);
                CREATE TABLE pending_files (
                    pending_id TEXT PRIMARY KEY, writer_id TEXT NOT NULL, user_id TEXT NOT NULL, type TEXT NOT NULL,
                    plain TEXT NOT NULL, data TEXT NOT NULL, rec_sig TEXT, file_meta TEXT, checksum TEXT NOT NULL,
                    size INTEGER NOT NULL, uploaded INTEGER NOT NULL, created INTEGER NOT NULL);
                CREATE TABLE notes (
                    note_id TEXT PRIMARY KEY, id_string TEXT UNIQUE, writer_client_id TEXT,
                    recipient_signing_key TEXT NOT NULL, writer_signing_key TEXT NOT NULL, max_views INTEGER,
                    views INTEGER NOT NULL, expires_at INTEGER, created INTEGER NOT NULL, body TEXT NOT NULL);
                """)
            try db.execute(sql: "INSERT INTO server_settings (key, value) VALUES ('secret', ?)",
                           arguments: [Data(SecureRandom.bytes(count: 32))])
        }
        m.registerMigration("v2 upload claims and expiry indexes") { db in
            try db.execute(sql: """
                ALTER TABLE pending_files ADD COLUMN upload_started INTEGER;
                CREATE INDEX pending_files_created ON pending_files (created);
                CREATE INDEX tsv1_nonces_expires ON tsv1_nonces (expires);
                CREATE INDEX access_tokens_expires ON access_tokens (expires);
                """)
        }
        return m
    }

    /// Applies the migrations that have not run, holding the data directory's migration lock (other processes
    /// migrating the same directory wait; migrations take milliseconds).
    public func migrate() async throws {
        let lock = open(migrationLockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else {
            throw StorageError(.unavailable, "cannot open the migration lock in the data directory (errno \(errno))")
        }
        defer { closeDescriptor(lock) }  // closing releases the lock
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw StorageError(.unavailable, "cannot take the migration lock in the data directory (errno \(errno))")
            }
        }
        do { try Self.migrator.migrate(pool) } catch {
            throw StorageError(.unavailable, "migrating the SQLite database failed: \(error)")
        }
    }

    public func serverSecret() async throws -> Data {
        try await pool.read { db in
            guard let d = try Data.fetchOne(db, sql: "SELECT value FROM server_settings WHERE key = 'secret'"),
                  d.count == 32 else { throw StorageError(.corrupted, "the server secret is missing; run migrate") }
            return d
        }
    }

    // MARK: Registration tokens

    public func createRegistrationToken(hash: Data, uses: Int?, created: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "INSERT INTO registration_tokens (token_hash, uses_left, created) VALUES (?, ?, ?)",
                           arguments: [hash, uses, created])
        }
    }

    public func registerClient(_ c: ClientRow) async throws -> Bool {
        try await pool.write { db in
            let hash = c.registrationTokenHash
            guard let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT uses_left FROM registration_tokens WHERE token_hash = ?"),
                arguments: [hash]) else { return false }
            let left: Int? = row[0]
            if let left {
                guard left > 0 else { return false }
                try db.cachedStatement(sql: "UPDATE registration_tokens SET uses_left = uses_left - 1 WHERE token_hash = ?")
                    .execute(arguments: [hash])
            }
            try db.execute(sql: "INSERT INTO clients (\(Self.clientColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           arguments: [c.clientID, c.name, c.publicKey, c.signingKey, c.apiKeyID, c.apiSecretHash,
                                       c.enabled, c.hasBackup, c.registrationTokenHash, c.created])
            return true
        }
    }

    public func registrationTokenExists(hash: Data) async throws -> Bool {
        try await pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM registration_tokens WHERE token_hash = ?", arguments: [hash]) ?? false
        }
    }

    public func backupClientID() async throws -> String? {
        try await pool.read { db in
            try Data.fetchOne(db, sql: "SELECT value FROM server_settings WHERE key = 'backup_client'")
                .map { String(decoding: $0, as: UTF8.self) }
        }
    }

    public func setBackupClientID(_ id: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO server_settings (key, value) VALUES ('backup_client', ?)",
                           arguments: [Data(id.utf8)])
        }
    }

    // MARK: Clients

    private static let clientColumns =
        "client_id, name, public_key, signing_key, api_key_id, api_secret_hash, enabled, has_backup, registration_token_hash, created"

    private static func client(_ r: Row) -> ClientRow {
        ClientRow(clientID: r[0], name: r[1], publicKey: r[2], signingKey: r[3], apiKeyID: r[4], apiSecretHash: r[5],
                  enabled: r[6], hasBackup: r[7], registrationTokenHash: r[8], created: r[9])
    }

    public func client(id: String) async throws -> ClientRow? {
        try pointRead { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.clientColumns) FROM clients WHERE client_id = ?"),
                             arguments: [id]).map(Self.client)
        }
    }

    public func client(apiKeyID: String) async throws -> ClientRow? {
        try pointRead { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.clientColumns) FROM clients WHERE api_key_id = ?"),
                             arguments: [apiKeyID]).map(Self.client)
        }
    }

    public func setHasBackup(clientID: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE clients SET has_backup = 1 WHERE client_id = ?", arguments: [clientID])
        }
    }

    public func setClientEnabled(id: String, _ enabled: Bool) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE clients SET enabled = ? WHERE client_id = ?", arguments: [enabled, id])
            return db.changesCount == 1
        }
    }

    // MARK: Tokens and nonces

    public func insertAccessToken(hash: Data, clientID: String, expires: Int64) async throws {
        try await pool.write { db in
            try db.cachedStatement(sql: "INSERT INTO access_tokens (token_hash, client_id, expires) VALUES (?, ?, ?)")
                .execute(arguments: [hash, clientID, expires])
        }
    }

    public func accessTokenClient(hash: Data, now: Int64) async throws -> String? {
        try pointRead { db in
            try String.fetchOne(
                db.cachedStatement(sql: "SELECT client_id FROM access_tokens WHERE token_hash = ? AND expires > ?"),
                arguments: [hash, now])
        }
    }

    public func accessToken(hash: Data, now: Int64) async throws -> (clientID: String, expires: Int64)? {
        try pointRead { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT client_id, expires FROM access_tokens WHERE token_hash = ? AND expires > ?"),
                arguments: [hash, now]).map { ($0[0], $0[1]) }
        }
    }

    public func useNonce(_ nonce: String, expires: Int64, now: Int64) async throws -> Bool {
        try await pool.write { db in
            if let old = try Int64.fetchOne(db.cachedStatement(sql: "SELECT expires FROM tsv1_nonces WHERE nonce = ?"),
                                            arguments: [nonce]) {
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

    public func accessKey(_ t: AccessTuple) async throws -> AccessKeyRow? {
        try pointRead { db in
            try Row.fetchOne(db.cachedStatement(sql: """
                SELECT eak, authorizer_id, authorizer_public_key, signer_id, signer_signing_key FROM access_keys
                WHERE writer_id = ? AND user_id = ? AND reader_id = ? AND type = ?
                """), arguments: [t.writerID, t.userID, t.readerID, t.type]).map {
                AccessKeyRow(tuple: t, eak: $0[0], authorizerID: $0[1], authorizerPublicKey: $0[2], signerID: $0[3],
                             signerSigningKey: $0[4])
            }
        }
    }

    public func insertAccessKey(_ r: AccessKeyRow) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT OR IGNORE INTO access_keys (writer_id, user_id, reader_id, type, eak, authorizer_id,
                    authorizer_public_key, signer_id, signer_signing_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [r.tuple.writerID, r.tuple.userID, r.tuple.readerID, r.tuple.type, r.eak,
                                 r.authorizerID, r.authorizerPublicKey, r.signerID, r.signerSigningKey])
            return db.changesCount == 1
        }
    }

    public func deleteAccessKey(_ t: AccessTuple) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM access_keys WHERE writer_id = ? AND user_id = ? AND reader_id = ? AND type = ?",
                           arguments: [t.writerID, t.userID, t.readerID, t.type])
        }
    }

    // MARK: Policies

    private static func policy(_ r: Row) -> PolicyRow {
        PolicyRow(tuple: AccessTuple(writerID: r[1], userID: r[0], readerID: r[2], type: r[3]), canRead: r[4],
                  canAuthorize: r[5], authorizedBy: r[6])
    }
    private static let policyColumns = "user_id, writer_id, reader_id, type, can_read, can_authorize, authorized_by"

    public func policy(_ t: AccessTuple) async throws -> PolicyRow? {
        try pointRead { db in
            try Row.fetchOne(db.cachedStatement(sql: """
                SELECT \(Self.policyColumns) FROM policies
                WHERE user_id = ? AND writer_id = ? AND reader_id = ? AND type = ?
                """), arguments: [t.userID, t.writerID, t.readerID, t.type]).map(Self.policy)
        }
    }

    public func changePolicy(_ t: AccessTuple, read: Bool?, authorize: Bool?, by: String?) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO policies (\(Self.policyColumns))
                VALUES (:user, :writer, :reader, :type, coalesce(:read, 0), coalesce(:authorize, 0),
                        CASE WHEN :authorize THEN :by END)
                ON CONFLICT (user_id, writer_id, reader_id, type) DO UPDATE SET
                    rowid = (SELECT max(rowid) + 1 FROM policies),
                    can_read = coalesce(:read, can_read), can_authorize = coalesce(:authorize, can_authorize),
                    authorized_by = CASE WHEN :authorize IS NULL THEN authorized_by WHEN :authorize THEN :by END
                """, arguments: ["user": t.userID, "writer": t.writerID, "reader": t.readerID, "type": t.type,
                                 "read": read, "authorize": authorize, "by": by])
        }
    }

    public func removeAuthorizations(userID: String, writerID: String, readerID: String) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                UPDATE policies SET can_authorize = 0, authorized_by = NULL
                WHERE user_id = ? AND writer_id = ? AND reader_id = ?
                """, arguments: [userID, writerID, readerID])
        }
    }

    public func listPolicies(_ listing: PolicyListing, clientID: String) async throws -> [PolicyRow] {
        let condition = switch listing {
        case .outgoing: "writer_id = ? AND can_read = 1"
        case .incoming: "reader_id = ? AND can_read = 1"
        case .proxies: "authorized_by = ? AND can_authorize = 1"
        case .granted: "reader_id = ? AND can_authorize = 1"
        }
        return try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.policyColumns) FROM policies WHERE \(condition) ORDER BY rowid",
                             arguments: [clientID]).map(Self.policy)
        }
    }

    // MARK: Records

    private static let recordColumns =
        "idx, record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created, last_modified, version"
    /// ``recordColumns`` with an empty `data` (``RecordScope/includeData``).
    private static let recordColumnsWithoutData =
        "idx, record_id, writer_id, user_id, type, plain, '', rec_sig, file_meta, created, last_modified, version"

    /// A row of ``recordColumns``, read by GRDB or by `SQLiteStatementReader`.
    private static func record(_ c: some SQLiteColumns) -> RecordRow {
        RecordRow(index: c.int64(0), recordID: c.text(1), writerID: c.text(2), userID: c.text(3), type: c.text(4),
                  plainJSON: c.text(5), dataJSON: c.text(6), recSig: c.optionalText(7), fileMetaJSON: c.optionalText(8),
                  created: c.int64(9), lastModified: c.int64(10), version: c.text(11))
    }

    private static func insert(_ r: RecordRow, _ db: Database) throws -> RecordRow {
        try db.cachedStatement(sql: """
            INSERT INTO records (record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created,
                last_modified, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """).execute(arguments: [r.recordID, r.writerID, r.userID, r.type, r.plainJSON, r.dataJSON, r.recSig,
                                     r.fileMetaJSON, r.created, r.lastModified, r.version])
        var out = r
        out.index = db.lastInsertedRowID
        return out
    }

    public func insertRecord(_ row: RecordRow) async throws -> RecordRow {
        try await recordInserts.submit(row)
    }

    /// Grouped with the other inserts (`GroupCommit`), on its drain task.
    public func insertRecord(_ row: RecordRow,
                             completion: @escaping @Sendable (Result<RecordRow, any Error>) -> Void) {
        recordInserts.submit(row, completion: completion)
    }

    public func record(id: String) async throws -> RecordRow? {
        try pointRead { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM records WHERE record_id = ?"),
                             arguments: [id]).map(Self.record)
        }
    }

    /// The record `id` when `readerID` may read it (`readableByCaller`), read on the calling thread without
    /// suspending: one indexed statement of a few microseconds, on connections of its own
    /// (`SQLiteStatementReader`). What the server's record-read fast path uses.
    func readableRecordNow(id: String, readerID: String) throws -> RecordRow? {
        try readableRecords.first([id, readerID, readerID], Self.record)
    }

    /// The read check of a record `r` for the client of the next argument: it wrote the record, or holds a `read`
    /// policy on its (user, writer, type) (a primary-key lookup).
    private static let readableByCaller = """
        (r.writer_id = ? OR EXISTS (SELECT 1 FROM policies p WHERE p.user_id = r.user_id
         AND p.writer_id = r.writer_id AND p.reader_id = ? AND p.type = r.type AND p.can_read = 1))
        """

    /// The record `?` when the client `?` (twice) may read it.
    private static let readableRecordSQL =
        "SELECT \(recordColumns) FROM records r WHERE r.record_id = ? AND \(readableByCaller)"

    /// The record with its read check in one statement, through GRDB's readers (waiting for a busy database, as
    /// every other read does); `readableRecordNow(id:readerID:)` is the same statement for the fast path.
    public func record(id: String, readableBy readerID: String) async throws -> RecordRow? {
        try pointRead { db in
            try Row.fetchOne(db.cachedStatement(sql: Self.readableRecordSQL), arguments: [id, readerID, readerID])
                .map(Self.record)
        }
    }

    public func updateRecord(id: String, expectedVersion: String, plainJSON: String?, dataJSON: String,
                             recSig: String?, newVersion: String, now: Int64) async throws -> VersionedOutcome {
        try await pool.write { db in
            guard let current = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM records WHERE record_id = ?"),
                arguments: [id]).map(Self.record) else { return .notFound }
            guard current.version == expectedVersion else { return .conflict }
            var updated = current
            if let plainJSON { updated.plainJSON = plainJSON }
            updated.dataJSON = dataJSON
            updated.recSig = recSig
            updated.version = newVersion
            updated.lastModified = max(now, current.lastModified + 1)
            try db.cachedStatement(sql: """
                UPDATE records SET plain = ?, data = ?, rec_sig = ?, version = ?, last_modified = ? WHERE record_id = ?
                """).execute(arguments: [updated.plainJSON, updated.dataJSON, updated.recSig, updated.version,
                                         updated.lastModified, id])
            return .done(updated)
        }
    }

    public func deleteRecord(id: String, expectedVersion: String?) async throws -> VersionedOutcome {
        try await pool.write { db in
            guard let current = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM records WHERE record_id = ?"),
                arguments: [id]).map(Self.record) else { return .notFound }
            if let expectedVersion, current.version != expectedVersion { return .conflict }
            try db.execute(sql: "DELETE FROM records WHERE record_id = ?", arguments: [id])
            return .done(current)
        }
    }

    public func records(in scope: RecordScope, afterIndex: Int64, limit: Int) async throws -> [RecordRow] {
        let columns = scope.includeData ? Self.recordColumns : Self.recordColumnsWithoutData
        var sql = "SELECT \(columns) FROM records r WHERE r.idx > ? AND "
        var args: [(any DatabaseValueConvertible)?] = [afterIndex]
        if scope.includeShared {
            sql += Self.readableByCaller
            args += [scope.caller, scope.caller]
        } else {
            sql += "r.writer_id = ?"
            args.append(scope.caller)
        }
        for (column, values) in [("writer_id", scope.writerIDs), ("user_id", scope.userIDs),
                                 ("record_id", scope.recordIDs), ("type", scope.types)] where !values.isEmpty {
            sql += " AND r.\(column) IN (" + Array(repeating: "?", count: values.count).joined(separator: ", ") + ")"
            args += values.map { $0 }
        }
        sql += " ORDER BY r.idx LIMIT ?"
        args.append(limit)
        let arguments = StatementArguments(args)
        let query = sql
        return try await pool.read { db in
            try Row.fetchAll(db, sql: query, arguments: arguments).map(Self.record)
        }
    }

    // MARK: Files

    public func insertPendingFile(_ p: PendingFileRow) async throws {
        try await pool.write { db in
            try db.execute(sql: """
                INSERT INTO pending_files (pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta,
                    checksum, size, uploaded, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [p.pendingID, p.record.writerID, p.record.userID, p.record.type, p.record.plainJSON,
                                 p.record.dataJSON, p.record.recSig, p.record.fileMetaJSON, p.checksum, p.size,
                                 p.uploaded, p.created])
        }
    }

    private static func pending(_ r: Row) -> PendingFileRow {
        let id: String = r[0]
        let created: Int64 = r[11]
        return PendingFileRow(
            pendingID: id,
            record: RecordRow(recordID: id, writerID: r[1], userID: r[2], type: r[3], plainJSON: r[4], dataJSON: r[5],
                              recSig: r[6], fileMetaJSON: r[7], created: created, lastModified: created, version: ""),
            checksum: r[8], size: r[9], uploaded: r[10], created: created)
    }

    public func pendingFile(id: String) async throws -> PendingFileRow? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: """
                SELECT pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, checksum, size, uploaded,
                    created FROM pending_files WHERE pending_id = ?
                """, arguments: [id]).map(Self.pending)
        }
    }

    public func claimUpload(pendingID: String, now: Int64, staleBefore: Int64) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: """
                UPDATE pending_files SET upload_started = ?
                WHERE pending_id = ? AND uploaded = 0 AND (upload_started IS NULL OR upload_started < ?)
                """, arguments: [now, pendingID, staleBefore])
            return db.changesCount == 1
        }
    }

    public func releaseUpload(pendingID: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE pending_files SET upload_started = NULL WHERE pending_id = ? AND uploaded = 0",
                           arguments: [pendingID])
        }
    }

    public func markUploaded(pendingID: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE pending_files SET uploaded = 1 WHERE pending_id = ?", arguments: [pendingID])
            return db.changesCount == 1
        }
    }

    public func purgeExpired(now: Int64, pendingCreatedBefore: Int64) async throws -> [String] {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM tsv1_nonces WHERE expires < ?", arguments: [now])
            try db.execute(sql: "DELETE FROM access_tokens WHERE expires < ?", arguments: [now])
            try db.execute(sql: "DELETE FROM notes WHERE expires_at < ?", arguments: [now])
            let stale = try String.fetchAll(db, sql: """
                DELETE FROM pending_files WHERE created < ?1 AND (upload_started IS NULL OR upload_started < ?1)
                RETURNING pending_id
                """, arguments: [pendingCreatedBefore])
            return stale
        }
    }

    public func commitPendingFile(id: String, now: Int64, version: String) async throws -> RecordRow? {
        try await pool.write { db in
            guard let p = try Row.fetchOne(db, sql: """
                SELECT pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, checksum, size, uploaded,
                    created FROM pending_files WHERE pending_id = ?
                """, arguments: [id]).map(Self.pending) else { return nil }
            var record = p.record
            record.created = now
            record.lastModified = now
            record.version = version
            let stored = try Self.insert(record, db)
            try db.execute(sql: "DELETE FROM pending_files WHERE pending_id = ?", arguments: [id])
            return stored
        }
    }

    // MARK: Notes

    private static let noteColumns = """
        note_id, id_string, writer_client_id, recipient_signing_key, writer_signing_key, max_views, views, expires_at,
        created, body
        """

    private static func note(_ r: Row) -> NoteRow {
        NoteRow(noteID: r[0], idString: r[1], writerClientID: r[2], recipientSigningKey: r[3], writerSigningKey: r[4],
                maxViews: r[5], views: r[6], expiresAt: r[7], created: r[8], bodyJSON: r[9])
    }

    private static func insert(_ n: NoteRow, _ db: Database) throws {
        try db.execute(sql: "INSERT INTO notes (\(noteColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       arguments: [n.noteID, n.idString, n.writerClientID, n.recipientSigningKey, n.writerSigningKey,
                                   n.maxViews, n.views, n.expiresAt, n.created, n.bodyJSON])
    }

    public func insertNote(_ n: NoteRow) async throws -> Bool {
        try await pool.write { db in
            if let name = n.idString,
               try Bool.fetchOne(db, sql: "SELECT 1 FROM notes WHERE id_string = ?", arguments: [name]) == true {
                return false
            }
            try Self.insert(n, db)
            return true
        }
    }

    public func note(id: String) async throws -> NoteRow? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.noteColumns) FROM notes WHERE note_id = ?", arguments: [id])
                .map(Self.note)
        }
    }

    public func note(name: String) async throws -> NoteRow? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.noteColumns) FROM notes WHERE id_string = ?", arguments: [name])
                .map(Self.note)
        }
    }

    public func viewNote(id: String, now: Int64) async throws -> NoteRow? {
        try await pool.write { db in
            guard var n = try Row.fetchOne(db, sql: "SELECT \(Self.noteColumns) FROM notes WHERE note_id = ?",
                                           arguments: [id]).map(Self.note) else { return nil }
            if let e = n.expiresAt, e <= now {
                try db.execute(sql: "DELETE FROM notes WHERE note_id = ?", arguments: [id])
                return nil
            }
            n.views += 1
            if let m = n.maxViews, m > 0, n.views >= m {
                try db.execute(sql: "DELETE FROM notes WHERE note_id = ?", arguments: [id])
            } else {
                try db.execute(sql: "UPDATE notes SET views = ? WHERE note_id = ?", arguments: [n.views, id])
            }
            return n
        }
    }

    public func replaceNote(_ n: NoteRow) async throws {
        try await pool.write { db in
            if let name = n.idString {
                try db.execute(sql: "DELETE FROM notes WHERE id_string = ?", arguments: [name])
            }
            try Self.insert(n, db)
        }
    }

    public func deleteNote(id: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM notes WHERE note_id = ?", arguments: [id])
            return db.changesCount == 1
        }
    }

    public func statistics() async throws -> [String: Int] {
        try await pool.read { db in
            var out: [String: Int] = [:]
            for table in ["clients", "registration_tokens", "access_keys", "policies", "records", "pending_files",
                          "notes", "access_tokens", "tsv1_nonces"] {
                out[table] = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0
            }
            return out
        }
    }
}

/// `close(2)` (inside ``SQLiteStorage`` the name is its own `close()`).
private func closeDescriptor(_ fd: Int32) { _ = close(fd) }

extension Row: SQLiteColumns {
    func int64(_ i: Int32) -> Int64 { self[Int(i)] }
    func text(_ i: Int32) -> String { self[Int(i)] }
    func optionalText(_ i: Int32) -> String? { self[Int(i)] }
}
