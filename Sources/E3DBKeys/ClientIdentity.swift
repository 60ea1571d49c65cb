internal import E3DBCanonicalJSON
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A client's identity: its client ID, Curve25519 box key pair and (for version 2 clients) Ed25519 signing
/// key pair, with the API credentials of the client credential file.
///
/// Reads and writes the JSON credential file the js-sdk, Go and Python SDKs use (`client_id`, `public_key`,
/// `private_key`, `public_signing_key`, `private_signing_key`, `version`, `api_key_id`, `api_secret`,
/// `client_email`, `api_url`) and also reads the old Swift SDK's `public_sig_key`/`private_sig_key` names.
///
/// - Warning: the private keys and the API secret are secrets. They are held in wiped storage, but the JSON
///   text returned by ``configJSON()`` contains them: write it only to files with mode 0600.
public struct ClientIdentity: Sendable, CustomStringConvertible {
    /// The API URL the other SDKs default to, written into credential files that name none.
    public static let defaultAPIURL = "https://api.e3db.com"

    /// The client ID (nil for a key pair that is not registered yet).
    public var clientID: UUID?
    /// The Curve25519 key pair used to wrap and unwrap access keys.
    public var boxKey: Box.PrivateKey
    /// The Ed25519 key pair used to sign documents, notes and requests (nil for a version 1 client).
    public var signingKey: Ed25519.PrivateKey?
    /// The API key ID, if present (not secret).
    public var apiKeyID: String?
    /// The API secret, if present.
    public var apiSecret: SecureBytes?
    /// The client's email, if present.
    public var clientEmail: String?
    /// The API URL, if present.
    public var apiURL: String?

    /// An identity from existing keys.
    public init(
        clientID: UUID?,
        boxKey: Box.PrivateKey,
        signingKey: Ed25519.PrivateKey?,
        apiKeyID: String? = nil,
        apiSecret: SecureBytes? = nil,
        clientEmail: String? = nil,
        apiURL: String? = nil
    ) {
        self.clientID = clientID
        self.boxKey = boxKey
        self.signingKey = signingKey
        self.apiKeyID = apiKeyID
        self.apiSecret = apiSecret
        self.clientEmail = clientEmail
        self.apiURL = apiURL
    }

    /// A new identity with random box and signing key pairs.
    /// - Parameter clientID: the client ID, if already known.
    /// - Returns: the identity.
    public static func generate(clientID: UUID? = nil) -> ClientIdentity {
        ClientIdentity(clientID: clientID, boxKey: Box.PrivateKey(), signingKey: Ed25519.PrivateKey())
    }

    /// The Curve25519 public key.
    public var publicKey: Box.PublicKey { boxKey.publicKey }
    /// The Ed25519 public signing key, if the identity has a signing key.
    public var publicSigningKey: Ed25519.PublicKey? { signingKey?.publicKey }

    /// The signing key, or an error naming what is missing.
    /// - Throws: `E3DBError` `.missingKey` when the identity has no signing key (a version 1 client).
    public func requireSigningKey() throws(E3DBError) -> Ed25519.PrivateKey {
        guard let signingKey else {
            throw E3DBError(.missingKey, "the identity has no Ed25519 signing key (a version 1 client)")
        }
        return signingKey
    }

    /// The client ID, or an error.
    /// - Throws: `E3DBError` `.missingKey` when the identity has no client ID.
    public func requireClientID() throws(E3DBError) -> UUID {
        guard let clientID else { throw E3DBError(.missingKey, "the identity has no client_id") }
        return clientID
    }

    /// Redacted except for the client ID and public keys.
    public var description: String {
        "ClientIdentity(client_id: \(clientID?.lowercasedString ?? "none"), public_key: "
            + "\(publicKey.base64URLEncoded), public_signing_key: \(publicSigningKey?.base64URLEncoded ?? "none"))"
    }

    // MARK: JSON

    /// The members whose string values are secrets: they are decoded from the input bytes straight into wiped
    /// storage and never become a Swift `String`.
    private static let secretMembers: Set<String> = [
        "private_key", "private_signing_key", "private_sig_key", "api_secret",
    ]
    /// The members this type reads (and `client_name`, which old Swift writes), which errors may name.
    private static let knownMembers: Set<String> = secretMembers.union([
        "public_key", "public_signing_key", "public_sig_key", "client_id", "api_key_id", "client_email", "api_url",
        "base_api_url", "version", "client_name",
    ])

