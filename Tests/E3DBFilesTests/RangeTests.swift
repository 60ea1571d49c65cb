import E3DBKeys
import E3DBPrimitives
import Foundation
import Testing

@testable import E3DBFiles

/// Range reads compared with full decryption, and their failure modes.
@Suite("E3DB file v3: byte-range reads")
struct RangeReadTests {
    static let key = AccessKey()
    static let chunk = E3DBFileFormat.plaintextChunkSize

    static func plaintext(_ size: Int) -> Data {
        Data((0..<size).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) })
    }

    static func encrypted(_ plain: Data) throws -> Data {
        var source = MemoryByteSource(plain)
        var sink = MemoryByteSink()
        _ = try E3DBFileCipher.encrypt(from: &source, to: &sink, accessKey: key)
        return try #require(sink.committed)
    }

    static func read(
        _ range: ClosedRange<Int>, _ file: Data, key: AccessKey = key
    ) throws(E3DBError) -> (Data, FileRangeDecryptionResult) {
        var sink = MemoryByteSink()
        do {
            let result = try E3DBFileCipher.decryptRange(
                range, from: MemoryRandomAccessSource(file), to: &sink, accessKey: key)
            return (sink.committed ?? Data(), result)
        } catch {
            #expect(sink.committed == nil && sink.aborted, "output committed despite \(error.code)")
            throw error
        }
    }

    static func failure(_ range: ClosedRange<Int>, _ file: Data, key: AccessKey = key) -> E3DBError? {
        do {
            _ = try read(range, file, key: key)
            return nil
        } catch {
            return error
        }
    }

    /// Ranges that start and end on, just before and just after chunk boundaries, single bytes, the whole file.
    static func ranges(forSize size: Int) -> [ClosedRange<Int>] {
        var points = Set([0, 1, size / 2, size - 2, size - 1])
        var boundary = chunk
        while boundary < size + chunk {
            for p in [boundary - 2, boundary - 1, boundary, boundary + 1] { points.insert(p) }
            boundary += chunk
        }
        let valid = points.filter { $0 >= 0 && $0 < size }.sorted()
        var ranges: [ClosedRange<Int>] = [0...(size - 1)]
        for p in valid {
            ranges.append(p...p)
            ranges.append(p...(size - 1))
            ranges.append(0...p)
            for q in valid where q > p { ranges.append(p...q) }
        }
        return ranges
    }

    @Test func libsodiumStateCanBePositioned() {
        #expect(SecretStream.positioningIsSupported)
    }

    @Test(arguments: [1, 2, 17, 65_535, 65_536, 65_537, 131_072, 200_000])
    func everyRangeMatchesFullDecryption(size: Int) throws {
        let plain = Self.plaintext(size)
        let file = try Self.encrypted(plain)
        let layout = try FileChunkLayout(encryptedSize: file.count)
        #expect(layout.plaintextSize == size)
        #expect(layout.chunkCount == E3DBFileFormat.chunkCount(forPlaintextSize: size))
        for range in Self.ranges(forSize: size) {
            let (bytes, result) = try Self.read(range, file)
            #expect(bytes == plain[range], "range \(range) of \(size)")
            #expect(result.range == range && result.plaintextSize == size)
            let first = range.lowerBound / Self.chunk
            let last = range.upperBound / Self.chunk
            #expect(result.chunks == first...last)
            // Only the headers, 16 bytes of MAC per chunk skipped, and the chunks holding the range are read.
            let chunkBytes = (first...last).reduce(0) { $0 + layout.size(ofChunk: $1) }
            #expect(result.encryptedBytesRead == 124 + 16 * first + chunkBytes, "range \(range)")
        }
    }

    @Test func rangesFromARegularFile() throws {
        let plain = Self.plaintext(300_000)
        let file = try Self.encrypted(plain)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("e3db-range-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: url) }
        try file.write(to: url)
        for range in [0...0, 65_536...65_536, 131_000...262_200, 299_999...299_999, 0...299_999] {
            #expect(try E3DBFileCipher.decryptRange(range, ofFileAtPath: url.path, accessKey: Self.key) == plain[range])
        }
        let fd = open(url.path, O_RDONLY)
        defer { close(fd) }
        let source = try FileDescriptorRandomAccessSource(fileDescriptor: fd)
        #expect(source.byteCount == file.count)
        var sink = MemoryByteSink()
        _ = try E3DBFileCipher.decryptRange(200_000...200_009, from: source, to: &sink, accessKey: Self.key)
        #expect(sink.committed == plain[200_000...200_009])
        #expect(lseek(fd, 0, SEEK_CUR) == 0, "pread leaves the descriptor's offset alone")
    }

    @Test func outOfBoundsAndEmptyFiles() throws {
        let file = try Self.encrypted(Self.plaintext(1000))
        for range in [1000...1000, 999...1000, 0...1000, 5000...6000, -1...3] {
            let error = Self.failure(range, file)
            #expect(error?.code == .rangeNotSatisfiable, "\(range)")
        }
        #expect(Self.failure(999...999, file) == nil)
        let empty = try Self.encrypted(Data())
        #expect(empty.count == 141)
        #expect(Self.failure(0...0, empty)?.code == .rangeNotSatisfiable)
        #expect(Self.failure(0...0, Data(empty.prefix(124)))?.code == .rangeNotSatisfiable)
        #expect(Self.failure(0...0, Data(empty.prefix(100)))?.code == .fileTruncated)
        #expect(Self.failure(0...0, Data())?.code == .fileTruncated)
        #expect(Self.failure(0...0, file, key: AccessKey())?.code == .wrongAccessKey)
    }

    @Test func tamperingInsideOrBeforeTheRangeIsDetected() throws {
        let plain = Self.plaintext(300_000)
        let file = try Self.encrypted(plain)
        let layout = try FileChunkLayout(encryptedSize: file.count)
        let target = 2 * Self.chunk + 10  // a byte in chunk 2
        // A bit flipped in each of the MACs of chunks 0 and 1 (which position chunk 2), in chunk 2 itself, and in
        // the stream header.
        let macOf0 = layout.offset(ofChunk: 1) - 16
        let macOf1 = layout.offset(ofChunk: 2) - 16 + 7  // the last byte that feeds the nonce
        let inChunk2 = layout.offset(ofChunk: 2) + 500
        for (offset, code) in [
            (macOf0, E3DBError.Code.chunkAuthenticationFailed), (macOf0 + 7, .chunkAuthenticationFailed),
            (macOf1, .chunkAuthenticationFailed), (inChunk2, .chunkAuthenticationFailed),
            (layout.offset(ofChunk: 2), .chunkAuthenticationFailed), (110, .chunkAuthenticationFailed),
        ] {
            var bad = file
            bad[offset] ^= 0x10
            let error = Self.failure(target...(target + 100), bad)
            #expect(error?.code == code, "bit flipped at \(offset): \(String(describing: error))")
            if code == .chunkAuthenticationFailed { #expect(error?.context.chunkIndex == 2) }
        }
        var edk = file
        edk[20] = edk[20] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(Self.failure(target...target, edk)?.code == .wrongAccessKey)
        // Chunks swapped: chunk 1's bytes at chunk 0's place and the reverse.
        let c0 = file[layout.offset(ofChunk: 0)..<layout.offset(ofChunk: 1)]
        let c1 = file[layout.offset(ofChunk: 1)..<layout.offset(ofChunk: 2)]
        let swapped = file.prefix(124) + c1 + c0 + file[layout.offset(ofChunk: 2)...]
        #expect(Self.failure(0...10, Data(swapped))?.code == .chunkAuthenticationFailed)
        #expect(Self.failure(70_000...70_010, Data(swapped))?.code == .chunkAuthenticationFailed)
        // The last 8 bytes of a skipped chunk's MAC, and its body, do not position anything: only a full read
        // notices them (documented).
        var outside = file
        outside[macOf0 + 12] ^= 1
        outside[layout.offset(ofChunk: 1) + 100] ^= 1
        #expect(try Self.read(target...(target + 100), outside).0 == plain[target...(target + 100)])
        var source = MemoryByteSource(outside)
        var sink = MemoryByteSink()
        #expect(throws: E3DBError.self) {
            _ = try E3DBFileCipher.decrypt(from: &source, to: &sink, accessKey: Self.key)
        }
    }

    @Test func truncationAndAppendedDataAreDetectedWhenTheRangeReachesTheEnd() throws {
        // 3 full chunks: the last full chunk carries FINAL.
        let plain = Self.plaintext(3 * Self.chunk)
        let file = try Self.encrypted(plain)
        let layout = try FileChunkLayout(encryptedSize: file.count)
        // Cut at the chunk boundary after chunk 1: chunk 1 is now the last chunk, but carries MESSAGE.
        let cut = Data(file.prefix(layout.offset(ofChunk: 2)))
        #expect(Self.failure(70_000...70_001, cut)?.code == .fileTruncated)
        // Before the cut, the range read cannot tell (documented).
        #expect(Self.failure(0...10, cut) == nil)
        // Cut inside the last chunk.
        #expect(Self.failure(150_000...150_001, Data(file.dropLast(5)))?.code == .chunkAuthenticationFailed)
        #expect(Self.failure(0...1, Data(file.dropLast(layout.lastChunkSize - 5)))?.code == .fileTruncated)
        // Data appended after a full FINAL chunk: chunk 2 is FINAL but no longer the last.
        let appended = file + Data(repeating: 0xee, count: 40)
        let error = Self.failure(140_000...140_001, appended)
        #expect(error?.code == .trailingData)
        #expect(error?.context.offset == file.count)
        // Data appended after a short FINAL chunk merges with it; still trailing data at the right offset.
        let short = try Self.encrypted(Self.plaintext(100_000))
        let shortError = Self.failure(99_990...99_999, short + Data([1, 2, 3]))
        #expect(shortError?.code == .trailingData)
        #expect(shortError?.context.offset == short.count)
        #expect(Self.failure(0...10, short + Data([1, 2, 3])) == nil)
    }
}

