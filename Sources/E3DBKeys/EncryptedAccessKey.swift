public import E3DBPrimitives

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// An access key wrapped for one reader: `b64u(box ciphertext) "." b64u(nonce)` (spec §2.2).
///
/// The ciphertext is `crypto_box_easy(AK, nonce, reader public key, authorizer secret key)`: 48 bytes
/// (16-byte tag and the 32-byte key). The ciphertext comes first, the nonce second: the reverse of the
/// `nonce:cipher` account strings.
public struct EncryptedAccessKey: Sendable, Hashable, CustomStringConvertible {
    /// The byte count of the box ciphertext of an access key (48).
    public static let ciphertextByteCount = AccessKey.byteCount + Box.tagByteCount

    /// The 48-byte box ciphertext (tag, then encrypted key).
    public let ciphertext: Data
    /// The 24-byte box nonce.
    public let nonce: Box.Nonce

    /// Parses an EAK string.
    /// - Parameters:
    ///   - text: `b64u(ciphertext).b64u(nonce)`: exactly two parts.
    ///   - decoding: ``Base64Decoding/strict`` (default) or ``Base64Decoding/lenient`` for padded or
    ///     standard-alphabet input that the Python, Node and Java SDKs accept.
    /// - Throws: `E3DBError` `.invalidEAK` when there are not exactly two parts; `.invalidBase64` (part `eak` or
    ///   `eakN`); `.invalidLength` when the ciphertext is not 48 bytes (part `eak`) or the nonce not 24 (part `eakN`).
    public init(_ text: some StringProtocol, decoding: Base64Decoding = .strict) throws(E3DBError) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            throw E3DBError(
                .invalidEAK, "an encrypted access key has 2 '.'-separated parts, found \(parts.count)",
                context: .init(expected: 2, actual: parts.count))
        }
        let ct = try decoding.decode(parts[0], part: "eak")
        let n = try decoding.decode(parts[1], part: "eakN")
        guard ct.count == Self.ciphertextByteCount else {
            throw E3DBError(
                .invalidLength, "the EAK ciphertext must be \(Self.ciphertextByteCount) bytes, found \(ct.count)",
                context: .init(part: "eak", expected: Self.ciphertextByteCount, actual: ct.count))
        }
        guard n.count == Box.nonceByteCount else {
            throw E3DBError(
                .invalidLength, "the EAK nonce must be \(Box.nonceByteCount) bytes, found \(n.count)",
                context: .init(part: "eakN", expected: Box.nonceByteCount, actual: n.count))
        }
        self.ciphertext = ct
        self.nonce = try Box.Nonce(rawRepresentation: n)
    }

    /// An EAK from its parts.
    /// - Parameters:
    ///   - ciphertext: the 48-byte box ciphertext.
    ///   - nonce: the box nonce.
    /// - Throws: `E3DBError` `.invalidLength` (part `eak`) when the ciphertext is not 48 bytes.
    public init(ciphertext: some Sequence<UInt8>, nonce: Box.Nonce) throws(E3DBError) {
        let ct = Data(ciphertext)
        guard ct.count == Self.ciphertextByteCount else {
            throw E3DBError(
                .invalidLength, "the EAK ciphertext must be \(Self.ciphertextByteCount) bytes, found \(ct.count)",
                context: .init(part: "eak", expected: Self.ciphertextByteCount, actual: ct.count))
        }
        self.ciphertext = ct
        self.nonce = nonce
    }

    /// Wraps `accessKey` for `reader`, authorized by `authorizer` (normally the writer).
    ///
    /// - Parameters:
    ///   - accessKey: the access key.
    ///   - reader: the reader's Curve25519 public key (the writer's own key for its own copy).
    ///   - authorizer: the authorizer's Curve25519 private key.
    ///   - nonce: the box nonce. Leave the default (random); pass one only to reproduce known answers.
    ///     Never reuse a nonce with the same key pair.
    /// - Returns: the encrypted access key.
    /// - Throws: `E3DBError` `.authenticationFailed` when the reader key is a low-order point.
    public static func wrap(
        _ accessKey: AccessKey,
        for reader: Box.PublicKey,
        by authorizer: Box.PrivateKey,
        nonce: Box.Nonce = Box.Nonce()
    ) throws(E3DBError) -> EncryptedAccessKey {
        let sealed = try unsafe accessKey.secretBoxKey.withUnsafeBytes { (raw) throws(E3DBError) in
            try unsafe Box.seal(raw, to: reader, from: authorizer, nonce: nonce)
        }
        return try EncryptedAccessKey(ciphertext: sealed.ciphertext, nonce: sealed.nonce)
    }

    /// Unwraps the access key.
    /// - Parameters:
    ///   - reader: the reader's Curve25519 private key.
    ///   - authorizer: the authorizer's Curve25519 public key (`authorizer_public_key.curve25519` of the EAKInfo).
    /// - Returns: the access key.
    /// - Throws: `E3DBError` `.authenticationFailed` (part `eak`) when the keys are wrong or the EAK was changed.
    public func unwrap(reader: Box.PrivateKey, authorizer: Box.PublicKey) throws(E3DBError) -> AccessKey {
        do {
            let box = try Box.SealedBox(nonce: nonce, ciphertext: ciphertext)
            return try AccessKey(Box.openSecret(box, from: authorizer, to: reader))
        } catch {
            throw E3DBError(
                .authenticationFailed,
                "the encrypted access key does not open with these keys (wrong reader or authorizer key, or changed)",
                context: .init(part: "eak"))
        }
    }

    /// The EAK string, `b64u(ciphertext).b64u(nonce)` (97 characters).
    public var stringValue: String { Base64URL.encode(ciphertext) + "." + Base64URL.encode(nonce.rawRepresentation) }

    /// The EAK string (it is not secret: only the reader can open it).
    public var description: String { stringValue }
}

extension EncryptedAccessKey: Codable {
    /// Decodes an EAK string (strict base64url).
    /// - Throws: `E3DBError` as ``init(_:decoding:)``.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        try self.init(text)
    }

    /// Encodes the EAK string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(stringValue)
    }
}
