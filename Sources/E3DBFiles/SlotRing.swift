import Dispatch

/// Fixed buffers shared by the cipher (caller's thread) and the checksum thread.
///
/// Each slot has a plaintext buffer (65,536 B), a ciphertext buffer (65,553 B) and a semaphore that is free when
/// no hashing of the slot is pending. Memory is bounded: `count * 131,089` bytes, wiped on ``wipe()``.
final class SlotRing {
    let count: Int
    private let plain: UnsafeMutableRawBufferPointer
    private let cipher: UnsafeMutableRawBufferPointer
    private let free: [DispatchSemaphore]
    private var held: [Bool]

    init(count: Int) {
        self.count = count
        plain = .allocate(byteCount: count * E3DBFileFormat.plaintextChunkSize, alignment: 64)
        cipher = .allocate(byteCount: count * E3DBFileFormat.ciphertextChunkSize, alignment: 64)
        plain.initializeMemory(as: UInt8.self, repeating: 0)
        cipher.initializeMemory(as: UInt8.self, repeating: 0)
        // Start at 0 and signal once: libdispatch traps if a semaphore is freed below its initial value.
        free = (0..<count).map { _ in
            let s = DispatchSemaphore(value: 0)
            s.signal()
            return s
        }
        held = Array(repeating: false, count: count)
    }

    deinit {
        wipe()
        plain.deallocate()
        cipher.deallocate()
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
        wipeMemory(plain)
        wipeMemory(cipher)
    }
}

/// Overwrites `buffer` with zeros through a volatile-like loop the optimizer keeps (the buffer is freed later).
@inline(never)
func wipeMemory(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress else { return }
    let bytes = base.assumingMemoryBound(to: UInt8.self)
    for i in 0..<buffer.count { bytes[i] = 0 }
    withExtendedLifetime(buffer) {}
}
