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
    ///
    /// Read and written only as part of a record body or a search response, by the strict record reader
    /// (`API.Record.decodeBody(_:)`, `API.QueryResponse.decodeBody(_:)`) and the record writer
    /// (`API.Record.encodeBody()`, `API.QueryResponse.encodeBody()`): not `Codable`.
    public struct Meta: Sendable, Hashable {
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
    }

    /// A record: metadata, the encrypted fields and the optional js-sdk signature.
    ///
    /// One reader and one writer, neither of them `Codable`: `decodeBody(_:)` is the strict record reader and
    /// `encodeBody()` the record writer (`APIBody`).
    public struct Record: Sendable, Hashable {
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
