internal import CE3DBSodium

// Safety: the guards check what libsodium relies on before any call: a 24-byte nonce, a ciphertext of at least the
// 16-byte tag, and output room for `message.count + 16` (seal) or `ciphertext.count - 16` (open) bytes; the key is 32
// bytes by its type. The caller's buffers are lent for the call only.
extension SecretBox {
    /// Seals `message` into caller-provided memory (`crypto_secretbox_easy`), for allocation-free pipelines.
    /// - Parameters:
    ///   - message: The plaintext.
    ///   - nonce: 24 nonce bytes.
    ///   - key: The secret key.
    ///   - output: At least `message.count + 16` bytes; receives tag then encrypted message.
    /// - Returns: The number of bytes written (`message.count + 16`).
    /// - Throws: ``E3DBError/Code/invalidNonceLength`` or ``E3DBError/Code/invalidLength`` (output too small).
    /// - Warning: Never reuse a nonce with the same key.
    package static func seal(
        _ message: UnsafeRawBufferPointer,
        nonce: UnsafeRawBufferPointer,
        using key: Key,
        into output: UnsafeMutableRawBufferPointer
    ) throws(E3DBError) -> Int {
        guard nonce.count == nonceByteCount else {
            throw E3DBError.length(
                .invalidNonceLength, "secretbox nonce", expected: nonceByteCount, actual: nonce.count)
        }
        let needed = message.count + tagByteCount
        guard output.count >= needed else {
            throw E3DBError.length(
                .invalidLength, "secretbox output buffer (at least)", expected: needed, actual: output.count)
        }
        Sodium.ensure()
        unsafe key.storage.withUnsafeBytes { k in
            _ = unsafe crypto_secretbox_easy(output.u8, message.u8, UInt64(message.count), nonce.u8, k.u8)
        }
        return needed
    }

    /// Opens tag‖ciphertext into caller-provided memory (`crypto_secretbox_open_easy`), for allocation-free
    /// pipelines. Nothing is written to `output` unless the tag verifies.
    /// - Parameters:
    ///   - ciphertext: Tag followed by the encrypted message (at least 16 bytes).
    ///   - nonce: 24 nonce bytes.
    ///   - key: The secret key.
    ///   - output: At least `ciphertext.count - 16` bytes.
    /// - Returns: The plaintext length (`ciphertext.count - 16`).
    /// - Throws: ``E3DBError/Code/invalidNonceLength``, ``E3DBError/Code/invalidLength`` (ciphertext shorter than
    ///   the tag, or output too small), ``E3DBError/Code/authenticationFailed``.
    package static func open(
        _ ciphertext: UnsafeRawBufferPointer,
        nonce: UnsafeRawBufferPointer,
        using key: Key,
        into output: UnsafeMutableRawBufferPointer
    ) throws(E3DBError) -> Int {
        guard nonce.count == nonceByteCount else {
            throw E3DBError.length(
                .invalidNonceLength, "secretbox nonce", expected: nonceByteCount, actual: nonce.count)
        }
        guard ciphertext.count >= tagByteCount else {
            throw E3DBError(
                .invalidLength, "secretbox ciphertext is shorter than its 16-byte tag",
                context: .init(part: "ciphertext", expected: tagByteCount, actual: ciphertext.count))
        }
        let count = ciphertext.count - tagByteCount
        guard output.count >= count else {
            throw E3DBError.length(
                .invalidLength, "secretbox output buffer (at least)", expected: count, actual: output.count)
        }
        Sodium.ensure()
        let status = unsafe key.storage.withUnsafeBytes { k in
            unsafe crypto_secretbox_open_easy(output.u8, ciphertext.u8, UInt64(ciphertext.count), nonce.u8, k.u8)
        }
        guard status == 0 else { throw E3DBError(.authenticationFailed, "secretbox authentication failed") }
        return count
    }

    /// Opens a sealed secret key (for example a wrapped data key) straight into wiped storage.
    /// - Parameters:
    ///   - ciphertext: Tag followed by the encrypted key.
    ///   - nonce: 24 nonce bytes.
    ///   - key: The wrapping key.
    /// - Returns: The unwrapped bytes in ``SecureBytes``.
    /// - Throws: As ``open(_:nonce:using:into:)``.
    package static func openSecret(
        _ ciphertext: UnsafeRawBufferPointer,
        nonce: UnsafeRawBufferPointer,
        using key: Key
    ) throws(E3DBError) -> SecureBytes {
        let count = max(ciphertext.count - tagByteCount, 0)
        return unsafe try SecureBytes(count: count) { (out: UnsafeMutableRawBufferPointer) throws(E3DBError) in
            _ = try unsafe open(ciphertext, nonce: nonce, using: key, into: out)
        }
    }
}
