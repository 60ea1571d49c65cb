internal import CE3DBBoringSSL
internal import E3DBPrimitives

/// The bytes of one BoringSSL state (`AES_KEY`, `SHA*_CTX`) as the page codec holds it: opaque, at least as large as
/// the struct, copied with `memcpy` (the structs are plain data).
private let stateByteCount = Int(CE3DB_BORINGSSL_STATE_BYTES)

/// AES-256-CBC without padding, from caller buffers into caller buffers (SQLCipher's pages), on swift-crypto's
/// BoringSSL: the encryption and decryption key schedules are computed once, here, and kept in wiped memory; a call
/// allocates nothing. (swift-crypto's `AES._CBC` returns a new `Data` per call, copies its input into another, and
/// expands the key schedule every time.)
@safe
final class AESCBC: @unchecked Sendable {
    // @unchecked Sendable: `schedules` is written in `init` only, then only read.
    private let schedules: WipedBuffer

    /// The key size (AES-256).
    static let keyByteCount = 32
    /// The block and IV size.
    static let blockByteCount = 16

    /// Expands `key` (32 bytes) for both directions.
    init(key: UnsafeRawBufferPointer) {
        precondition(key.count == Self.keyByteCount, "AESCBC: a 32-byte key")
        schedules = WipedBuffer(count: 2 * stateByteCount)
        // Safety: `key` holds 32 bytes (checked above); each schedule is `stateByteCount` bytes of `schedules`, which
        // is larger than BoringSSL's AES_KEY.
        let expanded = unsafe schedules.withUnsafeMutableBytes { states in
            let bytes = unsafe key.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let encrypt = unsafe CCryptoBoringSSL_AES_set_encrypt_key(bytes, 256, states.baseAddress!)
            let decrypt = unsafe CCryptoBoringSSL_AES_set_decrypt_key(
                bytes, 256, states.baseAddress! + stateByteCount)
            return encrypt == 0 && decrypt == 0
        }
        precondition(expanded, "AESCBC: BoringSSL refused a 256-bit key")
    }

    // Safety: `run` checks the sizes before BoringSSL sees the buffers; the callers lend them for the call.
    /// Encrypts `input` (a whole number of blocks) into `output` (the same size; no overlap) under `iv` (16 bytes).
    func encrypt(
        _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, iv: UnsafeRawBufferPointer
    ) {
        unsafe run(input, output, iv, schedule: 0, direction: 1)
    }

    // Safety: as for `encrypt`; the decryption schedule is the second `stateByteCount` bytes of `schedules`.
    /// Decrypts `input` (a whole number of blocks) into `output` (the same size; no overlap) under `iv` (16 bytes).
    func decrypt(
        _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer, iv: UnsafeRawBufferPointer
    ) {
        unsafe run(input, output, iv, schedule: stateByteCount, direction: 0)
    }

    // Safety: the precondition checks equal sizes, whole blocks and a 16-byte IV before BoringSSL sees the buffers
    // (lent by the caller for the call); `chained` is 16 bytes on the stack, lent for the closure, into which the IV is
    // copied.
    private func run(
        _ input: UnsafeRawBufferPointer, _ output: UnsafeMutableRawBufferPointer, _ iv: UnsafeRawBufferPointer,
        schedule: Int, direction: Int32
    ) {
        precondition(
            input.count == output.count && input.count % Self.blockByteCount == 0 && iv.count == Self.blockByteCount,
            "AESCBC: whole blocks, equal sizes, a 16-byte IV")
        guard input.count > 0 else { return }
        // BoringSSL advances the IV in place: a copy on the stack.
        var chained: (UInt64, UInt64) = (0, 0)
        unsafe withUnsafeMutableBytes(of: &chained) { chainedIV in
            unsafe chainedIV.copyMemory(from: iv)
            // Safety: the buffers hold `input.count` bytes each (checked above) and do not overlap (the callers'
            // contract); the schedule is read only.
            unsafe schedules.withUnsafeBytes { states in
                unsafe CCryptoBoringSSL_AES_cbc_encrypt(
                    input.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self), input.count,
                    states.baseAddress! + schedule, chainedIV.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    direction)
            }
        }
    }
}

/// HMAC with SHA-1, SHA-256 or SHA-512 (SQLCipher's page MACs) on swift-crypto's BoringSSL, keyed once: the inner and
/// outer hash states after the padded key are kept in wiped memory, and each message copies them onto the stack, so
/// that a call allocates nothing. (swift-crypto's `HMAC` is a value whose hash states live on the heap: updating a
/// copy of a keyed one copies them there.)
@safe
final class KeyedHMAC: @unchecked Sendable {
    // @unchecked Sendable: `states` is written in `init` only, then only read.
    enum Hash: Sendable {
        case sha1, sha256, sha512

        /// The tag size.
        var byteCount: Int {
            switch self {
            case .sha1: 20
            case .sha256: 32
            case .sha512: 64
            }
        }

        /// The block size, which the key is padded to.
        var blockByteCount: Int { self == .sha512 ? 128 : 64 }
    }

    let hash: Hash
    /// The inner state, then the outer state.
    private let states: WipedBuffer

