internal import CE3DBSodium

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

// Safety: the types carry the sizes libsodium relies on: a `Key` is 32 bytes of `SecureBytes` (every initialiser
// checks), a `Nonce` 24 bytes (checked by `FixedBytes`), and a `SealedBox`'s ciphertext at least the 16-byte tag (its
// public initialisers check; the unchecked one takes `seal`'s own output). Output buffers are sized here from the
// input: a seal writes `m.count + 16` bytes, an open `c.count - 16` (never negative by the box invariant), a detached
// open `c.count` with a tag checked to be 16 bytes. Every pointer is lent by a `with…` closure, `uninitializedData` or
// `SecureBytes(count:)` for the call only. The `@unsafe` low-level functions need their callers to lend buffers of the
// sizes their comments state.
/// Secret-key authenticated encryption: libsodium `crypto_secretbox` (XSalsa20-Poly1305).
///
/// E3DB encrypts every record field value and every data key with it.
/// ```swift
/// let key = SecretBox.Key()
/// let sealed = try SecretBox.seal(Data("hello".utf8), using: key)
/// let opened = try SecretBox.open(sealed, using: key)
/// ```
public enum SecretBox: Sendable {
    /// 32: key size.
    public static let keyByteCount = 32
    /// 24: nonce size.
    public static let nonceByteCount = 24
    /// 16: Poly1305 tag size.
    public static let tagByteCount = 16

    /// A 32-byte secret key in wiped memory.
    public struct Key: Sendable, RedactedSecret {
        static let redactedName = "SecretBox.Key"
        let storage: SecureBytes

        /// A random key.
        public init() { self.storage = SecureBytes(randomCount: SecretBox.keyByteCount) }

        /// Wraps 32 key bytes already held in wiped storage (no copy).
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when not 32 bytes.
        public init(_ bytes: SecureBytes) throws(E3DBError) {
            guard bytes.count == SecretBox.keyByteCount else {
                throw E3DBError.length(
                    .invalidKeyLength, "secretbox key", expected: SecretBox.keyByteCount, actual: bytes.count)
            }
            self.storage = bytes
        }

        /// Copies 32 key bytes into wiped storage.
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when not 32 bytes.
        public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
            self.storage = try FixedBytes.secret(
                rawRepresentation, count: SecretBox.keyByteCount, code: .invalidKeyLength, what: "secretbox key")
        }

        /// Decodes a key from unpadded base64url.
        /// - Throws: ``E3DBError/Code/invalidBase64`` or ``E3DBError/Code/invalidKeyLength``.
        public init(base64URLEncoded text: some StringProtocol) throws(E3DBError) {
            try self.init(Base64URL.decodeSecret(text))
        }

        /// The key as unpadded base64url.
        /// - Warning: The returned `String` is ordinary memory and cannot be wiped.
        public var base64URLEncoded: String { unsafe storage.withUnsafeBytes { unsafe Base64URL.encode($0) } }

