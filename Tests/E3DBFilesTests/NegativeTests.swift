import E3DBKeys
import E3DBPrimitives
import E3DBTestSupport
import Foundation
import Testing

@testable import E3DBFiles

/// Shared fixtures: a 3-chunk file (131,073 bytes of plaintext: two full chunks and one of 1 byte).
enum Fixture {
    static let key = AccessKey()
    static let plaintext = Data((0..<131_073).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
    static let file: Data = {
        var source = MemoryByteSource(plaintext)
        var sink = MemoryByteSink()
        _ = try? E3DBFileCipher.encrypt(from: &source, to: &sink, accessKey: key)
        return sink.committed ?? Data()
    }()
    static let c0 = E3DBFileFormat.prefixSize
    static let c1 = c0 + E3DBFileFormat.ciphertextChunkSize
    static let c2 = c1 + E3DBFileFormat.ciphertextChunkSize
    static let readSizes = [1, 7, 4096, 65_553, Int.max]

    /// Decrypts and returns the error code, checking that nothing was committed on failure.
    static func failure(
        _ bytes: Data, key: AccessKey = key, readSize: Int = .max, options: FileDecryptionOptions = .init()
    ) -> E3DBError? {
        var source = MemoryByteSource(bytes, maxReadSize: readSize)
        var sink = MemoryByteSink()
        do {
            _ = try E3DBFileCipher.decrypt(from: &source, to: &sink, accessKey: key, options: options)
            return nil
        } catch {
            #expect(sink.committed == nil && sink.aborted, "output committed despite \(error.code)")
            return error
        }
    }

    static func roundTrip(_ plain: Data, readSize: Int = .max) throws -> (Data, Data?) {
        var source = MemoryByteSource(plain, maxReadSize: readSize)
        var sink = MemoryByteSink()
        _ = try E3DBFileCipher.encrypt(from: &source, to: &sink, accessKey: key)
        let encrypted = sink.committed ?? Data()
        var source2 = MemoryByteSource(encrypted, maxReadSize: readSize)
        var sink2 = MemoryByteSink()
        _ = try E3DBFileCipher.decrypt(from: &source2, to: &sink2, accessKey: key)
        return (encrypted, sink2.committed)
    }
}

@Suite("E3DB file v3: round trips and layout")
struct RoundTripTests {
    @Test(arguments: [0, 1, 16, 65_535, 65_536, 65_537, 131_072, 131_073, 200_000])
    func sizes(_ size: Int) throws {
        let plain = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 ^ 0x5a) })
        for readSize in [7, 4096, 65_553, Int.max] {
            let (encrypted, decrypted) = try Fixture.roundTrip(plain, readSize: readSize)
            #expect(encrypted.count == E3DBFileFormat.encryptedSize(forPlaintextSize: size))
            #expect(decrypted == plain)
            #expect(encrypted.prefix(2) == Data("3.".utf8))
        }
    }

    @Test func emptyFileIsOneEmptyFinalChunk() throws {
        let (encrypted, decrypted) = try Fixture.roundTrip(Data())
        #expect(encrypted.count == 141)
        #expect(decrypted == Data())
    }

    @Test func checksumsMatchIndependentHashes() throws {
        for concurrent in [true, false] {
            var source = MemoryByteSource(Fixture.plaintext, maxReadSize: 1000)
            var sink = MemoryByteSink()
            let result = try E3DBFileCipher.encrypt(
                from: &source, to: &sink, accessKey: Fixture.key,
                options: FileEncryptionOptions(checksums: .all, concurrentChecksums: concurrent))
            let bytes = try #require(sink.committed)
            #expect(result.encryptedSize == bytes.count)
            #expect(result.plaintextSize == Fixture.plaintext.count)
            #expect(result.chunkCount == 3)
            #expect(result.checksums.ciphertextBLAKE2b512 == (try BLAKE2b.hash(data: bytes, outputByteCount: 64)))
            #expect(result.checksums.ciphertextMD5 == Hashes.md5(bytes))
            #expect(result.checksums.md5Base64 == Base64.encode(Hashes.md5(bytes)))
            #expect(
                result.checksums.plaintextBLAKE2b512 == (try BLAKE2b.hash(data: Fixture.plaintext, outputByteCount: 64))
            )
            var again = MemoryByteSource(bytes)
            let (sums, count) = try E3DBFileCipher.checksums(of: &again)
            #expect(count == bytes.count)
            #expect(sums.ciphertextBLAKE2b512 == result.checksums.ciphertextBLAKE2b512)
        }
    }

    @Test func progressIsMonotonicAndComplete() throws {
        final class Box: @unchecked Sendable { var seen: [FileProgress] = [] }
        let box = Box()
        var source = MemoryByteSource(Fixture.plaintext)
        var sink = MemoryByteSink()
        _ = try E3DBFileCipher.encrypt(
            from: &source, to: &sink, accessKey: Fixture.key,
            options: FileEncryptionOptions(progress: { box.seen.append($0) }))
        #expect(box.seen.map(\.chunksProcessed) == [1, 2, 3])
        #expect(box.seen.last?.bytesProcessed == Fixture.plaintext.count)
        #expect(box.seen.last?.fractionCompleted == 1)
    }

    @Test func cancellationCommitsNothing() throws {
        let flag = FileCancellation()
        flag.cancel()
        var source = MemoryByteSource(Fixture.plaintext)
        var sink = MemoryByteSink()
        #expect(throws: E3DBError(.cancelled)) {
            _ = try E3DBFileCipher.encrypt(
                from: &source, to: &sink, accessKey: Fixture.key, options: FileEncryptionOptions(cancellation: flag))
        }
        #expect(sink.committed == nil)
        #expect(Fixture.failure(Fixture.file, options: FileDecryptionOptions(cancellation: flag))?.code == .cancelled)
    }
}

