import E3DBPrimitives
import Logging
internal import PostgresNIO

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Records and pending files.
extension PostgresStorage {
    // MARK: Records

    static let recordColumns =
        "idx, record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created, last_modified, version"
    /// ``recordColumns`` with an empty `data` (``RecordScope/includeData``).
    static let recordColumnsWithoutData =
        "idx, record_id, writer_id, user_id, type, plain, ''::text, rec_sig, file_meta, created, last_modified, version"

    /// A record row in ``recordColumns``' order, decoded column by column with concrete types (a tuple `decode`
    /// resolves generic metadata at run time, which showed in the profile of record reads).
    static func record(_ row: PostgresRow) throws -> RecordRow {
        var cells = row.makeIterator()
        return try record(&cells)
    }

    /// The record in the next columns of `cells`, in ``recordColumns``' order (a statement may select more after
    /// them).
    static func record(_ cells: inout PostgresRow.Iterator) throws -> RecordRow {
        func next<T: PostgresDecodable>(_: T.Type) throws -> T {
            guard let cell = cells.next() else {
                throw E3DBError(.storageCorrupted, "a record row has fewer columns than a record")
            }
            return try cell.decode(T.self)
        }
        return RecordRow(
            index: try next(Int64.self), recordID: try RecordID(stored: next(String.self)),
            writerID: try ClientID(stored: next(String.self)), userID: try ClientID(stored: next(String.self)),
            type: try next(String.self), plainJSON: try next(String.self),
            dataJSON: try next(String.self), recSig: try next(String?.self), fileMetaJSON: try next(String?.self),
            created: try next(Int64.self), lastModified: try next(Int64.self), version: try next(String.self))
    }

    /// Inserts `rows` in one statement (``PostgresStatements/InsertRecords``) and returns them with their indexes.
    static func insert(_ rows: [RecordRow], client: PostgresClient, logger: Logger) async throws
        -> [RecordRow]
    {
        var indexes: [String: Int64] = [:]  // by the id's text, as the statement returns it
        indexes.reserveCapacity(rows.count)
        for try await (index, id) in try await client.execute(
            PostgresStatements.InsertRecords(rows: rows),
            logger: logger)
        {
            indexes[id] = index
        }
        return try rows.map { row in
            guard let index = indexes[row.recordID.text] else {
                throw E3DBError(.storageCorrupted, "inserting record \(row.recordID) returned no index")
            }
            var out = row
            out.index = index
            return out
        }
    }

    /// Inserts the record together with those of concurrent requests (one statement per group); a group that fails
    /// is retried one record at a time, so that a duplicate id fails only its own insert.
    package func insertRecord(_ row: RecordRow) async throws -> RecordRow {
        try await recordInserts.submit(row)
    }

    package func record(id: RecordID) async throws -> RecordRow? {
        try await first("reading record \(id)", PostgresStatements.Record(id: id))
    }

    /// The record joined with its read check in one prepared statement (`PostgresStatements.ReadableRecord`).
    /// Grouped with the reads of concurrent requests into one statement (`GroupCommit`).
    package func record(id: RecordID, readableBy readerID: ClientID) async throws -> RecordRow? {
        try await readableRecords.submit((id, readerID))
    }

    /// The records of `reads` that their readers may read, in one statement (a group of one runs the single
    /// prepared read); nil for a read whose record is missing or not readable.
    static func readableRecords(_ reads: [(RecordID, ClientID)], client: PostgresClient, logger: Logger)
        async throws -> [RecordRow?]
    {
        if reads.count == 1, let (id, readerID) = reads.first {
            var found: RecordRow?
            for try await row in try await client.execute(
                PostgresStatements.ReadableRecord(id: id, readerID: readerID), logger: logger)
            where found == nil {
                found = row
            }
            return [found]
        }
        var records = [RecordRow?](repeating: nil, count: reads.count)
        for try await (position, record) in try await client.execute(
            PostgresStatements.ReadableRecords(reads: reads), logger: logger)
        {
            guard position >= 1, position <= Int64(reads.count) else {
                throw E3DBError(
                    .storageCorrupted, "a grouped record read returned position \(position) for \(reads.count) reads")
            }
            records[Int(position) - 1] = record
        }
        return records
    }

    /// Whether a record exists, to tell a version conflict from a missing record after a conditional statement
    /// touched no row.
    private func outcomeWithoutChange(id: RecordID) async throws -> VersionedOutcome {
        try await execute("SELECT 1 FROM records WHERE record_id = \(id.text)", on: client) == 1 ? .conflict : .notFound
    }

