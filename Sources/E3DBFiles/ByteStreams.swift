import E3DBPrimitives

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A source of bytes that the file cipher pulls from: a file, a pipe, memory, a network body.
///
/// The cipher asks for at most `buffer.byteCount` bytes per call and copes with short reads, so a source may
/// return any positive count. It returns 0 only at the end of input. The buffer is a bounds-checked
/// `MutableRawSpan` that cannot outlive the call: write with `storeBytes(of:toByteOffset:as:)`, or hand
/// `withUnsafeMutableBytes` to a system call.
public protocol FileByteSource {
    /// Reads up to `buffer.byteCount` bytes into the start of `buffer`.
    ///
    /// - Parameter buffer: where to put the bytes; never empty.
    /// - Returns: the number of bytes written to the start of `buffer`; 0 means end of input.
    /// - Throws: any I/O error; the cipher reports it as `.fileIOFailed`.
    mutating func read(into buffer: inout MutableRawSpan) throws -> Int

    /// How many bytes the source will deliver in all, when known. Used only for progress reports.
    var totalByteCount: Int? { get }
}

extension FileByteSource {
    /// Unknown by default.
    public var totalByteCount: Int? { nil }

    /// ``read(into:)`` over memory the package's ciphers own (their wiped chunk buffers).
    package mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        var span = unsafe MutableRawSpan(_unsafeBytes: buffer)
        return try read(into: &span)
    }
}

/// A destination for the bytes a file cipher produces.
///
/// Decryption writes plaintext as each chunk authenticates, then calls ``finish()`` only after the FINAL chunk,
/// the end of input and any expected checksum have been verified. On any failure it calls ``abort()`` instead; a
/// sink must then discard (or never expose) what it was given. Nothing written before `finish()` may be treated
/// as valid plaintext.
public protocol FileByteSink {
    /// Appends `bytes`.
    ///
    /// - Parameter bytes: the next bytes of output, a `RawSpan` that cannot outlive the call (read it with
    ///   `withUnsafeBytes`, or `unsafeLoad(fromByteOffset:as:)`).
    /// - Throws: any I/O error; the cipher reports it as `.fileIOFailed` and calls ``abort()``.
    mutating func write(_ bytes: RawSpan) throws

    /// Commits the output: everything written is complete and verified.
    ///
    /// - Throws: any I/O error (for example a failed rename); the cipher reports it as
    ///   `.fileIOFailed`.
    mutating func finish() throws

    /// Discards the output after a failure. Must not throw.
    mutating func abort()
}

extension FileByteSink {
    /// ``write(_:)`` from memory the package's ciphers own (their wiped chunk buffers).
    package mutating func write(_ bytes: UnsafeRawBufferPointer) throws {
        try write(unsafe RawSpan(_unsafeBytes: bytes))
    }
}

extension FileByteSink where Self: AnyObject {
    /// ``write(_:)`` from package memory, for a sink that is a class (callable on a `let`).
    package func write(_ bytes: UnsafeRawBufferPointer) throws {
        var sink = self
        try sink.write(unsafe RawSpan(_unsafeBytes: bytes))
    }
}

/// A ``FileByteSource`` over bytes in memory. `maxReadSize` limits each read, to model a source that returns
/// short reads (tests use it to split input at arbitrary places).
public struct MemoryByteSource: FileByteSource, Sendable {
    private let bytes: Data
    private var position: Data.Index
    private let maxReadSize: Int

    /// Creates a source that delivers `bytes`.
    ///
    /// - Parameters:
    ///   - bytes: the input.
    ///   - maxReadSize: the most bytes one read returns (at least 1).
    public init(_ bytes: Data, maxReadSize: Int = .max) {
        self.bytes = bytes
        self.position = bytes.startIndex
        self.maxReadSize = max(1, maxReadSize)
    }

    /// See ``FileByteSource/read(into:)``.
    public mutating func read(into buffer: inout MutableRawSpan) throws -> Int {
        let count = min(buffer.byteCount, maxReadSize, bytes.endIndex - position)
        guard count > 0 else { return 0 }
        let range = position..<(position + count)
        unsafe buffer.withUnsafeMutableBytes { _ = unsafe bytes.copyBytes(to: $0, from: range) }
        position += count
        return count
    }

    /// The length of the input.
    public var totalByteCount: Int? { bytes.count }
}

/// A ``FileByteSink`` that collects output in memory and exposes it only once finished.
///
/// - Warning: it holds the whole output; for large files use a file or descriptor sink.
public struct MemoryByteSink: FileByteSink, Sendable {
    private var buffer = Data()
    /// The output, set only by ``finish()``; nil while writing and after ``abort()``.
    public private(set) var committed: Data?
    /// True once ``abort()`` was called.
    public private(set) var aborted = false

    /// Creates an empty sink.
    public init() {}

    /// See ``FileByteSink/write(_:)``.
    public mutating func write(_ bytes: RawSpan) throws {
        unsafe bytes.withUnsafeBytes { unsafe buffer.append(contentsOf: $0) }
    }

    /// See ``FileByteSink/finish()``.
    public mutating func finish() throws {
        committed = buffer
        buffer = Data()
    }

    /// See ``FileByteSink/abort()``. Wipes what was written so far.
    public mutating func abort() {
        buffer.wipe()
        buffer = Data()
        committed = nil
        aborted = true
    }
}

/// A ``FileByteSink`` that only counts (for checksumming or measuring without output).
public struct DiscardingByteSink: FileByteSink, Sendable {
    /// Bytes written so far.
    public private(set) var count = 0
    /// Creates the sink.
    public init() {}
    /// See ``FileByteSink/write(_:)``.
    public mutating func write(_ bytes: RawSpan) throws { count += bytes.byteCount }
    /// See ``FileByteSink/finish()``.
    public mutating func finish() throws {}
    /// See ``FileByteSink/abort()``.
    public mutating func abort() {}
}

/// Reads until `buffer` is full or the source ends; the result does not depend on how the source splits reads.
func readFully(
    _ source: inout some FileByteSource, into buffer: UnsafeMutableRawBufferPointer
) throws(E3DBError) -> Int {
    try unsafe fill(buffer) { part, _ in try unsafe source.read(into: part) }
}

/// Calls `read(rest, filled)` until `buffer` is full or it returns 0; returns the bytes filled.
func fill(
    _ buffer: UnsafeMutableRawBufferPointer, _ read: (UnsafeMutableRawBufferPointer, Int) throws -> Int
) throws(E3DBError) -> Int {
    var filled = 0
    while filled < buffer.count {
        let n: Int
        do {
            n = try unsafe read(UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), filled)
        } catch {
            throw ioError("reading the input failed", error)
        }
        guard n > 0 else { break }
        guard n <= buffer.count - filled else {
            throw E3DBError(.fileIOFailed, "the byte source returned more bytes than asked for")
        }
        filled += n
    }
    return filled
}

func ioError(_ what: String, _ error: any Error) -> E3DBError {
    if let error = error as? E3DBError { return error }
    return E3DBError(.fileIOFailed, "\(what): \(error)", cause: error)
}
