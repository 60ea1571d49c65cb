internal import CE3DBSodium

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

// Safety: `validate` checks the output (16...64) and key (16...64) sizes before libsodium sees them. A `State` owns
// `crypto_generichash_statebytes()` bytes, allocated in `init`, wiped and freed in `deinit`, and is written only while
// uniquely referenced (copy on write); digests are written into buffers of exactly `outputByteCount` bytes. Every other
// pointer is lent for its closure only.
/// BLAKE2b through libsodium `crypto_generichash`: one-shot or streaming, optionally keyed, 16 to 64 bytes of
/// output. 32 bytes is E3DB's default (TFSP1, TSV1, note names); 64 bytes equals GNU `b2sum`.
///
/// ``BLAKE2b`` is a value type: copying a hasher forks its state (copy on write).
public struct BLAKE2b: Sendable {
    /// 16: smallest output size.
    public static let minimumOutputByteCount = 16
    /// 64: largest output size.
    public static let maximumOutputByteCount = 64
    /// 32: the default output size.
    public static let defaultOutputByteCount = 32
    /// 16...64: allowed key sizes.
    public static let keyByteCountRange = 16...64

    /// Hashes `data` in one call.
    /// - Parameters:
    ///   - data: The input.
    ///   - outputByteCount: 16...64 (default 32).
    ///   - key: An optional 16...64-byte key.
    /// - Throws: ``E3DBError/Code/invalidParameter`` for an output size outside 16...64,
    ///   ``E3DBError/Code/invalidKeyLength`` for a key size outside 16...64.
    public static func hash(
        data: some DataProtocol,
        outputByteCount: Int = defaultOutputByteCount,
        key: SecureBytes? = nil
    ) throws(E3DBError) -> Data {
        try validate(outputByteCount: outputByteCount, key: key)
        Sodium.ensure()
        var out = Data(count: outputByteCount)
        unsafe withBytes(data) { d in
            unsafe out.withUnsafeMutableBytes { o in
                if let key {
                    unsafe key.withUnsafeBytes { k in
                        _ = unsafe crypto_generichash(o.u8, o.count, d.u8, UInt64(d.count), k.u8, k.count)
                    }
                } else {
                    _ = unsafe crypto_generichash(o.u8, o.count, d.u8, UInt64(d.count), nil, 0)
                }
            }
        }
        return out
    }

    package static func validate(outputByteCount: Int, key: SecureBytes?) throws(E3DBError) {
        guard (minimumOutputByteCount...maximumOutputByteCount).contains(outputByteCount) else {
            throw E3DBError(
                .invalidParameter, "BLAKE2b output must be 16...64 bytes, got \(outputByteCount)",
                context: .init(part: "outputByteCount", actual: outputByteCount))
        }
        if let key, !keyByteCountRange.contains(key.count) {
            throw E3DBError(
                .invalidKeyLength, "BLAKE2b key must be 16...64 bytes, got \(key.count)",
                context: .init(part: "key", actual: key.count))
        }
    }

    @safe
    final class State: @unchecked Sendable {
        // @unchecked Sendable: a State is mutated only while uniquely referenced (copy on write in BLAKE2b).
        static let size = Int(crypto_generichash_statebytes())
        let pointer: UnsafeMutableRawPointer

        init() {
            unsafe pointer = UnsafeMutableRawPointer.allocate(byteCount: State.size, alignment: 64)
        }

        init(copying other: State) {
            unsafe pointer = UnsafeMutableRawPointer.allocate(byteCount: State.size, alignment: 64)
            unsafe pointer.copyMemory(from: other.pointer, byteCount: State.size)
        }

        var typed: OpaquePointer { unsafe OpaquePointer(pointer) }

        deinit {
            unsafe sodium_memzero(pointer, State.size)
            unsafe pointer.deallocate()
        }
    }

    private var state: State
    /// The output size this hasher produces.
    public let outputByteCount: Int

    /// Starts a streaming hash.
    /// - Parameters:
    ///   - outputByteCount: 16...64 (default 32).
    ///   - key: An optional 16...64-byte key.
    /// - Throws: As ``hash(data:outputByteCount:key:)``.
    public init(outputByteCount: Int = defaultOutputByteCount, key: SecureBytes? = nil) throws(E3DBError) {
        try BLAKE2b.validate(outputByteCount: outputByteCount, key: key)
        Sodium.ensure()
        let state = State()
        if let key {
            unsafe key.withUnsafeBytes { k in
                _ = unsafe crypto_generichash_init(state.typed, k.u8, k.count, outputByteCount)
            }
        } else {
            _ = unsafe crypto_generichash_init(state.typed, nil, 0, outputByteCount)
        }
        self.state = state
        self.outputByteCount = outputByteCount
    }

    /// Adds `data` to the hash.
    public mutating func update(data: some DataProtocol) {
        unsafe withBytes(data) { d in unsafe update(bufferPointer: d) }
    }

    /// Adds the bytes at `buffer` to the hash.
    package mutating func update(bufferPointer buffer: UnsafeRawBufferPointer) {
        if !isKnownUniquelyReferenced(&state) { state = State(copying: state) }
        _ = unsafe crypto_generichash_update(state.typed, buffer.u8, UInt64(buffer.count))
    }

    /// Returns the digest. The hasher itself is unchanged, so you may keep updating a copy.
    public func finalize() -> Data {
        let copy = State(copying: state)
        var out = Data(count: outputByteCount)
        unsafe out.withUnsafeMutableBytes { o in
            _ = unsafe crypto_generichash_final(copy.typed, o.u8, o.count)
        }
        return out
    }

    /// Returns the digest in wiped storage, for a digest that is itself a key (a keyed subkey derivation).
    package func finalizeSecret() -> SecureBytes {
        let copy = State(copying: state)
        return unsafe SecureBytes(count: outputByteCount) { o in
            _ = unsafe crypto_generichash_final(copy.typed, o.u8, o.count)
        }
    }
}