    package func updateRecord(
        id: RecordID, expectedVersion: String, plainJSON: String?, dataJSON: String,
        recSig: String?, newVersion: String, now: Int64
    ) async throws -> VersionedOutcome {
        try await perform("updating record \(id)") { [self] in
            let updated = try await fetch(
                """
                UPDATE records SET plain = COALESCE(\(plainJSON)::text, plain), data = \(dataJSON),
                    rec_sig = \(recSig)::text, version = \(newVersion),
                    last_modified = GREATEST(\(now)::bigint, last_modified + 1)
                WHERE record_id = \(id.text) AND version = \(expectedVersion)
                RETURNING \(unescaped: Self.recordColumns)
                """, on: client, Self.record
            ).first
            if let updated { return .done(updated) }
            return try await outcomeWithoutChange(id: id)
        }
    }

    /// One statement: the delete, and for a file record the outbox row of its body.
    package func deleteRecord(id: RecordID, expectedVersion: String?) async throws -> VersionedOutcome {
        try await perform("deleting record \(id)") { [self] in
            let deleted = try await fetch(
                """
                WITH d AS (
                    DELETE FROM records WHERE record_id = \(id.text)
                        AND (\(expectedVersion)::text IS NULL OR version = \(expectedVersion)::text)
                    RETURNING \(unescaped: Self.recordColumns)),
                q AS (
                    INSERT INTO file_body_deletions (id) SELECT record_id FROM d WHERE file_meta IS NOT NULL
                    ON CONFLICT DO NOTHING)
                SELECT \(unescaped: Self.recordColumns) FROM d
                """, on: client, Self.record
            ).first
            if let deleted { return .done(deleted) }
            return try await outcomeWithoutChange(id: id)
        }
    }

    package func records(in scope: RecordScope, afterIndex: Int64, limit: Int) async throws -> [RecordRow] {
        var binds = PostgresBindings()
        binds.append(afterIndex)
        binds.append(scope.caller.text)
        let columns = scope.includeData ? Self.recordColumns : Self.recordColumnsWithoutData
        var sql = "SELECT \(columns) FROM records r WHERE r.idx > $1 AND "
        if scope.includeShared {
            sql += """
                (r.writer_id = $2 OR EXISTS (SELECT 1 FROM policies p WHERE p.user_id = r.user_id
                 AND p.writer_id = r.writer_id AND p.reader_id = $2 AND p.type = r.type AND p.can_read))
                """
        } else {
            sql += "r.writer_id = $2"
        }
        for (column, values) in [
            ("writer_id", scope.writerIDs.map(\.text)), ("user_id", scope.userIDs.map(\.text)),
            ("record_id", scope.recordIDs.map(\.text)), ("type", scope.types),
        ] where !values.isEmpty {
            binds.append(values)
            sql += " AND r.\(column) = ANY($\(binds.count))"
        }
        binds.append(Int64(max(0, limit)))
        sql += " ORDER BY r.idx LIMIT $\(binds.count)"
        let query = PostgresQuery(unsafeSQL: sql, binds: binds)
        return try await perform("searching records") { [self] in try await fetch(query, on: client, Self.record) }
    }

    // MARK: Files

    private static let pendingColumns =
        "pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, checksum, size, uploaded, created"

    private static func pending(_ row: PostgresRow) throws -> PendingFileRow {
        let (id, writer, user, type, plain, data, recSig, fileMeta, checksum, size, uploaded, created) =
            try row.decode(
                (
                    String, String, String, String, String, String, String?, String?, String, Int64, Bool,
                    Int64
                ).self)
        let pendingID = try RecordID(stored: id)
        return PendingFileRow(
            pendingID: pendingID,
            record: RecordRow(
                recordID: pendingID, writerID: try ClientID(stored: writer), userID: try ClientID(stored: user),
                type: type, plainJSON: plain,
                dataJSON: data, recSig: recSig, fileMetaJSON: fileMeta, created: created,
                lastModified: created, version: ""),
            checksum: checksum, size: size, uploaded: uploaded, created: created)
    }

    package func insertPendingFile(_ p: PendingFileRow) async throws {
        let r = p.record
        try await perform("inserting pending file \(p.pendingID)") { [self] in
            try await execute(
                """
                INSERT INTO pending_files (\(unescaped: Self.pendingColumns))
                VALUES (\(p.pendingID.text), \(r.writerID.text), \(r.userID.text), \(r.type), \(r.plainJSON),
                    \(r.dataJSON),
                    \(r.recSig), \(r.fileMetaJSON), \(p.checksum), \(p.size), \(p.uploaded), \(p.created))
                """, on: client)
        }
    }

    package func pendingFile(id: RecordID) async throws -> PendingFileRow? {
        try await perform("reading pending file \(id)") { [self] in
            try await fetch(
                "SELECT \(unescaped: Self.pendingColumns) FROM pending_files WHERE pending_id = \(id.text)",
                on: client, Self.pending
            ).first
        }
    }

