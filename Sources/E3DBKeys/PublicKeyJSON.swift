public import E3DBPrimitives

/// The JSON shape `{"curve25519": "<b64u>"}` in which E3DB carries a Curve25519 (box) public key
/// (client info, registration, EAKInfo `authorizer_public_key`).
public struct Curve25519PublicKeyJSON: Sendable, Hashable, Codable {
    /// The key.
    public var key: Box.PublicKey

    /// Wraps `key`.
    public init(_ key: Box.PublicKey) { self.key = key }

    enum CodingKeys: String, CodingKey { case curve25519 }

    /// Decodes `{"curve25519": "<43 chars>"}`.
    /// - Throws: `DecodingError` when the member is missing, or `E3DBError` `.invalidBase64`/`.invalidKeyLength`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.key = try Box.PublicKey(base64URLEncoded: c.decode(String.self, forKey: .curve25519))
    }

    /// Encodes `{"curve25519": "<43 chars>"}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(key.base64URLEncoded, forKey: .curve25519)
    }
}

/// The JSON shape `{"ed25519": "<b64u>"}` in which E3DB carries an Ed25519 public signing key
/// (client info `signing_key`, EAKInfo `signer_signing_key`).
public struct Ed25519PublicKeyJSON: Sendable, Hashable, Codable {
    /// The key.
    public var key: Ed25519.PublicKey

    /// Wraps `key`.
    public init(_ key: Ed25519.PublicKey) { self.key = key }

    enum CodingKeys: String, CodingKey { case ed25519 }

    /// Decodes `{"ed25519": "<43 chars>"}`.
    /// - Throws: `DecodingError` when the member is missing or null, or `E3DBError` `.invalidBase64`/`.invalidKeyLength`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.key = try Ed25519.PublicKey(base64URLEncoded: c.decode(String.self, forKey: .ed25519))
    }

    /// Encodes `{"ed25519": "<43 chars>"}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(key.base64URLEncoded, forKey: .ed25519)
    }
}