@Suite("E3DB file v3: strict decryption")
struct StrictDecryptionTests {
    /// Every truncation point: each byte of the headers, each chunk boundary, the middle and the last byte of
    /// each chunk. Expected code by region.
    static var truncations: [(Int, E3DBError.Code)] {
        var points: [(Int, E3DBError.Code)] = (0..<Fixture.c0).map { ($0, .fileTruncated) }
        let total = Fixture.file.count
        points += [(Fixture.c0, .fileTruncated), (Fixture.c1, .fileTruncated), (Fixture.c2, .fileTruncated)]
        for start in [Fixture.c0, Fixture.c1] {
            points.append((start + 8, .fileTruncated))  // under 17 bytes of a chunk
            points.append((start + 16, .fileTruncated))
            points.append((start + 17, .chunkAuthenticationFailed))
            points.append((start + 32_768, .chunkAuthenticationFailed))
            points.append((start + E3DBFileFormat.ciphertextChunkSize - 1, .chunkAuthenticationFailed))
        }
        points.append((Fixture.c2 + 9, .fileTruncated))
        points.append((total - 1, .chunkAuthenticationFailed))
        return points
    }

    @Test(arguments: Fixture.readSizes)
    func everyTruncationPointIsRejected(readSize: Int) {
        #expect(Fixture.file.count == Fixture.c2 + 18)
        for (length, code) in Self.truncations {
            let error = Fixture.failure(Data(Fixture.file.prefix(length)), readSize: readSize)
            #expect(
                error?.code == code,
                "truncated to \(length) bytes with reads of \(readSize): \(String(describing: error))")
        }
    }

    @Test(arguments: Fixture.readSizes)
    func chunkBoundaryTruncationSaysWhichChunk(readSize: Int) {
        let error = Fixture.failure(Data(Fixture.file.prefix(Fixture.c2)), readSize: readSize)
        #expect(error?.code == .fileTruncated)
        #expect(error?.context.chunkIndex == 2)
        #expect(error?.context.offset == Fixture.c2)
    }

    @Test(arguments: Fixture.readSizes)
    func dataAfterFinalIsRejected(readSize: Int) throws {
        // A full FINAL chunk: whatever follows is trailing data.
        let plain = Data(repeating: 0x42, count: 131_072)
        let (full, _) = try Fixture.roundTrip(plain)
        for extra in [Data([0]), Data(full.suffix(18)), Data(repeating: 0xff, count: 70_000)] {
            let error = Fixture.failure(full + extra, readSize: readSize)
            #expect(error?.code == .trailingData)
            #expect(error?.context.offset == full.count)
        }
        // A short FINAL chunk: appended bytes arrive in the same read as it, yet they are still reported as
        // trailing data at the end of the FINAL chunk (not as an authentication failure of chunk 2).
        let extras = [
            Data([0]), Data(Fixture.file.suffix(18)), Data(Fixture.file.suffix(17)), Data(repeating: 0xff, count: 16),
            Data(repeating: 0xff, count: 65_535), Data(repeating: 0xff, count: 70_000), Self.chunk(0),
        ]
        for extra in extras {
            let error = Fixture.failure(Fixture.file + extra, readSize: readSize)
            #expect(error?.code == .trailingData, "\(extra.count) bytes appended: \(String(describing: error))")
            #expect(error?.context.offset == Fixture.file.count)
            #expect(error?.context.chunkIndex == 3)
            // With the expected size (FileMeta.size) known, it is the same code, at the same offset.
            let sized = Fixture.failure(
                Fixture.file + extra, readSize: readSize,
                options: .init(expectedEncryptedSize: Fixture.file.count))
            #expect(sized?.code == .trailingData)
            #expect(sized?.context.offset == Fixture.file.count)
        }
        // A damaged short FINAL chunk followed by data is still an authentication failure of that chunk.
        var damaged = Fixture.file
        damaged[damaged.count - 1] ^= 1
        let error = Fixture.failure(damaged + Data([1, 2, 3]), readSize: readSize)
        #expect(error?.code == .chunkAuthenticationFailed)
        #expect(error?.context.chunkIndex == 2)
        #expect(
            Fixture.failure(Fixture.file, readSize: readSize, options: .init(expectedEncryptedSize: Fixture.file.count))
                == nil)
        #expect(
            Fixture.failure(
                Fixture.file, readSize: readSize, options: .init(expectedEncryptedSize: Fixture.file.count + 5))?
                .code == .checksumMismatch)
    }

    static func chunk(_ i: Int) -> Data {
        let start = Fixture.c0 + i * E3DBFileFormat.ciphertextChunkSize
        return Data(Fixture.file[start..<min(Fixture.file.count, start + E3DBFileFormat.ciphertextChunkSize)])
    }

    @Test(arguments: Fixture.readSizes)
    func reorderedDuplicatedOrDroppedChunksAreRejected(readSize: Int) {
        let prefix = Data(Fixture.file.prefix(Fixture.c0))
        let cases: [(String, Data, Int)] = [
            ("swap 0 and 1", prefix + Self.chunk(1) + Self.chunk(0) + Self.chunk(2), 0),
            ("duplicate 0", prefix + Self.chunk(0) + Self.chunk(0) + Self.chunk(1) + Self.chunk(2), 1),
            ("duplicate 1", prefix + Self.chunk(0) + Self.chunk(1) + Self.chunk(1) + Self.chunk(2), 2),
            ("drop 1", prefix + Self.chunk(0) + Self.chunk(2), 1),
            ("final first", prefix + Self.chunk(2) + Self.chunk(0) + Self.chunk(1), 0),
        ]
        for (name, bytes, index) in cases {
            let error = Fixture.failure(bytes, readSize: readSize)
            #expect(error?.code == .chunkAuthenticationFailed, "\(name)")
            #expect(error?.context.chunkIndex == index, "\(name)")
        }
    }

    static func expectedForHeaderFlip(offset: Int, bit: Int) -> E3DBError.Code {
        let original = Fixture.file[offset]
        let flipped = original ^ (1 << UInt8(bit))
        switch offset {
        case 0:
            if flipped >= 0x30 && flipped <= 0x39 { return .unsupportedFileVersion }
            return .malformedFileHeader
        case 1, 66, 99:
            return .malformedFileHeader
        case 2..<99:
            return TextHeader.isBase64URL(flipped) ? .wrongAccessKey : .malformedFileHeader
        default:
            return .chunkAuthenticationFailed
        }
    }

    @Test(arguments: [7, Int.max])
    func everyHeaderBitFlipIsRejected(readSize: Int) {
        for offset in 0..<Fixture.c0 {
            for bit in 0..<8 {
                var bytes = Fixture.file
                bytes[offset] ^= 1 << UInt8(bit)
                let error = Fixture.failure(bytes, readSize: readSize)
                let expected = Self.expectedForHeaderFlip(offset: offset, bit: bit)
                #expect(error?.code == expected, "bit \(bit) of byte \(offset)")
                if expected == .chunkAuthenticationFailed { #expect(error?.context.chunkIndex == 0) }
            }
        }
    }

    @Test func tamperedChunkBytesNameTheChunk() {
        for (offset, chunk) in [(Fixture.c0, 0), (Fixture.c0 + 40_000, 0), (Fixture.c1 + 1, 1), (Fixture.c2 + 17, 2)] {
            var bytes = Fixture.file
            bytes[offset] ^= 0x01
            let error = Fixture.failure(bytes, readSize: 4096)
            #expect(error?.code == .chunkAuthenticationFailed)
            #expect(error?.context.chunkIndex == chunk)
        }
    }

    @Test func wrongAccessKey() {
        #expect(Fixture.failure(Fixture.file, key: AccessKey())?.code == .wrongAccessKey)
    }

    @Test(arguments: [
        ("1.", E3DBError.Code.unsupportedFileVersion), ("2.", .unsupportedFileVersion),
        ("31.", .unsupportedFileVersion),
        ("03.", .unsupportedFileVersion), ("", .fileTruncated), ("3", .fileTruncated), ("x", .malformedFileHeader),
        (".", .malformedFileHeader), ("3x", .malformedFileHeader), ("99999999999999999999.", .malformedFileHeader),
    ])
    func versionField(text: String, code: E3DBError.Code) {
        #expect(Fixture.failure(Data(text.utf8))?.code == code, "\(text)")
    }

    @Test func expectedChecksumIsVerifiedBeforeCommit() {
        let md5 = Base64.encode(Hashes.md5(Fixture.file))
        #expect(Fixture.failure(Fixture.file, options: .init(expectedChecksum: .md5Base64(md5))) == nil)
        let wrong = Base64.encode(Hashes.md5(Data("x".utf8)))
        #expect(
            Fixture.failure(Fixture.file, options: .init(expectedChecksum: .md5Base64(wrong)))?.code
                == .checksumMismatch)
        #expect(
            Fixture.failure(Fixture.file, options: .init(expectedChecksum: .ciphertextBLAKE2b512(Data(count: 64))))?
                .code == .checksumMismatch)
    }

    /// D13: a malformed expected checksum is refused before any input is read, and a counting source proves it.
    @Test(arguments: [
        "garbage", "", "DPb7oJVFD4O0cXsAkVRltA", "DPb7oJVFD4O0cXsAkVRltA=", "0cf6fba095450f83b471",
        "DPb7oJVFD4O0cXsAkVRltA==\n", "DPb7oJVFD4O0cXsAkVRltA==DPb7oJVFD4O0cXsAkVRltA==",
    ])
    func malformedExpectedChecksumIsAnInvalidParameter(text: String) {
        var source = CountingSource(Fixture.file)
        var sink = MemoryByteSink()
        #expect {
            _ = try E3DBFileCipher.decrypt(
                from: &source, to: &sink, accessKey: Fixture.key, options: .init(expectedChecksum: .md5Base64(text)))
        } throws: {
            ($0 as? E3DBError)?.code == .invalidParameter && ($0 as? E3DBError)?.context.field == "expectedChecksum"
        }
        #expect(source.bytesRead == 0)
        #expect(sink.committed == nil)
        #expect(
            Fixture.failure(Fixture.file, options: .init(expectedChecksum: .plaintextBLAKE2b512(Data(count: 32))))?
                .code == .invalidParameter)
        #expect(Fixture.failure(Fixture.file, options: .init(expectedEncryptedSize: -1))?.code == .invalidParameter)
    }

    /// D13: an expected size shorter than the file is "longer than its expected size" (trailing data at that
    /// size), whatever region the size falls in, for split and unsplit input and for a source of known length.
    @Test(arguments: Fixture.readSizes)
    func expectedSizeShorterThanTheFileIsTrailingData(readSize: Int) {
        let sizes = [
            0, 1, 50, 99, 123, 124, 125, 140, Fixture.c1 - 1, Fixture.c1, Fixture.c1 + 1, Fixture.c2,
            Fixture.file.count - 1,
        ]
        for size in sizes {
            let error = Fixture.failure(Fixture.file, readSize: readSize, options: .init(expectedEncryptedSize: size))
            #expect(error?.code == .trailingData, "expected size \(size): \(String(describing: error))")
            #expect(error?.context.offset == size)
            #expect(error?.message.contains("longer than its expected size of \(size) bytes") == true)
            var unknown = CountingSource(Fixture.file, maxReadSize: readSize)
            var sink = MemoryByteSink()
            #expect {
                _ = try E3DBFileCipher.decrypt(
                    from: &unknown, to: &sink, accessKey: Fixture.key, options: .init(expectedEncryptedSize: size))
            } throws: { ($0 as? E3DBError)?.code == .trailingData && ($0 as? E3DBError)?.context.offset == size }
        }
        // One-byte file (142 bytes) as in the review: 0, 50, 141.
        let one = (try? Fixture.roundTrip(Data([7])).0) ?? Data()
        for size in [0, 50, 141] {
            #expect(Fixture.failure(one, options: .init(expectedEncryptedSize: size))?.code == .trailingData)
        }
        #expect(Fixture.failure(one, options: .init(expectedEncryptedSize: 142)) == nil)
    }

    @Test func zeroChunkFilePolicy() throws {
        let zero = Data(Fixture.file.prefix(Fixture.c0))
        #expect(Fixture.failure(zero)?.code == .fileTruncated)
        #expect(Fixture.failure(zero, options: .init(zeroChunkFiles: .reject))?.code == .fileTruncated)
        let md5 = Base64.encode(Hashes.md5(zero))
        var source = MemoryByteSource(zero)
        var sink = MemoryByteSink()
        let result = try E3DBFileCipher.decrypt(
            from: &source, to: &sink, accessKey: Fixture.key, options: .init(expectedChecksum: .md5Base64(md5)))
        #expect(result.wasZeroChunkFile && result.plaintextSize == 0 && sink.committed == Data())
        #expect(Fixture.failure(zero, options: .init(zeroChunkFiles: .accept)) == nil)
        #expect(
            Fixture.failure(zero, options: .init(expectedChecksum: .md5Base64(Base64.encode(Hashes.md5(Data())))))?
                .code == .checksumMismatch)
        #expect(
            Fixture.failure(zero, options: .init(expectedChecksum: .md5Base64(md5), zeroChunkFiles: .reject))?.code
                == .fileTruncated)
    }

    /// Files no SDK writes, built with the stream primitives: wrong tags and missing FINAL.
    @Test func unusualTagsAreRejected() throws {
        /// Seals chunks of zeros with the given tags; a FINAL tag ends the stream (the encryptor is consumed).
        func build(_ chunks: [(Int, SecretStream.Tag)]) throws -> Data {
            let dk = SecretStream.Key()
            var file = try E3DBFileCipher.makePrefix(dataKey: dk, accessKey: Fixture.key)
            var encryptor = SecretStream.Encryptor(key: dk)
            file += encryptor.header.rawRepresentation
            for (size, tag) in chunks {
                let plain = Data(count: size)
                if tag == .final {
                    file += encryptor.finish(plain)
                    break
                }
                file += try encryptor.seal(plain, tag: tag)
            }
            return file
        }
        let full = E3DBFileFormat.plaintextChunkSize
        #expect(Fixture.failure(try build([(10, .push)]))?.code == .unexpectedChunkTag)
        #expect(Fixture.failure(try build([(full, .rekey), (1, .final)]))?.code == .unexpectedChunkTag)
        #expect(Fixture.failure(try build([(10, .message)]))?.code == .fileTruncated)
        #expect(Fixture.failure(try build([(full, .message), (full, .message)]))?.code == .fileTruncated)
        #expect(Fixture.failure(try build([(full, .final)]) + Data(count: 20))?.code == .trailingData)
        // A short non-final chunk shifts every later chunk boundary: authentication fails.
        #expect(Fixture.failure(try build([(100, .message), (5, .final)]))?.code == .chunkAuthenticationFailed)
        #expect(Fixture.failure(try build([(0, .final)])) == nil)
    }
}

