internal import CE3DBSodium

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

// Safety: a `State` owns one heap `crypto_secretstream_xchacha20poly1305_state`, zeroed in `init`, wiped and freed in
// `deinit`, and is `~Copyable` inside `~Copyable` encryptors and decryptors, so no two owners share it. Keys are 32
// bytes and headers 24 (their types check); chunk buffers are sized here (`message.count + 17` to seal, `chunk.count -
// 17` to open, after checking the chunk holds at least the 17 bytes of overhead). Every other pointer is lent by a
// `with…` closure for the call only.
/// Authenticated encryption of a sequence of messages: libsodium `crypto_secretstream_xchacha20poly1305`.
///
/// The E3DB file format v3 is one secretstream: a 24-byte header, then one chunk per 64 KiB of plaintext, the last
/// one tagged ``Tag/final``. Each chunk is `message.count + 17` bytes (encrypted tag byte, ciphertext, 16-byte MAC).
///
/// ``Encryptor`` and ``Decryptor`` are noncopyable: a copied state would reuse nonces, and ``Encryptor/finish(_:)``
/// consumes the encryptor so nothing can be sealed after the final chunk. Their state is wiped on deinit.
public enum SecretStream: Sendable {
    /// 32: key size.
    public static let keyByteCount = 32
    /// 24: header size.
    public static let headerByteCount = 24
    /// 17: bytes each chunk adds to its message.
    public static let overheadByteCount = 17

    /// The tag carried by each chunk.
    public enum Tag: UInt8, Sendable, CaseIterable {
        /// An ordinary chunk.
        case message = 0
        /// The end of a set of messages, without ending the stream.
        case push = 1
        /// Forces a rekey after this chunk.
        case rekey = 2
        /// The last chunk of the stream (implies a rekey).
        case final = 3
    }

    /// A 32-byte stream key in wiped memory.
    public struct Key: Sendable, RedactedSecret {
        static let redactedName = "SecretStream.Key"
        let storage: SecureBytes

        /// A random key.
        public init() { self.storage = SecureBytes(randomCount: SecretStream.keyByteCount) }

        /// Wraps 32 key bytes already in wiped storage (no copy).
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when not 32 bytes.
        public init(_ bytes: SecureBytes) throws(E3DBError) {
            guard bytes.count == SecretStream.keyByteCount else {
                throw E3DBError.length(
                    .invalidKeyLength, "secretstream key", expected: SecretStream.keyByteCount, actual: bytes.count)
            }
            self.storage = bytes
        }

        /// Copies 32 key bytes into wiped storage.
        /// - Throws: ``E3DBError/Code/invalidKeyLength`` when not 32 bytes.
        public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
            self.storage = try FixedBytes.secret(
                rawRepresentation, count: SecretStream.keyByteCount, code: .invalidKeyLength, what: "secretstream key")
        }

