internal import CE3DBSodium
import Synchronization

/// Random bytes for bulk work, with one system call per 64 KiB instead of one per 256 bytes.
///
/// libsodium 1.0.18 reads `getrandom` 256 bytes at a time, so a record of ten fields (800 bytes of keys and
/// nonces) costs four system calls and the kernel's generic ChaCha20. A reservoir draws a fresh 32-byte seed from
/// `randombytes_buf` (the OS) and expands it with `randombytes_buf_deterministic` (libsodium's ChaCha20 generator)
/// into 64 KiB, hands those bytes out once each, zeroing them as they go, and draws a new seed when they run out.
/// The seed is wiped as soon as it has been expanded. Both live in ``WipedBuffer``s. Thread-safe.
@safe
package final class RandomReservoir: @unchecked Sendable {
    // @unchecked Sendable: `buffer` and `offset` are only touched under `lock`.
    private static let capacity = 1 << 16
    private let lock = Mutex(())
    private let buffer = WipedBuffer(count: RandomReservoir.capacity)
    private var offset = RandomReservoir.capacity

    package init() {}

    // Safety: the caller lends `out` for the call; each turn copies `take <= out.count - written` bytes to `target +
    // written`, from a range of `buffer` that `withUnsafeBytes(in:)` checks, under `lock`.
    /// Fills `out` with bytes no one else has received.
    package func fill(_ out: UnsafeMutableRawBufferPointer) {
        guard let target = out.baseAddress, out.count > 0 else { return }
        lock.withLock { _ in
            var written = 0
            while written < out.count {
                if offset == Self.capacity { refill() }
                let take = min(out.count - written, Self.capacity - offset)
                let taken = offset..<(offset + take)
                unsafe buffer.withUnsafeBytes(in: taken) {
                    unsafe UnsafeMutableRawBufferPointer(start: target + written, count: take).copyMemory(from: $0)
                }
                buffer.wipe(taken)
                offset += take
                written += take
            }
        }
    }

    // Safety: `s` and `b` are the two `WipedBuffer`s' own bytes, lent for the closures; libsodium writes `s.count` (the
    // seed size) and `b.count` bytes and reads `randombytes_SEEDBYTES` from `s`.
    private func refill() {
        let seed = WipedBuffer(count: Int(randombytes_SEEDBYTES))
        unsafe seed.withUnsafeMutableBytes { s in
            unsafe buffer.withUnsafeMutableBytes { b in
                unsafe randombytes_buf(s.u8, s.count)
                unsafe randombytes_buf_deterministic(b.u8, b.count, s.u8)
            }
        }
        offset = 0
    }
}
