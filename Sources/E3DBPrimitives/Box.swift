internal import CE3DBSodium

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

// Safety: as for `SecretBox`: keys are 32 bytes (private keys in `SecureBytes`, checked by every initialiser; public
// keys and nonces checked by `FixedBytes`), a `SealedBox`'s ciphertext holds at least the 16-byte tag, and output
// buffers are sized here (`m.count + 16` to seal, `c.count - 16` to open, 32 for a shared key or scalar product). Every
// pointer is lent for its closure only; `pk` arrays are local and exactly 32 bytes.
/// Public-key authenticated encryption: libsodium `crypto_box` (X25519, HSalsa20, XSalsa20-Poly1305).
///
/// E3DB wraps access keys with it (`box(AK, nonce, reader_pk, authorizer_sk)`).
/// ```swift
/// let alice = Box.PrivateKey(), bob = Box.PrivateKey()
/// let sealed = try Box.seal(message, to: bob.publicKey, from: alice)
/// let opened = try Box.open(sealed, from: alice.publicKey, to: bob)
/// ```
public enum Box: Sendable {
    /// 32: X25519 public and secret key size.
    public static let keyByteCount = 32
    /// 32: the seed size for ``PrivateKey/init(seed:)``.
    public static let seedByteCount = 32
    /// 24: XSalsa20 nonce size.
    public static let nonceByteCount = 24
    /// 16: Poly1305 tag size.
    public static let tagByteCount = 16

    /// An X25519 secret key, stored unclamped as libsodium stores it, in wiped memory.
    public struct PrivateKey: Sendable, RedactedSecret {
        static let redactedName = "Box.PrivateKey"
        let storage: SecureBytes
        /// The matching public key.
        public let publicKey: PublicKey

        /// Generates a random key pair (`crypto_box_keypair`).
        public init() {
            Sodium.ensure()
            var pk = [UInt8](repeating: 0, count: Box.keyByteCount)
            let sk = unsafe SecureBytes(count: Box.keyByteCount) { buffer in
                _ = unsafe crypto_box_keypair(&pk, buffer.u8)
            }
            self.storage = sk
            self.publicKey = PublicKey(trusted: Data(pk))
        }

        /// Derives a key pair from a 32-byte seed (`crypto_box_seed_keypair`: the secret key is the first
        /// 32 bytes of SHA-512(seed)). E3DB identity derivation uses this.
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when the seed is not 32 bytes.
        public init(seed: SecureBytes) throws(E3DBError) {
            guard seed.count == Box.seedByteCount else {
                throw E3DBError.length(.invalidKeyLength, "box seed", expected: Box.seedByteCount, actual: seed.count)
            }
            Sodium.ensure()
            var pk = [UInt8](repeating: 0, count: Box.keyByteCount)
            let sk = unsafe SecureBytes(count: Box.keyByteCount) { buffer in
                unsafe seed.withUnsafeBytes { s in
                    _ = unsafe crypto_box_seed_keypair(
                        &pk,
                        buffer.u8,
                        s.u8
                    )
                }
            }
            self.storage = sk
            self.publicKey = PublicKey(trusted: Data(pk))
        }

        /// Loads a 32-byte secret key and computes its public key.
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when `rawRepresentation` is not 32 bytes.
        public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
            let sk = try FixedBytes.secret(
                rawRepresentation, count: Box.keyByteCount, code: .invalidKeyLength, what: "box private key")
            self.storage = sk
            self.publicKey = PublicKey(trusted: PrivateKey.publicKey(of: sk))
        }

        /// Takes 32 secret key bytes from wiped storage (no copy) and computes the public key.
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when `bytes` is not 32 bytes.
        public init(_ bytes: SecureBytes) throws(E3DBError) {
            guard bytes.count == Box.keyByteCount else {
                throw E3DBError.length(
                    .invalidKeyLength, "box private key", expected: Box.keyByteCount, actual: bytes.count)
            }
            self.storage = bytes
            self.publicKey = PublicKey(trusted: PrivateKey.publicKey(of: bytes))
        }

        /// Loads a secret key from unpadded base64url (the form every E3DB SDK stores).
        /// - Throws: ``E3DBError/Code/invalidBase64`` or ``E3DBError/Code/invalidKeyLength``.
        public init(base64URLEncoded text: some StringProtocol) throws(E3DBError) {
            try self.init(Base64URL.decodeSecret(text))
        }

