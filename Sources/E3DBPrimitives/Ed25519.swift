internal import CE3DBSodium

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

// Safety: the key types carry their sizes (private keys 64 bytes of `SecureBytes`, seeds 32, public keys 32, all
// checked by their initialisers), signatures are written into exactly 64 bytes and verified only after a 64-byte check,
// and the 32-byte seed copies read `0..<32` of a 64-byte key. Every pointer is lent for its closure only; `pk` arrays
// are local and exactly 32 bytes.
/// Ed25519 signatures (RFC 8032) through libsodium `crypto_sign`.
///
/// Signatures are deterministic: the same key and message always give the same 64 bytes, so E3DB known-answer
/// signatures can be compared byte for byte. (Apple CryptoKit's Ed25519 randomizes its signatures; they still
/// verify here.)
public enum Ed25519: Sendable {
    /// 32: public key size.
    public static let publicKeyByteCount = 32
    /// 64: libsodium secret key size (`seed || public key`).
    public static let privateKeyByteCount = 64
    /// 32: seed size.
    public static let seedByteCount = 32
    /// 64: signature size.
    public static let signatureByteCount = 64

    /// A signing key: libsodium's 64-byte secret key `seed || public key`, in wiped memory.
    public struct PrivateKey: Sendable, RedactedSecret {
        static let redactedName = "Ed25519.PrivateKey"
        let storage: SecureBytes
        /// The matching verification key.
        public let publicKey: PublicKey

        /// A random signing key (`crypto_sign_keypair`).
        public init() {
            let seed = SecureBytes(randomCount: Ed25519.seedByteCount)
            self = PrivateKey(validSeed: seed)
        }

        /// Derives the key pair from a 32-byte seed (`crypto_sign_seed_keypair`).
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when the seed is not 32 bytes.
        public init(seed: SecureBytes) throws(E3DBError) {
            guard seed.count == Ed25519.seedByteCount else {
                throw E3DBError.length(
                    .invalidKeyLength, "ed25519 seed", expected: Ed25519.seedByteCount, actual: seed.count)
            }
            self = PrivateKey(validSeed: seed)
        }

        private init(validSeed seed: SecureBytes) {
            Sodium.ensure()
            var pk = [UInt8](repeating: 0, count: Ed25519.publicKeyByteCount)
            self.storage = unsafe SecureBytes(count: Ed25519.privateKeyByteCount) { sk in
                unsafe seed.withUnsafeBytes { s in _ = unsafe crypto_sign_seed_keypair(&pk, sk.u8, s.u8) }
            }
            self.publicKey = PublicKey(trusted: Data(pk))
        }

        /// Loads a 64-byte libsodium secret key (`seed || public key`).
        ///
        /// The public half must be the one the seed derives: a key whose halves disagree signs differently in
        /// different SDKs (libsodium and Go use the stored half, PyNaCl recomputes it), so it is rejected.
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when not 64 bytes, ``E3DBError/Code/inconsistentKey``
        ///   when the halves disagree.
        public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
            try self.init(SecureBytes(copying: rawRepresentation))
        }

