import E3DBFiles
import E3DBKeys
import E3DBPrimitives
import Foundation
import Testing

/// An async sequence that yields `bytes` in pieces of `size`.
struct Pieces: AsyncSequence, Sendable {
    typealias Element = Data
    let bytes: Data
    let size: Int
    struct AsyncIterator: AsyncIteratorProtocol {
        let bytes: Data
        let size: Int
        var offset = 0
        mutating func next() async -> Data? {
            guard offset < bytes.count else { return nil }
            let end = Swift.min(bytes.count, offset + size)
            defer { offset = end }
            return Data(bytes[(bytes.startIndex + offset)..<(bytes.startIndex + end)])
        }
    }
    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(bytes: bytes, size: size) }
}

@Suite("E3DB file v3: async sequences")
struct AsyncChunkTests {
    @Test(arguments: [0, 1, 65_536, 65_537, 131_073])
    func roundTripThroughAsyncSequences(size: Int) async throws {
        let plain = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        for pieceSize in [1_000, 65_536, 100_000] where size < 70_000 || pieceSize != 1 {
            var encrypted = Data()
            var pieces = 0
            for try await piece in Pieces(bytes: plain, size: pieceSize).e3dbFileEncrypted(accessKey: Fixture.key) {
                encrypted += piece
                pieces += 1
            }
            #expect(encrypted.count == E3DBFileFormat.encryptedSize(forPlaintextSize: size))
            #expect(pieces == 1 + E3DBFileFormat.chunkCount(forPlaintextSize: size))
            // The sync decryptor accepts it...
            var source = MemoryByteSource(encrypted)
            var sink = MemoryByteSink()
            _ = try E3DBFileCipher.decrypt(from: &source, to: &sink, accessKey: Fixture.key)
            #expect(sink.committed == plain)
            // ...and so does the async one, with any split.
            var decrypted = Data()
            for try await chunk in Pieces(bytes: encrypted, size: 7_777).e3dbFileDecrypted(accessKey: Fixture.key) {
                #expect(chunk.count <= E3DBFileFormat.plaintextChunkSize)
                decrypted += chunk
            }
            #expect(decrypted == plain)
        }
    }

    func asyncFailure(_ bytes: Data, key: AccessKey = Fixture.key) async -> E3DBError? {
        do {
            for try await _ in Pieces(bytes: bytes, size: 4_096).e3dbFileDecrypted(accessKey: key) {}
            return nil
        } catch let error as E3DBError {
            return error
        } catch {
            return nil
        }
    }

    @Test func asyncDecryptionIsStrict() async throws {
        let file = Fixture.file
        #expect(await asyncFailure(Data(file.prefix(Fixture.c1)))?.code == .fileTruncated)
        #expect(await asyncFailure(Data(file.prefix(Fixture.c0)))?.code == .fileTruncated)
        #expect(await asyncFailure(Data(file.prefix(50)))?.code == .fileTruncated)
        #expect(await asyncFailure(Data(file.prefix(Fixture.c1 + 100)))?.code == .chunkAuthenticationFailed)
        #expect(await asyncFailure(file, key: AccessKey())?.code == .wrongAccessKey)
        var flipped = file
        flipped[Fixture.c1 + 5] ^= 4
        let error = await asyncFailure(flipped)
        #expect(error?.code == .chunkAuthenticationFailed && error?.context.chunkIndex == 1)
        #expect(await asyncFailure(Data("1.".utf8) + file.dropFirst(2))?.code == .unsupportedFileVersion)
        let plain = Data(repeating: 1, count: 65_536)
        var full = Data()
        for try await piece in Pieces(bytes: plain, size: 65_536).e3dbFileEncrypted(accessKey: Fixture.key) {
            full += piece
        }
        #expect(await asyncFailure(full + Data([0]))?.code == .trailingData)
        #expect(await asyncFailure(full) == nil)
    }

    @Test func lastChunkIsHeldUntilTheEndIsVerified() async throws {
        // With one trailing byte after a full FINAL chunk, the FINAL chunk's plaintext is never yielded.
        let plain = Data(repeating: 9, count: 65_536)
        var file = Data()
        for try await piece in Pieces(bytes: plain, size: 65_536).e3dbFileEncrypted(accessKey: Fixture.key) {
            file += piece
        }
        var yielded = 0
        do {
            for try await _ in Pieces(bytes: file + Data([1]), size: 100).e3dbFileDecrypted(accessKey: Fixture.key) {
                yielded += 1
            }
            Issue.record("trailing data accepted")
        } catch {
            #expect((error as? E3DBError)?.code == .trailingData)
        }
        #expect(yielded == 0)
    }
}

