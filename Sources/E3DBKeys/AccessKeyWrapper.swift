internal import E3DBCanonicalJSON
public import E3DBPrimitives

/// One level of group wrapping in an EAKInfo's `access_key_wrappers` (spec §2.3, §8.5):
/// `{"membership_key": "<ct>.<nonce>", "public_key": "<b64u>", "access_key_id": "…", "group_public_key": "<b64u>"}`.
///
/// `membership_key` is the 32-byte Curve25519 secret key of a group, boxed for the holder of the previous level's
/// private key by the holder of the previous level's public key. ``EAKInfo/unwrap(with:)`` opens the wrappers in
/// order: each opened group secret key becomes the private key of the next step, and ``publicKey`` its public key.
public struct AccessKeyWrapper: Sendable, Hashable {
    /// The group secret key boxed for the previous level: `b64u(48-byte ciphertext).b64u(24-byte nonce)`, the same
    /// shape as an EAK (a 32-byte key and the 16-byte tag).
    public var membershipKey: EncryptedAccessKey
    /// The public key to open the next level with (`public_key`).
    public var publicKey: Box.PublicKey
    /// The server's access key ID (`access_key_id`), kept as given.
    public var accessKeyID: String
    /// The group's Curve25519 public key (`group_public_key`).
    public var groupPublicKey: Box.PublicKey

    /// A wrapper from its parts.
    public init(
        membershipKey: EncryptedAccessKey, publicKey: Box.PublicKey, accessKeyID: String, groupPublicKey: Box.PublicKey
    ) {
        self.membershipKey = membershipKey
        self.publicKey = publicKey
        self.accessKeyID = accessKeyID
        self.groupPublicKey = groupPublicKey
    }

    /// Opens ``membershipKey`` into the group's secret key.
    /// - Throws: `E3DBError` `.authenticationFailed` with field `access_key_wrappers[index].membership_key` when
    ///   it does not open, `.invalidKeyLength` (same field) if it opens to a value that is not 32 bytes.
    func openGroupKey(from sender: Box.PublicKey, with recipient: Box.PrivateKey, index: Int) throws(E3DBError)
        -> Box.PrivateKey
    {
        let field = "access_key_wrappers[\(index)].membership_key"
        let secret: SecureBytes
        do {
            let box = try Box.SealedBox(nonce: membershipKey.nonce, ciphertext: membershipKey.ciphertext)
            secret = try Box.openSecret(box, from: sender, to: recipient)
        } catch {
            throw E3DBError(
                .authenticationFailed,
                "the membership key of access key wrapper \(index) does not open with these keys "
                    + "(wrapped for another client, or changed)",
                context: .init(field: field, part: "membership_key"))
        }
        do {
            return try Box.PrivateKey(secret)
        } catch {
            throw E3DBError(
                .invalidKeyLength, "the membership key of access key wrapper \(index) is not a 32-byte group key",
                context: .init(field: field, part: "membership_key", expected: Box.keyByteCount, actual: secret.count))
        }
    }

    static let memberNames = ["membership_key", "public_key", "access_key_id", "group_public_key"]

    /// Reads wrapper `index` of `access_key_wrappers`.
    /// - Throws: `E3DBError` `.invalidEAKInfo` with field `access_key_wrappers[index]` (not an object) or
    ///   `access_key_wrappers[index].<member>` (missing, not a string, bad base64url, wrong length).
    init(json value: JSONValue, index: Int, decoding: Base64Decoding) throws(E3DBError) {
        let prefix = "access_key_wrappers[\(index)]"
        guard case .object(let object) = value else {
            throw E3DBError(
                .invalidEAKInfo, "EAKInfo member \"\(prefix)\" is not an object", context: .init(field: prefix))
        }
        func bad(_ member: String, _ why: String) -> E3DBError {
            E3DBError(
                .invalidEAKInfo, "EAKInfo member \"\(prefix).\(member)\" \(why)",
                context: .init(field: "\(prefix).\(member)"))
        }
        func string(_ member: String) throws(E3DBError) -> String {
            switch object[member] {
            case .string(let s)?: return s
            case nil: throw bad(member, "is missing")
            default: throw bad(member, "is not a string")
            }
        }
        func key(_ member: String) throws(E3DBError) -> Box.PublicKey {
            let text = try string(member)
            do {
                return try Box.PublicKey(base64URLEncoded: text)
            } catch {
                throw bad(member, "is not a 32-byte base64url Curve25519 key")
            }
        }
        let membershipText = try string("membership_key")
        do {
            self.membershipKey = try EncryptedAccessKey(membershipText, decoding: decoding)
        } catch {
            throw E3DBError(
                .invalidEAKInfo,
                "EAKInfo member \"\(prefix).membership_key\" is not 'b64u(48-byte ciphertext).b64u(24-byte nonce)'",
                context: .init(
                    field: "\(prefix).membership_key", expected: error.context.expected, actual: error.context.actual))
        }
        self.publicKey = try key("public_key")
        self.accessKeyID = try string("access_key_id")
        self.groupPublicKey = try key("group_public_key")
    }

    var jsonValue: JSONValue {
        .object(
            JSONObject([
                (key: "access_key_id", value: .string(accessKeyID)),
                (key: "group_public_key", value: .string(groupPublicKey.base64URLEncoded)),
                (key: "membership_key", value: .string(membershipKey.stringValue)),
                (key: "public_key", value: .string(publicKey.base64URLEncoded)),
            ]))
    }
}

extension AccessKeyWrapper: Codable {
    enum CodingKeys: String, CodingKey {
        case membership_key, public_key, access_key_id, group_public_key
    }

    /// Decodes the four string members.
    /// - Throws: `DecodingError` for a missing member or wrong type, `E3DBError` for a malformed value.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.membershipKey = try c.decode(EncryptedAccessKey.self, forKey: .membership_key)
        self.publicKey = try Box.PublicKey(base64URLEncoded: c.decode(String.self, forKey: .public_key))
        self.accessKeyID = try c.decode(String.self, forKey: .access_key_id)
        self.groupPublicKey = try Box.PublicKey(base64URLEncoded: c.decode(String.self, forKey: .group_public_key))
    }

    /// Encodes the four string members.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(accessKeyID, forKey: .access_key_id)
        try c.encode(groupPublicKey.base64URLEncoded, forKey: .group_public_key)
        try c.encode(membershipKey, forKey: .membership_key)
        try c.encode(publicKey.base64URLEncoded, forKey: .public_key)
    }
}
