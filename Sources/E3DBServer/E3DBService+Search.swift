import Foundation
import E3DBAPI
import Hummingbird

extension E3DBService {
    /// Search results with the caller's access key for each (writer, user, type), looked up once per request.
    private func results(_ rows: [RecordRow], caller: String, includeData: Bool) async throws -> [API.SearchResult] {
        var keys: [AccessTuple: API.EAKInfo?] = [:]
        var out: [API.SearchResult] = []
        out.reserveCapacity(rows.count)
        for row in rows {
            let t = AccessTuple(writerID: row.writerID, userID: row.userID, readerID: caller, type: row.type)
            let key: API.EAKInfo?
            if let cached = keys[t] {
                key = cached
            } else {
                key = try await storage.accessKey(t).map(eakInfo)
                keys[t] = key
            }
            out.append(API.SearchResult(meta: try meta(row), recordData: includeData ? try Self.map(row.dataJSON) : nil,
                                        accessKey: key, recSig: row.recSig))
        }
        return out
    }

    private static func ids(_ list: [String]?) -> [String] { (list ?? []).map { canonicalUUID($0) ?? $0.lowercased() } }

    /// The steps of scanning one record: reading and decoding its `plain` (a step per 16 bytes).
    private static func scanCost(_ row: RecordRow) -> Int { 4 + row.plainJSON.utf8.count / 16 }

    /// The comparisons of a v1 `plain` filter against one record: its nodes.
    private static func filterCost(_ q: API.PlainQuery) -> Int {
        switch q {
        case .equals: 1
        case .and(let all), .or(let all): all.reduce(1) { $0 + filterCost($1) }
        case .not(let inner): 1 + filterCost(inner)
        }
    }

    /// Runs a search's scan behind the search limiter (``ServerConfiguration/concurrentSearches``), with a new
    /// ``WorkBudget``; the scan yields between batches and stops when the request is cancelled.
    private func searching<T>(_ scan: (inout WorkBudget) async throws -> T) async throws -> T {
        try await searches.withPermit {
            var budget = WorkBudget(limit: configuration.searchBudget)
            return try await scan(&budget)
        }
    }

    /// v1 query: candidates by writer scope and id/type filters in storage, `plain` filtered here, ascending index,
    /// `index > after_index`, at most `count`.
    func searchV1(_ r: APIRequest) async throws -> Response {
        let caller = try await authenticate(r)
        let q = try JSONBody.decode(API.QueryRequest.self, from: try await body(r), what: "query")
        let after = q.afterIndex ?? 0
        guard after >= 0 else { throw HTTPFailure.badRequest("after_index must not be negative") }
        let count = min(max(q.count ?? 50, 1), 1000)
        let writers = Self.ids(q.writerIDs)
        let scope = RecordScope(
            caller: caller.clientID, includeShared: !writers.isEmpty || q.includeAllWriters == true, writerIDs: writers,
            userIDs: Self.ids(q.userIDs), recordIDs: Self.ids(q.recordIDs), types: q.contentTypes ?? [])
        let perRow = q.plain.map(Self.filterCost) ?? 0
        let picked = try await searching { budget in
            var picked: [RecordRow] = []
            var cursor = after
            while picked.count < count {
                let batch = try await storage.records(in: scope, afterIndex: cursor, limit: max(count * 2, 64))
                for row in batch where picked.count < count {
                    if let plain = q.plain {
                        try budget.charge(Self.scanCost(row) + perRow)
                        if !plain.matches(try Self.map(row.plainJSON)) { continue }
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
        let response = API.QueryResponse(
            results: try await results(picked, caller: caller.clientID, includeData: q.includeData == true),
            lastIndex: picked.last?.index ?? after)
        return try JSONBody.response(response)
    }

    /// v2 search over the visible set, `(match1 OR match2 …) AND NOT (exclude1 OR …)`, with a creation/modification
    /// range; paged by offset (`next_token`), the next offset returned as `last_index` (0 when done).
    func searchV2(_ r: APIRequest) async throws -> Response {
        let caller = try await authenticate(r)
        let q = try JSONBody.decode(API.SearchRequest.self, from: try await body(r), what: "search")
        let limit = (q.limit ?? 0) == 0 ? 50 : q.limit!
        guard limit > 0, limit <= 1000 else { throw HTTPFailure.badRequest("limit must be between 1 and 1000") }
        let offset = q.nextToken ?? 0
        guard offset >= 0, offset <= 10_000 else { throw HTTPFailure.badRequest("next_token must be between 0 and 10000") }
        let (matches, excludes) = try CompiledClause.compile(match: q.match, exclude: q.exclude)
        var after: Int64? = nil
        var before: Int64? = nil
        var byModified = false
        if let range = q.range {
            switch (range.rangeKey ?? "CREATED").uppercased() {
            case "CREATED", "": byModified = false
            case "MODIFIED": byModified = true
            default: throw HTTPFailure.badRequest("range_key must be CREATED or MODIFIED")
            }
            func bound(_ text: String?, _ name: String) throws -> Int64? {
                guard let text, !text.isEmpty else { return nil }
                guard let micros = APITimestamp.parse(text) else {
                    throw HTTPFailure.badRequest("range.\(name) is not an RFC 3339 timestamp")
                }
                return micros <= APITimestamp.parse("0001-01-01T00:00:00Z")! ? nil : micros  // Go's zero time: unbounded
            }
            after = try bound(range.after, "after")
            before = try bound(range.before, "before")
        }
        let scope = RecordScope(caller: caller.clientID, includeShared: q.includeAllWriters == true)
        let window = 10_000
        let matched = try await searching { budget in
            var matched: [RecordRow] = []
            var cursor: Int64 = 0
            scan: while true {
                let batch = try await storage.records(in: scope, afterIndex: cursor, limit: 1000)
                rows: for row in batch {
                    let t = byModified ? row.lastModified : row.created
                    if let after, t < after { continue }
                    if let before, t > before { continue }
                    if let after, let before, after >= before { continue }
                    try budget.charge(Self.scanCost(row))
                    let plain = try Self.map(row.plainJSON)
                    var included = matches.isEmpty
                    for clause in matches where try clause.matches(row, plain: plain, budget: &budget) {
                        included = true
                        break
                    }
                    guard included else { continue }
                    for clause in excludes where try clause.matches(row, plain: plain, budget: &budget) {
                        continue rows
                    }
                    matched.append(row)
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
        let page = Array(matched[start..<min(start + limit, matched.count)])
        let next = start + page.count < matched.count ? Int64(start + page.count) : 0
        return try JSONBody.response(API.SearchResponse(
            results: try await results(page, caller: caller.clientID, includeData: q.includeData == true),
            lastIndex: next, totalResults: matched.count))
    }
}
