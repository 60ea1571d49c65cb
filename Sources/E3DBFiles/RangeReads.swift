public import E3DBKeys
public import E3DBPrimitives

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

extension E3DBError.Code {
    /// A requested plaintext byte range does not lie within the file: its last byte is at or beyond the
    /// plaintext size (`context.expected` is the plaintext size, `context.actual` the last byte asked for), or
    /// it starts below 0.
    public static let rangeNotSatisfiable = Self("rangeNotSatisfiable", category: .invalidArgument)
    /// Range reads are unavailable because the linked libsodium does not advance its secretstream state the way
    /// range reads rely on (checked once at run time; never seen with libsodium 1.0.18 or later).
    public static let rangeReadsUnavailable = Self("rangeReadsUnavailable", category: .system)
}

/// Bytes that can be read at any offset: a regular file, or memory. Range reads need one.
public protocol FileRandomAccessSource {
    /// The total length in bytes.
    var byteCount: Int { get }

    /// Reads up to `buffer.byteCount` bytes starting at `offset` into the start of `buffer`.
    ///
    /// - Parameters:
    ///   - buffer: where to put the bytes (a bounds-checked span that cannot outlive the call); never empty.
    ///   - offset: the position of the first byte, in `0..<byteCount`.
    /// - Returns: the number of bytes read; 0 only at or after the end.
    /// - Throws: any I/O error; range reads report it as `.fileIOFailed`.
    func read(into buffer: inout MutableRawSpan, atOffset offset: Int) throws -> Int
}

extension FileRandomAccessSource {
    /// ``read(into:atOffset:)`` over memory the package's range reader owns (its wiped chunk buffers).
    package func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: Int) throws -> Int {
        var span = unsafe MutableRawSpan(_unsafeBytes: buffer)
        return try read(into: &span, atOffset: offset)
    }
}

/// A ``FileRandomAccessSource`` over bytes in memory.
public struct MemoryRandomAccessSource: FileRandomAccessSource, Sendable {
    private let bytes: Data

    /// Creates a source over `bytes`.
    ///
    /// - Parameter bytes: the encrypted file.
    public init(_ bytes: Data) { self.bytes = bytes }

    /// The length of `bytes`.
    public var byteCount: Int { bytes.count }

    /// See ``FileRandomAccessSource/read(into:atOffset:)``.
    public func read(into buffer: inout MutableRawSpan, atOffset offset: Int) throws -> Int {
        guard offset >= 0, offset < bytes.count else { return 0 }
        let count = min(buffer.byteCount, bytes.count - offset)
        let start = bytes.startIndex + offset
        unsafe buffer.withUnsafeMutableBytes { _ = unsafe bytes.copyBytes(to: $0, from: start..<(start + count)) }
        return count
    }
}

/// A ``FileRandomAccessSource`` over an open regular file, read with `pread` (the descriptor's offset is not
/// used or changed). It does not close the descriptor.
public struct FileDescriptorRandomAccessSource: FileRandomAccessSource, Sendable {
    /// The descriptor read from.
    public let fileDescriptor: Int32
    /// The file's size when the source was created.
    public let byteCount: Int

    /// Creates a source over `fileDescriptor`.
    ///
    /// - Parameter fileDescriptor: an open, readable descriptor of a regular file.
    /// - Throws: `E3DBError` with `.invalidParameter` when the descriptor is not a regular file (a pipe
    ///   cannot be read at an offset), `.fileIOFailed` when `fstat` fails.
    public init(fileDescriptor: Int32) throws(E3DBError) {
        var info = stat()
        guard unsafe fstat(fileDescriptor, &info) == 0 else {
            throw E3DBError(.fileIOFailed, "\(FileSystemError(operation: "fstat", errno: errno, path: nil))")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw E3DBError(.invalidParameter, "range reads need a regular file, not a pipe, socket or device")
        }
        self.fileDescriptor = fileDescriptor
        self.byteCount = Int(info.st_size)
    }

    /// See ``FileRandomAccessSource/read(into:atOffset:)``. Retries on `EINTR`.
    public func read(into buffer: inout MutableRawSpan, atOffset offset: Int) throws -> Int {
        let fd = fileDescriptor
        return try unsafe buffer.withUnsafeMutableBytes { buffer in
            try fileSystemCall { () throws(FileIOError) in try unsafe FileIO.read(fd, into: buffer, at: offset) }
        }
    }
}

