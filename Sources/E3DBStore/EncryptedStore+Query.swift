import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import Foundation
import GRDB
import Synchronization

extension EncryptedStore {
    /// The records matching `query`, decrypted, read in pages of `pageSize` so memory stays bounded however many
    /// match. Each page is one read transaction; records written meanwhile may or may not appear.
    public func records(matching query: RecordQuery, pageSize: Int = 256) -> StoreRecordSequence {
        StoreRecordSequence(store: self, query: query, pageSize: max(1, pageSize))
    }

    /// All records matching `query` at once (for small results; see ``records(matching:pageSize:)``).
    public func find(_ query: RecordQuery) throws(E3DBError) -> [StoredRecord] {
        var result: [StoredRecord] = []
        var after: Int64?
        while true {
            let page = try fetchPage(query, after: after, count: 512)
            result.append(contentsOf: page.records)
            if let limit = query.limit, result.count >= limit { return Array(result.prefix(limit)) }
            guard let last = page.lastSeq, page.rowCount == 512 else { return result }
            after = last
        }
    }

    /// `find(_:)` for async callers: the pages of ``records(matching:pageSize:)``, collected.
    public func find(_ query: RecordQuery) async throws(E3DBError) -> [StoredRecord] {
        var result: [StoredRecord] = []
        var iterator = records(matching: query, pageSize: 512).makeAsyncIterator()
        while let record = try await iterator.next() { result.append(record) }
        return result
    }

    /// The number of records in `collection` (all collections when nil).
    public func count(collection: String? = nil) throws(E3DBError) -> Int {
        try perform(counting(collection))
    }

    /// `count(collection:)` for async callers.
    public func count(collection: String? = nil) async throws(E3DBError) -> Int {
        try await perform(counting(collection))
    }

    /// The read of `count(collection:)`.
    private func counting(_ collection: String?) throws(E3DBError) -> StoreAccess<Int> {
        _ = try currentKeys()  // a locked store refuses every call
        return .read("counting records") { db in
            if let collection {
                return try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM records WHERE collection = ?", arguments: [collection]) ?? 0
            }
            return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM records") ?? 0
        }
    }

    /// The collections' names, sorted.
    public func collections() throws(E3DBError) -> [String] {
        try perform(collectionNames())
    }

    /// `collections()` for async callers.
    public func collections() async throws(E3DBError) -> [String] {
        try await perform(collectionNames())
    }

    /// The read of `collections()`.
    private func collectionNames() throws(E3DBError) -> StoreAccess<[String]> {
        _ = try currentKeys()
        return .read("listing collections") { db in
            try String.fetchAll(db, sql: "SELECT name FROM collections ORDER BY name")
        }
    }

    struct Page: Sendable {
        /// The records that matched every condition.
        var records: [StoredRecord]
        /// The last row read, and how many rows were read (before field conditions).
        var lastSeq: Int64?
        var rowCount: Int
    }

    /// The matcher of `query` (its collection's blind indexes read here) and the SQL selecting its candidate rows
    /// (after `after`, at most `count`).
    func querySQL(
        _ query: RecordQuery, after: Int64?, count: Int?
    ) throws(E3DBError) -> (matcher: QueryMatcher, sql: String, arguments: StatementArguments) {
        let indexes = query.usesIndexes ? try indexes(collection: query.collection) : []
        let matcher = try QueryMatcher(query, indexes: indexes, store: self)
        let (sql, arguments) = querySQL(matcher, after: after, count: count)
        return (matcher, sql, arguments)
    }

    /// The SQL selecting the candidate rows of the matcher's query. The query tables it reads are not
    /// authenticated: every candidate goes through ``QueryMatcher/accepts(_:)`` after decryption.
    func querySQL(_ matcher: QueryMatcher, after: Int64?, count: Int?) -> (String, StatementArguments) {
        let query = matcher.query
        var sql = "SELECT \(StoredRow.columns) FROM records r WHERE r.collection = ?"
        var arguments: [(any DatabaseValueConvertible)?] = [query.collection]
        if !query.types.isEmpty {
            sql += " AND r.type IN (" + Array(repeating: "?", count: query.types.count).joined(separator: ",") + ")"
            arguments.append(contentsOf: query.types.map { $0 as (any DatabaseValueConvertible)? })
        }
        for condition in query.plain {
            switch condition {
            case .equals(let key, let value):
                sql += " AND r.seq IN (SELECT record_seq FROM record_plain WHERE key = ? AND value = ?)"
                arguments += [key, value]
            case .hasPrefix(let key, let prefix):
                // A range on the index: prefix <= value < prefix + U+10FFFF (byte order of UTF-8 text).
                sql += " AND r.seq IN (SELECT record_seq FROM record_plain WHERE key = ? AND value >= ? AND value < ?)"
                arguments += [key, prefix, prefix + "\u{10FFFF}"]
            case .between(let key, let lower, let upper):
                sql += " AND r.seq IN (SELECT record_seq FROM record_plain WHERE key = ?"
                arguments.append(key)
                if let lower {
                    sql += " AND value >= ?"
                    arguments.append(lower)
                }
                if let upper {
                    sql += " AND value <= ?"
                    arguments.append(upper)
                }
                sql += ")"
            }
        }
        let restriction = indexRestriction(matcher)
        if query.types.isEmpty || !restriction.sql.isEmpty {
            // Without `+`, SQLite reads the whole collection through `records_by_key_version` and sorts it by seq for
            // every page (a scan in pages was quadratic), or tests every row against a token list. With it, SQLite
            // walks the rowid (seq) from the page's start, or looks the candidates up by rowid. A query on types
            // keeps the `(collection, type, seq)` index.
            sql = sql.replacingOccurrences(of: "WHERE r.collection = ?", with: "WHERE +r.collection = ?")
        }
        sql += restriction.sql
        arguments.append(contentsOf: restriction.arguments.map { $0 as (any DatabaseValueConvertible)? })
        if let after {
            sql += query.descending ? " AND r.seq < ?" : " AND r.seq > ?"
            arguments.append(after)
        }
        sql += query.descending ? " ORDER BY r.seq DESC" : " ORDER BY r.seq"
        if let count {
            sql += " LIMIT ?"
            arguments.append(count)
        }
        return (sql, StatementArguments(arguments))
    }

