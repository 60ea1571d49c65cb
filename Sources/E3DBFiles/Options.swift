import E3DBPrimitives

/// Settings for encrypting a file.
public struct FileEncryptionOptions: Sendable {
    /// Checksums to compute in the same pass. Default: the ciphertext's BLAKE2b-512 and MD5 (the MD5 is what E3DB
    /// uploads and `FileMeta` need).
    public var checksums: FileChecksumKinds
    /// Hash on a second thread while the cipher runs on the caller's thread. Default true.
    public var concurrentChecksums: Bool
    /// Called after each chunk with the bytes consumed so far. Called on the caller's thread; keep it cheap.
    public var progress: (@Sendable (FileProgress) -> Void)?
    /// A flag another thread can set to stop the operation (task cancellation works as well).
    public var cancellation: FileCancellation?

    /// Creates options.
    ///
    /// - Parameters:
    ///   - checksums: checksums to compute (default ciphertext BLAKE2b-512 and MD5).
    ///   - concurrentChecksums: hash on a second thread (default true).
    ///   - progress: progress callback, or nil.
    ///   - cancellation: cancellation flag, or nil.
    public init(
        checksums: FileChecksumKinds = [.ciphertextBLAKE2b512, .ciphertextMD5],
        concurrentChecksums: Bool = true,
        progress: (@Sendable (FileProgress) -> Void)? = nil,
        cancellation: FileCancellation? = nil
    ) {
        self.checksums = checksums
        self.concurrentChecksums = concurrentChecksums
        self.progress = progress
        self.cancellation = cancellation
    }
}

/// What to do with a file that has headers but no chunk at all (124 bytes).
///
/// Old Swift and Java SDKs wrote such a file for an empty plaintext. It cannot be told apart from any E3DB file
/// cut right after its headers, so reading it as empty is only safe when a checksum vouches for it.
public enum ZeroChunkFilePolicy: Sendable, Hashable {
    /// Always reject with `.fileTruncated` (as the Java, Python and Go decryptors do).
    case reject
    /// Accept as empty only when an ``ExpectedFileChecksum`` is given and matches (the default): the checksum
    /// from `FileMeta` proves the file was uploaded that way and not cut.
    case acceptIfChecksumVerified
    /// Always accept as empty (as the old Swift and JavaScript decryptors do). Loses truncation detection for this
    /// one case.
    case accept
}

/// Settings for decrypting a file.
public struct FileDecryptionOptions: Sendable {
    /// Checksums to compute in the same pass (default none; an ``expectedChecksum`` adds its own kind).
    public var checksums: FileChecksumKinds
    /// A checksum the encrypted input must have; verified before anything is committed. Its form is checked
    /// before any input is read (`.invalidParameter`, see ``ExpectedFileChecksum/validate()``).
    public var expectedChecksum: ExpectedFileChecksum?
    /// The encrypted size the input must have (E3DB `FileMeta.size`), if known. An input longer than this is
    /// reported as `.trailingData` ("longer than its expected size", offset = the expected size) as soon as
    /// the extra bytes are read (at once for a regular file), before any chunk beyond the size is opened; a file
    /// that authenticates at a smaller size is a `.checksumMismatch` (field `size`). A negative value is
    /// `.invalidParameter`.
    public var expectedEncryptedSize: Int?
    /// How to treat a file with no chunk (see ``ZeroChunkFilePolicy``). Default ``ZeroChunkFilePolicy/acceptIfChecksumVerified``.
    public var zeroChunkFiles: ZeroChunkFilePolicy
    /// Hash on a second thread while the cipher runs on the caller's thread. Default true.
    public var concurrentChecksums: Bool
    /// Called after each chunk with the ciphertext bytes consumed so far.
    public var progress: (@Sendable (FileProgress) -> Void)?
    /// A flag another thread can set to stop the operation (task cancellation works as well).
    public var cancellation: FileCancellation?

    /// Creates options.
    ///
    /// - Parameters:
    ///   - checksums: checksums to compute (default none).
    ///   - expectedChecksum: checksum to verify before committing, or nil.
    ///   - expectedEncryptedSize: the input's expected size (`FileMeta.size`), or nil.
    ///   - zeroChunkFiles: policy for 124-byte files with no chunk.
    ///   - concurrentChecksums: hash on a second thread (default true).
    ///   - progress: progress callback, or nil.
    ///   - cancellation: cancellation flag, or nil.
    public init(
        checksums: FileChecksumKinds = [],
        expectedChecksum: ExpectedFileChecksum? = nil,
        expectedEncryptedSize: Int? = nil,
        zeroChunkFiles: ZeroChunkFilePolicy = .acceptIfChecksumVerified,
        concurrentChecksums: Bool = true,
        progress: (@Sendable (FileProgress) -> Void)? = nil,
        cancellation: FileCancellation? = nil
    ) {
        self.checksums = checksums
        self.expectedChecksum = expectedChecksum
        self.expectedEncryptedSize = expectedEncryptedSize
        self.zeroChunkFiles = zeroChunkFiles
        self.concurrentChecksums = concurrentChecksums
        self.progress = progress
        self.cancellation = cancellation
    }
}

extension FileDecryptionOptions {
    /// Rejects settings that cannot describe any file, before any input is read.
    func validate() throws(E3DBError) {
        if let size = expectedEncryptedSize, size < 0 {
            var context = E3DBError.Context()
            context.field = "expectedEncryptedSize"
            context.actual = size
            throw E3DBError(.invalidParameter, "the expected encrypted size is negative", context: context)
        }
        try expectedChecksum?.validate()
    }
}

/// The outcome of encrypting a file.
public struct FileEncryptionResult: Sendable, Hashable {
    /// Plaintext bytes read.
    public var plaintextSize: Int
    /// Encrypted bytes written (E3DB `FileMeta.size`).
    public var encryptedSize: Int
    /// Chunks written (at least 1).
    public var chunkCount: Int
    /// The checksums requested; `checksums.md5Base64` is E3DB's `FileMeta.checksum`.
    public var checksums: FileChecksums
}

/// The outcome of decrypting a file.
public struct FileDecryptionResult: Sendable, Hashable {
    /// Plaintext bytes committed.
    public var plaintextSize: Int
    /// Encrypted bytes read.
    public var encryptedSize: Int
    /// Chunks opened (0 for an accepted zero-chunk file).
    public var chunkCount: Int
    /// The checksums requested (and the one verified, if any).
    public var checksums: FileChecksums
    /// True when the input was a 124-byte file with no chunk, accepted under ``ZeroChunkFilePolicy``.
    public var wasZeroChunkFile: Bool
}
