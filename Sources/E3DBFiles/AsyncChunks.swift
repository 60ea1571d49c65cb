public import E3DBKeys
import E3DBPrimitives

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

/// The state of one encryption, kept in a class because the stream state is noncopyable.
final class AsyncEncryptState {
    var encryptor: SecretStream.Encryptor
    let prefix: Data
    init(accessKey: AccessKey) throws(E3DBError) {
        let key = SecretStream.Key()
        encryptor = SecretStream.Encryptor(key: key)
        prefix = try E3DBFileCipher.makePrefix(dataKey: key, accessKey: accessKey) + encryptor.header.rawRepresentation
    }
}

/// An async sequence of the bytes of an E3DB v3 file, encrypting an async sequence of plaintext buffers.
///
/// The first element is the 124-byte header; each later element is one sealed chunk (65,553 bytes, the last one
/// shorter and tagged FINAL). Memory is bounded by one chunk plus the largest base element. Task cancellation
/// stops it with `.cancelled`. Use ``E3DBFileCipher`` for checksums in the same pass.
public struct E3DBFileEncryptedChunks<Base: AsyncSequence>: AsyncSequence where Base.Element: DataProtocol {
    /// Each element is a piece of the encrypted file.
    public typealias Element = Data
    let base: Base
    let accessKey: AccessKey

    /// Encrypts the plaintext that `base` yields.
    ///
    /// - Parameters:
    ///   - base: plaintext buffers of any sizes.
    ///   - accessKey: the access key.
    public init(_ base: Base, accessKey: AccessKey) {
        self.base = base
        self.accessKey = accessKey
    }

    /// Creates the iterator.
    public func makeAsyncIterator() -> Iterator {
        Iterator(reader: AsyncByteReader(base.makeAsyncIterator()), accessKey: accessKey)
    }

    /// The iterator; not for sharing between tasks.
    public struct Iterator: AsyncIteratorProtocol {
        var reader: AsyncByteReader<Base.AsyncIterator>
        let accessKey: AccessKey
        var state: AsyncEncryptState?
        var done = false

        init(reader: AsyncByteReader<Base.AsyncIterator>, accessKey: AccessKey) {
            self.reader = reader
            self.accessKey = accessKey
        }

        /// The next piece of the encrypted file, or nil after the FINAL chunk.
        ///
        /// - Throws: `.cancelled`, or any error of the base sequence.
        public mutating func next() async throws -> Data? {
            guard !done else { return nil }
            if Task.isCancelled { throw E3DBError(.cancelled, "the file encryption was cancelled") }
            guard let state else {
                let fresh = try AsyncEncryptState(accessKey: accessKey)
                state = fresh
                return fresh.prefix
            }
            let chunk = try await reader.take(E3DBFileFormat.plaintextChunkSize)
            var isLast = chunk.count < E3DBFileFormat.plaintextChunkSize
            if !isLast { isLast = try await !reader.hasMore() }
            let sealed: Data
            if isLast {
                done = true
                sealed = try sealFinal(chunk, state)
            } else {
                sealed = try state.encryptor.seal(chunk, tag: .message)
            }
            return sealed
        }

        private func sealFinal(_ chunk: Data, _ state: AsyncEncryptState) throws -> Data {
            var out = Data(count: chunk.count + E3DBFileFormat.chunkOverhead)
            let count = try out.withUnsafeMutableBytes { (o: UnsafeMutableRawBufferPointer) throws -> Int in
                try chunk.withUnsafeBytes { (p: UnsafeRawBufferPointer) throws -> Int in
                    try state.encryptor.seal(p, tag: .final, into: o)
                }
            }
            return out.prefix(count)
        }
    }
}

/// The state of one decryption.
final class AsyncDecryptState {
    var decryptor: SecretStream.Decryptor
    init(_ decryptor: consuming SecretStream.Decryptor) { self.decryptor = decryptor }
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
public struct E3DBFileDecryptedChunks<Base: AsyncSequence>: AsyncSequence where Base.Element: DataProtocol {
    /// Each element is one chunk's plaintext (65,536 bytes, the last one shorter).
    public typealias Element = Data
    let base: Base
    let accessKey: AccessKey

