internal import CE3DBSodium
import Synchronization

/// Random bytes for bulk work, with one system call per 64 KiB instead of one per 256 bytes.
///
/// libsodium 1.0.18 reads `getrandom` 256 bytes at a time, so a record of ten fields (800 bytes of keys and
/// nonces) costs four system calls and the kernel's generic ChaCha20. A reservoir draws a fresh 32-byte seed from
/// `randombytes_buf` (the OS) and expands it with `randombytes_buf_deterministic` (libsodium's ChaCha20 generator)
/// into 64 KiB, hands those bytes out once each, zeroing them as they go, and draws a new seed when they run out.
/// The seed is wiped as soon as it has been expanded. Thread-safe.
@safe
package final class RandomReservoir: @unchecked Sendable {
    // @unchecked Sendable: `buffer` and `offset` are only touched under `lock`.
    private static let capacity = 1 << 16
    private let lock = Mutex(())
    private let buffer: UnsafeMutableRawPointer
    private var offset: Int

    package init() {
        Sodium.ensure()
        unsafe buffer = UnsafeMutableRawPointer.allocate(byteCount: Self.capacity, alignment: 16)
        unsafe buffer.initializeMemory(as: UInt8.self, repeating: 0, count: Self.capacity)
        offset = Self.capacity
    }

    deinit {
        unsafe sodium_memzero(buffer, Self.capacity)
        unsafe buffer.deallocate()
    }

    /// Fills `out` with bytes no one else has received.
    package func fill(_ out: UnsafeMutableRawBufferPointer) {
        guard let target = out.baseAddress, out.count > 0 else { return }
        lock.withLock { _ in
            var written = 0
            while written < out.count {
                if offset == Self.capacity { refill() }
                let take = min(out.count - written, Self.capacity - offset)
                unsafe (target + written).copyMemory(from: buffer + offset, byteCount: take)
                unsafe sodium_memzero(buffer + offset, take)
                offset += take
                written += take
            }
        }
    }

    private func refill() {
        var seed = [UInt8](repeating: 0, count: Int(randombytes_SEEDBYTES))
        unsafe seed.withUnsafeMutableBufferPointer { s in
            guard let base = s.baseAddress else { return }
            unsafe randombytes_buf(base, s.count)
            unsafe randombytes_buf_deterministic(buffer, Self.capacity, base)
            unsafe sodium_memzero(base, s.count)
        }
        offset = 0
    }
}
