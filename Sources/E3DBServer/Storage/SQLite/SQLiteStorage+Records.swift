internal import GRDB

extension SQLiteStorage {
    // MARK: Records

    private static let recordColumns =
        "idx, record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created, last_modified, version"
    /// ``recordColumns`` with an empty `data` (``RecordScope/includeData``).
    private static let recordColumnsWithoutData =
        "idx, record_id, writer_id, user_id, type, plain, '', rec_sig, file_meta, created, last_modified, version"

    /// A row of ``recordColumns``.
    private static func record(_ r: Row) -> RecordRow {
        RecordRow(
            index: r[0], recordID: r[1], writerID: r[2], userID: r[3], type: r[4], plainJSON: r[5],
            dataJSON: r[6], recSig: r[7], fileMetaJSON: r[8], created: r[9], lastModified: r[10], version: r[11])
    }

    /// Inserts `r` in the caller's transaction and returns it with its index.
    static func insert(_ r: RecordRow, _ db: Database) throws -> RecordRow {
        try db.cachedStatement(
            sql: """
                INSERT INTO records (record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created,
                    last_modified, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            r.recordID, r.writerID, r.userID, r.type, r.plainJSON, r.dataJSON, r.recSig,
            r.fileMetaJSON, r.created, r.lastModified, r.version,
        ])
        var out = r
        out.index = db.lastInsertedRowID
        return out
    }

    /// Grouped with the inserts of concurrent requests into one transaction (`GroupCommit`).
    public func insertRecord(_ row: RecordRow) async throws -> RecordRow {
        try await recordInserts.submit(row)
    }

    public func record(id: String) async throws -> RecordRow? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM records WHERE record_id = ?"),
                arguments: [id]
            ).map(Self.record)
        }
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

    /// The record with its read check in one statement (one indexed lookup and a primary-key probe).
    public func record(id: String, readableBy readerID: String) async throws -> RecordRow? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: Self.readableRecordSQL), arguments: [id, readerID, readerID])
                .map(Self.record)
        }
    }

    public func updateRecord(
        id: String, expectedVersion: String, plainJSON: String?, dataJSON: String,
        recSig: String?, newVersion: String, now: Int64
    ) async throws -> VersionedOutcome {
        try await write { db in
            guard
                let current = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM records WHERE record_id = ?"),
                    arguments: [id]
                ).map(Self.record)
            else { return .notFound }
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
                updated.lastModified, id,
            ])
            return .done(updated)
        }
    }

    public func deleteRecord(id: String, expectedVersion: String?) async throws -> VersionedOutcome {
        try await write { db in
            guard
                let current = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT \(Self.recordColumns) FROM records WHERE record_id = ?"),
                    arguments: [id]
                ).map(Self.record)
            else { return .notFound }
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
        for (column, values) in [
            ("writer_id", scope.writerIDs), ("user_id", scope.userIDs),
            ("record_id", scope.recordIDs), ("type", scope.types),
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

    public func insertPendingFile(_ p: PendingFileRow) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO pending_files (pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta,
                        checksum, size, uploaded, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    p.pendingID, p.record.writerID, p.record.userID, p.record.type, p.record.plainJSON,
                    p.record.dataJSON, p.record.recSig, p.record.fileMetaJSON, p.checksum, p.size,
                    p.uploaded, p.created,
                ])
        }
    }

    private static func pending(_ r: Row) -> PendingFileRow {
        let id: String = r[0]
        let created: Int64 = r[11]
        return PendingFileRow(
            pendingID: id,
            record: RecordRow(
                recordID: id, writerID: r[1], userID: r[2], type: r[3], plainJSON: r[4], dataJSON: r[5],
                recSig: r[6], fileMetaJSON: r[7], created: created, lastModified: created, version: ""),
            checksum: r[8], size: r[9], uploaded: r[10], created: created)
    }

    public func pendingFile(id: String) async throws -> PendingFileRow? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, checksum, size, uploaded,
                        created FROM pending_files WHERE pending_id = ?
                    """, arguments: [id]
            ).map(Self.pending)
        }
    }

    public func claimUpload(pendingID: String, now: Int64, staleBefore: Int64) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE pending_files SET upload_started = ?
                    WHERE pending_id = ? AND uploaded = 0 AND (upload_started IS NULL OR upload_started < ?)
                    """, arguments: [now, pendingID, staleBefore])
            return db.changesCount == 1
        }
    }

    public func releaseUpload(pendingID: String) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE pending_files SET upload_started = NULL WHERE pending_id = ? AND uploaded = 0",
                arguments: [pendingID])
        }
    }

    public func markUploaded(pendingID: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE pending_files SET uploaded = 1 WHERE pending_id = ?", arguments: [pendingID])
            return db.changesCount == 1
        }
    }

    public func purgeExpired(now: Int64, pendingCreatedBefore: Int64) async throws -> [String] {
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
            return stale
        }
    }

    public func commitPendingFile(id: String, now: Int64, version: String) async throws -> RecordRow? {
        try await write { db in
            guard
                let p = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, checksum, size, uploaded,
                            created FROM pending_files WHERE pending_id = ?
                        """, arguments: [id]
                ).map(Self.pending)
            else { return nil }
            var record = p.record
            record.created = now
            record.lastModified = now
            record.version = version
            let stored = try Self.insert(record, db)
            try db.execute(sql: "DELETE FROM pending_files WHERE pending_id = ?", arguments: [id])
            return stored
        }
    }

}
