#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import E3DBPrimitives

/// An E3DB access key (AK): the 32-byte secretbox key shared by every record of one
/// `(writer, user, record type)` and wrapped for each reader as an ``EncryptedAccessKey``.
///
/// The bytes live in wiped storage (`SecureBytes`); `description`, `debugDescription` and `customMirror` are
/// redacted.
public struct AccessKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The number of bytes in an access key (32).
    public static let byteCount = SecretBox.keyByteCount

    /// The access key as a secretbox key.
    public let secretBoxKey: SecretBox.Key

    /// A new random access key.
    public init() { self.secretBoxKey = SecretBox.Key() }

    /// Wraps an existing secretbox key.
    /// - Parameter secretBoxKey: the key.
    public init(_ secretBoxKey: SecretBox.Key) { self.secretBoxKey = secretBoxKey }

    /// An access key from 32 raw bytes.
    /// - Parameter rawRepresentation: exactly 32 bytes.
    /// - Throws: `E3DBError` `.invalidKeyLength` for any other length.
    public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
        self.secretBoxKey = try SecretBox.Key(rawRepresentation: rawRepresentation)
    }

    /// An access key from wiped storage holding 32 bytes.
    /// - Parameter bytes: exactly 32 bytes.
    /// - Throws: `E3DBError` `.invalidKeyLength` for any other length.
    public init(_ bytes: SecureBytes) throws(E3DBError) {
        self.secretBoxKey = try SecretBox.Key(bytes)
    }

    /// Calls `body` with the 32 key bytes. Do not copy them out of the closure.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try secretBoxKey.withUnsafeBytes(body)
    }

    /// Redacted.
    public var description: String { "AccessKey(redacted)" }
    /// Redacted.
    public var debugDescription: String { description }
    /// Redacted: no children.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