/// Where the chunks of an E3DB v3 file lie, computed from its encrypted length alone.
public struct FileChunkLayout: Sendable, Hashable {
    /// The encrypted length.
    public var encryptedSize: Int
    /// The number of chunks (0 for a 124-byte file with no chunk).
    public var chunkCount: Int
    /// The length of the last chunk in bytes (17...65,553), 0 when there is no chunk.
    public var lastChunkSize: Int
    /// The plaintext length the file decrypts to if it is intact.
    public var plaintextSize: Int

    /// The layout of a file `encryptedSize` bytes long: every chunk but the last is 65,553 bytes.
    ///
    /// - Parameter encryptedSize: the file's length.
    /// - Throws: `E3DBError` with `.fileTruncated` when no E3DB v3 file has this length (shorter than
    ///   the 124 header bytes, or the last chunk would be shorter than 17 bytes).
    public init(encryptedSize: Int) throws(E3DBError) {
        let prefix = E3DBFileFormat.prefixSize
        let full = E3DBFileFormat.ciphertextChunkSize
        guard encryptedSize >= prefix else {
            throw E3DBError(
                .fileTruncated, "the input is \(encryptedSize) bytes, shorter than the 124 header bytes",
                context: .at(offset: max(0, encryptedSize), part: "headers"))
        }
        let body = encryptedSize - prefix
        let count = (body + full - 1) / full
        let last = body - max(0, count - 1) * full
        if count > 0, last < E3DBFileFormat.chunkOverhead {
            throw E3DBError(
                .fileTruncated,
                "the input ends \(last) bytes into chunk \(count - 1), too short to be a chunk (17 bytes minimum)",
                context: .at(offset: encryptedSize, chunk: count - 1, part: "chunk"))
        }
        self.encryptedSize = encryptedSize
        self.chunkCount = count
        self.lastChunkSize = count > 0 ? last : 0
        self.plaintextSize = body - E3DBFileFormat.chunkOverhead * count
    }

    /// The offset of chunk `index`'s first byte.
    public func offset(ofChunk index: Int) -> Int {
        E3DBFileFormat.prefixSize + index * E3DBFileFormat.ciphertextChunkSize
    }

    /// The length of chunk `index`.
    public func size(ofChunk index: Int) -> Int {
        index == chunkCount - 1 ? lastChunkSize : E3DBFileFormat.ciphertextChunkSize
    }
}

/// The outcome of a range read.
public struct FileRangeDecryptionResult: Sendable, Hashable {
    /// The plaintext bytes delivered (the range asked for).
    public var range: ClosedRange<Int>
    /// The file's plaintext length, from its encrypted length.
    public var plaintextSize: Int
    /// The chunks opened and authenticated.
    public var chunks: ClosedRange<Int>
    /// Encrypted bytes read: the headers, 16 bytes of MAC per chunk before the range, and the chunks opened.
    public var encryptedBytesRead: Int
}

extension E3DBFileCipher {
    /// Decrypts plaintext bytes `range` (offsets in the plaintext, both ends included, as in an HTTP `Range`
    /// header) of an E3DB v3 file, reading only the headers, the 16-byte MACs of the chunks before the range, and
    /// the chunks that hold it.
    ///
    /// How: secretstream's state after a chunk tagged MESSAGE depends only on the key, the stream header and the
    /// MACs of the chunks so far (each MAC's first 8 bytes are XORed into the nonce, and a counter increments), so
    /// the state for chunk `i` is rebuilt from the MACs of chunks `0..<i`, which sit at known offsets. Nothing is
    /// trusted on the way: every chunk that delivers bytes is opened with libsodium and authenticates only if the
    /// MACs before it, its position and its own bytes are exactly what the writer produced. Chunks before the last
    /// one must carry MESSAGE and the file's last chunk FINAL.
    ///
    /// The sink is finished only after every chunk of the range authenticated; on any failure it is aborted.
    ///
    /// - Important: a range read proves the bytes it returns, not the whole file. A file cut at a chunk boundary
    ///   after the range, or altered outside the range, is detected only by a full decryption
    ///   (``decrypt(from:to:accessKey:options:)``) or by a range that covers its last chunk.
    /// - Parameters:
    ///   - range: plaintext offsets, first and last byte included.
    ///   - source: the encrypted file, readable at any offset.
    ///   - sink: receives exactly `range.count` plaintext bytes.
    ///   - accessKey: the access key the file's data key was sealed with.
    /// - Returns: the range, the file's plaintext size, the chunks opened and the bytes read.
    /// - Throws: `E3DBError` with `.rangeNotSatisfiable` (the range ends at or beyond the plaintext size,
    ///   or starts below 0; an empty file has no satisfiable range), the header codes of
    ///   ``decrypt(from:to:accessKey:options:)`` (`.malformedFileHeader`, `.wrongAccessKey`, ...),
    ///   `.fileTruncated` (impossible length, or the file's last chunk is not FINAL),
    ///   `.trailingData`, `.chunkAuthenticationFailed`, `.unexpectedChunkTag`, `.fileIOFailed`.
    public static func decryptRange<S: FileByteSink>(
        _ range: ClosedRange<Int>,
        from source: some FileRandomAccessSource,
        to sink: inout S,
        accessKey: AccessKey
    ) throws(E3DBError) -> FileRangeDecryptionResult {
        try committing(to: &sink, "decrypted") { (sink: inout S) throws(E3DBError) in
            try decryptRangeBody(range, from: source, to: &sink, accessKey: accessKey)
        }
    }

