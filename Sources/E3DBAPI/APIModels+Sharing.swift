public import E3DBCanonicalJSON

// The API bodies of access keys and policies.

extension API {
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
    /// the verbs (objects whose member names are distinct by code units, as everywhere in `JSONObject`).
    public struct PolicyRequest: Codable, Sendable, Hashable {
        public var allow: [JSONObject]?
        public var deny: [JSONObject]?
        public init(allow: [JSONObject]? = nil, deny: [JSONObject]? = nil) {
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
}