        /// The wiped storage holding the key.
        public var secureBytes: SecureBytes { storage }
    }

    /// The 24-byte stream header written before the first chunk.
    public struct Header: Sendable, Hashable {
        /// The 24 header bytes.
        public let rawRepresentation: Data

        /// Wraps 24 header bytes.
        /// - Throws: ``E3DBError/Code/invalidNonceLength`` when not 24 bytes.
        public init(rawRepresentation: some Sequence<UInt8>) throws(E3DBError) {
            self.rawRepresentation = try FixedBytes.data(
                rawRepresentation, count: SecretStream.headerByteCount, code: .invalidNonceLength,
                what: "secretstream header")
        }

        init(trusted: Data) { self.rawRepresentation = trusted }
    }

    /// The heap-allocated libsodium state, wiped and freed with its owner.
    @safe
    struct State: ~Copyable {
        let pointer: UnsafeMutablePointer<crypto_secretstream_xchacha20poly1305_state>

        init() {
            unsafe pointer = .allocate(capacity: 1)
            unsafe UnsafeMutableRawPointer(pointer).initializeMemory(
                as: UInt8.self, repeating: 0, count: MemoryLayout<crypto_secretstream_xchacha20poly1305_state>.size)
        }

        deinit {
            unsafe sodium_memzero(pointer, MemoryLayout<crypto_secretstream_xchacha20poly1305_state>.size)
            unsafe pointer.deallocate()
        }
    }

    /// Seals a stream of messages. Create one per stream; it generates the ``header`` to send first.
    public struct Encryptor: ~Copyable {
        private let state: State
        /// The header to write before the first chunk.
        public let header: Header

        /// Starts a new stream with a random header (`init_push`).
        public init(key: Key) {
            Sodium.ensure()
            let state = State()
            var header = Data(count: SecretStream.headerByteCount)
            unsafe header.withUnsafeMutableBytes { h in
                unsafe key.storage.withUnsafeBytes { k in
                    _ = unsafe crypto_secretstream_xchacha20poly1305_init_push(state.pointer, h.u8, k.u8)
                }
            }
            self.state = state
            self.header = Header(trusted: header)
        }

        /// Starts a stream with a caller-chosen header, for known-answer tests only (never in production: a
        /// repeated header with the same key repeats the keystream).
        ///
        /// libsodium's `init_push` is `randombytes_buf(header)` followed by exactly the state set-up `init_pull`
        /// performs on that header, so this reproduces byte for byte what an encryptor whose random generator
        /// produced `header` writes.
        package init(key: Key, deterministicHeader header: Header) {
            Sodium.ensure()
            let state = State()
            unsafe header.rawRepresentation.withUnsafeBytes { h in
                unsafe key.storage.withUnsafeBytes { k in
                    _ = unsafe crypto_secretstream_xchacha20poly1305_init_pull(state.pointer, h.u8, k.u8)
                }
            }
            self.state = state
            self.header = header
        }

        /// Seals one chunk.
        /// - Parameters:
        ///   - message: The plaintext of this chunk.
        ///   - tag: ``Tag/message`` unless you need push or rekey; use ``finish(_:)`` for the final chunk.
        /// - Returns: `message.count + 17` bytes.
        /// - Throws: ``E3DBError/Code/invalidParameter`` when `tag` is ``Tag/final`` (use ``finish(_:)``).
        public mutating func seal(_ message: some DataProtocol, tag: Tag = .message) throws(E3DBError) -> Data {
            guard tag != .final else {
                throw E3DBError(.invalidParameter, "seal the final chunk with finish(_:), which ends the stream")
            }
            return sealChunk(message, tag: tag)
        }

        /// Seals one chunk into caller-provided memory, for zero-copy pipelines (package only: raw pointers).
        /// - Parameters:
        ///   - message: The plaintext.
        ///   - tag: The chunk tag; not ``Tag/final`` (use ``finish(_:into:)``, which consumes the encryptor).
        ///   - output: At least `message.count + 17` bytes.
        /// - Returns: The number of bytes written (`message.count + 17`).
        /// - Throws: ``E3DBError/Code/invalidLength`` when `output` is too small, ``E3DBError/Code/invalidParameter``
        ///   when `tag` is ``Tag/final``.
        package mutating func seal(
            _ message: UnsafeRawBufferPointer,
            tag: Tag,
            into output: UnsafeMutableRawBufferPointer
        ) throws(E3DBError) -> Int {
            guard tag != .final else {
                throw E3DBError(.invalidParameter, "seal the final chunk with finish(_:into:), which ends the stream")
            }
            return try unsafe push(message, tag: tag, into: output)
        }

        /// Seals the last chunk, tagged ``Tag/final``, into caller-provided memory and ends the stream (the
        /// encryptor is consumed, so nothing can be sealed after it).
        /// - Parameters:
        ///   - message: The plaintext.
        ///   - output: At least `message.count + 17` bytes.
        /// - Returns: The number of bytes written (`message.count + 17`).
        /// - Throws: ``E3DBError/Code/invalidLength`` when `output` is too small.
        package consuming func finish(
            _ message: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
        ) throws(E3DBError) -> Int {
            try unsafe push(message, tag: .final, into: output)
        }

        private func push(
            _ message: UnsafeRawBufferPointer, tag: Tag, into output: UnsafeMutableRawBufferPointer
        ) throws(E3DBError) -> Int {
            let needed = message.count + SecretStream.overheadByteCount
            guard output.count >= needed else {
                throw E3DBError.length(
                    .invalidLength, "secretstream output buffer (at least)", expected: needed, actual: output.count)
            }
            var written: UInt64 = 0
            _ = unsafe crypto_secretstream_xchacha20poly1305_push(
                state.pointer, output.u8, &written, message.u8, UInt64(message.count), nil, 0, tag.rawValue)
            return Int(written)
        }

        /// Seals the last chunk, tagged ``Tag/final``, and ends the stream (the encryptor is consumed).
        /// - Returns: `message.count + 17` bytes.
        public consuming func finish(_ message: some DataProtocol) -> Data {
            sealChunk(message, tag: .final)
        }

        private mutating func sealChunk(_ message: some DataProtocol, tag: Tag) -> Data {
            var out = Data(count: message.count + SecretStream.overheadByteCount)
            unsafe withBytes(message) { m in
                unsafe out.withUnsafeMutableBytes { c in
                    _ = unsafe crypto_secretstream_xchacha20poly1305_push(
                        state.pointer, c.u8, nil, m.u8, UInt64(m.count), nil, 0, tag.rawValue)
                }
            }
            return out
        }

        /// Rekeys explicitly (`crypto_secretstream_xchacha20poly1305_rekey`); the decryptor must do the same at
        /// the same point.
        public mutating func rekey() {
            unsafe crypto_secretstream_xchacha20poly1305_rekey(state.pointer)
        }
    }

    /// Opens a stream chunk by chunk. After a ``Tag/final`` chunk, further chunks are rejected.
    public struct Decryptor: ~Copyable {
        let state: State
        /// True once a ``Tag/final`` chunk has been opened.
        public internal(set) var isFinished = false
        /// The number of chunks opened (or skipped) so far.
        public internal(set) var chunkIndex = 0

        /// Starts reading a stream (`init_pull`).
        public init(key: Key, header: Header) {
            Sodium.ensure()
            let state = State()
            unsafe header.rawRepresentation.withUnsafeBytes { h in
                unsafe key.storage.withUnsafeBytes { k in
                    _ = unsafe crypto_secretstream_xchacha20poly1305_init_pull(state.pointer, h.u8, k.u8)
                }
            }
            self.state = state
        }

        /// Opens one chunk.
        /// - Returns: The plaintext and the chunk's tag.
        /// - Throws: ``E3DBError/Code/streamFinished`` after the final chunk, ``E3DBError/Code/streamTruncated``
        ///   for a chunk shorter than 17 bytes, ``E3DBError/Code/authenticationFailed`` (with the chunk index) for
        ///   a wrong key, a tampered, reordered or truncated chunk.
        public mutating func open(_ chunk: some DataProtocol) throws(E3DBError) -> (message: Data, tag: Tag) {
            try checkOpenable(chunk.count)
            var out = Data(count: chunk.count - SecretStream.overheadByteCount)
            let result = unsafe withBytes(chunk) { c in
                unsafe out.withUnsafeMutableBytes { m in unsafe pull(c, into: m) }
            }
            let tag = try finishPull(result)
            return (out, tag)
        }

        /// Opens one chunk into caller-provided memory, for zero-copy pipelines (package only: raw pointers).
        /// - Parameters:
        ///   - chunk: The chunk bytes.
        ///   - output: At least `chunk.count - 17` bytes.
        /// - Returns: The plaintext length and the tag.
        /// - Throws: As the `Data` variant of `open`, plus ``E3DBError/Code/invalidLength`` when `output` is too small.
        package mutating func open(
            _ chunk: UnsafeRawBufferPointer,
            into output: UnsafeMutableRawBufferPointer
        ) throws(E3DBError) -> (count: Int, tag: Tag) {
            try checkOpenable(chunk.count)
            let needed = chunk.count - SecretStream.overheadByteCount
            guard output.count >= needed else {
                throw E3DBError.length(
                    .invalidLength, "secretstream output buffer (at least)", expected: needed, actual: output.count)
            }
            let result = unsafe pull(chunk, into: output)
            return (needed, try finishPull(result))
        }

        func checkOpenable(_ count: Int) throws(E3DBError) {
            guard !isFinished else {
                throw E3DBError(
                    .streamFinished, "data after the final chunk", context: .init(chunkIndex: chunkIndex))
            }
            guard count >= SecretStream.overheadByteCount else {
                throw E3DBError(
                    .streamTruncated, "chunk is shorter than its 17-byte overhead",
                    context: .init(expected: SecretStream.overheadByteCount, actual: count, chunkIndex: chunkIndex))
            }
        }

        @unsafe
        private func pull(_ c: UnsafeRawBufferPointer, into m: UnsafeMutableRawBufferPointer) -> (Int32, UInt8) {
            var tag: UInt8 = 0
            let status = unsafe crypto_secretstream_xchacha20poly1305_pull(
                state.pointer, m.u8, nil, &tag, c.u8, UInt64(c.count), nil, 0)
            return (status, tag)
        }

        private mutating func finishPull(_ result: (Int32, UInt8)) throws(E3DBError) -> Tag {
            guard result.0 == 0, let tag = Tag(rawValue: result.1) else {
                throw E3DBError(
                    .authenticationFailed, "chunk \(chunkIndex) failed authentication",
                    context: .init(chunkIndex: chunkIndex))
            }
            chunkIndex += 1
            if tag == .final { isFinished = true }
            return tag
        }

        /// Rekeys explicitly, mirroring ``Encryptor/rekey()``.
        public mutating func rekey() {
            unsafe crypto_secretstream_xchacha20poly1305_rekey(state.pointer)
        }
    }
}
