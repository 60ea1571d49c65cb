#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import E3DBPrimitives

/// An encrypted access key with the identities and keys needed to open it and to verify what it protects,
/// as returned by `GET /v1/storage/access_keys/{writer}/{user}/{reader}/{type}` (spec §2.4):
///
/// ```json
/// {"authorizer_id":"<uuid>","authorizer_public_key":{"curve25519":"<b64u>"},"eak":"<ct>.<nonce>",
///  "signer_id":"<uuid>","signer_signing_key":{"ed25519":"<b64u>"}}
/// ```
///
/// Decoding also accepts `signer_*` members that are absent or null, js-sdk's `{"ed25519":null}`, uppercase
/// UUIDs (old Swift), and the Java SDK's flat shape (`"authorizer_public_key":"<b64u>"`,
/// `"signer_signing_key":"<b64u>"`). Encoding writes the API shape with lowercase UUIDs, sorted members and no
/// null members; ``jsonData(shape:)`` can write the Java shape.
public struct EAKInfo: Sendable, Hashable {
    /// The wrapped access key.
    public var eak: EncryptedAccessKey
    /// The client that wrapped the key.
    public var authorizerID: UUID
    /// The authorizer's Curve25519 public key, needed to unwrap.
    public var authorizerPublicKey: Box.PublicKey
    /// The writer whose Ed25519 key signs offline-encrypted documents, if known.
    public var signerID: UUID?
    /// The signer's Ed25519 public key, which verifies `rec_sig`, if known.
    public var signerSigningKey: Ed25519.PublicKey?

    /// An EAKInfo from its parts.
    public init(
        eak: EncryptedAccessKey,
        authorizerID: UUID,
        authorizerPublicKey: Box.PublicKey,
        signerID: UUID? = nil,
        signerSigningKey: Ed25519.PublicKey? = nil
    ) {
        self.eak = eak
        self.authorizerID = authorizerID
        self.authorizerPublicKey = authorizerPublicKey
        self.signerID = signerID
        self.signerSigningKey = signerSigningKey
    }

    /// Unwraps the access key with the reader's private key and ``authorizerPublicKey``.
    /// - Parameter reader: the reader's Curve25519 private key.
    /// - Returns: the access key.
    /// - Throws: `E3DBError` `.authenticationFailed` (part `eak`) for a wrong key or a changed EAK.
    public func unwrap(with reader: Box.PrivateKey) throws(E3DBError) -> AccessKey {
        try eak.unwrap(reader: reader, authorizer: authorizerPublicKey)
    }

    /// Parses EAKInfo JSON (API, js-sdk, old Swift or Java shape).
    /// - Parameters:
    ///   - jsonData: UTF-8 JSON.
    ///   - decoding: base64url strictness for the EAK and keys.
    /// - Throws: `E3DBError` `.invalidEAKInfo` with `context.field` naming the bad member (`eak`,
    ///   `authorizer_id`, `authorizer_public_key`, `signer_id`, `signer_signing_key`), or without a field when
    ///   the input is not a JSON object.
    public init(jsonData: some DataProtocol, decoding: Base64Decoding = .strict) throws(E3DBError) {
        let raw: Raw
        do {
            raw = try JSONDecoder().decode(Raw.self, from: Data(jsonData))
        } catch {
            throw E3DBError(.invalidEAKInfo, "EAKInfo is not a JSON object")
        }
        try self.init(raw: raw, decoding: decoding)
    }

    /// The shapes ``jsonData(shape:)`` can write.
    public enum Shape: Sendable, Hashable {
        /// The E3DB API shape with `{"curve25519":…}` / `{"ed25519":…}` objects (also old Swift and js-sdk).
        case api
        /// The Java SDK's `LocalEAKInfo` flat shape (keys as bare strings).
        case javaFlat
    }

