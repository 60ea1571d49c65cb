import Dispatch
public import E3DBPrimitives
import Synchronization

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Which checksums a file operation computes in the same pass as the cipher.
public struct FileChecksumKinds: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    /// Creates a set from its raw value.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// BLAKE2b-512 of the encrypted file (what `b2sum` prints for it).
    public static let ciphertextBLAKE2b512 = FileChecksumKinds(rawValue: 1 << 0)
    /// MD5 of the encrypted file: E3DB's `file_meta.checksum` and the upload's `Content-MD5`.
    public static let ciphertextMD5 = FileChecksumKinds(rawValue: 1 << 1)
    /// BLAKE2b-512 of the plaintext.
    public static let plaintextBLAKE2b512 = FileChecksumKinds(rawValue: 1 << 2)
    /// Everything.
    public static let all: FileChecksumKinds = [.ciphertextBLAKE2b512, .ciphertextMD5, .plaintextBLAKE2b512]
}

/// Checksums computed while a file was encrypted, decrypted or read. Members not requested are nil.
public struct FileChecksums: Sendable, Hashable {
    /// BLAKE2b-512 (64 bytes) of the encrypted file, identical to `b2sum` of it.
    public var ciphertextBLAKE2b512: Data?
    /// MD5 (16 bytes) of the encrypted file.
    public var ciphertextMD5: Data?
    /// BLAKE2b-512 (64 bytes) of the plaintext.
    public var plaintextBLAKE2b512: Data?

    /// Creates a value (mostly for tests).
    public init(ciphertextBLAKE2b512: Data? = nil, ciphertextMD5: Data? = nil, plaintextBLAKE2b512: Data? = nil) {
        self.ciphertextBLAKE2b512 = ciphertextBLAKE2b512
        self.ciphertextMD5 = ciphertextMD5
        self.plaintextBLAKE2b512 = plaintextBLAKE2b512
    }

    /// The MD5 as E3DB's `FileMeta.checksum` and the upload's `Content-MD5` header want it: standard base64 with
    /// padding (24 characters).
    public var md5Base64: String? { ciphertextMD5.map { Base64.encode($0) } }

    /// The ciphertext BLAKE2b-512 in lowercase hex, as `b2sum` prints it.
    public var blake2b512Hex: String? { ciphertextBLAKE2b512.map { Hex.encode($0) } }
}

/// A checksum the encrypted input must have; decryption verifies it before committing any output.
public enum ExpectedFileChecksum: Sendable, Hashable {
    /// MD5 of the encrypted file in standard padded base64 (E3DB `file_meta.checksum`).
    case md5Base64(String)
    /// BLAKE2b-512 of the encrypted file (64 bytes).
    case ciphertextBLAKE2b512(Data)
    /// BLAKE2b-512 of the plaintext (64 bytes).
    case plaintextBLAKE2b512(Data)

    var kind: FileChecksumKinds {
        switch self {
        case .md5Base64: return .ciphertextMD5
        case .ciphertextBLAKE2b512: return .ciphertextBLAKE2b512
        case .plaintextBLAKE2b512: return .plaintextBLAKE2b512
        }
    }

    /// Checks the expected value's form before anything is read: an MD5 must be 24 characters of padded standard
    /// base64 holding 16 bytes, a BLAKE2b-512 digest 64 bytes.
    ///
    /// - Throws: `E3DBError` with `.invalidParameter` (field `expectedChecksum`).
    public func validate() throws(E3DBError) {
        var context = E3DBError.Context()
        context.field = "expectedChecksum"
        switch self {
        case .md5Base64(let text):
            let decoded: Data
            do {
                decoded = try Base64.decode(text)
            } catch {
                throw E3DBError(
                    .invalidParameter,
                    "the expected checksum is not padded standard base64 (an MD5 is 24 characters ending in ==)",
                    context: context)
            }
            guard decoded.count == 16 else {
                context.expected = 16
                context.actual = decoded.count
                throw E3DBError(
                    .invalidParameter, "the expected checksum holds \(decoded.count) bytes, not the 16 of an MD5",
                    context: context)
            }
        case .ciphertextBLAKE2b512(let digest), .plaintextBLAKE2b512(let digest):
            guard digest.count == 64 else {
                context.expected = 64
                context.actual = digest.count
                throw E3DBError(
                    .invalidParameter, "the expected BLAKE2b-512 is \(digest.count) bytes, not 64", context: context)
            }
        }
    }

