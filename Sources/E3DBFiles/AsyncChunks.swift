public import E3DBKeys
import E3DBPrimitives
import Synchronization

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Pulls exact-size pieces from an async sequence of byte buffers, independent of how the base splits them.
struct AsyncByteReader<Base: AsyncIteratorProtocol> where Base.Element: DataProtocol {
    var base: Base
    var pending = Data()
    var pendingOffset = 0
    var finished = false

    init(_ base: Base) { self.base = base }

    /// Up to `n` bytes; fewer only at the end of the base sequence.
    mutating func take(_ n: Int) async throws -> Data {
        var out = Data()
        out.reserveCapacity(n)
        while out.count < n {
            if pendingOffset == pending.count {
                guard !finished else { break }
                guard let next = try await base.next() else {
                    finished = true
                    break
                }
                pending = Data(next)
                pendingOffset = 0
                continue
            }
            let k = min(n - out.count, pending.count - pendingOffset)
            let start = pending.startIndex + pendingOffset
            out.append(pending[start..<(start + k)])
            pendingOffset += k
        }
        return out
    }

    /// True if at least one more byte follows (reads ahead without consuming it).
    mutating func hasMore() async throws -> Bool {
        while pendingOffset == pending.count {
            guard !finished else { return false }
            guard let next = try await base.next() else {
                finished = true
                return false
            }
            pending = Data(next)
            pendingOffset = 0
        }
        return true
    }
}

/// What an async file sequence computed (sizes, chunk count, checksums), available once an iteration has ended
/// normally.
///
/// The sequence owns one report; ``result`` is nil until an iteration ends without throwing (after the FINAL chunk
/// for encryption; after the whole file is verified for decryption), and then holds that iteration's outcome.
/// Safe to read from any task or thread.
public final class FileStreamReport<Result: Sendable>: Sendable {
    private let storage = Mutex<Result?>(nil)

    /// Creates an empty report.
    public init() {}

    /// The outcome of the last iteration that ended normally, or nil.
    public var result: Result? { storage.withLock { $0 } }

    func store(_ result: Result) { storage.withLock { $0 = result } }
}

/// The state of one encryption, kept in a class because the stream state is noncopyable.
final class AsyncEncryptState {
    var encryptor: SecretStream.Encryptor?
    let prefix: Data
    var sums: ChecksumState
    var plaintextSize = 0
    var encryptedSize = 0
    var chunks = 0
    init(accessKey: AccessKey, checksums: FileChecksumKinds) throws(E3DBError) {
        let key = SecretStream.Key()
        let encryptor = SecretStream.Encryptor(key: key)
        prefix = try E3DBFileCipher.makePrefix(dataKey: key, accessKey: accessKey) + encryptor.header.rawRepresentation
        self.encryptor = consume encryptor
        sums = try ChecksumState(checksums)
        account(plaintext: Data(), ciphertext: prefix, isChunk: false)
    }

    func account(plaintext: Data, ciphertext: Data, isChunk: Bool) {
        unsafe plaintext.withUnsafeBytes { unsafe sums.updatePlaintext($0) }
        unsafe ciphertext.withUnsafeBytes { unsafe sums.updateCiphertext($0) }
        plaintextSize += plaintext.count
        encryptedSize += ciphertext.count
        if isChunk { chunks += 1 }
    }
}

/// An async sequence of the bytes of an E3DB v3 file, encrypting an async sequence of plaintext buffers.
///
/// The first element is the 124-byte header; each later element is one sealed chunk (65,553 bytes, the last one
/// shorter and tagged FINAL). Memory is bounded by one chunk plus the largest base element. Task cancellation
/// stops it with `.cancelled`.
///
/// The checksums asked for are computed in the same pass, exactly as ``E3DBFileCipher/encrypt(from:to:accessKey:options:)``
/// computes them (ciphertext BLAKE2b-512 and MD5 by default; `md5Base64` is `FileMeta.checksum`); they are in
/// ``report`` once the sequence has ended.
public struct E3DBFileEncryptedChunks<Base: AsyncSequence>: AsyncSequence where Base.Element: DataProtocol {
    /// Each element is a piece of the encrypted file.
    public typealias Element = Data
    let base: Base
    let accessKey: AccessKey
    let checksums: FileChecksumKinds
    /// Sizes, chunk count and checksums, set when an iteration has yielded the FINAL chunk.
    public let report = FileStreamReport<FileEncryptionResult>()

    /// Encrypts the plaintext that `base` yields.
    ///
    /// - Parameters:
    ///   - base: plaintext buffers of any sizes.
    ///   - accessKey: the access key.
    ///   - checksums: checksums to compute (default ciphertext BLAKE2b-512 and MD5, as the other APIs).
    public init(
        _ base: Base, accessKey: AccessKey, checksums: FileChecksumKinds = [.ciphertextBLAKE2b512, .ciphertextMD5]
    ) {
        self.base = base
        self.accessKey = accessKey
        self.checksums = checksums
    }