/// The async sequences report the same checksums, sizes and chunk counts as every other API, on the same file.
@Suite("E3DB file v3: checksums agree across APIs")
struct ChecksumAgreementTests {
    @Test(arguments: [0, 1, 65_536, 150_001])
    func everyAPIReportsTheSameChecksums(size: Int) async throws {
        let plain = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 5) })
        let expectedChunks = E3DBFileFormat.chunkCount(forPlaintextSize: size)

        // Async encryption, all checksums.
        let encryption = Pieces(bytes: plain, size: 10_000).e3dbFileEncrypted(accessKey: Fixture.key, checksums: .all)
        #expect(encryption.report.result == nil)
        var file = Data()
        for try await piece in encryption { file += piece }
        let asyncEncrypted = try #require(encryption.report.result)
        let independent = FileChecksums(
            ciphertextBLAKE2b512: try BLAKE2b.hash(data: file, outputByteCount: 64),
            ciphertextMD5: Hashes.md5(file),
            plaintextBLAKE2b512: try BLAKE2b.hash(data: plain, outputByteCount: 64))
        #expect(asyncEncrypted.checksums == independent)
        #expect(asyncEncrypted.checksums.md5Base64 == Base64.encode(Hashes.md5(file)))
        #expect(asyncEncrypted.encryptedSize == file.count && asyncEncrypted.plaintextSize == size)
        #expect(asyncEncrypted.chunkCount == expectedChunks)

        // Synchronous decryption of the same bytes, inline and on the checksum thread.
        for concurrent in [true, false] {
            var source = MemoryByteSource(file, maxReadSize: 3_000)
            var sink = MemoryByteSink()
            let sync = try E3DBFileCipher.decrypt(
                from: &source, to: &sink, accessKey: Fixture.key,
                options: FileDecryptionOptions(checksums: .all, concurrentChecksums: concurrent))
            #expect(sync.checksums == independent)
            #expect(sync.encryptedSize == file.count && sync.plaintextSize == size && sync.chunkCount == expectedChunks)
        }

        // Async decryption.
        let decryption = Pieces(bytes: file, size: 4_321).e3dbFileDecrypted(accessKey: Fixture.key, checksums: .all)
        var decrypted = Data()
        for try await chunk in decryption { decrypted += chunk }
        #expect(decrypted == plain)
        let asyncDecrypted = try #require(decryption.report.result)
        #expect(asyncDecrypted.checksums == independent)
        #expect(asyncDecrypted.encryptedSize == file.count && asyncDecrypted.plaintextSize == size)
        #expect(asyncDecrypted.chunkCount == expectedChunks)

        // Checksums of the encrypted bytes alone, and the path API.
        var raw = MemoryByteSource(file)
        let (sums, count) = try E3DBFileCipher.checksums(of: &raw)
        #expect(count == file.count)
        #expect(
            sums.ciphertextBLAKE2b512 == independent.ciphertextBLAKE2b512
                && sums.ciphertextMD5 == independent.ciphertextMD5)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("e3db-sums-\(UUID().uuidString)")
        defer {
            try? FileManager.default.removeItem(at: url)
            try? FileManager.default.removeItem(at: url.appendingPathExtension("out"))
        }
        try file.write(to: url)
        let fromPath = try E3DBFileCipher.decryptFile(
            atPath: url.path, toPath: url.appendingPathExtension("out").path, accessKey: Fixture.key,
            options: FileDecryptionOptions(checksums: .all))
        #expect(fromPath.checksums == independent)

        // Synchronous encryption (a fresh data key, so other bytes): its report matches its own output.
        var plainSource = MemoryByteSource(plain)
        var encryptedSink = MemoryByteSink()
        let syncEncrypted = try E3DBFileCipher.encrypt(
            from: &plainSource, to: &encryptedSink, accessKey: Fixture.key,
            options: FileEncryptionOptions(checksums: .all))
        let other = try #require(encryptedSink.committed)
        #expect(syncEncrypted.checksums.ciphertextMD5 == Hashes.md5(other))
        #expect(syncEncrypted.checksums.plaintextBLAKE2b512 == asyncEncrypted.checksums.plaintextBLAKE2b512)
        #expect(syncEncrypted.chunkCount == asyncEncrypted.chunkCount && syncEncrypted.encryptedSize == file.count)
    }

    @Test func defaultsMatchTheSynchronousDefaults() async throws {
        let encryption = Pieces(bytes: Data(repeating: 1, count: 1000), size: 100).e3dbFileEncrypted(
            accessKey: Fixture.key)
        for try await _ in encryption {}
        let sums = try #require(encryption.report.result).checksums
        #expect(sums.ciphertextBLAKE2b512 != nil && sums.ciphertextMD5 != nil && sums.plaintextBLAKE2b512 == nil)
        #expect(FileEncryptionOptions().checksums == [.ciphertextBLAKE2b512, .ciphertextMD5])
    }

    @Test func aFailedIterationReportsNothing() async throws {
        var bad = Fixture.file
        bad[bad.count - 1] ^= 1
        let decryption = Pieces(bytes: bad, size: 9_999).e3dbFileDecrypted(accessKey: Fixture.key, checksums: .all)
        await #expect(throws: E3DBError.self) {
            for try await _ in decryption {}
        }
        #expect(decryption.report.result == nil)
    }
}
