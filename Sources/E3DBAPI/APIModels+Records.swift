public import E3DBCanonicalJSON

// The API bodies of records and files.

extension API {
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
        /// Plain, searchable metadata: an ordered map whose names are distinct by code units.
        public var plain: RecordData?
        public var created: String?
        public var lastModified: String?
        public var version: String?
        public var fileMeta: FileMeta?
        public init(
            recordID: String? = nil, writerID: String, userID: String, type: String, plain: RecordData?,
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
            plain = try c.decodeIfPresent(RecordData.self, forKey: .plain)
            created = try? c.decodeIfPresent(String.self, forKey: .created)
            lastModified = try? c.decodeIfPresent(String.self, forKey: .lastModified)
            version = try? c.decodeIfPresent(String.self, forKey: .version)
            fileMeta = try c.decodeIfPresent(FileMeta.self, forKey: .fileMeta)
        }
    }

    /// A record: metadata, the encrypted fields and the optional js-sdk signature.
    public struct Record: Codable, Sendable, Hashable {
        public var meta: Meta
        /// The encrypted fields: an ordered map whose names are distinct by code units, so names the other SDKs
        /// keep apart (`"é"` and `"e\u{301}"`) stay apart.
        public var data: RecordData
        public var recSig: String?
        public init(meta: Meta, data: RecordData, recSig: String? = nil) {
            self.meta = meta
            self.data = data
            self.recSig = recSig
        }
        enum CodingKeys: String, CodingKey { case meta, data, recSig = "rec_sig" }
        /// Lenient: a missing or `null` `data` is empty (file writes from some SDKs).
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            meta = try c.decode(Meta.self, forKey: .meta)
            data = try c.decodeIfPresent(RecordData.self, forKey: .data) ?? RecordData()
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
}