    /// Creates the iterator.
    public func makeAsyncIterator() -> Iterator {
        Iterator(
            reader: AsyncByteReader(base.makeAsyncIterator()), accessKey: accessKey, checksums: checksums,
            report: report)
    }

    /// The iterator; not for sharing between tasks.
    public struct Iterator: AsyncIteratorProtocol {
        var reader: AsyncByteReader<Base.AsyncIterator>
        let accessKey: AccessKey
        let checksums: FileChecksumKinds
        let report: FileStreamReport<FileEncryptionResult>
        var state: AsyncEncryptState?
        var done = false

        init(
            reader: AsyncByteReader<Base.AsyncIterator>, accessKey: AccessKey, checksums: FileChecksumKinds,
            report: FileStreamReport<FileEncryptionResult>
        ) {
            self.reader = reader
            self.accessKey = accessKey
            self.checksums = checksums
            self.report = report
        }

        /// The next piece of the encrypted file, or nil after the FINAL chunk.
        ///
        /// - Throws: `.cancelled`, or any error of the base sequence.
        public mutating func next() async throws -> Data? {
            guard !done else { return nil }
            if Task.isCancelled { throw E3DBError(.cancelled, "the file encryption was cancelled") }
            guard let state else {
                let fresh = try AsyncEncryptState(accessKey: accessKey, checksums: checksums)
                state = fresh
                return fresh.prefix
            }
            let chunk = try await reader.take(E3DBFileFormat.plaintextChunkSize)
            var isLast = chunk.count < E3DBFileFormat.plaintextChunkSize
            if !isLast { isLast = try await !reader.hasMore() }
            guard var encryptor = state.encryptor.take() else {
                throw E3DBError(.streamFinished, "the file encryption already ended")
            }
            let sealed: Data
            if isLast {
                done = true
                sealed = encryptor.finish(chunk)
            } else {
                sealed = try encryptor.seal(chunk, tag: .message)
                state.encryptor = consume encryptor
            }
            state.account(plaintext: chunk, ciphertext: sealed, isChunk: true)
            if isLast {
                report.store(
                    FileEncryptionResult(
                        plaintextSize: state.plaintextSize, encryptedSize: state.encryptedSize,
                        chunkCount: state.chunks, checksums: state.sums.finalize()))
            }
            return sealed
        }
    }
}

/// The state of one decryption.
final class AsyncDecryptState {
    var decryptor: SecretStream.Decryptor?
    var sums: ChecksumState
    var plaintextSize = 0
    init(_ decryptor: consuming SecretStream.Decryptor, prefix: Data, checksums: FileChecksumKinds) throws(E3DBError) {
        self.decryptor = consume decryptor
        sums = try ChecksumState(checksums)
        unsafe prefix.withUnsafeBytes { unsafe sums.updateCiphertext($0) }
    }
}

/// An async sequence of plaintext chunks, decrypting an async sequence of E3DB v3 file bytes strictly.
///
/// Each element is one authenticated chunk's plaintext, in order. The sequence ends normally only after the FINAL
/// chunk authenticated and the input ended right after it; the last chunk is delivered only once that is known.
/// Any problem (the codes of ``E3DBFileCipher/decrypt(from:to:accessKey:options:)``) is thrown instead.
///
/// - Important: chunks yielded before an error are authentic pieces of *some* prefix of the file, but the file
///   is complete only if iteration ends without throwing. Treat output as provisional until then (for example,
///   play media from it but do not save or act on it). Files with no chunk are rejected
///   (``ZeroChunkFilePolicy/reject``).
///
/// The checksums asked for (none by default) are computed as ``E3DBFileCipher/decrypt(from:to:accessKey:options:)``
/// computes them and are in ``report`` once the whole file is verified.
public struct E3DBFileDecryptedChunks<Base: AsyncSequence>: AsyncSequence where Base.Element: DataProtocol {
    /// Each element is one chunk's plaintext (65,536 bytes, the last one shorter).
    public typealias Element = Data
    let base: Base
    let accessKey: AccessKey
    let checksums: FileChecksumKinds
    /// Sizes, chunk count and checksums, set when an iteration has verified the whole file.
    public let report = FileStreamReport<FileDecryptionResult>()

    /// Decrypts the encrypted file that `base` yields.
    ///
    /// - Parameters:
    ///   - base: encrypted bytes in buffers of any sizes.
    ///   - accessKey: the access key.
    ///   - checksums: checksums to compute (default none, as ``FileDecryptionOptions``).
    public init(_ base: Base, accessKey: AccessKey, checksums: FileChecksumKinds = []) {
        self.base = base
        self.accessKey = accessKey
        self.checksums = checksums
    }