    package func claimUpload(pendingID: RecordID, now: Int64, staleBefore: Int64) async throws -> Bool {
        try await perform("claiming the upload of pending file \(pendingID)") { [self] in
            try await execute(
                """
                UPDATE pending_files SET upload_started = \(now)
                WHERE pending_id = \(pendingID.text) AND NOT uploaded
                    AND (upload_started IS NULL OR upload_started < \(staleBefore))
                RETURNING 1
                """, on: client) == 1
        }
    }

    package func releaseUpload(pendingID: RecordID) async throws {
        try await perform("releasing the upload of pending file \(pendingID)") { [self] in
            try await execute(
                """
                UPDATE pending_files SET upload_started = NULL WHERE pending_id = \(pendingID.text) AND NOT uploaded
                """, on: client)
        }
    }

    /// One transaction, skipped when another process's purge holds the maintenance advisory lock
    /// (`pg_try_advisory_xact_lock`): the pending files' deletion and their outbox rows are one statement.
    package func purgeExpired(now: Int64, pendingCreatedBefore: Int64) async throws -> [RecordID] {
        try await transaction("removing expired nonces, tokens, notes and pending files") { [self] db in
            let locked = try await fetch("SELECT pg_try_advisory_xact_lock(\(Self.maintenanceLock))", on: db) {
                try $0.decode(Bool.self)
            }
            guard locked.first == true else { return [] }
            try await execute("DELETE FROM tsv1_nonces WHERE expires < \(now)", on: db)
            try await execute("DELETE FROM access_tokens WHERE expires < \(now)", on: db)
            try await execute("DELETE FROM notes WHERE expires_at < \(now)", on: db)
            return try await fetch(
                """
                WITH p AS (
                    DELETE FROM pending_files
                    WHERE created < \(pendingCreatedBefore)
                        AND (upload_started IS NULL OR upload_started < \(pendingCreatedBefore))
                    RETURNING pending_id),
                q AS (INSERT INTO file_body_deletions (id) SELECT pending_id FROM p ON CONFLICT DO NOTHING)
                SELECT pending_id FROM p
                """, on: db
            ) { try RecordID(stored: $0.decode(String.self)) }
        }
    }

    /// One statement: the oldest unleased rows, locked with `FOR UPDATE SKIP LOCKED` (rows another drain is
    /// leasing at this moment are skipped, not waited for), leased and returned.
    package func claimBodyDeletions(now: Int64, leaseUntil: Int64, limit: Int, only: RecordID?) async throws
        -> [RecordID]
    {
        try await perform("claiming file body deletions") { [self] in
            try await fetch(
                """
                UPDATE file_body_deletions SET lease_until = \(leaseUntil)
                WHERE id IN (
                    SELECT id FROM file_body_deletions
                    WHERE lease_until <= \(now) AND (\(only?.text)::text IS NULL OR id = \(only?.text)::text)
                    ORDER BY lease_until, enqueued LIMIT \(Int64(max(0, limit)))
                    FOR UPDATE SKIP LOCKED)
                RETURNING id
                """, on: client
            ) { try RecordID(stored: $0.decode(String.self)) }
        }
    }

    package func finishBodyDeletions(_ ids: [RecordID]) async throws {
        guard !ids.isEmpty else { return }
        try await perform("removing \(ids.count) file body deletion(s)") { [self] in
            try await execute("DELETE FROM file_body_deletions WHERE id = ANY(\(ids.map(\.text)))", on: client)
        }
    }

    package func markUploaded(pendingID: RecordID) async throws -> Bool {
        try await perform("marking pending file \(pendingID) uploaded") { [self] in
            try await execute(
                "UPDATE pending_files SET uploaded = true WHERE pending_id = \(pendingID.text) RETURNING 1",
                on: client) == 1
        }
    }

    /// Deletes the pending row and inserts its record in one statement (one implicit transaction, no client round
    /// trip while it holds the record-insert lock: a process that freezes cannot leave the lock held), taking the
    /// record-insert lock as `PostgresStatements.InsertRecords` does before the identity value is drawn. Of two
    /// concurrent commits, the second finds no pending row and returns `nil`.
    package func commitPendingFile(id: RecordID, now: Int64, version: String) async throws -> RecordRow? {
        try await perform("committing pending file \(id)") { [self] in
            try await fetch(
                """
                WITH pending AS (
                    DELETE FROM pending_files WHERE pending_id = \(id.text)
                    RETURNING pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta)
                INSERT INTO records (record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created,
                    last_modified, version)
                SELECT pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, \(now), \(now),
                    \(version)
                FROM pending
                WHERE (SELECT pg_advisory_xact_lock(\(Self.recordInsertLock))) IS NOT NULL
                RETURNING \(unescaped: Self.recordColumns)
                """, on: client, Self.record
            ).first
        }
    }
}