    /// Decrypts plaintext bytes `range` of the E3DB v3 file at `path` into memory; see
    /// ``decryptRange(_:from:to:accessKey:)``.
    ///
    /// - Parameters:
    ///   - range: plaintext offsets, first and last byte included.
    ///   - path: a regular file.
    ///   - accessKey: the access key.
    /// - Returns: the `range.count` plaintext bytes.
    /// - Throws: as ``decryptRange(_:from:to:accessKey:)``; `.fileIOFailed` when the file cannot be
    ///   opened, `.invalidParameter` when it is not a regular file.
    public static func decryptRange(
        _ range: ClosedRange<Int>, ofFileAtPath path: String, accessKey: AccessKey
    ) throws(E3DBError) -> Data {
        let fd = try openForReading(path)
        defer { _ = close(fd) }
        let source = try FileDescriptorRandomAccessSource(fileDescriptor: fd)
        var sink = MemoryByteSink()
        _ = try decryptRange(range, from: source, to: &sink, accessKey: accessKey)
        return sink.committed ?? Data()
    }

    static func decryptRangeBody(
        _ range: ClosedRange<Int>,
        from source: some FileRandomAccessSource,
        to sink: inout some FileByteSink,
        accessKey: AccessKey
    ) throws(E3DBError) -> FileRangeDecryptionResult {
        guard SecretStream.positioningIsSupported else {
            throw E3DBError(
                .rangeReadsUnavailable,
                "the linked libsodium does not advance secretstream state as range reads expect; decrypt whole files")
        }
        // One chunk of ciphertext and its plaintext, in wiped scratch.
        let cipherScratch = WipedBuffer(count: E3DBFileFormat.ciphertextChunkSize)
        let plainScratch = WipedBuffer(count: E3DBFileFormat.plaintextChunkSize)
        return try unsafe cipherScratch.withUnsafeMutableBytes { (cipherBuffer) throws(E3DBError) in
            try unsafe plainScratch.withUnsafeMutableBytes { (plainBuffer) throws(E3DBError) in
                try unsafe decryptRange(
                    range, from: source, to: &sink, accessKey: accessKey, cipherBuffer: cipherBuffer,
                    plainBuffer: plainBuffer)
            }
        }
    }

