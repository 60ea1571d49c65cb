public import E3DBCanonicalJSON

// The API bodies of search.

extension API {
    /// The `plain` filter of a v1 query: `eq`, `and`, `or`, `not`, or a flat map read as `and` of equalities.
    public indirect enum PlainQuery: Codable, Sendable, Hashable {
        case equals(name: String, value: String)
        case and([PlainQuery])
        case or([PlainQuery])
        case not(PlainQuery)

        struct Eq: Codable {
            var name: String
            var value: String
        }
        enum Keys: String, CodingKey { case eq, and, or, not }

        /// The deepest coding path a filter may sit at (each `not` adds one entry, each `and`/`or` element two):
        /// real filters are a few levels deep, and a bound keeps decoding, matching and re-encoding well inside
        /// `JSONEncoder`'s nesting limit and the stack.
        public static let maxCodingPathDepth = 100

        /// Reads the `eq`/`and`/`or`/`not` forms; any other object of strings (e3db-go's flat `map[string]string`,
        /// including one whose keys are `eq`, `and`, `or` or `not` with string values) is the AND of its
        /// equalities, in key order.
        /// - Throws: `DecodingError` for other shapes and for filters nested deeper than ``maxCodingPathDepth``.
        public init(from decoder: any Decoder) throws {
            guard decoder.codingPath.count <= Self.maxCodingPathDepth else {
                throw DecodingError.dataCorrupted(
                    .init(
                        codingPath: decoder.codingPath,
                        debugDescription: "the plain filter nests deeper than \(Self.maxCodingPathDepth) levels"))
            }
            if let c = try? decoder.container(keyedBy: Keys.self), !c.allKeys.isEmpty {
                do {
                    if let eq = try c.decodeIfPresent(Eq.self, forKey: .eq) {
                        self = .equals(name: eq.name, value: eq.value)
                    } else if let all = try c.decodeIfPresent([PlainQuery].self, forKey: .and) {
                        self = .and(all)
                    } else if let any = try c.decodeIfPresent([PlainQuery].self, forKey: .or) {
                        self = .or(any)
                    } else {
                        self = .not(try c.decode(PlainQuery.self, forKey: .not))
                    }
                    return
                } catch {
                    guard let flat = try? decoder.singleValueContainer().decode([String: String].self) else {
                        throw error
                    }
                    self = Self.flat(flat)
                    return
                }
            }
            self = Self.flat(try decoder.singleValueContainer().decode([String: String].self))
        }

        private static func flat(_ map: [String: String]) -> PlainQuery {
            .and(map.sorted { $0.key < $1.key }.map { .equals(name: $0.key, value: $0.value) })
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            switch self {
            case .equals(let name, let value): try c.encode(Eq(name: name, value: value), forKey: .eq)
            case .and(let all): try c.encode(all, forKey: .and)
            case .or(let any): try c.encode(any, forKey: .or)
            case .not(let q): try c.encode(q, forKey: .not)
            }
        }

        /// Whether a record's `plain` satisfies the filter. Names and values compare by code units, as `RecordData`
        /// keeps them: `"é"` (U+00E9) and `"e\u{301}"` are two names and two values, never equal because Swift
        /// `String` equality would call them canonically equivalent.
        public func matches(_ plain: RecordData) -> Bool {
            switch self {
            case .equals(let name, let value): plain[name].map { $0.utf8.elementsEqual(value.utf8) } ?? false
            case .and(let all): all.allSatisfy { $0.matches(plain) }
            case .or(let any): any.contains { $0.matches(plain) }
            case .not(let q): !q.matches(plain)
            }
        }
    }