    func fetchPage(_ query: RecordQuery, after: Int64?, count: Int) throws(E3DBError) -> Page {
        _ = try currentKeys()  // a locked store refuses every query, also one that matches nothing
        let rows = try databaseCall("querying collection \(query.collection)") {
            try readers.read { db in try pageRows(db, query, after: after, count: count) }
        }
        return try decodePage(rows, collection: query.collection)
    }

    /// `fetchPage(_:after:count:)` through GRDB's async access (the collection's keys too, when not in memory).
    func fetchPage(_ query: RecordQuery, after: Int64?, count: Int) async throws(E3DBError) -> Page {
        _ = try currentKeys()
        let rows = try await databaseCall("querying collection \(query.collection)") {
            try await readers.read { db in try pageRows(db, query, after: after, count: count) }
        }
        if !rows.rows.isEmpty { _ = try await collectionKeys(query.collection, create: false) }
        return try decodePage(rows, collection: query.collection)
    }

    /// One page's candidate rows. One connection for the index definitions (when field conditions may use them) and
    /// the query; the query is one statement, so SQLite's implicit read transaction gives it a consistent snapshot.
    private func pageRows(_ db: Database, _ query: RecordQuery, after: Int64?, count: Int) throws -> (
        matcher: QueryMatcher, rows: [StoredRow]
    ) {
        let indexes = query.usesIndexes ? try loadIndexes(db, collection: query.collection) : []
        let matcher = try QueryMatcher(query, indexes: indexes, store: self)
        let (sql, statementArguments) = querySQL(matcher, after: after, count: count)
        return (matcher, try StoredRow.fetchAll(db.cachedStatement(sql: sql), arguments: statementArguments))
    }

    /// The records of a page's rows that match the query (each authenticated and decrypted).
    private func decodePage(_ page: (matcher: QueryMatcher, rows: [StoredRow]), collection: String)
        throws(E3DBError) -> Page
    {
        var records: [StoredRecord] = []
        records.reserveCapacity(page.rows.count)
        for row in page.rows {
            let record = try decode(row, collection: collection)
            if try page.matcher.accepts(record) { records.append(record) }
        }
        return Page(records: records, lastSeq: page.rows.last?.seq, rowCount: page.rows.count)
    }
}

/// Records of a query, decrypted page by page (bounded memory).
public struct StoreRecordSequence: AsyncSequence, Sendable {
    public typealias Element = StoredRecord
    let store: EncryptedStore
    let query: RecordQuery
    let pageSize: Int

    public struct AsyncIterator: AsyncIteratorProtocol {
        let store: EncryptedStore
        let query: RecordQuery
        let pageSize: Int
        var buffer: [StoredRecord] = []
        var index = 0
        var after: Int64?
        var returned = 0
        var finished = false

        public mutating func next() async throws(E3DBError) -> StoredRecord? {
            try await next(isolation: nil)
        }

        /// The next record; a page is read through GRDB's async access, so the caller's thread is not held while
        /// the database is busy.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(E3DBError) -> StoredRecord? {
            if let limit = query.limit, returned >= limit { return nil }
            while index == buffer.count {
                if finished { return nil }
                try Task.checkCancellationAsE3DBError()
                let page = try await store.fetchPage(query, after: after, count: pageSize)
                buffer = page.records
                index = 0
                after = page.lastSeq
                finished = page.rowCount < pageSize
            }
            defer {
                index += 1
                returned += 1
            }
            return buffer[index]
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(store: store, query: query, pageSize: pageSize)
    }
}

extension Task where Success == Never, Failure == Never {
    static func checkCancellationAsE3DBError() throws(E3DBError) {
        if Task.isCancelled { throw E3DBError(.cancelled, "the scan was cancelled") }
    }
}
