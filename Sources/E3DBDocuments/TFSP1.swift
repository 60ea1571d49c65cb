public import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// TFSP1 field signatures (`UUIDv5 "TFSP1;ED25519;BLAKE2B"`, spec §7.1), used for note fields:
///
/// ```
/// h   = b64u(BLAKE2b-256(utf8(salt || key || value)))        // 43 ASCII characters
/// sig = b64u(Ed25519(ascii(h)))                              // 86 characters
/// signed = VERSION ";" salt ";" "86" ";" sig value
/// ```
public enum TFSP1 {
    /// The signature version, `e7737e7c-1637-511e-8bab-93c4f3e26fd9`.
    public static let version = "e7737e7c-1637-511e-8bab-93c4f3e26fd9"
    /// The length of the base64url signature (86).
    public static let signatureLength = 86

    /// A new random salt: a lowercase UUIDv4 string (old Swift's uppercase salts break Java).
    public static func makeSalt() -> String { UUID().lowercasedString }

    /// `b64u(BLAKE2b-256(utf8(salt || key || value)))`.
    public static func hash(salt: String, key: String, value: String) -> String {
        let digest = invariant("BLAKE2b-256 has a valid output length") { () throws(E3DBError) in
            try BLAKE2b.hash(data: Data((salt + key + value).utf8), outputByteCount: 32)
        }
        return Base64URL.encode(digest)
    }

    /// Signs a field.
    /// - Parameters:
    ///   - key: the field name.
    ///   - value: the plaintext.
    ///   - salt: the salt, used verbatim (default: a new lowercase UUID). Notes pass the note's object salt.
    ///   - signingKey: the writer's Ed25519 key.
    /// - Returns: `VERSION;salt;86;<sig><value>`.
    public static func sign(key: String, value: String, salt: String = makeSalt(), signingKey: Ed25519.PrivateKey)
        -> String
    {
        let h = hash(salt: salt, key: key, value: value)
        let sig = Base64URL.encode(signingKey.signature(for: Data(h.utf8)))
        return version + ";" + salt + ";" + String(sig.utf8.count) + ";" + sig + value
    }

    /// The result of ``verify(key:signed:publicKey:expectedSalt:allowUnsigned:)``.
    public struct Verified: Sendable, Hashable {
        /// The plaintext value.
        public var value: String
        /// The salt of a signed value; nil for an accepted unsigned (legacy) value.
        public var salt: String?
        /// False for an accepted unsigned (legacy) value.
        public var isSigned: Bool { salt != nil }
    }

    /// Verifies a signed field and returns its plaintext.
    /// - Parameters:
    ///   - key: the field name.
    ///   - signed: the signed string.
    ///   - publicKey: the writer's Ed25519 public key.
    ///   - expectedSalt: the salt the field must carry (the note's object salt), compared exactly.
    ///   - allowUnsigned: accept a value that does not start with the TFSP1 version as unsigned legacy data
    ///     (js-sdk and Python do; Java, Go and old Swift do not). Default false.
    /// - Returns: the value and salt.
    /// - Throws: `E3DBError` `.unsignedField` (no TFSP1 prefix, strict mode); `.invalidSignedField` (header
    ///   malformed; part `length` when the length field is not `86` or the signature is cut short);
    ///   `.saltMismatch` (part `salt`); `.invalidSignature` (part `signature`).
    public static func verify(
        key: String,
        signed: String,
        publicKey: Ed25519.PublicKey,
        expectedSalt: String? = nil,
        allowUnsigned: Bool = false
    ) throws(E3DBError) -> Verified {
        let bytes = Array(signed.utf8)
        let prefix = Array((version + ";").utf8)
        guard bytes.starts(with: prefix) else {
            if allowUnsigned { return Verified(value: signed, salt: nil) }
            throw E3DBError(.unsignedField, "the value is not TFSP1-signed")
        }
        let semicolon = UInt8(ascii: ";")
        var i = prefix.count
        guard let saltEnd = bytes[i...].firstIndex(of: semicolon) else {
            throw E3DBError(.invalidSignedField, "the TFSP1 header has no length field")
        }
        let salt = String(decoding: bytes[i..<saltEnd], as: UTF8.self)
        i = saltEnd + 1
        guard let lengthEnd = bytes[i...].firstIndex(of: semicolon) else {
            throw E3DBError(.invalidSignedField, "the TFSP1 header has no length field", context: .init(part: "length"))
        }
        let lengthText = bytes[i..<lengthEnd]
        guard lengthText.elementsEqual(String(signatureLength).utf8) else {
            throw E3DBError(
                .invalidSignedField, "the TFSP1 length field must be \(signatureLength)", context: .init(part: "length")
            )
        }
        let sigStart = lengthEnd + 1
        guard bytes.count - sigStart >= signatureLength else {
            throw E3DBError(
                .invalidSignedField, "the TFSP1 signature is shorter than \(signatureLength) characters",
                context: .init(part: "length", expected: signatureLength, actual: bytes.count - sigStart))
        }
        if let expectedSalt, !expectedSalt.utf8.elementsEqual(salt.utf8) {
            throw E3DBError(
                .saltMismatch, "the field's salt differs from the expected salt", context: .init(part: "salt"))
        }
        let sigBytes = bytes[sigStart..<(sigStart + signatureLength)]
        let value = String(decoding: bytes[(sigStart + signatureLength)...], as: UTF8.self)
        let h = hash(salt: salt, key: key, value: value)
        let raw: Data
        do {
            raw = try Base64URL.decode(String(decoding: sigBytes, as: UTF8.self))
        } catch {
            throw E3DBError(
                .invalidSignature, "the TFSP1 signature is not base64url", context: .init(part: "signature"))
        }
        guard raw.count == Ed25519.signatureByteCount, publicKey.isValidSignature(raw, for: Data(h.utf8)) else {
            throw E3DBError(.invalidSignature, "the TFSP1 signature does not verify", context: .init(part: "signature"))
        }
        return Verified(value: value, salt: salt)
    }
}