        /// The secret key as unpadded base64url, for writing E3DB client configurations.
        /// - Warning: The returned `String` is ordinary memory and cannot be wiped.
        public var base64URLEncoded: String { unsafe storage.withUnsafeBytes { unsafe Base64URL.encode($0) } }

        /// Calls `body` with the 32 secret bytes.
        public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
            try unsafe storage.withUnsafeBytes(body)
        }

        static func publicKey(of sk: SecureBytes) -> Data {
            Sodium.ensure()
            var pk = [UInt8](repeating: 0, count: Box.keyByteCount)
            unsafe sk.withUnsafeBytes { s in
                _ = unsafe crypto_scalarmult_base(&pk, s.u8)
            }
            return Data(pk)
        }
    }

    /// An X25519 public key.
    public struct PublicKey: Sendable, Hashable, CustomStringConvertible {
        /// The 32 key bytes.
        public let rawRepresentation: Data

        init(trusted bytes: Data) { self.rawRepresentation = bytes }

        /// Wraps 32 public key bytes.
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when not 32 bytes.
        public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
            self.rawRepresentation = try FixedBytes.data(
                rawRepresentation, count: Box.keyByteCount, code: .invalidKeyLength, what: "box public key")
        }

        /// Decodes an unpadded base64url public key.
        /// - Throws: ``E3DBError/Code/invalidBase64`` or ``E3DBError/Code/invalidKeyLength``.
        public init(base64URLEncoded text: some StringProtocol) throws(E3DBError) {
            try self.init(rawRepresentation: Base64URL.decode(text))
        }

        /// The key as unpadded base64url (43 characters).
        public var base64URLEncoded: String { Base64URL.encode(rawRepresentation) }
        public var description: String { "Box.PublicKey(\(base64URLEncoded))" }
    }

    /// A 24-byte nonce. `Nonce()` is random, which is the safe default for XSalsa20.
    public struct Nonce: Sendable, Hashable {
        /// The 24 nonce bytes.
        public let rawRepresentation: Data

        /// A random nonce.
        public init() { self.rawRepresentation = SecureRandom.bytes(count: Box.nonceByteCount) }

        /// Wraps 24 nonce bytes.
        /// - Throws: ``E3DBError/Code/invalidNonceLength`` when not 24 bytes.
        /// - Warning: Never seal two messages with the same nonce and key pair.
        public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
            self.rawRepresentation = try FixedBytes.data(
                rawRepresentation, count: Box.nonceByteCount, code: .invalidNonceLength, what: "box nonce")
        }
    }

    /// A sealed message: its nonce and the libsodium "easy" ciphertext (16-byte tag, then the encrypted bytes).
    public struct SealedBox: Sendable, Hashable {
        /// The nonce the message was sealed with.
        public let nonce: Nonce
        /// Tag followed by the encrypted message (`message.count + 16` bytes).
        public let ciphertext: Data

        /// Assembles a sealed box from its parts.
        /// - Throws: ``E3DBError/Code/invalidLength`` when `ciphertext` is shorter than the 16-byte tag.
        public init(nonce: Nonce, ciphertext: some Sequence<UInt8>) throws(E3DBError) {
            let data = Data(ciphertext)
            guard data.count >= Box.tagByteCount else {
                throw E3DBError(
                    .invalidLength, "box ciphertext is shorter than its 16-byte tag",
                    context: .init(part: "ciphertext", expected: Box.tagByteCount, actual: data.count))
            }
            self.nonce = nonce
            self.ciphertext = data
        }

        /// Parses `nonce || ciphertext`.
        /// - Throws: ``E3DBError/Code/invalidLength`` when shorter than 40 bytes.
        public init(combined: some Sequence<UInt8>) throws(E3DBError) {
            let data = Data(combined)
            guard data.count >= Box.nonceByteCount + Box.tagByteCount else {
                throw E3DBError(
                    .invalidLength, "combined box is shorter than nonce and tag",
                    context: .init(expected: Box.nonceByteCount + Box.tagByteCount, actual: data.count))
            }
            try self.init(
                nonce: Nonce(rawRepresentation: data.prefix(Box.nonceByteCount)),
                ciphertext: data.dropFirst(Box.nonceByteCount))
        }

        /// `nonce || ciphertext`.
        public var combined: Data { nonce.rawRepresentation + ciphertext }
    }

    /// A precomputed shared key (`crypto_box_beforenm`) for many messages between the same two parties.
    public struct SharedKey: Sendable, RedactedSecret {
        static let redactedName = "Box.SharedKey"
        let storage: SecureBytes

        /// Computes the key shared by `recipient` (public) and `sender` (private); symmetric in the two roles.
        /// - Throws: ``E3DBError/Code/weakPublicKey`` when the public key is a low-order point.
        public init(recipient: PublicKey, sender: PrivateKey) throws(E3DBError) {
            Sodium.ensure()
            var status: Int32 = 0
            self.storage = unsafe SecureBytes(count: 32) { k in
                unsafe sender.storage.withUnsafeBytes { sk in
                    unsafe recipient.rawRepresentation.withUnsafeBytes { pk in
                        status = unsafe crypto_box_beforenm(
                            k.u8,
                            pk.u8,
                            sk.u8)
                    }
                }
            }
            guard status == 0 else {
                throw E3DBError(.weakPublicKey, "the public key is a low-order point")
            }
        }
    }

    /// Seals `message` for `recipient`, authenticated as `sender` (`crypto_box_easy`).
    /// - Parameters:
    ///   - message: The plaintext.
    ///   - recipient: The reader's public key.
    ///   - sender: The writer's private key.
    ///   - nonce: A fresh random nonce unless you pass one.
    /// - Returns: The sealed box (nonce and tag‖ciphertext).
    /// - Throws: ``E3DBError/Code/weakPublicKey`` when the recipient key is a low-order point.
    /// - Warning: An explicit nonce must never be reused with the same key pair.
    @inlinable
    public static func seal(
        _ message: some DataProtocol,
        to recipient: PublicKey,
        from sender: PrivateKey,
        nonce: Nonce = Nonce()
    ) throws(E3DBError) -> SealedBox {
        let result: Result<SealedBox, E3DBError> = unsafe withBytes(message) { m in
            Result { () throws(E3DBError) in try unsafe seal(bytes: m, to: recipient, from: sender, nonce: nonce) }
        }
        return try result.get()
    }

    /// The non-generic body of ``seal(_:to:from:nonce:)``.
    @usableFromInline @unsafe
    static func seal(
        bytes m: UnsafeRawBufferPointer,
        to recipient: PublicKey,
        from sender: PrivateKey,
        nonce: Nonce
    ) throws(E3DBError) -> SealedBox {
        Sodium.ensure()
        var status: Int32 = 0
        let out = unsafe uninitializedData(count: m.count + tagByteCount) { c in
            status = unsafe nonce.rawRepresentation.withUnsafeBytes { n in
                unsafe recipient.rawRepresentation.withUnsafeBytes { pk in
                    unsafe sender.storage.withUnsafeBytes { sk in
                        unsafe crypto_box_easy(c.u8, m.u8, UInt64(m.count), n.u8, pk.u8, sk.u8)
                    }
                }
            }
        }
        guard status == 0 else { throw E3DBError(.weakPublicKey, "the recipient key is a low-order point") }
        return SealedBox(uncheckedNonce: nonce, ciphertext: out)
    }

    /// Opens a box sealed by `sender` for `recipient` (`crypto_box_open_easy`).
    /// - Returns: The plaintext.
    /// - Throws: ``E3DBError/Code/authenticationFailed`` for a wrong key, wrong nonce or tampered bytes.
    public static func open(_ box: SealedBox, from sender: PublicKey, to recipient: PrivateKey) throws(E3DBError)
        -> Data
    {
        var status: Int32 = 0
        // libsodium verifies the tag before it writes plaintext; on failure the buffer is freed unread.
        let out = unsafe uninitializedData(count: box.ciphertext.count - tagByteCount) { m in
            status = unsafe open(box, from: sender, to: recipient, into: m)
        }
        guard status == 0 else { throw E3DBError(.authenticationFailed, "box authentication failed") }
        return out
    }

    /// Opens a box whose plaintext is key material, straight into wiped storage.
    /// - Throws: ``E3DBError/Code/authenticationFailed``.
    public static func openSecret(
        _ box: SealedBox,
        from sender: PublicKey,
        to recipient: PrivateKey
    ) throws(E3DBError) -> SecureBytes {
        unsafe try SecureBytes(count: box.ciphertext.count - tagByteCount) {
            (m: UnsafeMutableRawBufferPointer) throws(E3DBError) in
            guard unsafe open(box, from: sender, to: recipient, into: m) == 0 else {
                throw E3DBError(.authenticationFailed, "box authentication failed")
            }
        }
    }

    /// `crypto_box_open_easy` into `m`. libsodium verifies the tag before it writes any plaintext.
    @unsafe
    private static func open(
        _ box: SealedBox,
        from sender: PublicKey,
        to recipient: PrivateKey,
        into m: UnsafeMutableRawBufferPointer
    ) -> Int32 {
        Sodium.ensure()
        return unsafe box.ciphertext.withUnsafeBytes { c in
            unsafe box.nonce.rawRepresentation.withUnsafeBytes { n in
                unsafe sender.rawRepresentation.withUnsafeBytes { pk in
                    unsafe recipient.storage.withUnsafeBytes { sk in
                        unsafe crypto_box_open_easy(
                            m.u8, c.u8, UInt64(c.count), n.u8, pk.u8, sk.u8)
                    }
                }
            }
        }
    }
}

