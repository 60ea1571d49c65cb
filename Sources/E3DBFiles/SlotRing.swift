import Dispatch
import E3DBPrimitives

/// Fixed buffers shared by the cipher (caller's thread) and the checksum thread.
///
/// Each slot has a plaintext buffer (65,536 B), a ciphertext buffer (65,553 B) and a semaphore that is free when
/// no hashing of the slot is pending. Memory is bounded: `count * 131,089` bytes, in the primitives' wiped scratch
/// (``WipedBuffer``: zeroed with `sodium_memzero` on ``wipe()`` and when released). The bytes are reached only
/// inside ``withPlaintext(_:_:)`` and ``withCiphertext(_:_:)``; the checksum thread holds a ``SlotBytes``, not a
/// pointer.
final class SlotRing: @unchecked Sendable {
    // @unchecked Sendable: a checksum thread reads a slot only between `handOff` and the signal of the slot's
    // semaphore, and the cipher's thread touches the slot again only after `acquire` has waited for that signal.
    let count: Int
    private let plain: WipedBuffer
    private let cipher: WipedBuffer
    private let free: [DispatchSemaphore]
    private var held: [Bool]

    init(count: Int) {
        self.count = count
        plain = WipedBuffer(count: count * E3DBFileFormat.plaintextChunkSize)
        cipher = WipedBuffer(count: count * E3DBFileFormat.ciphertextChunkSize)
        // Start at 0 and signal once: libdispatch traps if a semaphore is freed below its initial value.
        free = (0..<count).map { _ in
            let s = DispatchSemaphore(value: 0)
            s.signal()
            return s
        }
        held = Array(repeating: false, count: count)
    }

    /// Calls `body` with the plaintext buffer of slot `i` (65,536 bytes). Do not let the pointer escape.
    func withPlaintext<R, E: Error>(_ i: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let size = E3DBFileFormat.plaintextChunkSize
        return try unsafe plain.withUnsafeMutableBytes(in: (i * size)..<((i + 1) * size), body)
    }

    /// Calls `body` with the ciphertext buffer of slot `i` (65,553 bytes). Do not let the pointer escape.
    func withCiphertext<R, E: Error>(_ i: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let size = E3DBFileFormat.ciphertextChunkSize
        return try unsafe cipher.withUnsafeMutableBytes(in: (i * size)..<((i + 1) * size), body)
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
        plain.wipe()
        cipher.wipe()
    }
}

/// The first `count` bytes of one buffer of a ``SlotRing`` slot, as the checksum pipeline hashes them (possibly on
/// another thread). It holds the ring, not a pointer: the bytes are reached only inside ``withBytes(_:)``.
struct SlotBytes: Sendable {
    let ring: SlotRing
    let slot: Int
    let count: Int
    let isPlaintext: Bool

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        let count = count
        if isPlaintext {
            return unsafe ring.withPlaintext(slot) { unsafe body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        }
        return unsafe ring.withCiphertext(slot) { unsafe body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }
}
