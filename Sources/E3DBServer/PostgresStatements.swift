#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
internal import NIOCore
internal import PostgresNIO

/// The hot statements of ``PostgresStorage`` as named prepared statements: postgres-nio prepares each once per
/// pooled connection and then only binds and executes it, so that PostgreSQL parses and plans it once per
/// connection instead of once per request. Each is one round trip.
enum PostgresStatements {
    /// An unexpired bearer token's client and expiry.
    struct AccessToken: PostgresPreparedStatement {
        static let name = "e3dbkit_access_token"
        static let sql = "SELECT client_id, expires FROM access_tokens WHERE token_hash = $1 AND expires > $2"
        typealias Row = (String, Int64)

        var hash: Data
        var now: Int64

        func makeBindings() throws -> PostgresBindings {
            var binds = PostgresBindings(capacity: 2)
            try binds.append(hash)
            binds.append(now)
            return binds
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    /// A client by id.
    struct Client: LookupByID {
        static let name = "e3dbkit_client"
        static let sql = "SELECT \(PostgresStorage.clientColumns) FROM clients WHERE client_id = $1"
        var id: String
        func decodeRow(_ row: PostgresRow) throws -> ClientRow { try PostgresStorage.client(row) }
    }

    /// A record by id.
    struct Record: LookupByID {
        static let name = "e3dbkit_record"
        static let sql = "SELECT \(PostgresStorage.recordColumns) FROM records WHERE record_id = $1"
        var id: String
        func decodeRow(_ row: PostgresRow) throws -> RecordRow { try PostgresStorage.record(row) }
    }

    /// A group of record reads, each with its read check (the reader is the record's writer or holds a `read`
    /// policy on its user, writer and type), in one statement: a row per readable record with the 1-based position
    /// of its request; missing and unreadable records have no row. Prepared once per connection by
    /// `PostgresReadGroups` through postgres-nio's event-loop API, whose prepared statements describe their
    /// columns as text while the values arrive in binary; every column is therefore text, whose two formats are
    /// the same bytes.
    enum ReadableRecords {
        static let sql = """
            SELECT u.position::text, r.idx::text, r.record_id, r.writer_id, r.user_id, r.type, r.plain, r.data,
                r.rec_sig, r.file_meta, r.created::text, r.last_modified::text, r.version
            FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(id, reader, position)
            JOIN records r ON r.record_id = u.id
            WHERE r.writer_id = u.reader OR EXISTS (SELECT 1 FROM policies p
                WHERE p.user_id = r.user_id AND p.writer_id = r.writer_id AND p.reader_id = u.reader
                    AND p.type = r.type AND p.can_read)
            """

        /// The ids and readers of `reads` as the statement's two `text[]` parameters.
        static func binds(_ reads: some Collection<RecordRead>) -> [PostgresData] {
            var ids = ByteBuffer(), readers = ByteBuffer()
            reads.map(\.id).encode(into: &ids, context: .default)
            reads.map(\.readerID).encode(into: &readers, context: .default)
            return [PostgresData(type: .textArray, value: ids), PostgresData(type: .textArray, value: readers)]
        }

        /// A row's request position (1-based, at most `count`) and record.
        static func decode(_ row: PostgresRow, count: Int) throws -> (position: Int, record: RecordRow) {
            var cells = row.makeIterator()
            func text() throws -> String? {
                guard let cell = cells.next() else {
                    throw StorageError(.corrupted, "a grouped record read returned a row with too few columns")
                }
                return try cell.decode(String?.self)
            }
            func string() throws -> String {
                guard let value = try text() else {
                    throw StorageError(.corrupted, "a grouped record read returned NULL where a value belongs")
                }
                return value
            }
            func integer() throws -> Int64 {
                guard let value = Int64(try string()) else {
                    throw StorageError(.corrupted, "a grouped record read returned a column that is not an integer")
                }
                return value
            }
            let position = try integer()
            guard position >= 1, position <= count else {
                throw StorageError(.corrupted, "a grouped record read returned position \(position) of \(count)")
            }
            let record = RecordRow(
                index: try integer(), recordID: try string(), writerID: try string(), userID: try string(),
                type: try string(), plainJSON: try string(), dataJSON: try string(), recSig: try text(),
                fileMetaJSON: try text(), created: try integer(), lastModified: try integer(),
                version: try string())
            return (Int(position), record)
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
            binds.append(rows.map(\.recordID))
            binds.append(rows.map(\.writerID))
            binds.append(rows.map(\.userID))
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
    /// The id bound as `$1`.
    var id: String { get }
}

extension LookupByID {
    func makeBindings() throws -> PostgresBindings {
        var binds = PostgresBindings(capacity: 1)
        binds.append(id)
        return binds
    }
}
