internal import CE3DBSodium

/// Raw IETF ChaCha20 (RFC 8439's block function: 32-byte key, 12-byte nonce, 32-bit block counter) and one-time
/// Poly1305, as separate primitives: the building blocks of page formats that are not the RFC 8439 AEAD (SQLite3
/// Multiple Ciphers' `chacha20` pages). Pointer APIs for allocation-free page codecs; nothing here is an AEAD on its
/// own.
package enum RawChaCha20 {
    /// 32: key size.
    package static let keyByteCount = 32
    /// 12: IETF nonce size.
    package static let nonceByteCount = 12
    /// 64: one block of key stream.
    package static let blockByteCount = 64

    /// XORs `input` with the key stream that starts at block `counter` into `output` (same size; they may be the
    /// same memory). The 32-bit block counter wraps from 2³² − 1 to 0, as RFC 8439's counter does in sqleet and
    /// BoringSSL.
    ///
    /// libsodium 1.0.18 aborts the process when one call would wrap the counter, so a stream that crosses the wrap
    /// is two calls: the blocks up to 2³² − 1, then the rest from block 0.
    package static func xor(
        _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, nonce: UnsafeRawBufferPointer,
        counter: UInt32, key: UnsafeRawBufferPointer
    ) {
        precondition(
            input.count == output.count && nonce.count == nonceByteCount && key.count == keyByteCount,
            "RawChaCha20: buffer sizes")
        Sodium.ensure()
        guard input.count > 0 else { return }
        let blocks = UInt64((input.count + blockByteCount - 1) / blockByteCount)
        let beforeWrap = (UInt64(1) << 32) - UInt64(counter)
        // Safety: `first` is at most `input.count` bytes, and the second call covers the remaining bytes of the
        // same buffers; libsodium allows input and output to be the same memory.
        let first = blocks <= beforeWrap ? input.count : Int(beforeWrap) * blockByteCount
        _ = unsafe crypto_stream_chacha20_ietf_xor_ic(
            output.u8, input.u8, UInt64(first), nonce.u8, counter, key.u8)
        if first < input.count {
            _ = unsafe crypto_stream_chacha20_ietf_xor_ic(
                output.u8 + first, input.u8 + first, UInt64(input.count - first), nonce.u8, 0, key.u8)
        }
    }
}

/// One-time Poly1305 (`crypto_onetimeauth_poly1305`): a 16-byte tag of a message under a 32-byte key that is never
/// used for another message.
package enum Poly1305 {
    /// 32: one-time key size.
    package static let keyByteCount = 32
    /// 16: tag size.
    package static let tagByteCount = 16

    /// Writes the tag of `message` under `key` into `tag` (16 bytes).
    package static func authenticate(
        _ message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, into tag: UnsafeMutableRawBufferPointer
    ) {
        precondition(key.count == keyByteCount && tag.count == tagByteCount, "Poly1305: buffer sizes")
        Sodium.ensure()
        // Safety: the precondition checks the 32 key bytes libsodium reads and the 16 tag bytes it writes; `message` is
        // read for its own count. All are lent for the call.
        _ = unsafe crypto_onetimeauth_poly1305(tag.u8, message.u8, UInt64(message.count), key.u8)
    }

    /// Whether `tag` is the tag of `message` under `key`, compared in constant time.
    package static func verify(
        _ tag: UnsafeRawBufferPointer, of message: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer
    ) -> Bool {
        precondition(key.count == keyByteCount && tag.count == tagByteCount, "Poly1305: buffer sizes")
        Sodium.ensure()
        // Safety: the precondition checks the 32 key bytes and 16 tag bytes libsodium reads; `message` is read for its
        // own count.
        return unsafe crypto_onetimeauth_poly1305_verify(tag.u8, message.u8, UInt64(message.count), key.u8) == 0
    }
}
