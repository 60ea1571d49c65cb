import Dispatch
public import E3DBKeys
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Encrypts and decrypts E3DB files (format version 3) in constant memory, computing checksums in the same pass.
///
/// Streaming works over any ``FileByteSource`` and ``FileByteSink``; ``encryptFile(atPath:toPath:accessKey:options:)``
/// and ``decryptFile(atPath:toPath:accessKey:options:)`` work on paths, the `fileDescriptor` variants on open
/// descriptors, and ``E3DBFileEncryptedChunks`` / ``E3DBFileDecryptedChunks`` adapt async sequences.
///
/// Decryption is strict and atomic: output is committed (sink finished, temporary file renamed) only after the
/// chunk tagged FINAL authenticates, the input ends right after it, and any expected checksum matches. Every
/// failure throws an `E3DBError` whose code says what went wrong and whose context says where.
public enum E3DBFileCipher {
    /// Slots in the buffer ring shared with the checksum thread.
    static let slotCount = 4

    // MARK: Encryption

    /// Encrypts everything `source` delivers into `sink` as an E3DB v3 file, under a fresh random data key sealed
    /// with `accessKey`.
    ///
    /// The sink is finished on success and aborted on any failure.
    ///
    /// - Parameters:
    ///   - source: the plaintext.
    ///   - sink: receives the encrypted file.
    ///   - accessKey: the access key of the record type the file belongs to.
    ///   - options: checksums, progress and cancellation.
    /// - Returns: sizes, chunk count and checksums (`checksums.md5Base64` is E3DB's `FileMeta.checksum`).
    /// - Throws: `E3DBError` with `.fileIOFailed` (source or sink failed),
    ///   `.cancelled`, or a primitives code if libsodium fails.
    public static func encrypt<S: FileByteSink>(
        from source: inout some FileByteSource,
        to sink: inout S,
        accessKey: AccessKey,
        options: FileEncryptionOptions = FileEncryptionOptions()
    ) throws(E3DBError) -> FileEncryptionResult {
        try committing(to: &sink, "encrypted") { (sink: inout S) throws(E3DBError) in
            try encryptBody(from: &source, to: &sink, accessKey: accessKey, options: options)
        }
    }

    /// Runs `body`, then finishes `sink`; on any failure (of `body` or of finishing) aborts `sink` instead, so
    /// output is committed only on success.
    static func committing<S: FileByteSink, R>(
        to sink: inout S,
        _ what: String,
        _ body: (inout S) throws(E3DBError) -> R
    ) throws(E3DBError) -> R {
        do throws(E3DBError) {
            let result = try body(&sink)
            do { try sink.finish() } catch { throw ioError("committing the \(what) output failed", error) }
            return result
        } catch {
            sink.abort()
            throw error
        }
    }

    static func encryptBody(
        from source: inout some FileByteSource,
        to sink: inout some FileByteSink,
        accessKey: AccessKey,
        options: FileEncryptionOptions
    ) throws(E3DBError) -> FileEncryptionResult {
        let control = RunControl(
            progress: options.progress, cancellation: options.cancellation, totalBytes: source.totalByteCount)
        try control.checkCancelled()
        let streamKey = SecretStream.Key()
        let prefix = try makePrefix(dataKey: streamKey, accessKey: accessKey)
        let encryptor = SecretStream.Encryptor(key: streamKey)
        let fullPrefix = prefix + encryptor.header.rawRepresentation
        return try encryptChunks(
            prefix: fullPrefix, encryptor: encryptor, from: &source, to: &sink, checksums: options.checksums,
            concurrent: options.concurrentChecksums, control: control)
    }

    /// The 100-byte text header `3.<b64u(edk)>.<b64u(edkN)>.` for `dataKey` sealed with `accessKey`.
    static func makePrefix(
        dataKey: SecretStream.Key, accessKey: AccessKey, nonce: SecretBox.Nonce = SecretBox.Nonce()
    ) throws(E3DBError) -> Data {
        let sealed = SecretBox.seal(dataKey.secureBytes, using: accessKey.secretBoxKey, nonce: nonce)
        let text = "3." + Base64URL.encode(sealed.ciphertext) + "." + Base64URL.encode(nonce.rawRepresentation) + "."
        let bytes = Data(text.utf8)
        guard bytes.count == E3DBFileFormat.textHeaderSize else {
            throw E3DBError(.invalidLength, "internal error: the text header is \(bytes.count) bytes, not 100")
        }
        return bytes
    }

