internal import CE3DBSodium

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// Positioning a secretstream decryptor without opening the chunks before it, and finding where a FINAL chunk
// ends inside a longer buffer. Both rest on how libsodium's crypto_secretstream_xchacha20poly1305 advances its
// state, using only public libsodium functions and the public state struct of its header
// (`k[32]`, `nonce[12]`, `_pad[8]`):
//
// * `init_pull` sets `k = HChaCha20(key, header[0..<16])` and `nonce = counter(4, LE) || inonce(8)` with
//   counter 1 and `inonce = header[16..<24]`.
// * Opening a chunk XORs the first 8 bytes of its 16-byte MAC (the chunk's last 16 bytes) into `inonce` and
//   increments the counter. Only tag REKEY (which FINAL includes) or a counter wrapping to 0 rekey.
//
// So after chunks 0..<i tagged MESSAGE, the state depends only on the key, the header and those chunks' MACs,
// which sit at known offsets. `SecretStream.positioningIsSupported` checks this against the linked libsodium
// once, so a libsodium that ever changed its state layout fails closed instead of producing wrong plaintext
// (it would fail authentication anyway: a wrong state never yields a valid MAC).

extension SecretStream {
    /// Bytes of a chunk's MAC.
    package static let macByteCount = 16

    /// True when the linked libsodium advances its secretstream state as ``Decryptor/skipMessageChunk(mac:)``
    /// and ``Decryptor/finalChunkLength(in:)`` assume. Checked once, with a random key.
    package static let positioningIsSupported: Bool = {
        Sodium.ensure()
        let layout = MemoryLayout<crypto_secretstream_xchacha20poly1305_state>.self
        guard layout.size == 52, layout.offset(of: \crypto_secretstream_xchacha20poly1305_state.nonce) == 32 else {
            return false
        }
        do {
            return try checkPositioning()
        } catch {
            return false
        }
    }()
}

extension SecretStream {
    // Safety: `mac` is a local 16-byte array and `extended` a local `Data`, each lent for its closure only.
    /// Seals three chunks with a random key, then positions a fresh decryptor on the last one from the MACs alone.
    static func checkPositioning() throws -> Bool {
        let key = Key()
        var encryptor = Encryptor(key: key)
        let header = encryptor.header
        let first = try encryptor.seal(Data("first".utf8))
        let second = try encryptor.seal(Data("2".utf8))
        let last = encryptor.finish(Data("last chunk".utf8))
        var decryptor = Decryptor(key: key, header: header)
        for chunk in [first, second] {
            let mac = [UInt8](chunk.suffix(SecretStream.macByteCount))
            try unsafe mac.withUnsafeBytes { (m: UnsafeRawBufferPointer) throws in
                try unsafe decryptor.skipMessageChunk(mac: m)
            }
        }
        let extended = last + Data("appended".utf8)
        let found = unsafe extended.withUnsafeBytes { unsafe decryptor.finalChunkLength(in: $0) }
        guard found == last.count else { return false }
        let opened = try decryptor.open(last)
        return opened.tag == .final && opened.message == Data("last chunk".utf8)
    }
}

extension SecretStream.Decryptor {
    // Safety: the state is the header's struct (`k[32]`, `nonce[12]`, `_pad[8]`, the layout compiled against and
    // checked once by `positioningIsSupported`), owned by this decryptor; `nonce` points at its 12 bytes at offset 32.
    // The loop writes `nonce[4..<12]` from `mac[0..<8]` (`mac.count == 16` is checked above), and the counter calls
    // touch `nonce[0..<4]`.
    /// Advances the state past one chunk tagged ``SecretStream/Tag/message`` without reading the chunk: exactly
    /// what opening it would do, given only its MAC (the chunk's last 16 bytes).
    ///
    /// Nothing is authenticated here. If the MAC is not the one the writer produced (or the chunk was not tagged
    /// MESSAGE), the state is wrong and the next chunk opened fails authentication.
    ///
    /// - Parameter mac: the chunk's last 16 bytes.
    /// - Throws: ``E3DBError/Code/streamFinished`` after the final chunk, ``E3DBError/Code/invalidLength`` when
    ///   `mac` is not 16 bytes.
    package mutating func skipMessageChunk(mac: UnsafeRawBufferPointer) throws(E3DBError) {
        guard !isFinished else {
            throw E3DBError(.streamFinished, "data after the final chunk", context: .init(chunkIndex: chunkIndex))
        }
        guard mac.count == SecretStream.macByteCount else {
            throw E3DBError.length(
                .invalidLength, "secretstream chunk MAC", expected: SecretStream.macByteCount, actual: mac.count)
        }
        let nonce = unsafe UnsafeMutableRawPointer(state.pointer).advanced(by: 32).assumingMemoryBound(to: UInt8.self)
        for i in 0..<8 {
            unsafe nonce[4 + i] ^= mac[i]
        }
        unsafe sodium_increment(nonce, 4)
        if unsafe sodium_is_zero(nonce, 4) == 1 {
            unsafe crypto_secretstream_xchacha20poly1305_rekey(state.pointer)
        }
        chunkIndex += 1
    }

