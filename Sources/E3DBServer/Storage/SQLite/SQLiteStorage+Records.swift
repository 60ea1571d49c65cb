internal import E3DBRows
internal import GRDB

extension SQLiteStorage {
    // MARK: Records

    private static let recordColumns =
        "idx, record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created, last_modified, version"
    /// ``recordColumns`` with an empty `data` (``RecordScope/includeData``).
    private static let recordColumnsWithoutData =
        "idx, record_id, writer_id, user_id, type, plain, '', rec_sig, file_meta, created, last_modified, version"

    /// A row of ``recordColumns``.
    private static func record(_ row: Row) throws -> RecordRow {
        let r = UntrustedRow(server: row, table: "records")
        return RecordRow(
            index: try r.value(at: 0, "idx"), recordID: try RecordID(stored: r.value(at: 1, "record_id")),
            writerID: try ClientID(stored: r.value(at: 2, "writer_id")),
            userID: try ClientID(stored: r.value(at: 3, "user_id")), type: try r.value(at: 4, "type"),
            plainJSON: try r.value(at: 5, "plain"), dataJSON: try r.value(at: 6, "data"),
            recSig: try r.optional(at: 7, "rec_sig"), fileMetaJSON: try r.optional(at: 8, "file_meta"),
            created: try r.value(at: 9, "created"), lastModified: try r.value(at: 10, "last_modified"),
            version: try r.value(at: 11, "version"))
    }