    static func encryptChunks(
        prefix: Data,
        encryptor: consuming SecretStream.Encryptor,
        from source: inout some FileByteSource,
        to sink: inout some FileByteSink,
        checksums: FileChecksumKinds,
        concurrent: Bool,
        control: RunControl
    ) throws(E3DBError) -> FileEncryptionResult {
        let pipeline = try ChecksumPipeline(kinds: checksums, concurrent: concurrent)
        let slots = SlotRing(count: slotCount)
        defer {
            pipeline.drain()
            slots.wipe()
        }
        try write(prefix, to: &sink)
        pipeline.submitOwned(ciphertext: prefix)

        let chunkSize = E3DBFileFormat.plaintextChunkSize
        var consumed = 0
        var produced = prefix.count
        var chunks = 0
        var current = 0
        // Optional so that the FINAL chunk can take (consume) it inside the slot's closure.
        var sealer: SecretStream.Encryptor? = consume encryptor
        slots.acquire(current)
        var currentCount = try unsafe slots.withPlaintext(current) { (buffer) throws(E3DBError) in
            try unsafe readFully(&source, into: buffer)
        }
        while true {
            try control.checkCancelled()
            let next = (current + 1) % slots.count
            var nextCount = 0
            var isLast = currentCount < chunkSize
            if !isLast {
                // Look ahead one chunk: a full chunk followed by end of input carries FINAL.
                slots.acquire(next)
                nextCount = try unsafe slots.withPlaintext(next) { (buffer) throws(E3DBError) in
                    try unsafe readFully(&source, into: buffer)
                }
                if nextCount == 0 {
                    isLast = true
                    slots.release(next)
                }
            }
            let count = currentCount
            let sealedCount = try unsafe slots.withPlaintext(current) { (plainBuffer) throws(E3DBError) -> Int in
                try unsafe slots.withCiphertext(current) { (out) throws(E3DBError) -> Int in
                    let plain = unsafe UnsafeRawBufferPointer(rebasing: plainBuffer[0..<count])
                    let sealed: Int
                    if isLast {
                        // finish consumes the encryptor: nothing can be sealed after the FINAL chunk.
                        guard let last = sealer.take() else {
                            throw E3DBError(.streamFinished, "the file's stream was already finished")
                        }
                        sealed = try unsafe last.finish(plain, into: out)
                    } else {
                        guard var stream = sealer.take() else {
                            throw E3DBError(.streamFinished, "the file's stream was already finished")
                        }
                        sealed = try unsafe stream.seal(plain, tag: .message, into: out)
                        sealer = consume stream
                    }
                    try unsafe write(UnsafeRawBufferPointer(rebasing: out[0..<sealed]), to: &sink)
                    return sealed
                }
            }
            pipeline.submit(slot: current, of: slots, ciphertextCount: sealedCount, plaintextCount: count)
            consumed += count
            produced += sealedCount
            chunks += 1
            control.report(consumed, chunks: chunks)
            if isLast { break }
            current = next
            currentCount = nextCount
        }
        return FileEncryptionResult(
            plaintextSize: consumed, encryptedSize: produced, chunkCount: chunks, checksums: pipeline.finish())
    }

    // MARK: Decryption

    /// Decrypts an E3DB v3 file from `source` into `sink`, strictly.
    ///
    /// Plaintext is written to the sink chunk by chunk as each chunk authenticates, but the sink is finished only
    /// after the FINAL chunk authenticated, the input ended right after it, and `options.expectedChecksum` (if
    /// any) matched. On any failure the sink is aborted.
    ///
    /// - Parameters:
    ///   - source: the encrypted file.
    ///   - sink: receives the plaintext.
    ///   - accessKey: the access key the file's data key was sealed with.
    ///   - options: checksums, expected checksum, zero-chunk policy, progress and cancellation.
    /// - Returns: sizes, chunk count and checksums.
    /// - Throws: `E3DBError` with `.unsupportedFileVersion`, `.malformedFileHeader`,
    ///   `.wrongAccessKey`, `.fileTruncated`, `.trailingData`,
    ///   `.chunkAuthenticationFailed`, `.unexpectedChunkTag`,
    ///   `.checksumMismatch`, `.fileIOFailed` or `.cancelled`.
    public static func decrypt<S: FileByteSink>(
        from source: inout some FileByteSource,
        to sink: inout S,
        accessKey: AccessKey,
        options: FileDecryptionOptions = FileDecryptionOptions()
    ) throws(E3DBError) -> FileDecryptionResult {
        try committing(to: &sink, "decrypted") { (sink: inout S) throws(E3DBError) in
            try decryptBody(from: &source, to: &sink, accessKey: accessKey, options: options)
        }
    }