    // Safety: `scratch` is the `WipedBuffer`'s own `scratchSize` bytes (zeroed, 64-byte aligned, lent for the closure),
    // cut into two Poly1305 states, a 64-byte block, 16 zero bytes, 16 length bytes and a 16-byte MAC, exactly
    // `scratchSize` in all. `key` and `nonce` are the first 32 and next 12 bytes of this decryptor's state struct.
    // `buffer.count > 17` is checked first, so `input[0]` is inside, and for `messageLength < buffer.count - 17` the 16
    // MAC bytes at `input + 1 + messageLength` end at most at `buffer.count - 1`.
    /// The length of the shortest proper prefix of `buffer` that is a whole chunk tagged ``SecretStream/Tag/final``
    /// under the current state (it authenticates), or nil when there is none. The state is not changed.
    ///
    /// Used after `buffer` failed to open as one chunk, to tell "a FINAL chunk followed by other bytes" apart from
    /// a damaged chunk. Linear in `buffer.count`: the encrypted tag byte is checked first, then the Poly1305 state
    /// is carried forward one byte at a time and finished for each candidate length.
    ///
    /// - Parameter buffer: the bytes from the start of a chunk.
    /// - Returns: the chunk length (17 up to `buffer.count - 1`), or nil.
    package func finalChunkLength(in buffer: UnsafeRawBufferPointer) -> Int? {
        guard !isFinished, buffer.count > SecretStream.overheadByteCount else { return nil }
        let polySize = MemoryLayout<crypto_onetimeauth_poly1305_state>.size
        let scratchSize = 2 * polySize + 64 + 16 + 16 + 16
        // Poly1305 states, the keystream block and the MAC are secret: they live in wiped scratch.
        let scratchBuffer = WipedBuffer(count: scratchSize, alignment: 64)
        return unsafe scratchBuffer.withUnsafeMutableBytes { (scratchBytes: UnsafeMutableRawBufferPointer) -> Int? in
            guard let scratch = scratchBytes.baseAddress else { return nil }
            let running = unsafe scratch.assumingMemoryBound(to: crypto_onetimeauth_poly1305_state.self)
            let trial = unsafe (scratch + polySize).assumingMemoryBound(to: crypto_onetimeauth_poly1305_state.self)
            let block = unsafe (scratch + 2 * polySize).assumingMemoryBound(to: UInt8.self)
            let zeros = unsafe block + 64
            let lengths = unsafe zeros + 16
            let mac = unsafe lengths + 16
            let key = unsafe UnsafeRawPointer(state.pointer).assumingMemoryBound(to: UInt8.self)
            let nonce = unsafe key + 32
            let input = unsafe buffer.u8

            // Block 0 is the Poly1305 key; block 1 encrypts the tag byte and is authenticated with it.
            unsafe crypto_stream_chacha20_ietf(block, 64, nonce, key)
            unsafe crypto_onetimeauth_poly1305_init(running, block)
            unsafe sodium_memzero(block, 64)
            unsafe block[0] = input[0]
            unsafe crypto_stream_chacha20_ietf_xor_ic(block, block, 64, nonce, 1, key)
            guard unsafe block[0] == SecretStream.Tag.final.rawValue else { return nil }
            unsafe block[0] = input[0]
            unsafe crypto_onetimeauth_poly1305_update(running, block, 64)

            for messageLength in 0..<(buffer.count - SecretStream.overheadByteCount) {
                unsafe trial.update(from: running, count: 1)
                // libsodium pads the ciphertext with (0x10 - 64 + mlen) & 0xf zero bytes, then the two lengths.
                unsafe crypto_onetimeauth_poly1305_update(trial, zeros, UInt64(messageLength & 0xf))
                let total = UInt64(64 + messageLength)
                for i in 0..<8 {
                    unsafe lengths[i] = 0
                    unsafe lengths[8 + i] = UInt8(truncatingIfNeeded: total >> (8 * UInt64(i)))
                }
                unsafe crypto_onetimeauth_poly1305_update(trial, lengths, 16)
                unsafe crypto_onetimeauth_poly1305_final(trial, mac)
                if unsafe sodium_memcmp(mac, input + 1 + messageLength, 16) == 0 {
                    return messageLength + SecretStream.overheadByteCount
                }
                unsafe crypto_onetimeauth_poly1305_update(running, input + 1 + messageLength, 1)
            }
            return nil
        }
    }
}