/// A source whose reads fail with `failure`, as a file or pipe that goes away.
struct FailingSource: FileByteSource {
    struct Failure: Error, Equatable { let reason: String }
    let failure: Failure
    mutating func read(into buffer: inout MutableRawSpan) throws -> Int { throw failure }
}

@Suite("E3DBFiles: a failing source is reported with its cause")
struct IOCauseTests {
    @Test("a source's failure is .fileIOFailed carrying that failure as its cause")
    func sourceFailureCarriesCause() {
        var source = FailingSource(failure: .init(reason: "disk went away"))
        var sink = MemoryByteSink()
        do {
            _ = try E3DBFileCipher.encrypt(from: &source, to: &sink, accessKey: Fixture.key)
            Issue.record("a failing source encrypted")
        } catch {
            #expect(error.code == .fileIOFailed)
            #expect(error.cause as? FailingSource.Failure == .init(reason: "disk went away"))
        }
    }
}

/// A source that counts what it delivered and does not report its length (like a pipe).
struct CountingSource: FileByteSource {
    var inner: MemoryByteSource
    var bytesRead = 0
    init(_ bytes: Data, maxReadSize: Int = .max) { inner = MemoryByteSource(bytes, maxReadSize: maxReadSize) }
    mutating func read(into buffer: inout MutableRawSpan) throws -> Int {
        let n = try inner.read(into: &buffer)
        bytesRead += n
        return n
    }
}