    /// The record `id`, read in the caller's transaction.
    private static func record(id: RecordID, _ db: Database) throws -> RecordRow? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(recordColumns) FROM records WHERE record_id = ?"), arguments: [id.text]
        ).map(record)
    }

    /// Inserts `r` in the caller's transaction and returns it with its index.
    static func insert(_ r: RecordRow, _ db: Database) throws -> RecordRow {
        try db.cachedStatement(
            sql: """
                INSERT INTO records (record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created,
                    last_modified, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            r.recordID.text, r.writerID.text, r.userID.text, r.type, r.plainJSON, r.dataJSON, r.recSig,
            r.fileMetaJSON, r.created, r.lastModified, r.version,
        ])
        var out = r
        out.index = db.lastInsertedRowID
        return out
    }

    /// Grouped with the inserts of concurrent requests into one transaction (`GroupCommit`).
    package func insertRecord(_ row: RecordRow) async throws -> RecordRow {
        try await recordInserts.submit(row)
    }

    package func record(id: RecordID) async throws -> RecordRow? {
        try await read { db in try Self.record(id: id, db) }
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

    /// The record `id` when `readerID` may read it, in the caller's transaction: one statement (an indexed lookup
    /// and a primary-key probe).
    static func record(id: RecordID, readableBy readerID: ClientID, _ db: Database) throws -> RecordRow? {
        try Row.fetchOne(
            db.cachedStatement(sql: Self.readableRecordSQL), arguments: [id.text, readerID.text, readerID.text]
        ).map(Self.record)
    }

    /// Grouped with the reads of concurrent requests into one read transaction (`GroupCommit`).
    package func record(id: RecordID, readableBy readerID: ClientID) async throws -> RecordRow? {
        try await readableRecords.submit((id, readerID))
    }

    package func updateRecord(
        id: RecordID, expectedVersion: String, plainJSON: String?, dataJSON: String,
        recSig: String?, newVersion: String, now: Int64
    ) async throws -> VersionedOutcome {
        try await write { db in
            guard let current = try Self.record(id: id, db) else { return .notFound }
            guard current.version == expectedVersion else { return .conflict }
            var updated = current
            if let plainJSON { updated.plainJSON = plainJSON }
            updated.dataJSON = dataJSON
            updated.recSig = recSig
            updated.version = newVersion
            updated.lastModified = max(now, current.lastModified + 1)
            try db.cachedStatement(
                sql: """
                    UPDATE records SET plain = ?, data = ?, rec_sig = ?, version = ?, last_modified = ? WHERE record_id = ?
                    """
            ).execute(arguments: [
                updated.plainJSON, updated.dataJSON, updated.recSig, updated.version,
                updated.lastModified, id.text,
            ])
            return .done(updated)
        }
    }

    package func deleteRecord(id: RecordID, expectedVersion: String?) async throws -> VersionedOutcome {
        try await write { db in
            guard let current = try Self.record(id: id, db) else { return .notFound }
            if let expectedVersion, current.version != expectedVersion { return .conflict }
            try db.execute(sql: "DELETE FROM records WHERE record_id = ?", arguments: [id.text])
            if current.fileMetaJSON != nil { try Self.enqueueBodyDeletions([id.text], db) }
            return .done(current)
        }
    }

    package func records(in scope: RecordScope, afterIndex: Int64, limit: Int) async throws -> [RecordRow] {
        let columns = scope.includeData ? Self.recordColumns : Self.recordColumnsWithoutData
        var sql = "SELECT \(columns) FROM records r WHERE r.idx > ? AND "
        var args: [(any DatabaseValueConvertible)?] = [afterIndex]
        if scope.includeShared {
            sql += Self.readableByCaller
            args += [scope.caller.text, scope.caller.text]
        } else {
            sql += "r.writer_id = ?"
            args.append(scope.caller.text)
        }
        for (column, values) in [
            ("writer_id", scope.writerIDs.map(\.text)), ("user_id", scope.userIDs.map(\.text)),
            ("record_id", scope.recordIDs.map(\.text)), ("type", scope.types),
        ] where !values.isEmpty {
            sql += " AND r.\(column) IN (" + Array(repeating: "?", count: values.count).joined(separator: ", ") + ")"
            args += values.map { $0 }
        }
        sql += " ORDER BY r.idx LIMIT ?"
        args.append(limit)
        let arguments = StatementArguments(args)
        let query = sql
        return try await read { db in
            try Row.fetchAll(db, sql: query, arguments: arguments).map(Self.record)
        }
    }

    // MARK: Files

    package func insertPendingFile(_ p: PendingFileRow) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO pending_files (pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta,
                        checksum, size, uploaded, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    p.pendingID.text, p.record.writerID.text, p.record.userID.text, p.record.type, p.record.plainJSON,
                    p.record.dataJSON, p.record.recSig, p.record.fileMetaJSON, p.checksum, p.size,
                    p.uploaded, p.created,
                ])
        }
    }

    private static func pending(_ row: Row) throws -> PendingFileRow {
        let r = UntrustedRow(server: row, table: "pending_files")
        let id = try RecordID(stored: r.value(at: 0, "pending_id"))
        let created: Int64 = try r.value(at: 11, "created")
        return PendingFileRow(
            pendingID: id,
            record: RecordRow(
                recordID: id, writerID: try ClientID(stored: r.value(at: 1, "writer_id")),
                userID: try ClientID(stored: r.value(at: 2, "user_id")), type: try r.value(at: 3, "type"),
                plainJSON: try r.value(at: 4, "plain"), dataJSON: try r.value(at: 5, "data"),
                recSig: try r.optional(at: 6, "rec_sig"), fileMetaJSON: try r.optional(at: 7, "file_meta"),
                created: created, lastModified: created, version: ""),
            checksum: try r.value(at: 8, "checksum"), size: try r.value(at: 9, "size"),
            uploaded: try r.value(at: 10, "uploaded"), created: created)
    }

    /// The pending file `id`, read in the caller's transaction.
    private static func pending(id: RecordID, _ db: Database) throws -> PendingFileRow? {
        try Row.fetchOne(
            db,
            sql: """
                SELECT pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, checksum, size, uploaded,
                    created FROM pending_files WHERE pending_id = ?
                """, arguments: [id.text]
        ).map(pending)
    }

    package func pendingFile(id: RecordID) async throws -> PendingFileRow? {
        try await read { db in try Self.pending(id: id, db) }
    }

    package func claimUpload(pendingID: RecordID, now: Int64, staleBefore: Int64) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE pending_files SET upload_started = ?
                    WHERE pending_id = ? AND uploaded = 0 AND (upload_started IS NULL OR upload_started < ?)
                    """, arguments: [now, pendingID.text, staleBefore])
            return db.changesCount == 1
        }
    }

    package func releaseUpload(pendingID: RecordID) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE pending_files SET upload_started = NULL WHERE pending_id = ? AND uploaded = 0",
                arguments: [pendingID.text])
        }
    }

    package func markUploaded(pendingID: RecordID) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE pending_files SET uploaded = 1 WHERE pending_id = ?", arguments: [pendingID.text])
            return db.changesCount == 1
        }
    }

    package func purgeExpired(now: Int64, pendingCreatedBefore: Int64) async throws -> [RecordID] {
        try await write { db in
            try db.execute(sql: "DELETE FROM tsv1_nonces WHERE expires < ?", arguments: [now])
            try db.execute(sql: "DELETE FROM access_tokens WHERE expires < ?", arguments: [now])
            try db.execute(sql: "DELETE FROM notes WHERE expires_at < ?", arguments: [now])
            let stale = try String.fetchAll(
                db,
                sql: """
                    DELETE FROM pending_files WHERE created < ?1 AND (upload_started IS NULL OR upload_started < ?1)
                    RETURNING pending_id
                    """, arguments: [pendingCreatedBefore])
            try Self.enqueueBodyDeletions(stale, db)
            return try stale.map { text in try RecordID(stored: text) }
        }
    }

    /// Puts ids in the deletion outbox, in the caller's transaction.
    private static func enqueueBodyDeletions(_ ids: [String], _ db: Database) throws {
        for id in ids {
            try db.execute(sql: "INSERT OR IGNORE INTO file_body_deletions (id) VALUES (?)", arguments: [id])
        }
    }

    /// One write transaction (one writer at a time: the same semantics as PostgreSQL's `SKIP LOCKED` lease).
    package func claimBodyDeletions(now: Int64, leaseUntil: Int64, limit: Int, only: RecordID?) async throws
        -> [RecordID]
    {
        try await write { db in
            let ids = try String.fetchAll(
                db,
                sql: """
                    UPDATE file_body_deletions SET lease_until = ?1
                    WHERE id IN (
                        SELECT id FROM file_body_deletions WHERE lease_until <= ?2 AND (?3 IS NULL OR id = ?3)
                        ORDER BY lease_until, enqueued LIMIT ?4)
                    RETURNING id
                    """, arguments: [leaseUntil, now, only?.text, max(0, limit)])
            return try ids.map { text in try RecordID(stored: text) }
        }
    }

    package func finishBodyDeletions(_ ids: [RecordID]) async throws {
        guard !ids.isEmpty else { return }
        try await write { db in
            for id in ids {
                try db.execute(sql: "DELETE FROM file_body_deletions WHERE id = ?", arguments: [id.text])
            }
        }
    }

    package func commitPendingFile(id: RecordID, now: Int64, version: String) async throws -> RecordRow? {
        try await write { db in
            guard let p = try Self.pending(id: id, db) else { return nil }
            var record = p.record
            record.created = now
            record.lastModified = now
            record.version = version
            let stored = try Self.insert(record, db)
            try db.execute(sql: "DELETE FROM pending_files WHERE pending_id = ?", arguments: [id.text])
            return stored
        }
    }

}