// Safety: as the note on `Box`: 32-byte shared keys (their type checks), outputs sized here (`message.count + 16`,
// `ciphertext.count - 16`, 32 for a scalar product), pointers lent for their closures only.
extension Box {
    /// Seals `message` with a precomputed shared key (`crypto_box_easy_afternm`).
    /// - Warning: An explicit nonce must never be reused with the same shared key.
    public static func seal(_ message: some DataProtocol, using key: SharedKey, nonce: Nonce = Nonce()) -> SealedBox {
        Sodium.ensure()
        var out = Data(count: message.count + tagByteCount)
        unsafe withBytes(message) { m in
            unsafe out.withUnsafeMutableBytes { c in
                unsafe nonce.rawRepresentation.withUnsafeBytes { n in
                    unsafe key.storage.withUnsafeBytes { k in
                        _ = unsafe crypto_box_easy_afternm(c.u8, m.u8, UInt64(m.count), n.u8, k.u8)
                    }
                }
            }
        }
        return SealedBox(uncheckedNonce: nonce, ciphertext: out)
    }

    /// Opens a box with a precomputed shared key (`crypto_box_open_easy_afternm`).
    /// - Throws: ``E3DBError/Code/authenticationFailed``.
    public static func open(_ box: SealedBox, using key: SharedKey) throws(E3DBError) -> Data {
        Sodium.ensure()
        var out = Data(count: box.ciphertext.count - tagByteCount)
        let status: Int32 = unsafe out.withUnsafeMutableBytes { m in
            unsafe box.ciphertext.withUnsafeBytes { c in
                unsafe box.nonce.rawRepresentation.withUnsafeBytes { n in
                    unsafe key.storage.withUnsafeBytes { k in
                        unsafe crypto_box_open_easy_afternm(m.u8, c.u8, UInt64(c.count), n.u8, k.u8)
                    }
                }
            }
        }
        guard status == 0 else { throw E3DBError(.authenticationFailed, "box authentication failed") }
        return out
    }
}

