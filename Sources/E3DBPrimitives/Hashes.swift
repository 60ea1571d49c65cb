internal import CE3DBSodium
internal import Crypto

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

// Safety: each digest is written into a buffer of exactly its size (32 or 64 bytes) and the input is read for its own
// count; the key bytes of `hmacSHA256(keyBytes:message:)` are copied into a `SymmetricKey` while they are lent. Every
// pointer is lent for its closure or call only.
/// The other hashes E3DB formats need: SHA-256 (PKCE), SHA-512, MD5 (the `Content-MD5` file checksum), and
/// HMAC-SHA256 (AWS Signature Version 4, which the server uses to sign object-store requests).
///
/// SHA-2 comes from libsodium, MD5 and HMAC-SHA256 from swift-crypto (`Insecure.MD5`, `HMAC<SHA256>`). MD5 is here
/// only because the E3DB upload protocol requires it; it is not a security primitive.
public enum Hashes: Sendable {
    /// SHA-256 of `data` (32 bytes).
    public static func sha256(_ data: some DataProtocol) -> Data {
        Sodium.ensure()
        var out = Data(count: 32)
        unsafe withBytes(data) { d in
            unsafe out.withUnsafeMutableBytes { o in _ = unsafe crypto_hash_sha256(o.u8, d.u8, UInt64(d.count)) }
        }
        return out
    }

    /// SHA-512 of `data` (64 bytes).
    public static func sha512(_ data: some DataProtocol) -> Data {
        Sodium.ensure()
        var out = Data(count: 64)
        unsafe withBytes(data) { d in
            unsafe out.withUnsafeMutableBytes { o in _ = unsafe crypto_hash_sha512(o.u8, d.u8, UInt64(d.count)) }
        }
        return out
    }

    /// HMAC-SHA256 (RFC 2104) of `message` under `key`, which may have any length (32 bytes).
    public static func hmacSHA256(key: some DataProtocol, message: some DataProtocol) -> Data {
        unsafe withBytes(key) { k in unsafe hmacSHA256(keyBytes: k, message: message) }
    }

    /// HMAC-SHA256 of `message` under a key kept in wiped memory (32 bytes).
    public static func hmacSHA256(key: SecureBytes, message: some DataProtocol) -> Data {
        unsafe key.withUnsafeBytes { k in unsafe hmacSHA256(keyBytes: k, message: message) }
    }

    /// The one HMAC-SHA256 both overloads call. swift-crypto copies the key into its own storage, which it zeroes
    /// when released.
    private static func hmacSHA256(keyBytes: UnsafeRawBufferPointer, message: some DataProtocol) -> Data {
        let key = unsafe SymmetricKey(data: keyBytes)
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: key))
    }

    /// MD5 of `data` (16 bytes). Not collision resistant: for E3DB checksums only.
    public static func md5(_ data: some DataProtocol) -> Data {
        var hasher = MD5()
        hasher.update(data: data)
        return hasher.finalize()
    }

    /// Streaming MD5 (value type).
    public struct MD5: Sendable {
        private var inner = Insecure.MD5()

        /// Starts a hash.
        public init() {}

        /// Adds `data`.
        public mutating func update(data: some DataProtocol) {
            unsafe withBytes(data) { d in unsafe inner.update(bufferPointer: d) }
        }

        /// Adds the bytes at `buffer`.
        package mutating func update(bufferPointer buffer: UnsafeRawBufferPointer) {
            unsafe inner.update(bufferPointer: buffer)
        }

        /// The 16-byte digest.
        public func finalize() -> Data { Data(inner.finalize()) }
    }
}
