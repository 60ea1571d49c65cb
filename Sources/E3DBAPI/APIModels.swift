/// The JSON bodies of the E3DB HTTP API (spec api), shared by the client and the server so that both sides
/// agree by construction.
///
/// Identifiers travel as strings (UUIDs written lowercase; the server parses them case-insensitively), timestamps
/// as ``APITimestamp`` strings, and record `data`/`plain` as string→string maps. Where an SDK needs a member to be
/// present as `null` rather than absent (`signing_key`, `signer_signing_key`, `record_data`, `access_key`), the
/// encoder writes `null`; members that must be absent rather than `null` (`file_meta`) are omitted.
public enum API {
    /// `{"curve25519": b64u}`: a client's public encryption key.
    public struct ClientKey: Codable, Sendable, Hashable {
        public var curve25519: String
        public init(curve25519: String) { self.curve25519 = curve25519 }
    }

    /// `{"ed25519": b64u}`: a client's public signing key.
    public struct SigningKey: Codable, Sendable, Hashable {
        public var ed25519: String
        public init(ed25519: String) { self.ed25519 = ed25519 }
    }

    /// `{"error": message}`: every error body (Python's v1 search needs the `error` member).
    public struct ErrorBody: Codable, Sendable, Hashable {
        public var error: String
        public init(error: String) { self.error = error }
    }

    // MARK: Authentication and registration