    /// Decrypts the encrypted file that `base` yields.
    ///
    /// - Parameters:
    ///   - base: encrypted bytes in buffers of any sizes.
    ///   - accessKey: the access key.
    public init(_ base: Base, accessKey: AccessKey) {
        self.base = base
        self.accessKey = accessKey
    }

    /// Creates the iterator.
    public func makeAsyncIterator() -> Iterator {
        Iterator(reader: AsyncByteReader(base.makeAsyncIterator()), accessKey: accessKey)
    }

    /// The iterator; not for sharing between tasks.
    public struct Iterator: AsyncIteratorProtocol {
        var reader: AsyncByteReader<Base.AsyncIterator>
        let accessKey: AccessKey
        var state: AsyncDecryptState?
        var offset = 0
        var index = 0
        var done = false
        let output = SendableScratch()

        init(reader: AsyncByteReader<Base.AsyncIterator>, accessKey: AccessKey) {
            self.reader = reader
            self.accessKey = accessKey
        }

        /// The next chunk's plaintext, or nil once the whole file is verified.
        ///
        /// - Throws: the codes of ``E3DBFileCipher/decrypt(from:to:accessKey:options:)``, or any error of the base.
        public mutating func next() async throws -> Data? {
            guard !done else { return nil }
            if Task.isCancelled { throw E3DBError(.cancelled, "the file decryption was cancelled") }
            if state == nil {
                let prefix = try await reader.take(E3DBFileFormat.prefixSize)
                state = AsyncDecryptState(try E3DBFileCipher.openPrefix(prefix, accessKey: accessKey))
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
            let (count, tag) = try cipher.withUnsafeBytes { (c: UnsafeRawBufferPointer) throws in
                try E3DBFileCipher.openChunk(
                    c, into: output.buffer, decryptor: &state.decryptor, index: index, offset: offset)
            }
            offset += cipher.count
            index += 1
            if tag == .final {
                if try await reader.hasMore() {
                    throw E3DBError(
                        .trailingData, "data follows the chunk tagged FINAL, at byte \(offset)",
                        context: .at(offset: offset, chunk: index))
                }
                done = true
            }
            return Data(UnsafeRawBufferPointer(rebasing: output.buffer[0..<count]))
        }
    }
}

/// A reusable 64 KiB plaintext buffer, wiped when released.
final class SendableScratch: @unchecked Sendable {
    let buffer: UnsafeMutableRawBufferPointer = {
        let b = UnsafeMutableRawBufferPointer.allocate(byteCount: E3DBFileFormat.plaintextChunkSize, alignment: 16)
        b.initializeMemory(as: UInt8.self, repeating: 0)
        return b
    }()
    deinit {
        wipeMemory(buffer)
        buffer.deallocate()
    }
}

extension AsyncSequence where Element: DataProtocol {
    /// This sequence's bytes encrypted as an E3DB v3 file (see ``E3DBFileEncryptedChunks``).
    ///
    /// - Parameter accessKey: the access key.
    /// - Returns: an async sequence of encrypted pieces.
    public func e3dbFileEncrypted(accessKey: AccessKey) -> E3DBFileEncryptedChunks<Self> {
        E3DBFileEncryptedChunks(self, accessKey: accessKey)
    }

    /// This sequence's bytes (an E3DB v3 file) decrypted chunk by chunk (see ``E3DBFileDecryptedChunks``).
    ///
    /// - Parameter accessKey: the access key.
    /// - Returns: an async sequence of plaintext chunks.
    public func e3dbFileDecrypted(accessKey: AccessKey) -> E3DBFileDecryptedChunks<Self> {
        E3DBFileDecryptedChunks(self, accessKey: accessKey)
    }
}
