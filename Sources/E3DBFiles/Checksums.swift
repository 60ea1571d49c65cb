public import E3DBPrimitives
import Dispatch

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
    public var blake2b512Hex: String? { ciphertextBLAKE2b512.map(hexString) }
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

func hexString(_ data: Data) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(data.count * 2)
    for byte in data {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
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
        guard !bytes.isEmpty else { return }
        cipherB2?.update(bufferPointer: bytes)
        cipherMD5?.update(bufferPointer: bytes)
    }

    mutating func updatePlaintext(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        plainB2?.update(bufferPointer: bytes)
    }

    mutating func finalize() -> FileChecksums {
        FileChecksums(
            ciphertextBLAKE2b512: cipherB2?.finalize(),
            ciphertextMD5: cipherMD5?.finalize(),
            plaintextBLAKE2b512: plainB2?.finalize())
    }
}

/// A buffer pointer that crosses to the checksum thread. Safety: the pipeline's slot semaphores guarantee the
/// memory stays valid and unmodified until the hashing closure has run.
struct SendableBuffer: @unchecked Sendable {
    let pointer: UnsafeRawBufferPointer
}

/// Computes checksums on a second thread while the caller's thread runs the cipher (double buffering).
///
/// Buffers are handed over in order with ``submit(ciphertext:plaintext:whenDone:)``; the worker hashes them in
/// the same order on a serial queue and signals `whenDone` so the cipher may reuse the memory. With
/// `concurrent == false` (or nothing to hash) it hashes inline on the caller's thread.
final class ChecksumPipeline: @unchecked Sendable {
    // Touched only on `queue` (concurrent mode) or the caller's thread (inline mode), never both.
    private var state: ChecksumState
    private let queue: DispatchQueue?

    init(kinds: FileChecksumKinds, concurrent: Bool) throws(E3DBError) {
        state = try ChecksumState(kinds)
        queue = concurrent && !state.isEmpty ? DispatchQueue(label: "E3DBFiles.checksum", qos: .userInitiated) : nil
    }

    var isActive: Bool { !state.isEmpty }
    var wantsPlaintext: Bool { state.plainB2 != nil }

    /// Hashes `ciphertext` (and `plaintext`, if given) after everything submitted before, then signals `done`.
    func submit(ciphertext: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer?, done: DispatchSemaphore?) {
        guard !state.isEmpty else {
            done?.signal()
            return
        }
        guard let queue else {
            state.updateCiphertext(ciphertext)
            if let plaintext { state.updatePlaintext(plaintext) }
            done?.signal()
            return
        }
        let c = SendableBuffer(pointer: ciphertext)
        let p = plaintext.map { SendableBuffer(pointer: $0) }
        queue.async {
            self.state.updateCiphertext(c.pointer)
            if let p { self.state.updatePlaintext(p.pointer) }
            done?.signal()
        }
    }

    /// Hashes bytes the caller owns (the headers), synchronously with respect to ordering.
    func submitOwned(ciphertext: Data) {
        guard !state.isEmpty else { return }
        guard let queue else {
            ciphertext.withUnsafeBytes { state.updateCiphertext($0) }
            return
        }
        queue.async {
            ciphertext.withUnsafeBytes { self.state.updateCiphertext($0) }
        }
    }

    /// Waits for all submitted work and returns the checksums.
    func finish() -> FileChecksums {
        guard let queue else { return state.finalize() }
        return queue.sync { self.state.finalize() }
    }

    /// Waits for all submitted work (used before freeing buffers after a failure).
    func drain() {
        queue?.sync {}
    }
}