    func verify(_ sums: FileChecksums) throws(E3DBError) {
        let matches: Bool
        let what: String
        switch self {
        case .md5Base64(let text):
            what = "MD5"
            matches = sums.md5Base64.map { ConstantTime.equals(Data($0.utf8), Data(text.utf8)) } ?? false
        case .ciphertextBLAKE2b512(let digest):
            what = "ciphertext BLAKE2b-512"
            matches = sums.ciphertextBLAKE2b512.map { ConstantTime.equals($0, digest) } ?? false
        case .plaintextBLAKE2b512(let digest):
            what = "plaintext BLAKE2b-512"
            matches = sums.plaintextBLAKE2b512.map { ConstantTime.equals($0, digest) } ?? false
        }
        guard matches else {
            var context = E3DBError.Context()
            context.field = what
            throw E3DBError(
                .checksumMismatch, "the file decrypted but its \(what) differs from the expected checksum",
                context: context)
        }
    }
}

/// The running hash states for one operation.
struct ChecksumState {
    var cipherB2: BLAKE2b?
    var cipherMD5: Hashes.MD5?
    var plainB2: BLAKE2b?

    init(_ kinds: FileChecksumKinds) throws(E3DBError) {
        cipherB2 = kinds.contains(.ciphertextBLAKE2b512) ? try BLAKE2b(outputByteCount: 64) : nil
        cipherMD5 = kinds.contains(.ciphertextMD5) ? Hashes.MD5() : nil
        plainB2 = kinds.contains(.plaintextBLAKE2b512) ? try BLAKE2b(outputByteCount: 64) : nil
    }

    var needsCiphertext: Bool { cipherB2 != nil || cipherMD5 != nil }
    var isEmpty: Bool { cipherB2 == nil && cipherMD5 == nil && plainB2 == nil }

    mutating func updateCiphertext(_ bytes: UnsafeRawBufferPointer) {
        guard unsafe !bytes.isEmpty else { return }
        unsafe cipherB2?.update(bufferPointer: bytes)
        unsafe cipherMD5?.update(bufferPointer: bytes)
    }

    mutating func updatePlaintext(_ bytes: UnsafeRawBufferPointer) {
        guard unsafe !bytes.isEmpty else { return }
        unsafe plainB2?.update(bufferPointer: bytes)
    }

    mutating func finalize() -> FileChecksums {
        FileChecksums(
            ciphertextBLAKE2b512: cipherB2?.finalize(),
            ciphertextMD5: cipherMD5?.finalize(),
            plaintextBLAKE2b512: plainB2?.finalize())
    }
}

/// Signals a semaphore when the last of `count` lanes has arrived.
final class Countdown: Sendable {
    private let remaining: Atomic<Int>
    private let done: DispatchSemaphore?

    init(_ count: Int, done: DispatchSemaphore?) {
        remaining = Atomic(count)
        self.done = done
    }

    func arrive() {
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done?.signal() }
    }
}

/// One running checksum, fed either the ciphertext or the plaintext, on its own serial queue (or inline).
final class ChecksumLane: @unchecked Sendable {
    // Touched only on `queue` (concurrent mode) or the caller's thread (inline mode), never both.
    let readsPlaintext: Bool
    private var state: ChecksumState
    let queue: DispatchQueue?

    init(_ kind: FileChecksumKinds, concurrent: Bool) throws(E3DBError) {
        readsPlaintext = kind == .plaintextBLAKE2b512
        state = try ChecksumState(kind)
        queue = concurrent ? DispatchQueue(label: "E3DBFiles.checksum", qos: .userInitiated) : nil
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        if readsPlaintext { unsafe state.updatePlaintext(bytes) } else { unsafe state.updateCiphertext(bytes) }
    }

    /// The finished checksum; call after the lane's queue has drained.
    func finalize() -> FileChecksums { state.finalize() }
}