    // Safety: `pad` is `block` bytes on the stack, written at `index < block` and reading `key[index]` only for `index
    // < key.count` (at most one block, checked above); each state is `stateByteCount` bytes at offset 0 or
    // `stateByteCount` of `states` (twice that size). The pad is wiped before the allocation is released.
    /// Keys the two states with `key` (at most one block: SQLCipher's HMAC keys are 32 bytes).
    init(hash: Hash, key: UnsafeRawBufferPointer) {
        precondition(key.count <= hash.blockByteCount, "KeyedHMAC: a key of at most one block")
        self.hash = hash
        states = WipedBuffer(count: 2 * stateByteCount)
        let block = hash.blockByteCount
        unsafe withUnsafeTemporaryAllocation(byteCount: block, alignment: 16) { pad in
            for (offset, mask) in [(0, UInt8(0x36)), (stateByteCount, UInt8(0x5c))] {
                for index in 0..<block {
                    unsafe pad[index] = (index < key.count ? key[index] : 0) ^ mask
                }
                unsafe states.withUnsafeMutableBytes { states in
                    let state = unsafe states.baseAddress! + offset
                    unsafe Self.initialize(hash, state)
                    unsafe Self.update(hash, state, UnsafeRawBufferPointer(pad))
                }
            }
            unsafe pad.initializeMemory(as: UInt8.self, repeating: 0)
        }
    }

    // Safety: the precondition keeps `tag.count` within the `hash.byteCount` bytes `withTag` lends, which are copied
    // before they are wiped.
    /// Writes the tag of `first` ‖ `second` into `tag` (at most ``Hash/byteCount`` bytes: a prefix of the tag).
    func authenticate(
        _ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer, into tag: UnsafeMutableRawBufferPointer
    ) {
        precondition(tag.count <= hash.byteCount, "KeyedHMAC: a tag of at most the hash's size")
        unsafe withTag(first, second) {
            unsafe tag.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<tag.count]))
        }
    }

    // Safety: the guard keeps `expected.count` within the `hash.byteCount` bytes `withTag` lends.
    /// Whether `expected` (at most ``Hash/byteCount`` bytes) is the tag (or its prefix) of `first` ‖ `second`,
    /// compared in constant time.
    func verify(
        _ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer, expected: UnsafeRawBufferPointer
    ) -> Bool {
        guard expected.count <= hash.byteCount else { return false }
        return unsafe withTag(first, second) {
            unsafe ConstantTime.equals(UnsafeRawBufferPointer(rebasing: $0[0..<expected.count]), expected)
        }
    }

    // Safety: `scratch` is `stateByteCount + 64` bytes on the stack: the state (`stateByteCount`, copied from either
    // half of `states`, which holds two) then the 64-byte digest, room for any of the three hashes. `body` gets the
    // first `hash.byteCount` digest bytes for the call only; everything is wiped before the allocation is released.
    /// Calls `body` with the tag (``Hash/byteCount`` bytes on the stack, wiped after with the state used).
    private func withTag<R>(
        _ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> R
    ) -> R {
        let hash = hash
        return unsafe withUnsafeTemporaryAllocation(byteCount: stateByteCount + 64, alignment: 16) { scratch in
            let state = scratch.baseAddress!
            let digest = unsafe UnsafeMutableRawBufferPointer(rebasing: scratch[stateByteCount..<(stateByteCount + 64)])
            unsafe states.withUnsafeBytes { keyed in
                unsafe state.copyMemory(from: keyed.baseAddress!, byteCount: stateByteCount)
                unsafe Self.update(hash, state, first)
                unsafe Self.update(hash, state, second)
                unsafe Self.finish(hash, state, digest.baseAddress!)
                unsafe state.copyMemory(from: keyed.baseAddress! + stateByteCount, byteCount: stateByteCount)
            }
            unsafe Self.update(hash, state, UnsafeRawBufferPointer(rebasing: digest[0..<hash.byteCount]))
            unsafe Self.finish(hash, state, digest.baseAddress!)
            let result = unsafe body(UnsafeRawBufferPointer(rebasing: digest[0..<hash.byteCount]))
            unsafe scratch.initializeMemory(as: UInt8.self, repeating: 0)
            return result
        }
    }

    // Safety (the three below): `state` is `stateByteCount` bytes, larger than BoringSSL's SHA_CTX, SHA256_CTX and
    // SHA512_CTX; `digest` has room for 64 bytes. The return values are always 1.

    private static func initialize(_ hash: Hash, _ state: UnsafeMutableRawPointer) {
        switch hash {
        case .sha1: _ = unsafe CCryptoBoringSSL_SHA1_Init(state)
        case .sha256: _ = unsafe CCryptoBoringSSL_SHA256_Init(state)
        case .sha512: _ = unsafe CCryptoBoringSSL_SHA512_Init(state)
        }
    }

    private static func update(_ hash: Hash, _ state: UnsafeMutableRawPointer, _ data: UnsafeRawBufferPointer) {
        guard let bytes = data.baseAddress, data.count > 0 else { return }
        switch hash {
        case .sha1: _ = unsafe CCryptoBoringSSL_SHA1_Update(state, bytes, data.count)
        case .sha256: _ = unsafe CCryptoBoringSSL_SHA256_Update(state, bytes, data.count)
        case .sha512: _ = unsafe CCryptoBoringSSL_SHA512_Update(state, bytes, data.count)
        }
    }

    private static func finish(_ hash: Hash, _ state: UnsafeMutableRawPointer, _ digest: UnsafeMutableRawPointer) {
        let out = unsafe digest.assumingMemoryBound(to: UInt8.self)
        switch hash {
        case .sha1: _ = unsafe CCryptoBoringSSL_SHA1_Final(out, state)
        case .sha256: _ = unsafe CCryptoBoringSSL_SHA256_Final(out, state)
        case .sha512: _ = unsafe CCryptoBoringSSL_SHA512_Final(out, state)
        }
    }
}