@Suite("E3DB file v3: the stream is consumed by the FINAL chunk")
struct StreamConsumptionTests {
    @Test func finalChunkConsumesTheDecryptor() throws {
        let file = try RangeReadTests.encrypted(RangeReadTests.plaintext(70_000))
        let prefix = Data(file.prefix(E3DBFileFormat.prefixSize))
        var decryptor: SecretStream.Decryptor? = try E3DBFileCipher.openPrefix(prefix, accessKey: RangeReadTests.key)
        let output = UnsafeMutableRawBufferPointer.allocate(byteCount: E3DBFileFormat.plaintextChunkSize, alignment: 16)
        let input = UnsafeMutableRawBufferPointer.allocate(byteCount: E3DBFileFormat.ciphertextChunkSize, alignment: 16)
        defer {
            output.deallocate()
            input.deallocate()
        }
        let bounds = [124..<(124 + 65_553), (124 + 65_553)..<file.count]
        var tags: [SecretStream.Tag] = []
        for (index, range) in bounds.enumerated() {
            file.copyBytes(to: input, from: range)
            let chunk = UnsafeRawBufferPointer(rebasing: input[0..<range.count])
            let (_, tag) = try E3DBFileCipher.openChunk(
                chunk, into: output, decryptor: &decryptor, index: index, offset: 0)
            tags.append(tag)
            #expect((decryptor != nil) == (tag == .message), "the stream is handed back only after MESSAGE")
        }
        #expect(tags == [.message, .final])
        // Nothing can be opened after FINAL: the stream is gone.
        let last = UnsafeRawBufferPointer(rebasing: input[0..<bounds[1].count])
        do {
            _ = try E3DBFileCipher.openChunk(last, into: output, decryptor: &decryptor, index: 2, offset: 0)
            Issue.record("a chunk was opened after FINAL")
        } catch {
            #expect(error.code == .trailingData)
        }
    }
}