/// Computes checksums on other threads while the caller's thread runs the cipher: one serial queue per checksum
/// (ciphertext BLAKE2b-512, ciphertext MD5, plaintext BLAKE2b-512), so that on a machine with cores to spare the
/// hashes run beside each other and beside the cipher.
///
/// Buffers are handed over in order with ``submit(ciphertext:plaintext:done:)``; each lane hashes them in the same
/// order, and `done` is signalled when every lane is finished with the buffer, so the cipher may reuse the memory.
/// With `concurrent == false` (or nothing to hash) it hashes inline on the caller's thread.
final class ChecksumPipeline: @unchecked Sendable {
    private let lanes: [ChecksumLane]
    private let concurrent: Bool

    init(kinds: FileChecksumKinds, concurrent: Bool) throws(E3DBError) {
        var lanes: [ChecksumLane] = []
        for kind in [FileChecksumKinds.ciphertextBLAKE2b512, .ciphertextMD5, .plaintextBLAKE2b512]
        where kinds.contains(kind) {
            lanes.append(try ChecksumLane(kind, concurrent: concurrent))
        }
        self.lanes = lanes
        self.concurrent = concurrent && !lanes.isEmpty
    }

    var isActive: Bool { !lanes.isEmpty }
    var wantsPlaintext: Bool { lanes.contains { $0.readsPlaintext } }

    /// Hashes `ciphertext` (and `plaintext`, if given) after everything submitted before, then signals `done`.
    /// The slots must stay unwritten until then (``SlotRing/acquire(_:)`` waits for `done`).
    private func submit(ciphertext: SlotBytes, plaintext: SlotBytes?, done: DispatchSemaphore?) {
        guard concurrent else {
            for lane in lanes {
                if lane.readsPlaintext {
                    if let plaintext { unsafe plaintext.withBytes { unsafe lane.update($0) } }
                } else {
                    unsafe ciphertext.withBytes { unsafe lane.update($0) }
                }
            }
            done?.signal()
            return
        }
        // The last lane to finish with the buffer signals `done` itself (no extra hop through another queue).
        var work: [(ChecksumLane, DispatchQueue, SlotBytes)] = []
        for lane in lanes {
            guard let queue = lane.queue else { continue }
            guard let bytes = lane.readsPlaintext ? plaintext : ciphertext else { continue }
            work.append((lane, queue, bytes))
        }
        guard !work.isEmpty else {
            done?.signal()
            return
        }
        let countdown = Countdown(work.count, done: done)
        for (lane, queue, bytes) in work {
            queue.async {
                unsafe bytes.withBytes { unsafe lane.update($0) }
                countdown.arrive()
            }
        }
    }

    /// Hashes the first `ciphertextCount` bytes of slot `slot`'s ciphertext and, when a lane reads plaintext, the
    /// first `plaintextCount` bytes of its plaintext, after everything submitted before; hands the slot to the
    /// lanes, which free it when they are done.
    func submit(slot: Int, of ring: SlotRing, ciphertextCount: Int, plaintextCount: Int?) {
        let plaintext =
            wantsPlaintext
            ? plaintextCount.map { SlotBytes(ring: ring, slot: slot, count: $0, isPlaintext: true) } : nil
        submit(
            ciphertext: SlotBytes(ring: ring, slot: slot, count: ciphertextCount, isPlaintext: false),
            plaintext: plaintext, done: ring.handOff(slot))
    }

    /// Hashes bytes the caller owns (the headers), in order with what was submitted before.
    func submitOwned(ciphertext: Data) {
        for lane in lanes where !lane.readsPlaintext {
            guard let queue = lane.queue else {
                unsafe ciphertext.withUnsafeBytes { unsafe lane.update($0) }
                continue
            }
            queue.async { unsafe ciphertext.withUnsafeBytes { unsafe lane.update($0) } }
        }
    }

    /// Waits for all submitted work and returns the checksums.
    func finish() -> FileChecksums {
        drain()
        var sums = FileChecksums()
        for lane in lanes {
            let one = lane.finalize()
            sums.ciphertextBLAKE2b512 = sums.ciphertextBLAKE2b512 ?? one.ciphertextBLAKE2b512
            sums.ciphertextMD5 = sums.ciphertextMD5 ?? one.ciphertextMD5
            sums.plaintextBLAKE2b512 = sums.plaintextBLAKE2b512 ?? one.plaintextBLAKE2b512
        }
        return sums
    }

    /// Waits for all submitted hashing (used before freeing or wiping buffers, also after a failure).
    func drain() {
        for lane in lanes { lane.queue?.sync {} }
    }
}
