import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

extension E3DBService {
    /// `POST /v1/storage/search` and `POST /v2/search`, for registered clients.
    func addSearchRoutes(to router: Router<E3DBRequestContext>) {
        router.group().add(middleware: Authentication(service: self, requirement: .client))
            .on(API.Endpoints.query) { try await self.searchV1($0) }
            .on(API.Endpoints.search) { try await self.searchV2($0) }
    }

    /// A search response, `{"results":[…],"last_index":…}` and the `v2` members (the members of
    /// `API.QueryResponse` and `API.SearchResponse`, in `JSONTextWriter`'s search response envelope): each result
    /// written by `RecordJSON.writeSearchResult` from the stored text, with the caller's access key for its
    /// (writer, user, type), looked up once per request.
    func searchResponse(
        _ rows: [RecordRow], caller: ClientID, includeData: Bool, lastIndex: Int64,
        v2: (totalResults: Int, searchID: String)? = nil
    ) async throws -> Response {
        var keys: [AccessTuple: String?] = [:]
        var w = JSONTextWriter()
        w.beginSearchResponse()
        for (n, row) in rows.enumerated() {
            let t = AccessTuple(writerID: row.writerID, userID: row.userID, readerID: caller, type: row.type)
            let key: String?
            if let cached = keys[t] {
                key = cached
            } else {
                key = try await storage.accessKey(t).map {
                    String(decoding: try JSONEncoders.wire().encode(eakInfo($0)), as: UTF8.self)
                }
                keys[t] = key
            }
            if n > 0 { w.byte(UInt8(ascii: ",")) }
            try RecordJSON.writeSearchResult(row, includeData: includeData, accessKey: key, into: &w)
        }
        w.endSearchResponse(lastIndex: lastIndex, v2: v2)
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: w.bytes)))
    }

    /// A v1 query's id filter, parsed: the UUIDs it names (empty: no filter), or `nil` when it names ids but none
    /// is a UUID. An id that is not a UUID names no record, so such a filter matches nothing.
    private static func ids<Kind: IdentifierKind>(_ list: [String]?) -> [Identifier<Kind>]? {
        let texts = list ?? []
        let ids = texts.compactMap { Identifier<Kind>($0) }
        return !texts.isEmpty && ids.isEmpty ? nil : ids
    }

    /// The steps of scanning one record: reading and decoding its `plain` (a step per 4 bytes). Scans read no
    /// `data` (``RecordScope/includeData``).
    private static func scanCost(_ row: RecordRow) -> Int { 4 + row.plainJSON.utf8.count / 4 }

    /// The steps of one comparison of `text` (hashing or comparing it): a step per 4 bytes, a step per byte when it
    /// is not ASCII (exact terms compare code units, but fuzzy, wildcard and regular expression terms walk such text
    /// by Unicode scalar, which costs more).
    static func textCost(_ text: String) -> Int {
        let bytes = text.utf8.count
        return text.utf8.allSatisfy { $0 < 0x80 } ? bytes / 4 : bytes
    }

    /// The steps of evaluating a v1 `plain` filter against one record: each node, and the text it compares.
    static func filterCost(_ q: API.PlainQuery) -> Int {
        switch q {
        case .equals(let name, let value): 1 + textCost(name) + textCost(value)
        case .and(let all), .or(let all): all.reduce(1) { $0 + filterCost($1) }
        case .not(let inner): 1 + filterCost(inner)
        }
    }

    /// The most UTF-8 bytes of names and values one v1 `plain` filter may hold.
    static let maxFilterBytes = 64 << 10

    /// The UTF-8 bytes of names and values in a v1 `plain` filter.
    private static func filterBytes(_ q: API.PlainQuery) -> Int {
        switch q {
        case .equals(let name, let value): name.utf8.count + value.utf8.count
        case .and(let all), .or(let all): all.reduce(0) { $0 + filterBytes($1) }
        case .not(let inner): filterBytes(inner)
        }
    }

    /// The most bytes of records (`plain` and `data`) one page of search results holds; a page stops before the
    /// record that would pass it (it always holds one), and the client pages on.
    static let maxPageBytes = 32 << 20

    /// The records `ids` (ascending index, from `first` on, visible in `scope`) read again, with `data` when
    /// `includeData`: a scan reads records without `data` and keeps only what it matched.
    func reread(_ ids: [RecordID], from first: Int64, scope: RecordScope, includeData: Bool) async throws
        -> [RecordRow]
    {
        guard !ids.isEmpty else { return [] }
        var again = scope
        again.recordIDs = ids
        again.includeData = includeData
        return try await storage.records(in: again, afterIndex: first - 1, limit: ids.count)
    }

    /// The longest prefix of `rows` within ``maxPageBytes`` (at least one row).
    private static func capped(_ rows: [RecordRow]) -> [RecordRow] {
        var bytes = 0
        for (i, row) in rows.enumerated() {
            bytes += row.plainJSON.utf8.count + row.dataJSON.utf8.count
            if bytes > maxPageBytes { return Array(rows.prefix(max(i, 1))) }
        }
        return rows
    }

    /// Runs a search's scan for `caller` behind the search limiter (``ServerConfiguration/concurrentSearches``, at
    /// most two of one client waiting), with a new ``WorkBudget``. The scan yields between batches and stops when
    /// the request is cancelled (its client closed the connection): a waiting search leaves the queue at once, a
    /// running one at its next ``WorkBudget/checkCancellation()``.
    func searching<T>(for caller: ClientID, _ scan: (inout WorkBudget) async throws -> T) async throws -> T {
        try await searches.withPermit(owner: caller) {
            var budget = WorkBudget(limit: configuration.searchBudget)
            return try await scan(&budget)
        }
    }

    /// v1 query: candidates by writer scope and id/type filters in storage, `plain` filtered here, ascending index,
    /// `index > after_index`, at most `count`.
    func searchV1(_ r: APIRequest) async throws -> Response {
        let caller = try r.caller()
        let q = try JSONBody.decode(
            API.QueryRequest.self, from: try await body(r, for: .client(caller.clientID)),
            what: "query")
        let after = q.afterIndex ?? 0
        guard after >= 0 else { throw E3DBError(.badRequest, "after_index must not be negative") }
        let count = min(max(q.count ?? 50, 1), 1000)
        if let plain = q.plain, Self.filterBytes(plain) > Self.maxFilterBytes {
            throw E3DBError(
                .badRequest, "a plain filter may hold at most \(Self.maxFilterBytes) bytes of names and values")
        }
        guard let writers: [ClientID] = Self.ids(q.writerIDs), let users: [ClientID] = Self.ids(q.userIDs),
            let records: [RecordID] = Self.ids(q.recordIDs)
        else {
            return try await searchResponse([], caller: caller.clientID, includeData: false, lastIndex: after)
        }
        let scope = RecordScope(
            caller: caller.clientID, includeShared: !writers.isEmpty || q.includeAllWriters == true, writerIDs: writers,
            userIDs: users, recordIDs: records, types: q.contentTypes ?? [], includeData: false)
        let perRow = q.plain.map(Self.filterCost) ?? 0
        let picked = try await searching(for: caller.clientID) { budget in
            var picked: [RecordRow] = []
            var cursor = after
            while picked.count < count {
                let batch = try await storage.records(in: scope, afterIndex: cursor, limit: max(count * 2, 64))
                for row in batch where picked.count < count {
                    try budget.checkCancellation()
                    if let plain = q.plain {
                        try budget.charge(Self.scanCost(row) + perRow)
                        if !plain.matches(try RecordJSON.plainMembers(row)) { continue }
                    }
                    picked.append(row)
                }
                guard let last = batch.last, batch.count == max(count * 2, 64) else { break }
                cursor = last.index
                try Task.checkCancellation()
                await Task.yield()
            }
            return picked
        }
        let includeData = q.includeData == true
        let rows = Self.capped(
            includeData
                ? try await reread(
                    picked.map(\.recordID), from: picked.first?.index ?? 0, scope: scope, includeData: true)
                : picked)
        return try await searchResponse(
            rows, caller: caller.clientID, includeData: includeData, lastIndex: rows.last?.index ?? after)
    }

    /// v2 search over the visible set, `(match1 OR match2 …) AND NOT (exclude1 OR …)`, with a creation/modification
    /// range; paged by offset (`next_token`), the next offset returned as `last_index` (0 when done).
    func searchV2(_ r: APIRequest) async throws -> Response {
        let caller = try r.caller()
        let q = try JSONBody.decode(
            API.SearchRequest.self, from: try await body(r, for: .client(caller.clientID)),
            what: "search")
        let limit = (q.limit ?? 0) == 0 ? 50 : q.limit!
        guard limit > 0, limit <= 1000 else { throw E3DBError(.badRequest, "limit must be between 1 and 1000") }
        let offset = q.nextToken ?? 0
        guard offset >= 0, offset <= 10_000 else {
            throw E3DBError(.badRequest, "next_token must be between 0 and 10000")
        }
        var after: Int64? = nil
        var before: Int64? = nil
        var byModified = false
        if let range = q.range {
            switch (range.rangeKey ?? "CREATED").uppercased() {
            case "CREATED", "": byModified = false
            case "MODIFIED": byModified = true
            default: throw E3DBError(.badRequest, "range_key must be CREATED or MODIFIED")
            }
            func bound(_ text: String?, _ name: String) throws -> Int64? {
                guard let text, !text.isEmpty else { return nil }
                guard let micros = APITimestamp.parse(text) else {
                    throw E3DBError(.badRequest, "range.\(name) is not an RFC 3339 timestamp")
                }
                // Go's zero time: unbounded.
                return micros <= APITimestamp.goZeroTime ? nil : micros
            }
            after = try bound(range.after, "after")
            before = try bound(range.before, "before")
        }
        let scope = RecordScope(caller: caller.clientID, includeShared: q.includeAllWriters == true, includeData: false)
        let window = 10_000
        // Compiled inside the limiter too: REGEXP terms cost memory and time to compile.
        let matched = try await searching(for: caller.clientID) { budget -> [(index: Int64, id: RecordID)] in
            let (matches, excludes) = try CompiledClause.compile(match: q.match, exclude: q.exclude)
            var matched: [(index: Int64, id: RecordID)] = []
            var cursor: Int64 = 0
            scan: while true {
                let batch = try await storage.records(in: scope, afterIndex: cursor, limit: 1000)
                rows: for row in batch {
                    try budget.checkCancellation()
                    try budget.charge(Self.scanCost(row))
                    let t = byModified ? row.lastModified : row.created
                    if let after, t < after { continue }
                    if let before, t > before { continue }
                    if let after, let before, after >= before { continue }
                    let plain = try RecordJSON.plainMembers(row)
                    var included = matches.isEmpty
                    for clause in matches where try clause.matches(row, plain: plain, budget: &budget) {
                        included = true
                        break
                    }
                    guard included else { continue }
                    for clause in excludes where try clause.matches(row, plain: plain, budget: &budget) {
                        continue rows
                    }
                    matched.append((row.index, row.recordID))
                    if matched.count >= window { break scan }
                }
                guard let last = batch.last, batch.count == 1000 else { break }
                cursor = last.index
                try Task.checkCancellation()
                await Task.yield()
            }
            return matched
        }
        let start = min(Int(offset), matched.count)
        let wanted = matched[start..<min(start + limit, matched.count)]
        let page = Self.capped(
            try await reread(
                wanted.map(\.id), from: wanted.first?.index ?? 0, scope: scope,
                includeData: q.includeData == true))
        // The page may stop early (``maxPageBytes``): the next offset follows its last record.
        let end =
            page.last.flatMap { last in wanted.firstIndex { $0.id == last.recordID } }.map { $0 + 1 }
            ?? wanted.endIndex
        let next = end < matched.count ? Int64(end) : 0
        return try await searchResponse(
            page, caller: caller.clientID, includeData: q.includeData == true, lastIndex: next,
            v2: (matched.count, ""))
    }
}