    /// Reads a client credential JSON file.
    ///
    /// The text is parsed with the strict parser of E3DBCanonicalJSON (no duplicate members, well-formed UTF-8,
    /// no lone surrogates, no byte order mark) into wiped storage. The private keys and the API secret are decoded
    /// from the UTF-8 bytes of their JSON strings straight into wiped storage: they never pass through a `String`.
    /// Every known member must have its JSON type: strings (or null) for the keys, IDs, email, URL and secret; a
    /// string or number for `version`. Unknown members are ignored. Empty signing-key strings (Python writes `""`
    /// for version 1 clients) mean "no signing key". Accepted names: `public_signing_key`/`private_signing_key`
    /// and the old Swift SDK's `public_sig_key`/`private_sig_key`; `api_url` or `base_api_url`.
    /// - Parameter configJSON: the UTF-8 JSON text.
    /// - Throws: `E3DBError` `.invalidClientConfig` with `context.field` naming the member: a missing or
    ///   malformed `private_key`, a member of the wrong JSON type, a secret member written with JSON escapes, a
    ///   `public_key` that does not match the private key, a `private_signing_key` that is not the 64-byte
    ///   `seed || public key`, a `public_signing_key` that does not match, or a `client_id` that is not a UUID;
    ///   without a field (and with `context.offset`) when the text is not a strict JSON object. Messages never
    ///   contain key bytes.
    public init(configJSON: some DataProtocol) throws(E3DBError) {
        // The text holds private keys: work on a wiped copy.
        let text = SecureBytes(copying: configJSON)
        self = try unsafe text.withUnsafeBytes { (raw) throws(E3DBError) in
            try unsafe Self.parse(raw.assumingMemoryBound(to: UInt8.self))
        }
    }

    private static func parse(_ utf8: UnsafeBufferPointer<UInt8>) throws(E3DBError) -> ClientIdentity {
        let object: JSONObject
        let raw: [String: RawJSONString]
        do {
            (object, raw) = unsafe try CanonicalJSON.parseObject(utf8, rawMembers: secretMembers)
        } catch {
            // Only the code, the offset and a known member name: a parser message may quote one input character,
            // which could be key text.
            throw error.keysError(.invalidClientConfig, what: "client configuration", knownMembers: knownMembers)
        }
        func bad(_ field: String, _ why: String) -> E3DBError {
            E3DBError(
                .invalidClientConfig, "client configuration member \"\(field)\" \(why)", context: .init(field: field))
        }
        func present(_ name: String) -> Bool { raw[name] != nil || object[name] != nil }
        /// A string member (nil when absent or null).
        func string(_ name: String) throws(E3DBError) -> String? {
            switch object[name] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            default: throw bad(name, "is not a string")
            }
        }
        /// The raw UTF-8 bytes of a secret string member (nil when absent, null or empty).
        func secretText(_ name: String) throws(E3DBError) -> UnsafeBufferPointer<UInt8>? {
            if let member = raw[name] {
                guard !member.hasEscapes else {
                    throw bad(name, "contains a JSON escape sequence; secrets must be written as plain text")
                }
                return unsafe member.range.isEmpty ? nil : UnsafeBufferPointer(rebasing: utf8[member.range])
            }
            switch object[name] {
            case nil, .null?: return nil
            default: throw bad(name, "is not a string")
            }
        }
        func secretKey(_ name: String) throws(E3DBError) -> SecureBytes? {
            guard let text = try unsafe secretText(name) else { return nil }
            do {
                return unsafe try Base64URL.decodeSecret(utf8: text)
            } catch {
                throw E3DBError(
                    .invalidClientConfig,
                    "client configuration member \"\(name)\" is not base64url (bad character at offset \(error.context.offset ?? 0) of its value)",
                    context: .init(field: name, offset: error.context.offset))
            }
        }

