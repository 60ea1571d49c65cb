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
}
