/// The error every E3DBKit layer above canonical JSON throws.
///
/// An error has a ``code`` (a stable identifier to match on), a human ``message``, non-secret ``context``
/// (which field, which part, expected and actual length, byte offset, chunk index, version) and, where a lower layer
/// failed, that layer's error as its ``cause``. Messages and context never contain key, plaintext or ciphertext
/// bytes.
///
/// Codes are static members of ``Code`` declared by E3DBKit's modules (each layer adds its own in an extension), so
/// callers match on them (`error.code == .authenticationFailed`) and map them through their ``Category``. Only
/// E3DBKit creates codes: the initialisers of ``Code`` are `package`, so every code a caller can meet is one of the
/// documented static members.
///
/// Two errors compare equal when their codes are equal, so tests can write
/// `#expect(throws: E3DBError(.authenticationFailed)) { ... }`.
///
/// ## The cause
///
/// ``cause`` is the error of the layer underneath (GRDB's `DatabaseError`, a `CocoaError` or `POSIXError` from the
/// file system, a PostgreSQL client error), kept for a debugger or a caller that wants to tell failures apart
/// further. It plays no part in equality and is never put into ``description`` or ``message``: those are written
/// for logs and HTTP responses, while a lower layer's error text is not E3DBKit's to vouch for. E3DBKit attaches a
/// cause only when that error holds no secret (no key or plaintext bytes, no credentials, no row values, no
/// database password or presigned URL); a caller that logs `cause` still decides for itself what its logs may hold.
///
/// - Note: Authentication failure is a single code: libsodium cannot tell a wrong key from tampered bytes.
public struct E3DBError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure a code stands for, so that callers (the CLI's exit codes, a server's status codes)
    /// map every code, including codes added later by other layers, through one table.
    public enum Category: String, Sendable, Hashable, CaseIterable {
        /// The data or a key did not verify: a MAC, signature, checksum or file-integrity check failed, or the
        /// data is not what its signer wrote. Tampering and a wrong key both land here.
        case verification
        /// The input is not well formed (bad JSON, base64, lengths, structure).
        case malformedInput
        /// The caller asked for something that cannot be done with what it passed (an out-of-range parameter, an
        /// identity without the key the operation needs).
        case invalidArgument
        /// Reading or writing failed.
        case io
        /// The operation was cancelled.
        case cancelled
        /// The system failed (random number generator, memory).
        case system
    }

    /// A stable identifier for a kind of failure, with its ``Category``.
    ///
    /// Equality and hashing use ``rawValue`` only.
    /// Codes are created inside E3DBKit only (the initialiser is `package`); callers use the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name, as it appears in descriptions, CLI messages and the API's error bodies.
        public let rawValue: String
        /// What kind of failure this is.
        public let category: Category
        /// Creates a code: E3DBKit's modules only, in an extension of `E3DBError.Code` beside the code's use.
        package init(_ rawValue: String, category: Category) {
            self.rawValue = rawValue
            self.category = category
        }
        public var description: String { rawValue }
        public static func == (lhs: Code, rhs: Code) -> Bool { lhs.rawValue == rhs.rawValue }
        public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
    }

    /// Non-secret details about where a failure happened.
    public struct Context: Sendable, Equatable {
        /// The record, note or document field involved.
        public var field: String?
        /// The part of a structured value (`"edk"`, `"nonce"`, `"header"`, …).
        public var part: String?
        /// The expected length or count.
        public var expected: Int?
        /// The length or count found.
        public var actual: Int?
        /// A byte (or character) offset into the input.
        public var offset: Int?
        /// A chunk index in a stream, counting from 0.
        public var chunkIndex: Int?
        /// A format version.
        public var version: String?
        /// The stored item involved: a record id, an attachment path, a collection (the store's errors).
        public var item: String?

        public init(
            field: String? = nil,
            part: String? = nil,
            expected: Int? = nil,
            actual: Int? = nil,
            offset: Int? = nil,
            chunkIndex: Int? = nil,
            version: String? = nil,
            item: String? = nil
        ) {
            self.field = field
            self.part = part
            self.expected = expected
            self.actual = actual
            self.offset = offset
            self.chunkIndex = chunkIndex
            self.version = version
            self.item = item
        }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable, non-secret explanation.
    public let message: String
    /// Where it went wrong.
    public let context: Context
    /// The lower layer's error this one reports, if any: not compared, never in ``description`` (see "The cause"
    /// above for what may be attached).
    public let cause: (any Error & Sendable)?

    /// Creates an error.
    /// - Parameters:
    ///   - code: The failure kind.
    ///   - message: A non-secret explanation; defaults to the code's name.
    ///   - context: Non-secret details.
    ///   - cause: The lower layer's error, when it holds no secret (it is never printed).
    public init(_ code: Code, _ message: String = "", context: Context = .init(), cause: (any Error & Sendable)? = nil)
    {
        self.code = code
        self.message = message.isEmpty ? code.rawValue : message
        self.context = context
        self.cause = cause
    }

    public static func == (lhs: E3DBError, rhs: E3DBError) -> Bool { lhs.code == rhs.code }

    public var description: String {
        var parts: [String] = []
        if let field = context.field { parts.append("field \(String(reflecting: field))") }
        if let part = context.part { parts.append("part \(part)") }
        if let chunk = context.chunkIndex { parts.append("chunk \(chunk)") }
        if let offset = context.offset { parts.append("offset \(offset)") }
        if let expected = context.expected { parts.append("expected \(expected)") }
        if let actual = context.actual { parts.append("actual \(actual)") }
        if let version = context.version { parts.append("version \(String(reflecting: version))") }
        let where_ = parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")"
        return "E3DBError.\(code.rawValue): \(message)\(where_)"
    }
}

