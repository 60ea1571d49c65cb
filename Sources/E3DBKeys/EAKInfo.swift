internal import E3DBCanonicalJSON
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// An encrypted access key with the identities and keys needed to open it and to verify what it protects,
/// as returned by `GET /v1/storage/access_keys/{writer}/{user}/{reader}/{type}` (spec §2.4):
///
/// ```json
/// {"authorizer_id":"<uuid>","authorizer_public_key":{"curve25519":"<b64u>"},"eak":"<ct>.<nonce>",
///  "signer_id":"<uuid>","signer_signing_key":{"ed25519":"<b64u>"}}
/// ```
///
/// A key shared through a group also carries `access_key_wrappers` (spec §2.3, ``AccessKeyWrapper``), and
/// ``unwrap(with:)`` follows that membership key chain.
///
/// Decoding uses the strict parser of E3DBCanonicalJSON (duplicate members, invalid UTF-8 and lone surrogates
/// are rejected) and checks every known member's JSON type. It also accepts `signer_*` members that are absent or
/// null, js-sdk's `{"ed25519":null}`, uppercase UUIDs (old Swift), and the Java SDK's flat shape
/// (`"authorizer_public_key":"<b64u>"`, `"signer_signing_key":"<b64u>"`). Encoding writes the API shape with
/// lowercase UUIDs, sorted members and no null members; ``jsonData(shape:)`` can write the Java shape.
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
    /// The group wrappers (`access_key_wrappers`, spec §2.3), outermost first; empty for a key wrapped directly
    /// for the reader.
    public var accessKeyWrappers: [AccessKeyWrapper]

    /// An EAKInfo from its parts.
    public init(
        eak: EncryptedAccessKey,
        authorizerID: UUID,
        authorizerPublicKey: Box.PublicKey,
        signerID: UUID? = nil,
        signerSigningKey: Ed25519.PublicKey? = nil,
        accessKeyWrappers: [AccessKeyWrapper] = []
    ) {
        self.eak = eak
        self.authorizerID = authorizerID
        self.authorizerPublicKey = authorizerPublicKey
        self.signerID = signerID
        self.signerSigningKey = signerSigningKey
        self.accessKeyWrappers = accessKeyWrappers
    }

    /// Unwraps the access key with the reader's private key, following the group wrappers (spec §2.3).
    ///
    /// Without wrappers: `AK = box_open(eak, authorizer_public_key, reader)`. With wrappers, starting from
    /// `private = reader` and `public = authorizer_public_key`, each wrapper in order gives
    /// `private = box_open(membership_key, public, private)` (a 32-byte group secret key) and then
    /// `public = wrapper.public_key`; finally `AK = box_open(eak, public, private)`.
    /// - Parameter reader: the reader's Curve25519 private key.
    /// - Returns: the access key.
    /// - Throws: `E3DBError` `.authenticationFailed` with `context.field` `access_key_wrappers[i].membership_key`
    ///   when wrapper `i` does not open (not for this reader, or changed), or with part `eak` for a wrong key or
    ///   a changed EAK.
    public func unwrap(with reader: Box.PrivateKey) throws(E3DBError) -> AccessKey {
        var privateKey = reader
        var publicKey = authorizerPublicKey
        for (index, wrapper) in accessKeyWrappers.enumerated() {
            privateKey = try wrapper.openGroupKey(from: publicKey, with: privateKey, index: index)
            publicKey = wrapper.publicKey
        }
        return try eak.unwrap(reader: privateKey, authorizer: publicKey)
    }

    /// Parses EAKInfo JSON (API, js-sdk, old Swift or Java shape, with or without group wrappers).
    /// - Parameters:
    ///   - jsonData: UTF-8 JSON.
    ///   - decoding: base64url strictness for the EAK and the wrappers' membership keys.
    /// - Throws: `E3DBError` `.invalidEAKInfo` with `context.field` naming the bad member (`eak`,
    ///   `authorizer_id`, `authorizer_public_key`, `signer_id`, `signer_signing_key`, `access_key_wrappers`, or
    ///   `access_key_wrappers[i].<member>` for wrapper `i`), or without a field (and with `context.offset`) when
    ///   the input is not strict JSON (duplicate members, invalid UTF-8, lone surrogates...) or not an object.
    public init(jsonData: some DataProtocol, decoding: Base64Decoding = .strict) throws(E3DBError) {
        let parsed = Result { () throws(ObjectParseError) in
            try CanonicalJSON.parseObject(jsonData, rawMembers: []).object
        }
        switch parsed {
        case .success(let object): try self.init(json: .object(object), decoding: decoding)
        case .failure(let error):
            throw error.keysError(.invalidEAKInfo, what: "EAKInfo", knownMembers: Self.knownMembers)
        }
    }

    /// The members errors may name.
    static let knownMembers: Set<String> = [
        "eak", "authorizer_id", "authorizer_public_key", "signer_id", "signer_signing_key", "access_key_wrappers",
    ]

    /// The shapes ``jsonData(shape:)`` can write.
    public enum Shape: Sendable, Hashable {
        /// The E3DB API shape with `{"curve25519":…}` / `{"ed25519":…}` objects (also old Swift and js-sdk).
        case api
        /// The Java SDK's `LocalEAKInfo` flat shape (keys as bare strings).
        case javaFlat
    }

    /// The JSON text: members sorted, lowercase UUIDs, absent signer members omitted, `access_key_wrappers`
    /// written only when there are wrappers. Built as a `JSONValue` and written in canonical form.
    /// - Parameter shape: ``Shape/api`` (default) or ``Shape/javaFlat``.
    /// - Returns: UTF-8 JSON.
    public func jsonData(shape: Shape = .api) -> Data {
        Data(CanonicalJSON.serializedBytes(jsonValue(shape: shape)))
    }

    func jsonValue(shape: Shape) -> JSONValue {
        func key(_ text: String, _ name: String) -> JSONValue {
            shape == .api ? .object(JSONObject([(key: name, value: .string(text))])) : .string(text)
        }
        var members: [JSONObject.Member] = [
            ("authorizer_id", .string(authorizerID.lowercasedString)),
            ("authorizer_public_key", key(authorizerPublicKey.base64URLEncoded, "curve25519")),
            ("eak", .string(eak.stringValue)),
        ]
        if let signerID { members.append(("signer_id", .string(signerID.lowercasedString))) }
        if let signerSigningKey {
            members.append(("signer_signing_key", key(signerSigningKey.base64URLEncoded, "ed25519")))
        }
        if !accessKeyWrappers.isEmpty {
            members.append(("access_key_wrappers", .array(accessKeyWrappers.map(\.jsonValue))))
        }
        return .object(JSONObject(members))
    }

    /// Reads the members of a parsed EAKInfo object, checking each known member's type.
    init(json value: JSONValue, decoding: Base64Decoding) throws(E3DBError) {
        guard case .object(let object) = value else {
            throw E3DBError(.invalidEAKInfo, "EAKInfo is not a JSON object")
        }
        func bad(_ field: String, _ why: String) -> E3DBError {
            E3DBError(.invalidEAKInfo, "EAKInfo member \"\(field)\" \(why)", context: .init(field: field))
        }
        func string(_ name: String) throws(E3DBError) -> String {
            switch object[name] {
            case .string(let s)?: return s
            case nil: throw bad(name, "is missing")
            default: throw bad(name, "is not a string")
            }
        }
        /// A key as a bare string (Java) or `{alg: string}`; nil for null, absent or `{alg: null}` when allowed.
        func keyText(_ name: String, alg: String, optional: Bool) throws(E3DBError) -> String? {
            switch object[name] {
            case nil, .null?:
                if optional { return nil }
                throw bad(name, object[name] == nil ? "is missing" : "is null")
            case .string(let s)?: return s
            case .object(let nested)?:
                switch nested[alg] {
                case .string(let s)?: return s
                case .null? where optional: return nil
                case nil: throw bad(name, "has no \(alg) key")
                default: throw bad(name, "member \"\(alg)\" is not a string")
                }
            default: throw bad(name, "is neither a string nor a {\"\(alg)\": ...} object")
            }
        }

        let eakText = try string("eak")
        do {
            self.eak = try EncryptedAccessKey(eakText, decoding: decoding)
        } catch {
            throw E3DBError(
                .invalidEAKInfo, "EAKInfo member \"eak\" is malformed: \(error.message)",
                context: .init(field: "eak", part: error.context.part))
        }
        guard let id = UUID(uuidString: try string("authorizer_id")) else {
            throw bad("authorizer_id", "is not a UUID")
        }
        self.authorizerID = id
        guard let authorizerText = try keyText("authorizer_public_key", alg: "curve25519", optional: false) else {
            throw bad("authorizer_public_key", "is missing")
        }
        do { self.authorizerPublicKey = try Box.PublicKey(base64URLEncoded: authorizerText) } catch {
            throw bad("authorizer_public_key", "is not a 32-byte base64url Curve25519 key")
        }
        switch object["signer_id"] {
        case nil, .null?: self.signerID = nil
        case .string(let s)?:
            guard let id = UUID(uuidString: s) else { throw bad("signer_id", "is not a UUID") }
            self.signerID = id
        default: throw bad("signer_id", "is not a string")
        }
        if let signerText = try keyText("signer_signing_key", alg: "ed25519", optional: true) {
            do { self.signerSigningKey = try Ed25519.PublicKey(base64URLEncoded: signerText) } catch {
                throw bad("signer_signing_key", "is not a 32-byte base64url Ed25519 key")
            }
        } else {
            self.signerSigningKey = nil
        }
        switch object["access_key_wrappers"] {
        case nil, .null?: self.accessKeyWrappers = []
        case .array(let elements)?:
            var wrappers: [AccessKeyWrapper] = []
            for (index, element) in elements.enumerated() {
                wrappers.append(try AccessKeyWrapper(json: element, index: index, decoding: decoding))
            }
            self.accessKeyWrappers = wrappers
        default: throw bad("access_key_wrappers", "is not an array")
        }
    }
}

