public import E3DBPrimitives

// Error codes of the E3DB file layer. Every failure of a file operation is an `E3DBError` with one of these codes
// (or a primitives code for key or parameter problems); `context` says where (offset, chunk index, part).

extension E3DBError.Code {
    /// The file's version field is a number other than `3` (E3DB versions `1` and `2` are not supported).
    /// `context.version` holds the version text.
    public static let unsupportedFileVersion = Self("unsupportedFileVersion", category: .malformedInput)
    /// The 100-byte text header `3.<edk>.<edkN>.` is not well formed. `context.offset` is the first bad byte and
    /// `context.part` names the field (`version`, `edk`, `edkN`, `separator`).
    public static let malformedFileHeader = Self("malformedFileHeader", category: .malformedInput)
    /// The file's data key does not open with the access key given: the access key is wrong, or the header's
    /// edk/edkN were altered (the two cannot be told apart).
    public static let wrongAccessKey = Self("wrongAccessKey", category: .verification)
    /// The input ended early: inside the headers, inside a chunk too short to be one (under 17 bytes), or at a
    /// chunk boundary before any chunk tagged FINAL. `context.offset` is the input length, `context.chunkIndex`
    /// the chunk that is missing or incomplete, `context.part` the region.
    public static let fileTruncated = Self("fileTruncated", category: .verification)
    /// Bytes follow the chunk tagged FINAL. `context.offset` is the first extra byte.
    public static let trailingData = Self("trailingData", category: .verification)
    /// A chunk did not authenticate: a byte of it (or of the stream header) was altered, chunks were reordered or
    /// duplicated, or the input was cut inside this chunk. `context.chunkIndex` (0-based) and `context.offset`
    /// (of the chunk's first byte) say which.
    public static let chunkAuthenticationFailed = Self("chunkAuthenticationFailed", category: .verification)
    /// An authenticated chunk carries a tag E3DB files never use (PUSH or REKEY), or FINAL is missing although the
    /// chunk is shorter than a full chunk. `context.chunkIndex` says which.
    public static let unexpectedChunkTag = Self("unexpectedChunkTag", category: .verification)
    /// The whole file decrypted, but its checksum differs from the expected one. Nothing was committed.
    public static let checksumMismatch = Self("checksumMismatch", category: .verification)
    /// Reading the input or writing the output failed (an I/O error from a byte source or sink).
    public static let fileIOFailed = Self("fileIOFailed", category: .io)
}

extension E3DBError {
    /// True for the codes that mean the input failed an authenticity or integrity check (as opposed to I/O
    /// errors, cancellation or bad parameters): those in ``E3DBError/Category/verification``.
    public var isIntegrityFailure: Bool { code.category == .verification }
}

extension E3DBError.Context {
    static func at(offset: Int? = nil, chunk: Int? = nil, part: String? = nil, version: String? = nil)
        -> E3DBError.Context
    {
        var context = E3DBError.Context()
        context.offset = offset
        context.chunkIndex = chunk
        context.part = part
        context.version = version
        return context
    }
}