        /// Calls `body` with the 32 key bytes.
        public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
            try unsafe storage.withUnsafeBytes(body)
        }

        /// The wiped storage holding the key.
        public var secureBytes: SecureBytes { storage }
    }

    /// A 24-byte nonce; `Nonce()` is random.
    public struct Nonce: Sendable, Hashable {
        /// The 24 nonce bytes.
        public let rawRepresentation: Data

        /// A random nonce.
        public init() { self.rawRepresentation = SecureRandom.bytes(count: SecretBox.nonceByteCount) }

        /// Wraps 24 nonce bytes.
        /// - Throws: ``E3DBError/Code/invalidNonceLength`` when not 24 bytes.
        /// - Warning: Never seal two messages with the same nonce and key.
        public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
            self.rawRepresentation = try FixedBytes.data(
                rawRepresentation, count: SecretBox.nonceByteCount, code: .invalidNonceLength, what: "secretbox nonce")
        }
    }

    /// A sealed message: the nonce and the "easy" ciphertext (16-byte tag, then the encrypted message).
    ///
    /// The detached form is the same bytes split differently: ``tag`` and ``encryptedMessage``.
    public struct SealedBox: Sendable, Hashable {
        /// The nonce.
        public let nonce: Nonce
        /// Tag followed by the encrypted message (`message.count + 16` bytes).
        public let ciphertext: Data

        /// Assembles a sealed box.
        /// - Throws: ``E3DBError/Code/invalidLength`` when `ciphertext` is shorter than the tag.
        public init(nonce: Nonce, ciphertext: some Sequence<UInt8>) throws(E3DBError) {
            let data = Data(ciphertext)
            guard data.count >= SecretBox.tagByteCount else {
                throw E3DBError(
                    .invalidLength, "secretbox ciphertext is shorter than its 16-byte tag",
                    context: .init(part: "ciphertext", expected: SecretBox.tagByteCount, actual: data.count))
            }
            self.nonce = nonce
            self.ciphertext = data
        }

        /// Assembles a sealed box from the detached parts.
        /// - Throws: ``E3DBError/Code/invalidLength`` when `tag` is not 16 bytes.
        public init(nonce: Nonce, tag: some Sequence<UInt8>, encryptedMessage: some Sequence<UInt8>) throws(E3DBError) {
            let t = Data(tag)
            guard t.count == SecretBox.tagByteCount else {
                throw E3DBError.length(
                    .invalidLength, "secretbox tag", expected: SecretBox.tagByteCount, actual: t.count)
            }
            self.nonce = nonce
            self.ciphertext = t + Data(encryptedMessage)
        }

        /// Parses `nonce || ciphertext`.
        /// - Throws: ``E3DBError/Code/invalidLength`` when shorter than 40 bytes.
        public init(combined: some Sequence<UInt8>) throws(E3DBError) {
            let data = Data(combined)
            guard data.count >= SecretBox.nonceByteCount + SecretBox.tagByteCount else {
                throw E3DBError(
                    .invalidLength, "combined secretbox is shorter than nonce and tag",
                    context: .init(expected: SecretBox.nonceByteCount + SecretBox.tagByteCount, actual: data.count))
            }
            self.nonce = try Nonce(rawRepresentation: data.prefix(SecretBox.nonceByteCount))
            self.ciphertext = Data(data.dropFirst(SecretBox.nonceByteCount))
        }

        init(uncheckedNonce nonce: Nonce, ciphertext: Data) {
            self.nonce = nonce
            self.ciphertext = ciphertext
        }

        /// `nonce || ciphertext`.
        public var combined: Data { nonce.rawRepresentation + ciphertext }
        /// The 16-byte Poly1305 tag (detached form).
        public var tag: Data { ciphertext.prefix(SecretBox.tagByteCount) }
        /// The encrypted message without its tag (detached form).
        public var encryptedMessage: Data { ciphertext.dropFirst(SecretBox.tagByteCount) }
    }

    /// Seals `message` with `key` (`crypto_secretbox_easy`).
    /// - Parameters:
    ///   - message: The plaintext.
    ///   - key: The secret key.
    ///   - nonce: A fresh random nonce unless you pass one.
    /// - Returns: The sealed box.
    /// - Warning: An explicit nonce must never be reused with the same key.
    @inlinable
    public static func seal(_ message: some DataProtocol, using key: Key, nonce: Nonce = Nonce()) -> SealedBox {
        unsafe withBytes(message) { m in unsafe seal(bytes: m, using: key, nonce: nonce) }
    }

    /// The non-generic body of ``seal(_:using:nonce:)``.
    @usableFromInline @unsafe
    static func seal(bytes m: UnsafeRawBufferPointer, using key: Key, nonce: Nonce) -> SealedBox {
        let out = unsafe uninitializedData(count: m.count + tagByteCount) { c in
            unsafe seal(m, into: c, nonce: nonce.rawRepresentation, key: key.storage)
        }
        return SealedBox(uncheckedNonce: nonce, ciphertext: out)
    }

    /// Seals key material held in wiped storage (for wrapping data keys).
    public static func seal(_ secret: SecureBytes, using key: Key, nonce: Nonce = Nonce()) -> SealedBox {
        unsafe secret.withUnsafeBytes { m in unsafe seal(bytes: m, using: key, nonce: nonce) }
    }

    /// Low-level seal into caller-provided memory: `c` must hold `m.count + 16` bytes and `nonce` 24 bytes.
    @unsafe
    static func seal(_ m: UnsafeRawBufferPointer, into c: UnsafeMutableRawBufferPointer, nonce: Data, key: SecureBytes)
    {
        Sodium.ensure()
        unsafe nonce.withUnsafeBytes { n in
            unsafe key.withUnsafeBytes { k in
                _ = unsafe crypto_secretbox_easy(c.u8, m.u8, UInt64(m.count), n.u8, k.u8)
            }
        }
    }

    /// Opens a sealed box (`crypto_secretbox_open_easy`).
    /// - Returns: The plaintext.
    /// - Throws: ``E3DBError/Code/authenticationFailed`` for a wrong key, wrong nonce or tampered bytes.
    public static func open(_ box: SealedBox, using key: Key) throws(E3DBError) -> Data {
        var status: Int32 = 0
        // libsodium verifies the tag before it writes plaintext; on failure the buffer is freed unread.
        let out = unsafe uninitializedData(count: box.ciphertext.count - tagByteCount) { m in
            status = unsafe open(box, into: m, key: key.storage)
        }
        guard status == 0 else { throw E3DBError(.authenticationFailed, "secretbox authentication failed") }
        return out
    }

    /// Opens a sealed box whose plaintext is key material, straight into wiped storage.
    /// - Throws: ``E3DBError/Code/authenticationFailed``.
    public static func openSecret(_ box: SealedBox, using key: Key) throws(E3DBError) -> SecureBytes {
        unsafe try SecureBytes(count: box.ciphertext.count - tagByteCount) {
            (m: UnsafeMutableRawBufferPointer) throws(E3DBError) in
            guard unsafe open(box, into: m, key: key.storage) == 0 else {
                throw E3DBError(.authenticationFailed, "secretbox authentication failed")
            }
        }
    }

    /// Opens the detached form (`crypto_secretbox_open_detached`).
    /// - Throws: ``E3DBError/Code/invalidLength`` for a tag that is not 16 bytes,
    ///   ``E3DBError/Code/authenticationFailed`` when it does not verify.
    public static func openDetached(
        _ encryptedMessage: some DataProtocol,
        tag: some DataProtocol,
        nonce: Nonce,
        using key: Key
    ) throws(E3DBError) -> Data {
        guard tag.count == tagByteCount else {
            throw E3DBError.length(.invalidLength, "secretbox tag", expected: tagByteCount, actual: tag.count)
        }
        Sodium.ensure()
        var out = Data(count: encryptedMessage.count)
        let status: Int32 = unsafe withBytes(encryptedMessage) { c in
            unsafe withBytes(tag) { t in
                unsafe out.withUnsafeMutableBytes { m in
                    unsafe nonce.rawRepresentation.withUnsafeBytes { n in
                        unsafe key.storage.withUnsafeBytes { k in
                            unsafe crypto_secretbox_open_detached(m.u8, c.u8, t.u8, UInt64(c.count), n.u8, k.u8)
                        }
                    }
                }
            }
        }
        guard status == 0 else { throw E3DBError(.authenticationFailed, "secretbox authentication failed") }
        return out
    }

    /// `crypto_secretbox_open_easy` into `m`; libsodium verifies the tag before writing plaintext.
    @unsafe
    static func open(_ box: SealedBox, into m: UnsafeMutableRawBufferPointer, key: SecureBytes) -> Int32 {
        Sodium.ensure()
        return unsafe box.ciphertext.withUnsafeBytes { c in
            unsafe box.nonce.rawRepresentation.withUnsafeBytes { n in
                unsafe key.withUnsafeBytes { k in
                    unsafe crypto_secretbox_open_easy(m.u8, c.u8, UInt64(c.count), n.u8, k.u8)
                }
            }
        }
    }
}
