#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import E3DBPrimitives

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
        "ClientIdentity(client_id: \(clientID?.uuidString.lowercased() ?? "none"), public_key: "
            + "\(publicKey.base64URLEncoded), public_signing_key: \(publicSigningKey?.base64URLEncoded ?? "none"))"
    }

    // MARK: JSON

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private struct Members: Decodable {
        var strings: [String: String] = [:]
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: AnyKey.self)
            for key in c.allKeys {
                if let s = try? c.decode(String.self, forKey: key) {
                    strings[key.stringValue] = s
                } else if let n = try? c.decode(Int.self, forKey: key) {
                    strings[key.stringValue] = String(n)
                }
            }
        }
    }

    /// Reads a client credential JSON file.
    ///
    /// Empty signing-key strings (Python writes `""` for version 1 clients) mean "no signing key".
    /// - Parameter configJSON: the UTF-8 JSON text.
    /// - Throws: `E3DBError` `.invalidClientConfig` with `context.field` naming the member: a missing or
    ///   malformed `private_key`, a `public_key` that does not match it, a `private_signing_key` that is not the
    ///   64-byte `seed || public key`, a `public_signing_key` that does not match, or a `client_id` that is not a
    ///   UUID; without a field when the text is not a JSON object.
    public init(configJSON: some DataProtocol) throws(E3DBError) {
        let members: [String: String]
        do {
            members = try JSONDecoder().decode(Members.self, from: Data(configJSON)).strings
        } catch {
            throw E3DBError(.invalidClientConfig, "the client configuration is not a JSON object")
        }
        func bad(_ field: String, _ why: String) -> E3DBError {
            E3DBError(.invalidClientConfig, "client configuration member \"\(field)\" \(why)", context: .init(field: field))
        }
        guard let privateText = members["private_key"], !privateText.isEmpty else {
            throw bad("private_key", "is missing")
        }
        guard let box = try? Box.PrivateKey(base64URLEncoded: privateText) else {
            throw bad("private_key", "is not a 32-byte base64url Curve25519 key")
        }
        if let publicText = members["public_key"], !publicText.isEmpty {
            guard let pk = try? Box.PublicKey(base64URLEncoded: publicText), pk == box.publicKey else {
                throw bad("public_key", "does not match private_key")
            }
        }
        var signing: Ed25519.PrivateKey?
        let signingText = members["private_signing_key"] ?? members["private_sig_key"]
        let signingName = members["private_signing_key"] != nil ? "private_signing_key" : "private_sig_key"
        if let signingText, !signingText.isEmpty {
            guard let key = try? Ed25519.PrivateKey(base64URLEncoded: signingText) else {
                throw bad(signingName, "is not a consistent 64-byte base64url Ed25519 key (seed || public key)")
            }
            signing = key
            let publicName = members["public_signing_key"] != nil ? "public_signing_key" : "public_sig_key"
            if let publicText = members[publicName], !publicText.isEmpty {
                guard let pk = try? Ed25519.PublicKey(base64URLEncoded: publicText), pk == key.publicKey else {
                    throw bad(publicName, "does not match \(signingName)")
                }
            }
        }
        var clientID: UUID?
        if let idText = members["client_id"], !idText.isEmpty {
            guard let id = UUID(uuidString: idText) else { throw bad("client_id", "is not a UUID") }
            clientID = id
        }
        self.init(
            clientID: clientID, boxKey: box, signingKey: signing, apiKeyID: members["api_key_id"],
            apiSecret: members["api_secret"].map { SecureBytes(copying: Array($0.utf8)) },
            clientEmail: members["client_email"], apiURL: members["api_url"] ?? members["base_api_url"])
    }

    /// The client credential JSON (js-sdk/Go/Python member names, sorted members, lowercase client ID,
    /// `version` "2" with signing keys and "1" without).
    /// - Warning: the result contains the private keys. Write it only to a file with mode 0600.
    /// - Returns: UTF-8 JSON text ending in a newline.
    public func configJSON() -> Data {
        var members: [(String, String)] = []
        if let apiKeyID { members.append(("api_key_id", apiKeyID)) }
        if let apiSecret { members.append(("api_secret", apiSecret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })) }
        if let apiURL { members.append(("api_url", apiURL)) }
        if let clientEmail { members.append(("client_email", clientEmail)) }
        if let clientID { members.append(("client_id", clientID.uuidString.lowercased())) }
        members.append(("private_key", boxKey.base64URLEncoded))
        if let signingKey {
            members.append(("private_signing_key", signingKey.base64URLEncoded))
        }
        members.append(("public_key", publicKey.base64URLEncoded))
        if let signingKey {
            members.append(("public_signing_key", signingKey.publicKey.base64URLEncoded))
        }
        members.append(("version", signingKey == nil ? "1" : "2"))
        members.sort { $0.0 < $1.0 }
        let body = members.map { "  \(jsonString($0.0)): \(jsonString($0.1))" }.joined(separator: ",\n")
        return Data(("{\n" + body + "\n}\n").utf8)
    }
}

/// A JSON string literal for `s` (ECMAScript `JSON.stringify` escaping).
package func jsonString(_ s: String) -> String {
    var out = "\""
    out.reserveCapacity(s.utf8.count + 2)
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\u{08}": out += "\\b"
        case "\u{09}": out += "\\t"
        case "\u{0A}": out += "\\n"
        case "\u{0C}": out += "\\f"
        case "\u{0D}": out += "\\r"
        case let c where c.value < 0x20:
            let hex = String(c.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
