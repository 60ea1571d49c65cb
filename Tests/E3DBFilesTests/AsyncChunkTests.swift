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
        for try await piece in Pieces(bytes: plain, size: 65_536).e3dbFileEncrypted(accessKey: Fixture.key) { full += piece }
        #expect(await asyncFailure(full + Data([0]))?.code == .trailingData)
        #expect(await asyncFailure(full) == nil)
    }

    @Test func lastChunkIsHeldUntilTheEndIsVerified() async throws {
        // With one trailing byte after a full FINAL chunk, the FINAL chunk's plaintext is never yielded.
        let plain = Data(repeating: 9, count: 65_536)
        var file = Data()
        for try await piece in Pieces(bytes: plain, size: 65_536).e3dbFileEncrypted(accessKey: Fixture.key) { file += piece }
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