@Suite("E3DB file v3: temporary outputs")
struct TemporaryOutputTests {
    static func directory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("e3db-atomic-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test func atomicSinkShowsNothingUntilCommitAndLeavesNothingOnAbort() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let target = dir.appendingPathComponent(String(repeating: "n", count: 250)).path  // a long name works
        let sink = try AtomicFileSink(path: target)
        try Data(repeating: 1, count: 1000).withUnsafeBytes { try sink.write($0) }
        let during = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #if os(Linux)
            #expect(sink.isUnnamedUntilCommit)
        #endif
        #expect(
            during == (sink.isUnnamedUntilCommit ? [] : [URL(fileURLWithPath: sink.temporaryPath).lastPathComponent]))
        try sink.finish()
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir.path) == [
                URL(fileURLWithPath: target).lastPathComponent
            ])
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data(repeating: 1, count: 1000))

        let aborted = try AtomicFileSink(path: dir.appendingPathComponent("other").path)
        try Data(repeating: 2, count: 10).withUnsafeBytes { try aborted.write($0) }
        aborted.abort()
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir.path) == [
                URL(fileURLWithPath: target).lastPathComponent
            ])
    }

    /// `removeAll()` is `remove(slot:)` over every slot; only this test's slots are removed here, since other
    /// tests in the process may be committing files at the same moment.
    @Test func registeredTemporaryFilesAreRemovedFromTheirSlots() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(at: dir) }
        PendingTemporaryFiles.prepare()
        let paths = (0..<3).map { dir.appendingPathComponent(".e3dbkit-test\($0).tmp").path }
        var slots: [Int?] = []
        for path in paths {
            #expect(FileManager.default.createFile(atPath: path, contents: Data([1])))
            slots.append(TemporaryFileRegistry.register(path))
        }
        #expect(slots.allSatisfy { $0 != nil })
        // Unregistering (what a commit or an abort does) frees the slot and leaves the file to its owner.
        TemporaryFileRegistry.unregister(slots[1])
        #expect(FileManager.default.fileExists(atPath: paths[1]))
        // Removing a slot unlinks its file.
        for slot in [slots[0], slots[2]].compactMap({ $0 }) { TemporaryFileRegistry.remove(slot: slot) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == [".e3dbkit-test1.tmp"])
    }
}