    static func decryptBody(
        from source: inout some FileByteSource,
        to sink: inout some FileByteSink,
        accessKey: AccessKey,
        options: FileDecryptionOptions
    ) throws(E3DBError) -> FileDecryptionResult {
        let control = RunControl(
            progress: options.progress, cancellation: options.cancellation, totalBytes: source.totalByteCount)
        try control.checkCancelled()
        try options.validate()
        var kinds = options.checksums
        if let expected = options.expectedChecksum { kinds.insert(expected.kind) }
        let pipeline = try ChecksumPipeline(kinds: kinds, concurrent: options.concurrentChecksums)
        let slots = SlotRing(count: slotCount)
        defer {
            pipeline.drain()
            slots.wipe()
        }

        // Headers: read 124 bytes (or to the end), validate in order of offset.
        let limit = options.expectedEncryptedSize
        if let limit, let total = source.totalByteCount, total > limit {
            throw longerThanExpected(limit, chunk: nil)
        }
        let prefix = try unsafe slots.withCiphertext(0) { (buffer) throws(E3DBError) -> Data in
            let prefixCount = try unsafe readFully(
                &source, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<E3DBFileFormat.prefixSize]))
            if let limit, prefixCount > limit { throw longerThanExpected(limit, chunk: nil) }
            return unsafe Data(UnsafeRawBufferPointer(rebasing: buffer[0..<prefixCount]))
        }
        var decryptor: SecretStream.Decryptor? = try openPrefix(prefix, accessKey: accessKey)
        pipeline.submitOwned(ciphertext: prefix)

        let header = E3DBFileFormat.prefixSize
        var offset = header
        var plaintextSize = 0
        var chunks = 0
        var sawFinal = false
        var current = 0
        while true {
            try control.checkCancelled()
            slots.acquire(current)
            let chunkOffset = offset
            let opened = try unsafe slots.withCiphertext(current) {
                (input) throws(E3DBError) -> (Int, Int, SecretStream.Tag)? in
                let n = try unsafe readFully(&source, into: input)
                if n == 0 { return nil }
                if let limit, chunkOffset + n > limit { throw longerThanExpected(limit, chunk: chunks) }
                let cipher = unsafe UnsafeRawBufferPointer(rebasing: input[0..<n])
                return unsafe try slots.withPlaintext(current) {
                    (output) throws(E3DBError) -> (Int, Int, SecretStream.Tag) in
                    let (count, tag) = try unsafe openChunk(
                        cipher, into: output, decryptor: &decryptor, index: chunks, offset: chunkOffset)
                    try unsafe write(UnsafeRawBufferPointer(rebasing: output[0..<count]), to: &sink)
                    return (n, count, tag)
                }
            }
            guard let (n, count, tag) = opened else {
                slots.release(current)
                break
            }
            if tag == .final { sawFinal = true }
            pipeline.submit(slot: current, of: slots, ciphertextCount: n, plaintextCount: count)
            offset += n
            plaintextSize += count
            chunks += 1
            control.report(offset, chunks: chunks)
            if sawFinal { break }
            current = (current + 1) % slots.count
        }

        var zeroChunk = false
        if sawFinal {
            let probe = (current + 1) % slots.count
            slots.acquire(probe)
            let extra = try unsafe slots.withPlaintext(probe) { (buffer) throws(E3DBError) in
                try unsafe readFully(&source, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<1]))
            }
            slots.release(probe)
            if extra > 0 {
                if let limit, offset >= limit { throw longerThanExpected(limit, chunk: chunks) }
                throw E3DBError(
                    .trailingData, "data follows the chunk tagged FINAL, at byte \(offset)",
                    context: .at(offset: offset, chunk: chunks))
            }
            if let limit, offset != limit {
                var context = E3DBError.Context.at(offset: offset, chunk: chunks)
                context.field = "size"
                context.expected = limit
                context.actual = offset
                throw E3DBError(
                    .checksumMismatch, "the file authenticated but is \(offset) bytes, not the expected \(limit)",
                    context: context)
            }
        } else if chunks == 0 {
            switch options.zeroChunkFiles {
            case .accept:
                zeroChunk = true
            case .acceptIfChecksumVerified where options.expectedChecksum != nil:
                zeroChunk = true
            default:
                throw E3DBError(
                    .fileTruncated,
                    "the file has headers but no chunk: it was cut after its headers, or is an empty file written "
                        + "by the old Swift or Java SDK (accept those with ZeroChunkFilePolicy, ideally with the "
                        + "expected checksum)",
                    context: .at(offset: offset, chunk: 0, part: "chunks"))
            }
        } else {
            throw E3DBError(
                .fileTruncated,
                "the input ends after chunk \(chunks - 1) at byte \(offset) without a chunk tagged FINAL",
                context: .at(offset: offset, chunk: chunks, part: "chunks"))
        }
        let sums = pipeline.finish()
        if let expected = options.expectedChecksum { try expected.verify(sums) }
        return FileDecryptionResult(
            plaintextSize: plaintextSize, encryptedSize: offset, chunkCount: chunks, checksums: sums,
            wasZeroChunkFile: zeroChunk)
    }

    /// The error for an input that goes on past `expectedEncryptedSize`.
    static func longerThanExpected(_ limit: Int, chunk: Int?) -> E3DBError {
        var context = E3DBError.Context.at(offset: limit, chunk: chunk, part: "size")
        context.expected = limit
        return E3DBError(
            .trailingData, "the input is longer than its expected size of \(limit) bytes", context: context)
    }

    /// Validates the 124-byte prefix, opens the data key and starts the stream.
    static func openPrefix(_ prefix: Data, accessKey: AccessKey) throws(E3DBError) -> SecretStream.Decryptor {
        let textCount = min(prefix.count, E3DBFileFormat.textHeaderSize)
        try TextHeader.validate(
            [UInt8](prefix.prefix(textCount)), atEnd: prefix.count < E3DBFileFormat.textHeaderSize)
        guard prefix.count == E3DBFileFormat.prefixSize else {
            throw E3DBError(
                .fileTruncated,
                "the input ends inside the 24-byte secretstream header after \(prefix.count) bytes",
                context: .at(offset: prefix.count, part: "stream header"))
        }
        let start = prefix.startIndex
        let edkText = String(decoding: prefix[(start + 2)..<(start + 66)], as: UTF8.self)
        let nonceText = String(decoding: prefix[(start + 67)..<(start + 99)], as: UTF8.self)
        let edk: Data
        let nonceBytes: Data
        do {
            edk = try Base64URL.decode(edkText)
            nonceBytes = try Base64URL.decode(nonceText)
        } catch {
            throw E3DBError(
                .malformedFileHeader, "the header's edk or edkN is not valid base64url",
                context: .at(offset: 2, part: "edk"))
        }
        let dataKey = try openDataKey(edk: edk, nonce: nonceBytes, accessKey: accessKey)
        let streamHeader = Data(prefix[(start + 100)..<(start + 124)])
        return SecretStream.Decryptor(key: dataKey, header: try SecretStream.Header(rawRepresentation: streamHeader))
    }

    /// Opens the file's data key (`edk`, sealed by secretbox under `nonce` with the access key).
    static func openDataKey(edk: Data, nonce: Data, accessKey: AccessKey) throws(E3DBError) -> SecretStream.Key {
        let box: SecretBox.SealedBox
        do {
            box = try SecretBox.SealedBox(nonce: SecretBox.Nonce(rawRepresentation: nonce), ciphertext: edk)
        } catch {
            throw E3DBError(
                .malformedFileHeader, "the header's edk or edkN has the wrong length: \(error.message)",
                context: .at(offset: 2, part: "edk"))
        }
        let secret: SecureBytes
        do {
            secret = try SecretBox.openSecret(box, using: accessKey.secretBoxKey)
        } catch {
            throw E3DBError(
                .wrongAccessKey,
                "the file's data key does not open with this access key (wrong access key, or edk/edkN altered)",
                context: .at(offset: 2, part: "edk"))
        }
        do {
            return try SecretStream.Key(secret)
        } catch {
            throw E3DBError(
                .wrongAccessKey, "the file's data key has the wrong length", context: .at(offset: 2, part: "edk"))
        }
    }

    /// Opens one chunk with the strict rules of the format.
    ///
    /// The stream is taken out of `decryptor` and handed back only after a MESSAGE chunk: a FINAL chunk (or any
    /// failure) consumes it, so nothing can be opened after the end of the file.
    static func openChunk(
        _ cipher: UnsafeRawBufferPointer,
        into output: UnsafeMutableRawBufferPointer,
        decryptor: inout SecretStream.Decryptor?,
        index: Int,
        offset: Int
    ) throws(E3DBError) -> (Int, SecretStream.Tag) {
        let full = E3DBFileFormat.ciphertextChunkSize
        guard cipher.count >= E3DBFileFormat.chunkOverhead else {
            throw E3DBError(
                .fileTruncated,
                "the input ends \(cipher.count) bytes into chunk \(index), too short to be a chunk (17 bytes minimum)",
                context: .at(offset: offset + cipher.count, chunk: index, part: "chunk"))
        }
        guard var stream = decryptor.take() else {
            throw E3DBError(
                .trailingData, "chunk \(index) at byte \(offset) follows the chunk tagged FINAL",
                context: .at(offset: offset, chunk: index))
        }
        let opened: (count: Int, tag: SecretStream.Tag)
        do {
            opened = try unsafe stream.open(cipher, into: output)
        } catch {
            // A FINAL chunk shorter than a full chunk merges with whatever follows it in one read. If a proper
            // prefix of these bytes authenticates as a FINAL chunk, the file is intact and the rest is appended.
            if let length = unsafe stream.finalChunkLength(in: cipher) {
                throw E3DBError(
                    .trailingData,
                    "data follows the chunk tagged FINAL: chunk \(index) ends at byte \(offset + length), and "
                        + "\(cipher.count - length) more bytes follow it",
                    context: .at(offset: offset + length, chunk: index + 1))
            }
            let why =
                cipher.count < full
                ? "the last chunk (\(cipher.count) bytes) did not authenticate: it was altered or cut"
                : "it was altered, or chunks were reordered or duplicated"
            throw E3DBError(
                .chunkAuthenticationFailed, "chunk \(index) at byte \(offset) did not authenticate: \(why)",
                context: .at(offset: offset, chunk: index, part: cipher.count < full ? "last chunk" : "chunk"))
        }
        switch opened.tag {
        case .message:
            decryptor = consume stream
            return opened
        case .final:
            return opened
        default:
            throw E3DBError(
                .unexpectedChunkTag, "chunk \(index) carries a tag other than MESSAGE or FINAL",
                context: .at(offset: offset, chunk: index, part: "tag"))
        }
    }

    // MARK: Deterministic encryption (known-answer tests)

    /// Encrypts with a caller-chosen data key, edk nonce and stream header, to reproduce another SDK's output byte
    /// for byte in tests. Never use in production: reusing these values with the same access key repeats keystream.
    package static func encryptDeterministically<S: FileByteSink>(
        from source: inout some FileByteSource,
        to sink: inout S,
        accessKey: AccessKey,
        dataKey: SecretStream.Key,
        edkNonce: SecretBox.Nonce,
        streamHeader: SecretStream.Header,
        options: FileEncryptionOptions = FileEncryptionOptions()
    ) throws(E3DBError) -> FileEncryptionResult {
        try committing(to: &sink, "encrypted") { (sink: inout S) throws(E3DBError) in
            let control = RunControl(
                progress: options.progress, cancellation: options.cancellation, totalBytes: source.totalByteCount)
            let prefix = try makePrefix(dataKey: dataKey, accessKey: accessKey, nonce: edkNonce)
            let encryptor = SecretStream.Encryptor(key: dataKey, deterministicHeader: streamHeader)
            return try encryptChunks(
                prefix: prefix + streamHeader.rawRepresentation, encryptor: encryptor, from: &source, to: &sink,
                checksums: options.checksums, concurrent: options.concurrentChecksums, control: control)
        }
    }

    static func write(_ bytes: UnsafeRawBufferPointer, to sink: inout some FileByteSink) throws(E3DBError) {
        do { try unsafe sink.write(bytes) } catch { throw ioError("writing the output failed", error) }
    }

    static func write(_ bytes: Data, to sink: inout some FileByteSink) throws(E3DBError) {
        do {
            try unsafe bytes.withUnsafeBytes { try unsafe sink.write($0) }
        } catch {
            throw ioError("writing the output failed", error)
        }
    }
}