        /// Loads a 64-byte libsodium secret key (`seed || public key`) from wiped storage.
        ///
        /// The public half must be the one the seed derives (see ``init(rawRepresentation:)``).
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when not 64 bytes, ``E3DBError/Code/inconsistentKey``
        ///   when the halves disagree.
        public init(_ sk: SecureBytes) throws(E3DBError) {
            guard sk.count == Ed25519.privateKeyByteCount else {
                throw E3DBError.length(
                    .invalidKeyLength, "ed25519 private key", expected: Ed25519.privateKeyByteCount, actual: sk.count)
            }
            let seed = unsafe SecureBytes(count: Ed25519.seedByteCount) { s in
                unsafe sk.withUnsafeBytes { unsafe s.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<32])) }
            }
            let derived = PrivateKey(validSeed: seed)
            guard derived.storage.constantTimeEquals(sk) else {
                throw E3DBError(.inconsistentKey, "the public half of the Ed25519 secret key does not match its seed")
            }
            self = derived
        }

        /// Loads a 64-byte secret key from unpadded base64url (86 characters).
        /// - Throws: ``E3DBError/Code/invalidBase64``, ``E3DBError/Code/invalidKeyLength`` or
        ///   ``E3DBError/Code/inconsistentKey``.
        public init(base64URLEncoded text: some StringProtocol) throws(E3DBError) {
            try self.init(Base64URL.decodeSecret(text))
        }

        /// The 64-byte secret key as unpadded base64url.
        /// - Warning: The returned `String` is ordinary memory and cannot be wiped.
        public var base64URLEncoded: String { unsafe storage.withUnsafeBytes { unsafe Base64URL.encode($0) } }

        /// The 32-byte seed, in wiped storage.
        public var seed: SecureBytes {
            unsafe SecureBytes(count: Ed25519.seedByteCount) { s in
                unsafe storage.withUnsafeBytes {
                    unsafe s.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<32]))
                }
            }
        }

        /// Calls `body` with the 64 secret-key bytes.
        public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
            try unsafe storage.withUnsafeBytes(body)
        }

        /// Signs `message` (`crypto_sign_detached`).
        /// - Returns: The 64-byte signature.
        @inlinable
        public func signature(for message: some DataProtocol) -> Data {
            unsafe withBytes(message) { m in unsafe signature(bytes: m) }
        }

        /// The non-generic body of ``signature(for:)``.
        @usableFromInline @unsafe
        func signature(bytes m: UnsafeRawBufferPointer) -> Data {
            Sodium.ensure()
            return unsafe uninitializedData(count: Ed25519.signatureByteCount) { s in
                unsafe storage.withUnsafeBytes { sk in
                    _ = unsafe crypto_sign_detached(s.u8, nil, m.u8, UInt64(m.count), sk.u8)
                }
            }
        }
    }

    /// An Ed25519 verification key.
    public struct PublicKey: Sendable, Hashable, CustomStringConvertible {
        /// The 32 key bytes.
        public let rawRepresentation: Data

        init(trusted: Data) { self.rawRepresentation = trusted }

        /// Wraps 32 public key bytes.
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when not 32 bytes.
        public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
            self.rawRepresentation = try FixedBytes.data(
                rawRepresentation, count: Ed25519.publicKeyByteCount, code: .invalidKeyLength,
                what: "ed25519 public key")
        }

        /// Decodes an unpadded base64url public key.
        /// - Throws: ``E3DBError/Code/invalidBase64`` or ``E3DBError/Code/invalidKeyLength``.
        public init(base64URLEncoded text: some StringProtocol) throws(E3DBError) {
            try self.init(rawRepresentation: Base64URL.decode(text))
        }

        /// The key as unpadded base64url (43 characters).
        public var base64URLEncoded: String { Base64URL.encode(rawRepresentation) }
        public var description: String { "Ed25519.PublicKey(\(base64URLEncoded))" }

        /// Whether `signature` is a valid signature of `message` by this key (`crypto_sign_verify_detached`).
        /// A signature that is not exactly 64 bytes is invalid.
        @inlinable
        public func isValidSignature(_ signature: some DataProtocol, for message: some DataProtocol) -> Bool {
            guard signature.count == Ed25519.signatureByteCount else { return false }
            return unsafe withBytes(signature) { s in
                unsafe withBytes(message) { m in unsafe isValidSignature(bytes: s, message: m) }
            }
        }

        /// The non-generic body of ``isValidSignature(_:for:)``; `s` is 64 bytes.
        @usableFromInline @unsafe
        func isValidSignature(bytes s: UnsafeRawBufferPointer, message m: UnsafeRawBufferPointer) -> Bool {
            Sodium.ensure()
            return unsafe rawRepresentation.withUnsafeBytes { pk in
                unsafe crypto_sign_verify_detached(s.u8, m.u8, UInt64(m.count), pk.u8)
            } == 0
        }
    }
}