    /// Creates the iterator.
    public func makeAsyncIterator() -> Iterator {
        Iterator(
            reader: AsyncByteReader(base.makeAsyncIterator()), accessKey: accessKey, checksums: checksums,
            report: report)
    }

    /// The iterator; not for sharing between tasks.
    public struct Iterator: AsyncIteratorProtocol {
        var reader: AsyncByteReader<Base.AsyncIterator>
        let accessKey: AccessKey
        let checksums: FileChecksumKinds
        let report: FileStreamReport<FileDecryptionResult>
        var state: AsyncDecryptState?
        var offset = 0
        var index = 0
        var done = false
        /// The chunk's plaintext before it is copied out: wiped scratch, reused for every chunk.
        let output = WipedBuffer(count: E3DBFileFormat.plaintextChunkSize)

        init(
            reader: AsyncByteReader<Base.AsyncIterator>, accessKey: AccessKey, checksums: FileChecksumKinds,
            report: FileStreamReport<FileDecryptionResult>
        ) {
            self.reader = reader
            self.accessKey = accessKey
            self.checksums = checksums
            self.report = report
        }

        /// The next chunk's plaintext, or nil once the whole file is verified.
        ///
        /// - Throws: the codes of ``E3DBFileCipher/decrypt(from:to:accessKey:options:)``, or any error of the base.
        public mutating func next() async throws -> Data? {
            guard !done else { return nil }
            if Task.isCancelled { throw E3DBError(.cancelled, "the file decryption was cancelled") }
            if state == nil {
                let prefix = try await reader.take(E3DBFileFormat.prefixSize)
                state = try AsyncDecryptState(
                    try E3DBFileCipher.openPrefix(prefix, accessKey: accessKey), prefix: prefix, checksums: checksums)
                offset = E3DBFileFormat.prefixSize
            }
            guard let state else { return nil }
            let cipher = try await reader.take(E3DBFileFormat.ciphertextChunkSize)
            guard !cipher.isEmpty else {
                throw E3DBError(
                    .fileTruncated,
                    index == 0
                        ? "the file has headers but no chunk (cut, or an empty file from the old Swift or Java SDK)"
                        : "the input ends after chunk \(index - 1) at byte \(offset) without a chunk tagged FINAL",
                    context: .at(offset: offset, chunk: index, part: "chunks"))
            }
            let (plain, tag) = try unsafe cipher.withUnsafeBytes { (c: UnsafeRawBufferPointer) throws in
                try unsafe output.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) throws(E3DBError) in
                    let (count, tag) = try unsafe E3DBFileCipher.openChunk(
                        c, into: out, decryptor: &state.decryptor, index: index, offset: offset)
                    let plain = unsafe UnsafeRawBufferPointer(rebasing: out[0..<count])
                    unsafe state.sums.updateCiphertext(c)
                    unsafe state.sums.updatePlaintext(plain)
                    return (unsafe Data(plain), tag)
                }
            }
            offset += cipher.count
            index += 1
            state.plaintextSize += plain.count
            if tag == .final {
                if try await reader.hasMore() {
                    throw E3DBError(
                        .trailingData, "data follows the chunk tagged FINAL, at byte \(offset)",
                        context: .at(offset: offset, chunk: index))
                }
                done = true
                report.store(
                    FileDecryptionResult(
                        plaintextSize: state.plaintextSize, encryptedSize: offset, chunkCount: index,
                        checksums: state.sums.finalize(), wasZeroChunkFile: false))
            }
            return plain
        }
    }
}

extension AsyncSequence where Element: DataProtocol {
    /// This sequence's bytes encrypted as an E3DB v3 file (see ``E3DBFileEncryptedChunks``).
    ///
    /// - Parameters:
    ///   - accessKey: the access key.
    ///   - checksums: checksums for the sequence's ``E3DBFileEncryptedChunks/report``.
    /// - Returns: an async sequence of encrypted pieces.
    public func e3dbFileEncrypted(
        accessKey: AccessKey, checksums: FileChecksumKinds = [.ciphertextBLAKE2b512, .ciphertextMD5]
    ) -> E3DBFileEncryptedChunks<Self> {
        E3DBFileEncryptedChunks(self, accessKey: accessKey, checksums: checksums)
    }

    /// This sequence's bytes (an E3DB v3 file) decrypted chunk by chunk (see ``E3DBFileDecryptedChunks``).
    ///
    /// - Parameters:
    ///   - accessKey: the access key.
    ///   - checksums: checksums for the sequence's ``E3DBFileDecryptedChunks/report``.
    /// - Returns: an async sequence of plaintext chunks.
    public func e3dbFileDecrypted(accessKey: AccessKey, checksums: FileChecksumKinds = []) -> E3DBFileDecryptedChunks<
        Self
    > {
        E3DBFileDecryptedChunks(self, accessKey: accessKey, checksums: checksums)
    }
}