        guard let privateBytes = try secretKey("private_key") else { throw bad("private_key", "is missing") }
        let box: Box.PrivateKey
        do { box = try Box.PrivateKey(privateBytes) } catch {
            throw bad("private_key", "is not a 32-byte base64url Curve25519 key")
        }
        if let publicText = try string("public_key"), !publicText.isEmpty {
            let pk: Box.PublicKey
            do { pk = try Box.PublicKey(base64URLEncoded: publicText) } catch {
                throw bad("public_key", "is not a 32-byte base64url Curve25519 key")
            }
            guard pk == box.publicKey else { throw bad("public_key", "does not match private_key") }
        }
        var signing: Ed25519.PrivateKey?
        let signingName = present("private_signing_key") ? "private_signing_key" : "private_sig_key"
        let publicSigningName = present("public_signing_key") ? "public_signing_key" : "public_sig_key"
        // Both spellings are type-checked, even the one that is not used.
        for name in ["private_signing_key", "private_sig_key"] where name != signingName {
            _ = try unsafe secretText(name)
        }
        for name in ["public_signing_key", "public_sig_key"] where name != publicSigningName { _ = try string(name) }
        let publicSigningText = try string(publicSigningName)
        if let signingBytes = try secretKey(signingName) {
            let key: Ed25519.PrivateKey
            do { key = try Ed25519.PrivateKey(signingBytes) } catch {
                throw bad(signingName, "is not a consistent 64-byte base64url Ed25519 key (seed || public key)")
            }
            signing = key
            if let publicSigningText, !publicSigningText.isEmpty {
                let pk: Ed25519.PublicKey
                do { pk = try Ed25519.PublicKey(base64URLEncoded: publicSigningText) } catch {
                    throw bad(publicSigningName, "is not a 32-byte base64url Ed25519 key")
                }
                guard pk == key.publicKey else { throw bad(publicSigningName, "does not match \(signingName)") }
            }
        }
        var clientID: UUID?
        if let idText = try string("client_id"), !idText.isEmpty {
            guard let id = UUID(uuidString: idText) else { throw bad("client_id", "is not a UUID") }
            clientID = id
        }
        switch object["version"] {
        case nil, .null?, .string?, .number?: break
        default: throw bad("version", "is not a string or a number")
        }
        // Empty API credentials (what a key-only credential file holds) mean "none".
        let apiSecret = try unsafe secretText("api_secret").map { unsafe SecureBytes(copying: $0) }.flatMap {
            $0.count == 0 ? nil : $0
        }
        let apiURL = try string("api_url")
        let baseAPIURL = try string("base_api_url")
        func nonEmpty(_ text: String?) -> String? { text.flatMap { $0.isEmpty ? nil : $0 } }
        return ClientIdentity(
            clientID: clientID, boxKey: box, signingKey: signing, apiKeyID: nonEmpty(try string("api_key_id")),
            apiSecret: apiSecret, clientEmail: nonEmpty(try string("client_email")), apiURL: apiURL ?? baseAPIURL)
    }

    /// The client credential JSON (js-sdk/Go/Python member names, lowercase client ID, `version` "2" with
    /// signing keys and "1" without), built as a `JSONValue` and written in canonical form (sorted members, no
    /// insignificant whitespace) followed by a newline.
    ///
    /// Every member the other SDKs read is present, so the file loads unchanged in each of them (the Python SDK's
    /// `Client` indexes `api_key_id`, `api_secret` and `api_url` directly): an identity without API credentials
    /// writes them as empty strings, and `api_url` defaults to ``defaultAPIURL``.
    /// - Warning: the result contains the private keys. Write it only to a file with mode 0600.
    /// - Returns: UTF-8 JSON text ending in a newline.
    public func configJSON() -> Data {
        var members: [JSONObject.Member] = [
            ("private_key", .string(boxKey.base64URLEncoded)),
            ("public_key", .string(publicKey.base64URLEncoded)),
            ("version", .string(signingKey == nil ? "1" : "2")),
        ]
        members.append(("api_key_id", .string(apiKeyID ?? "")))
        unsafe members.append(
            ("api_secret", .string(apiSecret?.withUnsafeBytes { unsafe String(decoding: $0, as: UTF8.self) } ?? "")))
        members.append(("api_url", .string(apiURL ?? Self.defaultAPIURL)))
        members.append(("client_email", .string(clientEmail ?? "")))
        if let clientID { members.append(("client_id", .string(clientID.lowercasedString))) }
        if let signingKey {
            members.append(("private_signing_key", .string(signingKey.base64URLEncoded)))
            members.append(("public_signing_key", .string(signingKey.publicKey.base64URLEncoded)))
        }
        return Data(CanonicalJSON.serializedBytes(.object(JSONObject(members))) + [0x0A])
    }
}