// Safety: as the note on `Box`: a 32-byte private key, a 32-byte public key (their types check) and a 32-byte output,
// each lent for its closure only.
extension Box.PrivateKey {
    /// Raw X25519 (`crypto_scalarmult`): the 32-byte shared point, before HSalsa20.
    ///
    /// E3DB formats never use it directly; it is here for interoperability tests (RFC 7748, Wycheproof).
    /// Prefer ``Box/SharedKey``.
    /// - Throws: ``E3DBError/Code/weakPublicKey`` when the result is all zeros (a low-order public key).
    public func rawSharedSecret(with publicKey: Box.PublicKey) throws(E3DBError) -> SecureBytes {
        Sodium.ensure()
        var status: Int32 = 0
        let out = unsafe SecureBytes(count: 32) { q in
            unsafe storage.withUnsafeBytes { n in
                unsafe publicKey.rawRepresentation.withUnsafeBytes { p in
                    status = unsafe crypto_scalarmult(q.u8, n.u8, p.u8)
                }
            }
        }
        guard status == 0 else {
            throw E3DBError(.weakPublicKey, "the public key is a low-order point (all-zero shared secret)")
        }
        return out
    }
}

extension Box.SealedBox {
    init(uncheckedNonce nonce: Box.Nonce, ciphertext: Data) {
        self.nonce = nonce
        self.ciphertext = ciphertext
    }
}