    /// The JSON text: members sorted, lowercase UUIDs, absent signer members omitted.
    /// - Parameter shape: ``Shape/api`` (default) or ``Shape/javaFlat``.
    /// - Returns: UTF-8 JSON.
    public func jsonData(shape: Shape = .api) -> Data {
        var members: [(String, String)] = [
            ("authorizer_id", quoted(authorizerID.uuidString.lowercased())),
            ("authorizer_public_key", keyJSON(authorizerPublicKey.base64URLEncoded, "curve25519", shape)),
            ("eak", quoted(eak.stringValue)),
        ]
        if let signerID { members.append(("signer_id", quoted(signerID.uuidString.lowercased()))) }
        if let signerSigningKey {
            members.append(("signer_signing_key", keyJSON(signerSigningKey.base64URLEncoded, "ed25519", shape)))
        }
        let body = members.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",")
        return Data(("{" + body + "}").utf8)
    }

    private func quoted(_ s: String) -> String { "\"" + s + "\"" }  // base64url and UUIDs need no escaping
    private func keyJSON(_ key: String, _ name: String, _ shape: Shape) -> String {
        shape == .api ? "{\"\(name)\":\"\(key)\"}" : quoted(key)
    }

    /// Undecoded members, so that errors can name the member.
    struct Raw: Decodable {
        enum KeyValue { case absent, null, string(String), object(String?), invalid }
        var eak: String?
        var eakInvalid = false
        var authorizerID: String?
        var authorizerIDInvalid = false
        var authorizerPublicKey: KeyValue = .absent
        var signerID: KeyValue = .absent
        var signerSigningKey: KeyValue = .absent

        enum CodingKeys: String, CodingKey {
            case eak, authorizer_id, authorizer_public_key, signer_id, signer_signing_key
        }
        struct AlgKey: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            if c.contains(.eak) {
                if let s = try? c.decode(String.self, forKey: .eak) { eak = s } else { eakInvalid = true }
            }
            if c.contains(.authorizer_id) {
                if let s = try? c.decode(String.self, forKey: .authorizer_id) { authorizerID = s } else {
                    authorizerIDInvalid = true
                }
            }
            authorizerPublicKey = Self.key(c, .authorizer_public_key, alg: "curve25519")
            signerSigningKey = Self.key(c, .signer_signing_key, alg: "ed25519")
            if c.contains(.signer_id) {
                if (try? c.decodeNil(forKey: .signer_id)) == true {
                    signerID = .null
                } else if let s = try? c.decode(String.self, forKey: .signer_id) {
                    signerID = .string(s)
                } else {
                    signerID = .invalid
                }
            }
        }

        static func key(_ c: KeyedDecodingContainer<CodingKeys>, _ k: CodingKeys, alg: String) -> KeyValue {
            guard c.contains(k) else { return .absent }
            if (try? c.decodeNil(forKey: k)) == true { return .null }
            if let s = try? c.decode(String.self, forKey: k) { return .string(s) }
            if let nested = try? c.nestedContainer(keyedBy: AlgKey.self, forKey: k) {
                let name = AlgKey(stringValue: alg)
                guard nested.contains(name) else { return .invalid }
                if (try? nested.decodeNil(forKey: name)) == true { return .object(nil) }
                if let s = try? nested.decode(String.self, forKey: name) { return .object(s) }
            }
            return .invalid
        }
    }

    init(raw: Raw, decoding: Base64Decoding) throws(E3DBError) {
        func bad(_ field: String, _ why: String) -> E3DBError {
            E3DBError(.invalidEAKInfo, "EAKInfo member \"\(field)\" \(why)", context: .init(field: field))
        }
        guard let eakText = raw.eak, !raw.eakInvalid else {
            throw bad("eak", raw.eakInvalid ? "is not a string" : "is missing")
        }
        do {
            self.eak = try EncryptedAccessKey(eakText, decoding: decoding)
        } catch {
            throw E3DBError(
                .invalidEAKInfo, "EAKInfo member \"eak\" is malformed: \(error.message)",
                context: .init(field: "eak", part: error.context.part))
        }
        guard let idText = raw.authorizerID, !raw.authorizerIDInvalid else {
            throw bad("authorizer_id", raw.authorizerIDInvalid ? "is not a string" : "is missing")
        }
        guard let id = UUID(uuidString: idText) else { throw bad("authorizer_id", "is not a UUID") }
        self.authorizerID = id
        switch raw.authorizerPublicKey {
        case .string(let s), .object(let s?):
            guard let key = try? Box.PublicKey(base64URLEncoded: s) else {
                throw bad("authorizer_public_key", "is not a 32-byte base64url Curve25519 key")
            }
            self.authorizerPublicKey = key
        case .absent: throw bad("authorizer_public_key", "is missing")
        default: throw bad("authorizer_public_key", "has no curve25519 key")
        }
        switch raw.signerID {
        case .absent, .null: self.signerID = nil
        case .string(let s):
            guard let id = UUID(uuidString: s) else { throw bad("signer_id", "is not a UUID") }
            self.signerID = id
        default: throw bad("signer_id", "is not a string")
        }
        switch raw.signerSigningKey {
        case .absent, .null, .object(nil): self.signerSigningKey = nil
        case .string(let s), .object(let s?):
            guard let key = try? Ed25519.PublicKey(base64URLEncoded: s) else {
                throw bad("signer_signing_key", "is not a 32-byte base64url Ed25519 key")
            }
            self.signerSigningKey = key
        case .invalid: throw bad("signer_signing_key", "has no ed25519 key")
        }
    }
}

extension EAKInfo: Codable {
    /// Decodes any accepted shape (see the type documentation).
    /// - Throws: `E3DBError` `.invalidEAKInfo` naming the member, or a `DecodingError` when the value is not an object.
    public init(from decoder: any Decoder) throws {
        try self.init(raw: Raw(from: decoder), decoding: .strict)
    }

    enum CodingKeys: String, CodingKey {
        case eak, authorizer_id, authorizer_public_key, signer_id, signer_signing_key
    }

    /// Encodes the API shape: lowercase UUIDs, nil signer members omitted (old Swift cannot decode nulls there).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(authorizerID.uuidString.lowercased(), forKey: .authorizer_id)
        try c.encode(Curve25519PublicKeyJSON(authorizerPublicKey), forKey: .authorizer_public_key)
        try c.encode(eak, forKey: .eak)
        try c.encodeIfPresent(signerID?.uuidString.lowercased(), forKey: .signer_id)
        try c.encodeIfPresent(signerSigningKey.map(Ed25519PublicKeyJSON.init), forKey: .signer_signing_key)
    }
}
