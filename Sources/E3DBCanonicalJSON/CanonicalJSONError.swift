/// An error from the strict parser or from ``JSONValueEncoder``: what is wrong and, for parse errors, at which
/// byte offset of the input (0-based, counted in UTF-8 bytes).
public struct CanonicalJSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The class of error. Compare codes, not messages.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable identifier, e.g. `"duplicateKey"`.
        public let rawValue: String
        /// Creates a code: this package's modules only, so the set of codes is the one listed here.
        package init(rawValue: String) { self.rawValue = rawValue }
        /// The raw value.
        public var description: String { rawValue }

        /// The input is not well-formed UTF-8 (overlong form, encoded surrogate, truncated sequence, > U+10FFFF).
        public static let invalidUTF8 = Code(rawValue: "invalidUTF8")
        /// A character that cannot start or continue a value here (including a leading byte order mark).
        public static let unexpectedCharacter = Code(rawValue: "unexpectedCharacter")
        /// The input ended inside a value.
        public static let unexpectedEnd = Code(rawValue: "unexpectedEnd")
        /// A backslash escape that JSON does not define, or a malformed `\u` escape.
        public static let invalidEscape = Code(rawValue: "invalidEscape")
        /// A `\u` escape of a surrogate that is not part of a high-low pair.
        public static let loneSurrogate = Code(rawValue: "loneSurrogate")
        /// An unescaped control character (U+0000 to U+001F) inside a string.
        public static let controlCharacter = Code(rawValue: "controlCharacter")
        /// A number that does not follow the JSON grammar (leading zero, missing digits, `+`, `.5`, ...).
        public static let invalidNumber = Code(rawValue: "invalidNumber")
        /// A number whose magnitude is beyond the largest finite IEEE 754 double.
        public static let numberOutOfRange = Code(rawValue: "numberOutOfRange")
        /// An object member whose key (compared by code units) already occurred in the same object.
        public static let duplicateKey = Code(rawValue: "duplicateKey")
        /// Arrays and objects nested deeper than ``ParseLimits/maxDepth``.
        public static let nestingTooDeep = Code(rawValue: "nestingTooDeep")
        /// The input is longer than ``ParseLimits/maxInputBytes``.
        public static let inputTooLarge = Code(rawValue: "inputTooLarge")
        /// The input holds more values than ``ParseLimits/maxValues``.
        public static let tooManyValues = Code(rawValue: "tooManyValues")
        /// Non-whitespace after the single top-level value.
        public static let trailingData = Code(rawValue: "trailingData")
        /// ``JSONValueEncoder``: a value JSON cannot represent exactly (non-finite float, integer beyond ±2^53).
        public static let unrepresentableValue = Code(rawValue: "unrepresentableValue")
    }

    /// The class of error.
    public let code: Code
    /// A human-readable explanation. Contains no input bytes beyond at most one offending character.
    public let message: String
    /// The 0-based UTF-8 byte offset of the problem in the parser's input, or nil when not applicable.
    public let offset: Int?

    /// Creates an error.
    public init(_ code: Code, _ message: String, offset: Int? = nil) {
        self.code = code
        self.message = message
        self.offset = offset
    }

    /// Errors compare by code and offset only.
    public static func == (lhs: CanonicalJSONError, rhs: CanonicalJSONError) -> Bool {
        lhs.code == rhs.code && lhs.offset == rhs.offset
    }

    /// `"<code> at byte <offset>: <message>"`, on one line.
    public var description: String {
        if let offset { return "\(code.rawValue) at byte \(offset): \(message)" }
        return "\(code.rawValue): \(message)"
    }
}

/// Resource limits for the `CanonicalJSON.parse(_:limits:)` functions.
public struct ParseLimits: Sendable, Hashable {
    /// The deepest allowed nesting of arrays and objects. A top-level scalar has depth 0, `[]` depth 1.
    /// The parser and serializer recurse once per level, so keep this well below what the thread's stack allows.
    /// The default, 512, is the one depth bound of every JSON reader in the package (E3DBAPI's record reader
    /// included).
    public var maxDepth: Int
    /// The largest accepted input, in bytes.
    public var maxInputBytes: Int
    /// The most values (scalars, arrays, objects and object members' values, each counted once) in one input. A
    /// parsed value costs far more memory than its few bytes of text (`{}` is 2 bytes), so this, not the input
    /// size, bounds the memory a hostile shape can claim (D9: 66 MB of `[{"a":{}},…]` once took 1.8 GB). The
    /// default, 1,048,576, admits a record or note of about 500,000 fields.
    public var maxValues: Int

    /// Creates limits.
    /// - Parameters:
    ///   - maxDepth: deepest nesting of arrays and objects (default 512).
    ///   - maxInputBytes: largest input in bytes (default 64 MiB).
    ///   - maxValues: most values in one input (default 1,048,576).
    public init(maxDepth: Int = 512, maxInputBytes: Int = 64 << 20, maxValues: Int = 1 << 20) {
        self.maxDepth = maxDepth
        self.maxInputBytes = maxInputBytes
        self.maxValues = maxValues
    }

    /// Depth 512, 64 MiB, 1,048,576 values.
    public static let `default` = ParseLimits()
}
