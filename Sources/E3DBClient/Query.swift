public import E3DBAPI
import E3DBCanonicalJSON
import E3DBDocuments
import E3DBPrimitives
public import Foundation

/// A v1 query (`POST /v1/storage/search`): filters combine with AND, values within one filter with OR.
public struct RecordQuery: Sendable, Hashable {
    /// Only these record types.
    public var types: [String] = []
    /// Only these writers (records they shared with this client included).
    public var writers: [UUID] = []
    /// Only records about these users (`user_ids`).
    public var users: [UUID] = []
    /// Only these records.
    public var recordIDs: [UUID] = []
    /// Every record this client may read, not only its own.
    public var includeAllWriters = false
    /// Decrypt and return data (otherwise metadata only).
    public var includeData = true
    /// A `plain` filter.
    public var plain: API.PlainQuery?
    /// Records per request.
    public var pageSize = 100
    /// Start after this index (`after_index`: the `last_index` of an earlier page; 0 from the start).
    public var afterIndex: Int64 = 0

    /// A query; every filter left empty matches everything.
    public init(
        types: [String] = [], writers: [UUID] = [], users: [UUID] = [], recordIDs: [UUID] = [],
        includeAllWriters: Bool = false, includeData: Bool = true, plain: API.PlainQuery? = nil,
        pageSize: Int = 100, afterIndex: Int64 = 0
    ) {
        self.types = types
        self.writers = writers
        self.users = users
        self.afterIndex = afterIndex
        self.recordIDs = recordIDs
        self.includeAllWriters = includeAllWriters
        self.includeData = includeData
        self.plain = plain
        self.pageSize = pageSize
    }
}

extension RecordQuery {
    /// Refuses a result outside the query's type, writer, user and record-id filters (a server answering with
    /// records that were not asked for).
    func check(_ meta: API.Meta) throws(E3DBError) {
        func refuse(_ field: String) -> E3DBError {
            E3DBError(
                .invalidResponse,
                "query: the server returned record \(meta.recordID?.prefix(40) ?? "(no id)") "
                    + "whose \(field) the query does not select", context: .init(field: field, part: "query"))
        }
        if !types.isEmpty, !types.contains(meta.type) { throw refuse("type") }
        if !writers.isEmpty, UUID(uuidString: meta.writerID).map(writers.contains) != true { throw refuse("writer_id") }
        if !users.isEmpty, UUID(uuidString: meta.userID).map(users.contains) != true { throw refuse("user_id") }
        if !recordIDs.isEmpty, meta.recordID.flatMap(UUID.init(uuidString:)).map(recordIDs.contains) != true {
            throw refuse("record_id")
        }
    }
}

/// The records of a query, page by page as the sequence is consumed (bounded memory).
public struct QueryResults: AsyncSequence, Sendable {
    public typealias Element = ClientRecord
    let client: E3DBClient
    let query: RecordQuery

    public struct AsyncIterator: AsyncIteratorProtocol {
        let client: E3DBClient
        let query: RecordQuery
        var page: [API.SearchResult] = []
        var position = 0
        var afterIndex: Int64
        var done = false

        init(client: E3DBClient, query: RecordQuery) {
            self.client = client
            self.query = query
            afterIndex = query.afterIndex
        }

        /// The `last_index` of the page read last (where a new query with ``RecordQuery/afterIndex`` resumes).
        public var lastIndex: Int64 { afterIndex }

        public mutating func next() async throws -> ClientRecord? {
            while position == page.count {
                if done { return nil }
                let request = API.QueryRequest(
                    count: query.pageSize, afterIndex: afterIndex, includeData: query.includeData,
                    writerIDs: query.writers.map { $0.lowercasedString },
                    userIDs: query.users.isEmpty ? nil : query.users.map { $0.lowercasedString },
                    recordIDs: query.recordIDs.map { $0.lowercasedString }, contentTypes: query.types,
                    plain: query.plain, includeAllWriters: query.includeAllWriters)
                let response = try await client.call(
                    API.Endpoints.query, json: request, operation: "query", idempotent: true)
                done = response.results.count < query.pageSize
                // A full page means another may follow from last_index: one that does not move past the page's
                // start would be asked for again and again.
                if !done, response.lastIndex <= afterIndex {
                    throw E3DBError(
                        .invalidResponse,
                        "query: the server returned a full page with last_index "
                            + "\(response.lastIndex) after index \(afterIndex); paging would not advance",
                        context: .init(field: "last_index", part: "query"))
                }
                page = response.results
                position = 0
                afterIndex = response.lastIndex
                if page.isEmpty { return nil }
            }
            let result = page[position]
            position += 1
            try query.check(result.meta)
            guard query.includeData else { return ClientRecord(meta: result.meta, data: .init()) }
            guard let data = result.recordData else {
                throw E3DBError(
                    .invalidResponse,
                    "query: the server sent record "
                        + "\(result.meta.recordID?.prefix(40) ?? "(no id)") without the record_data asked for",
                    context: .init(field: "record_data", part: "query", item: result.meta.recordID))
            }
            return try await client.decrypt(API.Record(meta: result.meta, data: data, recSig: result.recSig))
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(client: client, query: query) }
}

extension E3DBClient {
    /// Runs a v1 query; pages are fetched as the sequence is consumed.
    /// - Parameter query: the filters.
    /// - Returns: the matching records, in write order, decrypted when `includeData`.
    public func query(_ query: RecordQuery) -> QueryResults { QueryResults(client: self, query: query) }
}