    /// The `POST /v1/auth/token` response. Python and js need `expires_at`, Java `expires_in`, old Swift
    /// `token_type`.
    public struct TokenResponse: Codable, Sendable, Hashable {
        public var accessToken: String
        public var tokenType: String
        public var expiresIn: Int
        public var expiresAt: String
        public init(accessToken: String, tokenType: String = "Bearer", expiresIn: Int, expiresAt: String) {
            self.accessToken = accessToken
            self.tokenType = tokenType
            self.expiresIn = expiresIn
            self.expiresAt = expiresAt
        }
        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token", tokenType = "token_type", expiresIn = "expires_in"
            case expiresAt = "expires_at"
        }
    }

    /// The `POST /v1/account/e3db/clients/register` request.
    public struct RegistrationRequest: Codable, Sendable, Hashable {
        /// The client being registered.
        public struct Client: Codable, Sendable, Hashable {
            public var name: String
            public var publicKey: ClientKey
            public var signingKey: SigningKey?
            public var type: String?
            public init(name: String, publicKey: ClientKey, signingKey: SigningKey?, type: String? = nil) {
                self.name = name
                self.publicKey = publicKey
                self.signingKey = signingKey
                self.type = type
            }
            enum CodingKeys: String, CodingKey {
                case name, publicKey = "public_key", signingKey = "signing_key", type
            }
        }
        public var token: String
        public var client: Client
        public init(token: String, client: Client) {
            self.token = token
            self.client = client
        }
    }

    /// The registration response (status 201, with the `X-Backup-Client` header).
    public struct RegistrationResponse: Codable, Sendable, Hashable {
        public var clientID: String
        public var apiKeyID: String
        public var apiSecret: String
        public var name: String
        public var type: String
        public var enabled: Bool
        public var hasBackup: Bool
        public var publicKey: ClientKey
        public var signingKey: SigningKey?
        public init(
            clientID: String, apiKeyID: String, apiSecret: String, name: String, type: String = "general",
            enabled: Bool = true, hasBackup: Bool = false, publicKey: ClientKey, signingKey: SigningKey?
        ) {
            self.clientID = clientID
            self.apiKeyID = apiKeyID
            self.apiSecret = apiSecret
            self.name = name
            self.type = type
            self.enabled = enabled
            self.hasBackup = hasBackup
            self.publicKey = publicKey
            self.signingKey = signingKey
        }
        enum CodingKeys: String, CodingKey {
            case clientID = "client_id", apiKeyID = "api_key_id", apiSecret = "api_secret", name, type, enabled
            case hasBackup = "has_backup", publicKey = "public_key", signingKey = "signing_key"
        }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(clientID, forKey: .clientID)
            try c.encode(apiKeyID, forKey: .apiKeyID)
            try c.encode(apiSecret, forKey: .apiSecret)
            try c.encode(name, forKey: .name)
            try c.encode(type, forKey: .type)
            try c.encode(enabled, forKey: .enabled)
            try c.encode(hasBackup, forKey: .hasBackup)
            try c.encode(publicKey, forKey: .publicKey)
            try c.encode(signingKey, forKey: .signingKey)  // null when absent: Python needs the key
        }
    }

    /// `GET /v1/storage/clients/{id}`.
    public struct ClientInfo: Codable, Sendable, Hashable {
        public var clientID: String
        public var publicKey: ClientKey
        public var signingKey: SigningKey?
        public var validated: Bool
        public init(clientID: String, publicKey: ClientKey, signingKey: SigningKey?, validated: Bool = true) {
            self.clientID = clientID
            self.publicKey = publicKey
            self.signingKey = signingKey
            self.validated = validated
        }
        enum CodingKeys: String, CodingKey {
            case clientID = "client_id", publicKey = "public_key", signingKey = "signing_key", validated
        }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(clientID, forKey: .clientID)
            try c.encode(publicKey, forKey: .publicKey)
            try c.encode(signingKey, forKey: .signingKey)  // null, never {}: Java needs the key, Swift rejects {}
            try c.encode(validated, forKey: .validated)
        }
    }

    // MARK: Access keys and policies

    /// `{"eak": "<b64u(box)>.<b64u(nonce)>"}`: the body of an access-key PUT.
    public struct PutAccessKeyRequest: Codable, Sendable, Hashable {
        public var eak: String
        public init(eak: String) { self.eak = eak }
    }

    /// An encrypted access key with its authorizer and signer (the `GET access_keys` response and the
    /// `access_key` member of search results).
    public struct EAKInfo: Codable, Sendable, Hashable {
        public var eak: String
        public var authorizerID: String
        public var authorizerPublicKey: ClientKey
        public var signerID: String?
        public var signerSigningKey: SigningKey?
        public init(
            eak: String, authorizerID: String, authorizerPublicKey: ClientKey, signerID: String?,
            signerSigningKey: SigningKey?
        ) {
            self.eak = eak
            self.authorizerID = authorizerID
            self.authorizerPublicKey = authorizerPublicKey
            self.signerID = signerID
            self.signerSigningKey = signerSigningKey
        }
        enum CodingKeys: String, CodingKey {
            case eak, authorizerID = "authorizer_id", authorizerPublicKey = "authorizer_public_key"
            case signerID = "signer_id", signerSigningKey = "signer_signing_key"
        }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(eak, forKey: .eak)
            try c.encode(authorizerID, forKey: .authorizerID)
            try c.encode(authorizerPublicKey, forKey: .authorizerPublicKey)
            try c.encodeIfPresent(signerID, forKey: .signerID)
            try c.encode(signerSigningKey, forKey: .signerSigningKey)  // present as null: Java needs the key
        }
    }

    /// A policy body: `{"allow": [{"read": {}}]}`, `{"deny": [{"authorizer": {}}]}`, …; each element's keys are
    /// the verbs.
    public struct PolicyRequest: Codable, Sendable, Hashable {
        public var allow: [[String: AnyJSON]]?
        public var deny: [[String: AnyJSON]]?
        public init(allow: [[String: AnyJSON]]? = nil, deny: [[String: AnyJSON]]? = nil) {
            self.allow = allow
            self.deny = deny
        }
    }

    /// An element of `GET /v1/storage/policy/outgoing`.
    public struct OutgoingSharing: Codable, Sendable, Hashable {
        public var readerID: String
        public var readerName: String
        public var recordType: String
        public init(readerID: String, readerName: String, recordType: String) {
            self.readerID = readerID
            self.readerName = readerName
            self.recordType = recordType
        }
        enum CodingKeys: String, CodingKey {
            case readerID = "reader_id", readerName = "reader_name", recordType = "record_type"
        }
    }

    /// An element of `GET /v1/storage/policy/incoming`.
    public struct IncomingSharing: Codable, Sendable, Hashable {
        public var writerID: String
        public var writerName: String
        public var recordType: String
        public init(writerID: String, writerName: String, recordType: String) {
            self.writerID = writerID
            self.writerName = writerName
            self.recordType = recordType
        }
        enum CodingKeys: String, CodingKey {
            case writerID = "writer_id", writerName = "writer_name", recordType = "record_type"
        }
    }

    /// An element of `GET /v1/storage/policy/proxies` and `/granted`.
    public struct AuthorizerPolicy: Codable, Sendable, Hashable {
        public var authorizerID: String
        public var writerID: String
        public var userID: String
        public var recordType: String
        public var authorizedBy: String
        public init(authorizerID: String, writerID: String, userID: String, recordType: String, authorizedBy: String) {
            self.authorizerID = authorizerID
            self.writerID = writerID
            self.userID = userID
            self.recordType = recordType
            self.authorizedBy = authorizedBy
        }
        enum CodingKeys: String, CodingKey {
            case authorizerID = "authorizer_id", writerID = "writer_id", userID = "user_id"
            case recordType = "record_type", authorizedBy = "authorized_by"
        }
    }

    // MARK: Records and files

    /// `file_meta` of a file record.
    public struct FileMeta: Codable, Sendable, Hashable {
        public var fileURL: String?
        public var fileName: String?
        public var checksum: String?
        public var compression: String?
        public var size: Int64?
        public init(
            fileURL: String? = nil, fileName: String? = nil, checksum: String?, compression: String? = "raw",
            size: Int64?
        ) {
            self.fileURL = fileURL
            self.fileName = fileName
            self.checksum = checksum
            self.compression = compression
            self.size = size
        }
        enum CodingKeys: String, CodingKey {
            case fileURL = "file_url", fileName = "file_name", checksum, compression, size
        }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(fileURL, forKey: .fileURL)  // null when absent: Python reads the key
            try c.encodeIfPresent(fileName, forKey: .fileName)
            try c.encodeIfPresent(checksum, forKey: .checksum)
            try c.encodeIfPresent(compression, forKey: .compression)
            try c.encodeIfPresent(size, forKey: .size)
        }
    }

    /// Record metadata. On requests the server reads `writer_id`, `user_id`, `type`, `plain` and (files)
    /// `file_meta`, and ignores the rest; on responses every member but `file_meta` (files only) is set.
    public struct Meta: Codable, Sendable, Hashable {
        public var recordID: String?
        public var writerID: String
        public var userID: String
        public var type: String
        public var plain: [String: String]?
        public var created: String?
        public var lastModified: String?
        public var version: String?
        public var fileMeta: FileMeta?
        public init(
            recordID: String? = nil, writerID: String, userID: String, type: String, plain: [String: String]?,
            created: String? = nil, lastModified: String? = nil, version: String? = nil, fileMeta: FileMeta? = nil
        ) {
            self.recordID = recordID
            self.writerID = writerID
            self.userID = userID
            self.type = type
            self.plain = plain
            self.created = created
            self.lastModified = lastModified
            self.version = version
            self.fileMeta = fileMeta
        }
        enum CodingKeys: String, CodingKey {
            case recordID = "record_id", writerID = "writer_id", userID = "user_id", type, plain, created
            case lastModified = "last_modified", version, fileMeta = "file_meta"
        }
        /// Lenient: members the server ignores (`created`, `last_modified`, `version`, `record_id`) may have any
        /// type (Go sends zero times); a `null` `plain` is absent.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            recordID = try? c.decodeIfPresent(String.self, forKey: .recordID)
            writerID = try c.decode(String.self, forKey: .writerID)
            userID = try c.decode(String.self, forKey: .userID)
            type = try c.decode(String.self, forKey: .type)
            plain = try c.decodeIfPresent([String: String].self, forKey: .plain)
            created = try? c.decodeIfPresent(String.self, forKey: .created)
            lastModified = try? c.decodeIfPresent(String.self, forKey: .lastModified)
            version = try? c.decodeIfPresent(String.self, forKey: .version)
            fileMeta = try c.decodeIfPresent(FileMeta.self, forKey: .fileMeta)
        }
    }

    /// A record: metadata, the encrypted fields and the optional js-sdk signature.
    public struct Record: Codable, Sendable, Hashable {
        public var meta: Meta
        public var data: [String: String]
        public var recSig: String?
        public init(meta: Meta, data: [String: String], recSig: String? = nil) {
            self.meta = meta
            self.data = data
            self.recSig = recSig
        }
        enum CodingKeys: String, CodingKey { case meta, data, recSig = "rec_sig" }
        /// Lenient: a missing or `null` `data` is empty (file writes from some SDKs).
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            meta = try c.decode(Meta.self, forKey: .meta)
            data = try c.decodeIfPresent([String: String].self, forKey: .data) ?? [:]
            recSig = try c.decodeIfPresent(String.self, forKey: .recSig)
        }
    }

    /// The `POST /v1/storage/files` response (status 202).
    public struct PendingFile: Codable, Sendable, Hashable {
        public var id: String
        public var fileURL: String
        public init(id: String, fileURL: String) {
            self.id = id
            self.fileURL = fileURL
        }
        enum CodingKeys: String, CodingKey { case id, fileURL = "file_url" }
    }

    // MARK: Search

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

        /// Whether a record's `plain` satisfies the filter.
        public func matches(_ plain: [String: String]) -> Bool {
            switch self {
            case .equals(let name, let value): plain[name] == value
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

    /// An element of a v1 or v2 search response.
    public struct SearchResult: Codable, Sendable, Hashable {
        public var meta: Meta
        public var recordData: [String: String]?
        public var accessKey: EAKInfo?
        public var recSig: String?
        public init(meta: Meta, recordData: [String: String]?, accessKey: EAKInfo?, recSig: String? = nil) {
            self.meta = meta
            self.recordData = recordData
            self.accessKey = accessKey
            self.recSig = recSig
        }
        enum CodingKeys: String, CodingKey {
            case meta, recordData = "record_data", accessKey = "access_key", recSig = "rec_sig"
        }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(meta, forKey: .meta)
            try c.encode(recordData, forKey: .recordData)  // null without include_data (Python needs the key)
            try c.encode(accessKey, forKey: .accessKey)  // always present (js tests !== null)
            try c.encodeIfPresent(recSig, forKey: .recSig)
        }
    }

    /// The v1 search response.
    public struct QueryResponse: Codable, Sendable, Hashable {
        public var results: [SearchResult]
        public var lastIndex: Int64
        public init(results: [SearchResult], lastIndex: Int64) {
            self.results = results
            self.lastIndex = lastIndex
        }
        enum CodingKeys: String, CodingKey { case results, lastIndex = "last_index" }
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

    /// The v2 search response: the next offset is `last_index` (0 when no more).
    public struct SearchResponse: Codable, Sendable, Hashable {
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
        enum CodingKeys: String, CodingKey {
            case results, lastIndex = "last_index", totalResults = "total_results", searchID = "search_id"
        }
    }

    // MARK: Notes

    /// A note (`/v2/storage/notes`). Members the SDKs send as `null` are optional; `file_meta` and `eacp` are
    /// carried through as they come (Python sends `plain` in `file_meta`).
    public struct Note: Codable, Sendable, Hashable {
        public var noteID: String?
        public var idString: String?
        public var clientID: String?
        public var mode: String?
        public var recipientSigningKey: String
        public var writerSigningKey: String
        public var writerEncryptionKey: String
        public var encryptedAccessKey: String
        public var type: String?
        public var data: [String: String]
        public var plain: [String: String]?
        public var fileMeta: AnyJSON?
        public var signature: String?
        public var maxViews: Int?
        public var views: Int?
        public var expiration: String?
        public var expires: Bool?
        public var eacp: AnyJSON?
        public var createdAt: String?
        public var recordID: String?
        public var isSecret: Bool?

        public init(
            recipientSigningKey: String, writerSigningKey: String, writerEncryptionKey: String,
            encryptedAccessKey: String, data: [String: String]
        ) {
            self.recipientSigningKey = recipientSigningKey
            self.writerSigningKey = writerSigningKey
            self.writerEncryptionKey = writerEncryptionKey
            self.encryptedAccessKey = encryptedAccessKey
            self.data = data
        }
        enum CodingKeys: String, CodingKey {
            case noteID = "note_id", idString = "id_string", clientID = "client_id", mode
            case recipientSigningKey = "recipient_signing_key", writerSigningKey = "writer_signing_key"
            case writerEncryptionKey = "writer_encryption_key", encryptedAccessKey = "encrypted_access_key"
            case type, data, plain, fileMeta = "file_meta", signature, maxViews = "max_views", views, expiration
            case expires, eacp, createdAt = "created_at", recordID = "record_id", isSecret = "is_secret"
        }
        /// Lenient: `plain` that is not a string map (or `null`) is dropped; a `max_views` sent as a float is
        /// truncated.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            noteID = try? c.decodeIfPresent(String.self, forKey: .noteID)
            idString = try c.decodeIfPresent(String.self, forKey: .idString)
            clientID = try? c.decodeIfPresent(String.self, forKey: .clientID)
            mode = try c.decodeIfPresent(String.self, forKey: .mode)
            recipientSigningKey = try c.decode(String.self, forKey: .recipientSigningKey)
            writerSigningKey = try c.decode(String.self, forKey: .writerSigningKey)
            writerEncryptionKey = try c.decode(String.self, forKey: .writerEncryptionKey)
            encryptedAccessKey = try c.decode(String.self, forKey: .encryptedAccessKey)
            type = try c.decodeIfPresent(String.self, forKey: .type)
            data = try c.decode([String: String].self, forKey: .data)
            plain = (try? c.decodeIfPresent([String: String].self, forKey: .plain)) ?? nil
            fileMeta = try c.decodeIfPresent(AnyJSON.self, forKey: .fileMeta)
            signature = try c.decodeIfPresent(String.self, forKey: .signature)
            if let i = try? c.decodeIfPresent(Int.self, forKey: .maxViews) {
                maxViews = i
            } else if let d = try? c.decodeIfPresent(Double.self, forKey: .maxViews), d.isFinite, abs(d) < 1e9 {
                maxViews = Int(d)
            } else {
                maxViews = nil
            }
            views = try? c.decodeIfPresent(Int.self, forKey: .views)
            expiration = try? c.decodeIfPresent(String.self, forKey: .expiration)
            expires = try? c.decodeIfPresent(Bool.self, forKey: .expires)
            eacp = try c.decodeIfPresent(AnyJSON.self, forKey: .eacp)
            createdAt = try? c.decodeIfPresent(String.self, forKey: .createdAt)
            recordID = try? c.decodeIfPresent(String.self, forKey: .recordID)
            isSecret = try? c.decodeIfPresent(Bool.self, forKey: .isSecret)
        }
    }
}