extension E3DBError.Code {
    /// A key has the wrong number of bytes.
    public static let invalidKeyLength = Self("invalidKeyLength", category: .malformedInput)
    /// A nonce or stream header has the wrong number of bytes.
    public static let invalidNonceLength = Self("invalidNonceLength", category: .malformedInput)
    /// An input (ciphertext, signature, output size) has an invalid length.
    public static let invalidLength = Self("invalidLength", category: .malformedInput)
    /// A MAC did not verify: wrong key, wrong nonce or tampered bytes.
    public static let authenticationFailed = Self("authenticationFailed", category: .verification)
    /// Text is not valid base64 of the expected variant.
    public static let invalidBase64 = Self("invalidBase64", category: .malformedInput)
    /// Text is not hex: an odd number of digits, or a character that is not a hex digit.
    public static let invalidHex = Self("invalidHex", category: .malformedInput)
    /// A signature did not verify.
    public static let invalidSignature = Self("invalidSignature", category: .verification)
    /// A key's parts disagree (an Ed25519 secret key whose public half does not match its seed).
    public static let inconsistentKey = Self("inconsistentKey", category: .malformedInput)
    /// A parameter is outside its allowed range.
    public static let invalidParameter = Self("invalidParameter", category: .invalidArgument)
    /// A stream was used after its final chunk.
    public static let streamFinished = Self("streamFinished", category: .verification)
    /// A stream ended without its final chunk.
    public static let missingFinalChunk = Self("missingFinalChunk", category: .verification)
    /// A stream chunk is shorter than its authentication overhead.
    public static let streamTruncated = Self("streamTruncated", category: .verification)
    /// A public key is a low-order point, which would give an all-zero shared secret.
    public static let weakPublicKey = Self("weakPublicKey", category: .malformedInput)
    /// The system random number generator failed.
    public static let randomFailure = Self("randomFailure", category: .system)
    /// A key derivation failed (bad parameters or out of memory).
    public static let kdfFailure = Self("kdfFailure", category: .system)
    /// The system could not start a thread for blocking work (`pthread_create` failed: a process or thread limit,
    /// or no memory); the work did not run.
    public static let threadUnavailable = Self("threadUnavailable", category: .system)
    /// The operation was cancelled (task cancellation, or the file cipher's `FileCancellation` flag). Nothing was
    /// committed.
    public static let cancelled = Self("cancelled", category: .cancelled)
    /// The passphrase or key does not open an encrypted store or database: the first thing it protects did not
    /// authenticate (E3DBStore's master key, page 1 of an E3DBSQLite database). Reported at open, before any
    /// content is read.
    public static let wrongKey = Self("wrongKey", category: .verification)
    /// SQLite failed (I/O, a full disk, a busy database, a constraint); the message holds SQLite's.
    public static let databaseError = Self("databaseError", category: .io)
}

extension E3DBError {
    static func length(
        _ code: Code,
        _ what: String,
        expected: Int,
        actual: Int
    ) -> E3DBError {
        E3DBError(
            code,
            "\(what) must be \(expected) bytes, got \(actual)",
            context: .init(part: what, expected: expected, actual: actual)
        )
    }
}
