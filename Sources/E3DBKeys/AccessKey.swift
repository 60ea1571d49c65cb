public import E3DBPrimitives

/// An E3DB access key (AK): the 32-byte secretbox key shared by every record of one
/// `(writer, user, record type)` and by a file's data-key wrapping. Each authorized reader holds it wrapped
/// for them as an encrypted access key (EAK, ``EncryptedAccessKey``).
///
/// The key lives in wiped storage; `description`, `debugDescription` and `customMirror` are redacted.
public struct AccessKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// 32: the key size.
    public static let byteCount = SecretBox.keyByteCount

    /// The key as a secretbox key.
    public let secretBoxKey: SecretBox.Key

    /// A fresh random access key.
    public init() { self.secretBoxKey = SecretBox.Key() }

    /// Wraps an existing secretbox key.
    public init(_ key: SecretBox.Key) { self.secretBoxKey = key }

    /// Copies 32 key bytes.
    /// - Throws: `.invalidKeyLength` when not 32 bytes.
    public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
        self.secretBoxKey = try SecretBox.Key(rawRepresentation: rawRepresentation)
    }

    /// Takes 32 bytes of wiped storage (no copy).
    /// - Throws: `.invalidKeyLength` when not 32 bytes.
    public init(_ bytes: SecureBytes) throws(E3DBError) {
        self.secretBoxKey = try SecretBox.Key(bytes)
    }

    /// Decodes the unpadded base64url form the SDKs store (43 characters).
    /// - Throws: `.invalidBase64` or `.invalidKeyLength`.
    public init(base64URLEncoded text: some StringProtocol) throws(E3DBError) {
        self.secretBoxKey = try SecretBox.Key(base64URLEncoded: text)
    }

    /// The key as unpadded base64url.
    /// - Warning: The returned `String` is ordinary memory and cannot be wiped.
    public var base64URLEncoded: String { secretBoxKey.base64URLEncoded }

    /// Calls `body` with the 32 key bytes. Do not copy them out of the closure.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try unsafe secretBoxKey.withUnsafeBytes(body)
    }

    /// Redacted.
    public var description: String { "AccessKey(redacted)" }
    /// Redacted.
    public var debugDescription: String { description }
    /// Redacted: no children.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