extension EAKInfo: Codable {
    /// Decodes any accepted shape (see the type documentation) from any `Decoder`.
    ///
    /// Prefer ``init(jsonData:decoding:)`` for JSON text: a `Decoder` cannot report duplicate members.
    /// - Throws: `E3DBError` `.invalidEAKInfo` naming the member, or a `DecodingError` when the value is not an object.
    public init(from decoder: any Decoder) throws {
        try self.init(json: JSONValue(from: decoder), decoding: .strict)
    }

    enum CodingKeys: String, CodingKey {
        case eak, authorizer_id, authorizer_public_key, signer_id, signer_signing_key, access_key_wrappers
    }

    /// Encodes the API shape: lowercase UUIDs, nil signer members omitted (old Swift cannot decode nulls there),
    /// `access_key_wrappers` only when there are wrappers.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(authorizerID.lowercasedString, forKey: .authorizer_id)
        try c.encode(Curve25519PublicKeyJSON(authorizerPublicKey), forKey: .authorizer_public_key)
        try c.encode(eak, forKey: .eak)
        try c.encodeIfPresent(signerID?.lowercasedString, forKey: .signer_id)
        try c.encodeIfPresent(signerSigningKey.map(Ed25519PublicKeyJSON.init), forKey: .signer_signing_key)
        if !accessKeyWrappers.isEmpty { try c.encode(accessKeyWrappers, forKey: .access_key_wrappers) }
    }
}