    /// The `POST /v1/storage/search` request.
    public struct QueryRequest: Codable, Sendable, Hashable {
        public var count: Int?
        public var afterIndex: Int64?
        public var includeData: Bool?
        public var writerIDs: [String]?
        public var userIDs: [String]?
        public var recordIDs: [String]?
        public var contentTypes: [String]?
        public var plain: PlainQuery?
        public var includeAllWriters: Bool?
        public init(
            count: Int? = nil, afterIndex: Int64? = nil, includeData: Bool? = nil, writerIDs: [String]? = nil,
            userIDs: [String]? = nil, recordIDs: [String]? = nil, contentTypes: [String]? = nil,
            plain: PlainQuery? = nil, includeAllWriters: Bool? = nil
        ) {
            self.count = count
            self.afterIndex = afterIndex
            self.includeData = includeData
            self.writerIDs = writerIDs
            self.userIDs = userIDs
            self.recordIDs = recordIDs
            self.contentTypes = contentTypes
            self.plain = plain
            self.includeAllWriters = includeAllWriters
        }
        enum CodingKeys: String, CodingKey {
            case count, afterIndex = "after_index", includeData = "include_data", writerIDs = "writer_ids"
            case userIDs = "user_ids", recordIDs = "record_ids", contentTypes = "content_types", plain
            case includeAllWriters = "include_all_writers"
        }
        /// Lenient: old Swift sends `after_index` as a `Double`.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            count = try c.decodeIfPresent(Int.self, forKey: .count)
            if let i = try? c.decodeIfPresent(Int64.self, forKey: .afterIndex) {
                afterIndex = i
            } else if let d = try c.decodeIfPresent(Double.self, forKey: .afterIndex) {
                guard d.rounded() == d, abs(d) < 9.0e15 else {
                    throw DecodingError.dataCorruptedError(
                        forKey: .afterIndex, in: c,
                        debugDescription: "after_index must be an integer")
                }
                afterIndex = Int64(d)
            } else {
                afterIndex = nil
            }
            includeData = try c.decodeIfPresent(Bool.self, forKey: .includeData)
            writerIDs = try c.decodeIfPresent([String].self, forKey: .writerIDs)
            userIDs = try c.decodeIfPresent([String].self, forKey: .userIDs)
            recordIDs = try c.decodeIfPresent([String].self, forKey: .recordIDs)
            contentTypes = try c.decodeIfPresent([String].self, forKey: .contentTypes)
            plain = try c.decodeIfPresent(PlainQuery.self, forKey: .plain)
            includeAllWriters = try c.decodeIfPresent(Bool.self, forKey: .includeAllWriters)
        }
    }

    /// An element of a v1 or v2 search response. Read by the strict record reader and written by the record writer
    /// as part of a response (`API.QueryResponse.decodeBody(_:)` and `encodeBody()`), so not `Codable`.
    public struct SearchResult: Sendable, Hashable {
        public var meta: Meta
        /// The record's encrypted fields (names distinct by code units, as `API.Record.data`).
        public var recordData: RecordData?
        public var accessKey: EAKInfo?
        public var recSig: String?
        public init(meta: Meta, recordData: RecordData?, accessKey: EAKInfo?, recSig: String? = nil) {
            self.meta = meta
            self.recordData = recordData
            self.accessKey = accessKey
            self.recSig = recSig
        }
    }

    /// The v1 search response. Read by the strict record reader (`decodeBody(_:)`) and written by the record writer
    /// (`encodeBody()`), so not `Codable`.
    public struct QueryResponse: Sendable, Hashable {
        public var results: [SearchResult]
        public var lastIndex: Int64
        public init(results: [SearchResult], lastIndex: Int64) {
            self.results = results
            self.lastIndex = lastIndex
        }
    }

    /// One `match` or `exclude` clause of a v2 search.
    public struct SearchClause: Codable, Sendable, Hashable {
        /// The terms of a clause; empty lists and `null` tags are "no term".
        public struct Terms: Codable, Sendable, Hashable {
            public var writerIDs: [String]?
            public var userIDs: [String]?
            public var recordIDs: [String]?
            public var contentTypes: [String]?
            public var keys: [String]?
            public var values: [String]?
            public var tags: [String: String]?
            public init(
                writerIDs: [String]? = nil, userIDs: [String]? = nil, recordIDs: [String]? = nil,
                contentTypes: [String]? = nil, keys: [String]? = nil, values: [String]? = nil,
                tags: [String: String]? = nil
            ) {
                self.writerIDs = writerIDs
                self.userIDs = userIDs
                self.recordIDs = recordIDs
                self.contentTypes = contentTypes
                self.keys = keys
                self.values = values
                self.tags = tags
            }
            enum CodingKeys: String, CodingKey {
                case writerIDs = "writer_ids", userIDs = "user_ids", recordIDs = "record_ids"
                case contentTypes = "content_types", keys, values, tags
            }
        }
        public var condition: String?
        public var strategy: String?
        public var terms: Terms?
        public init(condition: String? = nil, strategy: String? = nil, terms: Terms? = nil) {
            self.condition = condition
            self.strategy = strategy
            self.terms = terms
        }
    }

    /// The `range` of a v2 search (`{}` or missing bounds mean unbounded).
    public struct SearchRange: Codable, Sendable, Hashable {
        public var rangeKey: String?
        public var after: String?
        public var before: String?
        public init(rangeKey: String? = nil, after: String? = nil, before: String? = nil) {
            self.rangeKey = rangeKey
            self.after = after
            self.before = before
        }
        enum CodingKeys: String, CodingKey { case rangeKey = "range_key", after, before }
    }

    /// The `POST /v2/search` request.
    public struct SearchRequest: Codable, Sendable, Hashable {
        public var limit: Int?
        public var nextToken: Int64?
        public var includeAllWriters: Bool?
        public var includeData: Bool?
        public var match: [SearchClause]?
        public var exclude: [SearchClause]?
        public var range: SearchRange?
        public init(
            limit: Int? = nil, nextToken: Int64? = nil, includeAllWriters: Bool? = nil,
            includeData: Bool? = nil, match: [SearchClause]? = nil, exclude: [SearchClause]? = nil,
            range: SearchRange? = nil
        ) {
            self.limit = limit
            self.nextToken = nextToken
            self.includeAllWriters = includeAllWriters
            self.includeData = includeData
            self.match = match
            self.exclude = exclude
            self.range = range
        }
        enum CodingKeys: String, CodingKey {
            case limit, nextToken = "next_token", includeAllWriters = "include_all_writers"
            case includeData = "include_data", match, exclude, range
        }
    }

    /// The v2 search response: the next offset is `last_index` (0 when no more). Read by the strict record reader
    /// (`decodeBody(_:)`) and written by the record writer (`encodeBody()`), so not `Codable`.
    public struct SearchResponse: Sendable, Hashable {
        public var results: [SearchResult]
        public var lastIndex: Int64
        public var totalResults: Int
        public var searchID: String
        public init(results: [SearchResult], lastIndex: Int64, totalResults: Int, searchID: String = "") {
            self.results = results
            self.lastIndex = lastIndex
            self.totalResults = totalResults
            self.searchID = searchID
        }
    }
}
