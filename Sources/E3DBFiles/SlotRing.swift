import Dispatch
import E3DBPrimitives

/// Fixed buffers shared by the cipher (caller's thread) and the checksum thread.
///
/// Each slot has a plaintext buffer (65,536 B), a ciphertext buffer (65,553 B) and a semaphore that is free when
/// no hashing of the slot is pending. Memory is bounded: `count * 131,089` bytes, in the primitives' wiped storage
/// (`SecureBytes`: zeroed with `sodium_memzero` on ``wipe()`` and when released).
final class SlotRing {
    let count: Int
    private let plainStorage: SecureBytes
    private let cipherStorage: SecureBytes
    private let plain: UnsafeMutableRawBufferPointer
    private let cipher: UnsafeMutableRawBufferPointer
    private let free: [DispatchSemaphore]
    private var held: [Bool]

    init(count: Int) {
        self.count = count
        plainStorage = SecureBytes(count: count * E3DBFileFormat.plaintextChunkSize) { _ in }
        cipherStorage = SecureBytes(count: count * E3DBFileFormat.ciphertextChunkSize) { _ in }
        // The storage lives as long as the ring; the pointers never escape it.
        plain = plainStorage.withUnsafeMutableBytes { $0 }
        cipher = cipherStorage.withUnsafeMutableBytes { $0 }
        // Start at 0 and signal once: libdispatch traps if a semaphore is freed below its initial value.
        free = (0..<count).map { _ in
            let s = DispatchSemaphore(value: 0)
            s.signal()
            return s
        }
        held = Array(repeating: false, count: count)
    }


    func plaintext(_ i: Int) -> UnsafeMutableRawBufferPointer {
        let size = E3DBFileFormat.plaintextChunkSize
        return UnsafeMutableRawBufferPointer(rebasing: plain[(i * size)..<((i + 1) * size)])
    }

    func ciphertext(_ i: Int) -> UnsafeMutableRawBufferPointer {
        let size = E3DBFileFormat.ciphertextChunkSize
        return UnsafeMutableRawBufferPointer(rebasing: cipher[(i * size)..<((i + 1) * size)])
    }

    /// Waits until slot `i` is not being hashed, and takes it.
    func acquire(_ i: Int) {
        if !held[i] {
            free[i].wait()
            held[i] = true
        }
    }

    /// Gives slot `i` back without hashing it.
    func release(_ i: Int) {
        if held[i] {
            held[i] = false
            free[i].signal()
        }
    }

    /// Hands slot `i` to the checksum pipeline, which frees it when done.
    func handOff(_ i: Int) -> DispatchSemaphore {
        held[i] = false
        return free[i]
    }

    /// Zeroes all buffers (plaintext is secret). Call only when no hashing is pending.
    func wipe() {
        plainStorage.wipe()
        cipherStorage.wipe()
    }
}
