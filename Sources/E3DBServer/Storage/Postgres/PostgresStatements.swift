import E3DBPrimitives
internal import PostgresNIO

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The hot statements of ``PostgresStorage`` as named prepared statements: postgres-nio prepares each once per
/// pooled connection and then only binds and executes it, so that PostgreSQL parses and plans it once per
/// connection instead of once per request. Each is one round trip.
enum PostgresStatements {
    /// An unexpired bearer token's client and expiry.
    struct AccessToken: PostgresPreparedStatement {
        static let name = "e3dbkit_access_token"
        static let sql = "SELECT client_id, expires FROM access_tokens WHERE token_hash = $1 AND expires > $2"
        typealias Row = (ClientID, Int64)

        var hash: Data
        var now: Int64

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 2)
            try binds.append(hash)
            binds.append(now)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            let (id, expires) = try row.decode((String, Int64).self)
            return (try ClientID(stored: id), expires)
        }
    }

    /// A client by id.
    struct Client: LookupByID {
        static let name = "e3dbkit_client"
        static let sql = "SELECT \(PostgresStorage.clientColumns) FROM clients WHERE client_id = $1"
        var id: ClientID
        func decodeRow(_ row: PostgresRow) throws -> ClientRow { try PostgresStorage.client(row) }
    }

    /// A record by id.
    struct Record: LookupByID {
        static let name = "e3dbkit_record"
        static let sql = "SELECT \(PostgresStorage.recordColumns) FROM records WHERE record_id = $1"
        var id: RecordID
        func decodeRow(_ row: PostgresRow) throws -> RecordRow { try PostgresStorage.record(row) }
    }

    /// A record with its read check: a row when the reader is the record's writer or holds a `read` policy on its
    /// user, writer and type; none when the record is missing or not readable.
    struct ReadableRecord: PostgresPreparedStatement {
        static let name = "e3dbkit_readable_record"
        static let sql = """
            SELECT \(PostgresStorage.recordColumns) FROM records r
            WHERE r.record_id = $1 AND (r.writer_id = $2 OR EXISTS (SELECT 1 FROM policies p
                WHERE p.user_id = r.user_id AND p.writer_id = r.writer_id AND p.reader_id = $2
                    AND p.type = r.type AND p.can_read))
            """

        var id: RecordID
        var readerID: ClientID

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 2)
            binds.append(id.text)
            binds.append(readerID.text)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> RecordRow { try PostgresStorage.record(row) }
    }

    /// ``ReadableRecord`` for a group of reads in one statement: the ids and readers travel as two `text[]`, and
    /// each row ends with the 1-based position of its read, so that repeated ids map back to their reads and a
    /// read whose record is missing or not readable gets no row.
    struct ReadableRecords: PostgresPreparedStatement {
        static let name = "e3dbkit_readable_records"
        static let sql = """
            SELECT \(PostgresStorage.recordColumns), position
            FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(id, reader, position)
            JOIN records r ON r.record_id = u.id
            WHERE r.writer_id = u.reader OR EXISTS (SELECT 1 FROM policies p
                WHERE p.user_id = r.user_id AND p.writer_id = r.writer_id AND p.reader_id = u.reader
                    AND p.type = r.type AND p.can_read)
            """
        typealias Row = (position: Int64, record: RecordRow)

        var reads: [(RecordID, ClientID)]

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 2)
            binds.append(reads.map(\.0.text))
            binds.append(reads.map(\.1.text))
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            var cells = row.makeIterator()
            let record = try PostgresStorage.record(&cells)
            guard let position = cells.next() else {
                throw E3DBError(.storageCorrupted, "a grouped record read returned a row without its position")
            }
            return (try position.decode(Int64.self), record)
        }
    }

    /// Inserts a group of records in one statement (one implicit transaction) and returns each one's index.
    ///
    /// The statement first takes the record-insert advisory lock (an uncorrelated subquery in `WHERE`, evaluated
    /// once before the first row is produced, so before any identity value is drawn); the lock is held until the
    /// statement's transaction commits. Index values are therefore drawn and committed in the same order by every
    /// process, as with one insert per transaction, at one round trip for the whole group. Rows are inserted in
    /// the order given. Nullable columns travel as a value array and a null-flag array (postgres-nio encodes
    /// arrays without NULL elements).
    struct InsertRecords: PostgresPreparedStatement {
        static let name = "e3dbkit_insert_records"
        static let sql = """
            INSERT INTO records (record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created,
                last_modified, version)
            SELECT id, writer, owner, kind, plain, body, CASE WHEN has_sig THEN sig END,
                CASE WHEN has_meta THEN meta END, created, modified, version
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                    $8::boolean[], $9::text[], $10::boolean[], $11::bigint[], $12::bigint[], $13::text[])
                WITH ORDINALITY AS u(id, writer, owner, kind, plain, body, sig, has_sig, meta, has_meta, created,
                    modified, version, position)
            WHERE (SELECT pg_advisory_xact_lock(\(PostgresStorage.recordInsertLock))) IS NOT NULL
            ORDER BY position
            RETURNING idx, record_id
            """
        typealias Row = (Int64, String)

        var rows: [RecordRow]

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 13)
            binds.append(rows.map(\.recordID.text))
            binds.append(rows.map(\.writerID.text))
            binds.append(rows.map(\.userID.text))
            binds.append(rows.map(\.type))
            binds.append(rows.map(\.plainJSON))
            binds.append(rows.map(\.dataJSON))
            binds.append(rows.map { $0.recSig ?? "" })
            binds.append(rows.map { $0.recSig != nil })
            binds.append(rows.map { $0.fileMetaJSON ?? "" })
            binds.append(rows.map { $0.fileMetaJSON != nil })
            binds.append(rows.map(\.created))
            binds.append(rows.map(\.lastModified))
            binds.append(rows.map(\.version))
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }
}

/// A prepared statement whose one parameter is an id.
protocol LookupByID: PostgresPreparedStatement {
    associatedtype Kind: IdentifierKind
    /// The id bound as `$1` (its ``Identifier/text``).
    var id: Identifier<Kind> { get }
}

extension LookupByID {
    func makeBindings() throws -> PostgresBindings {
        var binds = PostgresBindings(capacity: 1)
        binds.append(id.text)
        return binds
    }
}