    /// ``decryptRangeBody(_:from:to:accessKey:)`` with its two chunk buffers.
    private static func decryptRange(
        _ range: ClosedRange<Int>,
        from source: some FileRandomAccessSource,
        to sink: inout some FileByteSink,
        accessKey: AccessKey,
        cipherBuffer: UnsafeMutableRawBufferPointer,
        plainBuffer: UnsafeMutableRawBufferPointer
    ) throws(E3DBError) -> FileRangeDecryptionResult {
        let size = source.byteCount
        // Headers first, so a wrong key or a damaged header is reported before any size or range problem.
        let prefixCount = try unsafe readFullyAt(
            source, at: 0,
            into: UnsafeMutableRawBufferPointer(
                rebasing: cipherBuffer[0..<min(max(0, size), E3DBFileFormat.prefixSize)]))
        var stream = try unsafe openPrefix(
            Data(UnsafeRawBufferPointer(rebasing: cipherBuffer[0..<prefixCount])), accessKey: accessKey)
        var bytesRead = prefixCount
        let layout = try FileChunkLayout(encryptedSize: size)
        guard range.lowerBound >= 0, range.upperBound < layout.plaintextSize else {
            var context = E3DBError.Context()
            context.expected = layout.plaintextSize
            context.actual = range.upperBound
            context.part = "range"
            throw E3DBError(
                .rangeNotSatisfiable,
                layout.plaintextSize == 0
                    ? "the file's plaintext is empty: no byte range can be read from it"
                    : "bytes \(range.lowerBound)-\(range.upperBound) are not within the plaintext of "
                        + "\(layout.plaintextSize) bytes (0-\(layout.plaintextSize - 1))",
                context: context)
        }
        let chunkSize = E3DBFileFormat.plaintextChunkSize
        let first = range.lowerBound / chunkSize
        let last = range.upperBound / chunkSize

        // Rebuild the state for chunk `first` from the MACs (last 16 bytes) of the chunks before it.
        let mac = unsafe UnsafeMutableRawBufferPointer(rebasing: cipherBuffer[0..<SecretStream.macByteCount])
        for index in 0..<first {
            let end = layout.offset(ofChunk: index) + E3DBFileFormat.ciphertextChunkSize
            let n = try unsafe readFullyAt(source, at: end - SecretStream.macByteCount, into: mac)
            guard n == SecretStream.macByteCount else { throw shrank(size, at: end) }
            try unsafe stream.skipMessageChunk(mac: UnsafeRawBufferPointer(mac))
            bytesRead += n
        }

        var decryptor: SecretStream.Decryptor? = consume stream
        for index in first...last {
            let offset = layout.offset(ofChunk: index)
            let length = layout.size(ofChunk: index)
            let input = unsafe UnsafeMutableRawBufferPointer(rebasing: cipherBuffer[0..<length])
            let n = try unsafe readFullyAt(source, at: offset, into: input)
            guard n == length else { throw shrank(size, at: offset + n) }
            bytesRead += n
            let (count, tag) = try unsafe openChunk(
                UnsafeRawBufferPointer(input), into: plainBuffer, decryptor: &decryptor, index: index, offset: offset)
            let isLastOfFile = index == layout.chunkCount - 1
            if isLastOfFile, tag != .final {
                throw E3DBError(
                    .fileTruncated,
                    "the input ends after chunk \(index) at byte \(offset + length) without a chunk tagged FINAL",
                    context: .at(offset: offset + length, chunk: index + 1, part: "chunks"))
            }
            if !isLastOfFile, tag == .final {
                throw E3DBError(
                    .trailingData, "data follows the chunk tagged FINAL, at byte \(offset + length)",
                    context: .at(offset: offset + length, chunk: index + 1))
            }
            let base = index * chunkSize
            let lower = index == first ? range.lowerBound - base : 0
            let upper = index == last ? range.upperBound - base + 1 : count
            guard lower <= upper, upper <= count else {
                throw E3DBError(
                    .fileTruncated, "chunk \(index) holds \(count) bytes, fewer than its place in the file requires",
                    context: .at(offset: offset, chunk: index, part: "chunk"))
            }
            try unsafe write(UnsafeRawBufferPointer(rebasing: plainBuffer[lower..<upper]), to: &sink)
        }
        return FileRangeDecryptionResult(
            range: range, plaintextSize: layout.plaintextSize, chunks: first...last, encryptedBytesRead: bytesRead)
    }

    /// The file got shorter while it was being read.
    static func shrank(_ size: Int, at offset: Int) -> E3DBError {
        E3DBError(
            .fileTruncated, "the input ended at byte \(offset), before its size of \(size) bytes (did it change?)",
            context: .at(offset: offset, part: "chunks"))
    }

    /// Reads at `offset` until `buffer` is full or the source ends.
    static func readFullyAt(
        _ source: some FileRandomAccessSource, at offset: Int, into buffer: UnsafeMutableRawBufferPointer
    ) throws(E3DBError) -> Int {
        try unsafe fill(buffer) { part, filled in try unsafe source.read(into: part, atOffset: offset + filled) }
    }
}
