public import E3DBCanonicalJSON

// The API bodies of notes.

extension API {
    /// A note (`/v2/storage/notes`). Members the SDKs send as `null` are optional; `file_meta` and `eacp` are
    /// carried through as they come, as `JSONValue`s (Python sends `plain` in `file_meta`).
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
        public var fileMeta: JSONValue?
        public var signature: String?
        public var maxViews: Int?
        public var views: Int?
        public var expiration: String?
        public var expires: Bool?
        public var eacp: JSONValue?
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
            fileMeta = try c.decodeIfPresent(JSONValue.self, forKey: .fileMeta)
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
            eacp = try c.decodeIfPresent(JSONValue.self, forKey: .eacp)
            createdAt = try? c.decodeIfPresent(String.self, forKey: .createdAt)
            recordID = try? c.decodeIfPresent(String.self, forKey: .recordID)
            isSecret = try? c.decodeIfPresent(Bool.self, forKey: .isSecret)
        }
    }
}
