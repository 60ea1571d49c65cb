/// The package's one JSON grammar: the strict RFC 8259 parser behind `CanonicalJSON.parse`, and the lexical layer
/// (white space, literals, strings, numbers, skipping a value) that E3DBAPI's record reader is built on.
///
/// It accepts exactly the JSON grammar over well-formed UTF-8 (no comments, no trailing commas, no `NaN`), and
/// decides each edge once, for both readers:
/// - A byte order mark (U+FEFF as EF BB BF) before the text is refused: RFC 8259 §8.1 forbids sending one, so no
///   SDK does, and one rule for every reader beats "ignored here, refused there". U+FEFF inside a string is text.
/// - Arrays and objects nest at most `JSONParser.maxDepth` (512, `ParseLimits.default.maxDepth`) levels, the
///   top-level container being level 1. 512 is what `JSONDecoder` and this parser always allowed, so every
///   document an SDK signs or sends (records are 3 levels deep) still reads. Skipping a value (the record reader's
///   members nobody reads, the deepest a hostile body can nest) is iterative: its open containers are kept in an
///   array, so it needs no native stack per level. Parsing (`CanonicalJSON.parse`, which builds a tree) recurses,
///   two frames a level: about 0.6 KB a level for objects in a release build (about 300 KB at 512 levels, inside
///   the 512 KB of Swift's cooperative threads, not inside musl's 128 KB default) and about 5 KB in a debug build.
///   A caller that parses untrusted input on a small stack lowers `ParseLimits.maxDepth`.
/// - Strings are well-formed UTF-8 with no raw control character (U+0000 to U+001F); escapes are JSON's, and a
///   `\u` surrogate escape must be a high one followed by a low one (a lone surrogate is no Unicode scalar).
/// - A number follows the JSON grammar (no leading zero, `+`, `.5` or `1.`) and its value is a finite IEEE 754
///   double: `1e999999` (infinite) and `1e-400` (a non-zero literal that would become 0) are refused by both
///   readers. A parsed (not skipped) integer must also be exact as a double (beyond 2^53, `9007199254740993` is
///   refused: it would sign as ...992): a rule of canonical values, which the record reader, building no number, does
///   not need.
/// - A member name repeated in one object (by code units: `"é"` and `"e\u{301}"` are two names) is refused, in
///   parsed and in skipped values.
/// - Size: the grammar has no cap of its own. `CanonicalJSON.parse` caps the input (`ParseLimits.maxInputBytes`)
///   and the number of values (`ParseLimits.maxValues`) because it builds a tree several times larger than the
///   text; the record reader builds only what it returns, in one linear pass over a body whose size the server's
///   request limit bounds, and skips what it does not read without building it.
///
/// Errors are `CanonicalJSONError`s with the byte offset of the problem; the record reader maps them to its own
/// `badRequest` refusals at its boundary.
///
/// The parser holds only its position, its limits and a scratch buffer for escapes; every method reads the input
/// through the `Span<UInt8>` it is given (`CanonicalJSON.withSpan`), so the input cannot outlive its owner and
/// every read is bounds-checked, in release builds too. The parser still tests `pos < bytes.count` before each
/// read, so that an input that ends early is an `unexpectedEnd` error, never a trap: every `bytes[pos]` (or
/// `bytes[pos + k]`) is dominated by such a test on the same path, either on the line itself or, for the functions
/// that start at a byte the caller has just read (`parseString`, `parseArray`, `parseMembers`, `skipContainer`,
/// `scanNumber`, `validateUTF8Sequence`, `skipString`), in the caller (for the package entry points among them, the record reader checks the byte before calling).
/// `pos` only grows, by at most the bytes just checked, so it never passes `bytes.count`.
package struct JSONParser: ~Copyable {
    /// The deepest nesting of arrays and objects any reader follows (see the type's documentation).
    package static var maxDepth: Int { ParseLimits.default.maxDepth }

    private var pos: Int
    private let maxDepth: Int
    private var valuesLeft: Int
    private let maxValues: Int
    private var scratch: [UInt8] = []
    private let namesAsText: Bool

    /// A parser at byte `position` of its input, nesting at most `maxDepth` levels and reading at most `maxValues`
    /// values. With `namesAsText`, a skipped object also refuses two names equal as Swift `String`s (canonically
    /// equivalent, `"é"` and `"e\u{301}"`): for text that `JSONDecoder` reads next, which would merge them.
    package init(
        maxDepth: Int = JSONParser.maxDepth, maxValues: Int = Int.max, at position: Int = 0, namesAsText: Bool = false
    ) {
        self.namesAsText = namesAsText
        self.maxDepth = maxDepth
        self.maxValues = maxValues
        self.valuesLeft = maxValues
        self.pos = position
    }

    /// The byte after what the parser has read; setting it moves the parser (the record reader keeps one parser
    /// and moves it to each token it reads).
    package var position: Int {
        get { pos }
        set { pos = newValue }
    }

    // MARK: Entry

    mutating func parseDocument(_ bytes: Span<UInt8>) throws(CanonicalJSONError) -> JSONValue {
        try Self.refuseByteOrderMark(bytes)
        skipWhitespace(bytes)
        let value = try parseValue(bytes, depth: 0)
        try expectEnd(bytes)
        return value
    }

    /// Refuses a byte order mark at the start of the input (see the type's documentation).
    package static func refuseByteOrderMark(_ bytes: Span<UInt8>) throws(CanonicalJSONError) {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF {
            throw CanonicalJSONError(
                .unexpectedCharacter, "a byte order mark (U+FEFF) is not allowed before JSON text", offset: 0)
        }
    }

    private mutating func expectEnd(_ bytes: Span<UInt8>) throws(CanonicalJSONError) {
        skipWhitespace(bytes)
        if pos < bytes.count {
            throw CanonicalJSONError(
                .trailingData, "unexpected \(describe(bytes[pos])) after the top-level value", offset: pos)
        }
    }

    // MARK: Values

    private mutating func parseValue(_ bytes: Span<UInt8>, depth: Int) throws(CanonicalJSONError) -> JSONValue {
        try value(bytes, depth: depth, build: true)
    }

    /// Skips the value at `pos` (after white space) with the grammar and limits of parsing it, building nothing but
    /// each object's set of names (to refuse a repeated one): how the record reader passes over the members it does
    /// not read. `depth` is the nesting level of the value's container (1 for a member of a top-level object).
    package mutating func skipValue(_ bytes: Span<UInt8>, depth: Int) throws(CanonicalJSONError) {
        skipWhitespace(bytes)
        _ = try value(bytes, depth: depth, build: false)
    }

    /// The value at `pos`, parsed when `build`, else checked and skipped (the result is `.null`).
    private mutating func value(
        _ bytes: Span<UInt8>, depth: Int, build: Bool
    ) throws(CanonicalJSONError) -> JSONValue {
        guard pos < bytes.count else {
            throw CanonicalJSONError(.unexpectedEnd, "input ended where a value was expected", offset: pos)
        }
        valuesLeft -= 1
        guard valuesLeft >= 0 else {
            throw CanonicalJSONError(.tooManyValues, "the input holds more than \(maxValues) values", offset: pos)
        }
        switch bytes[pos] {
        case UInt8(ascii: "\""):
            guard build else {
                _ = try skipString(bytes)
                return .null
            }
            return .string(try parseString(bytes))
        case UInt8(ascii: "{"):
            guard build else {
                try skipContainer(bytes, depth: depth)
                return .null
            }
            try checkDepth(depth + 1)
            var noCapture: RawCapture? = nil
            return .object(try parseMembers(bytes, depth: depth + 1, capture: &noCapture))
        case UInt8(ascii: "["):
            guard build else {
                try skipContainer(bytes, depth: depth)
                return .null
            }
            return try parseArray(bytes, depth: depth + 1)
        case UInt8(ascii: "t"):
            try expectLiteral(bytes, .true)
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral(bytes, .false)
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral(bytes, .null)
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            guard build else {
                try checkRange(scanNumber(bytes), bytes)
                return .null
            }
            return .number(try parseNumber(bytes))
        default:
            throw CanonicalJSONError(
                .unexpectedCharacter, "unexpected \(describe(bytes[pos])) where a value was expected", offset: pos)
        }
    }

    /// The three literals: their text, and their ASCII bytes packed little-endian with their count.
    package enum Literal {
        case `true`, `false`, null

        var text: StaticString {
            switch self {
            case .true: "true"
            case .false: "false"
            case .null: "null"
            }
        }

        var packed: (bytes: UInt64, count: Int) {
            switch self {
            case .true: (0x65_7572_74, 4)
            case .false: (0x65_736C_6166, 5)
            case .null: (0x6C_6C75_6E, 4)
            }
        }
    }

    /// Reads the literal `which` at `pos`, or refuses what stands there instead.
    package mutating func expectLiteral(_ bytes: Span<UInt8>, _ which: Literal) throws(CanonicalJSONError) {
        let start = pos
        let literal = which.text
        let (packed, count) = which.packed
        for k in 0..<count {
            let expected = UInt8(truncatingIfNeeded: packed >> (8 * UInt64(k)))
            guard pos < bytes.count else {
                throw CanonicalJSONError(
                    .unexpectedEnd, "input ended inside the literal \(literal) that starts at byte \(start)",
                    offset: pos)
            }
            guard bytes[pos] == expected else {
                throw CanonicalJSONError(
                    .unexpectedCharacter, "unexpected \(describe(bytes[pos])) inside the literal \(literal)",
                    offset: pos)
            }
            pos += 1
        }
    }

    private func checkDepth(_ depth: Int) throws(CanonicalJSONError) {
        guard depth <= maxDepth else {
            throw CanonicalJSONError(
                .nestingTooDeep, "arrays and objects are nested deeper than the limit of \(maxDepth)", offset: pos)
        }
    }

    private mutating func parseArray(_ bytes: Span<UInt8>, depth: Int) throws(CanonicalJSONError) -> JSONValue {
        try checkDepth(depth)
        pos += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace(bytes)
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "]") {
            pos += 1
            return .array(elements)
        }
        while true {
            skipWhitespace(bytes)
            elements.append(try parseValue(bytes, depth: depth))
            skipWhitespace(bytes)
            guard pos < bytes.count else {
                throw CanonicalJSONError(
                    .unexpectedEnd, "input ended inside an array; expected ',' or ']'", offset: pos)
            }
            switch bytes[pos] {
            case UInt8(ascii: ","):
                pos += 1
            case UInt8(ascii: "]"):
                pos += 1
                return .array(elements)
            default:
                throw CanonicalJSONError(
                    .unexpectedCharacter,
                    "expected ',' or ']' after an array element, found \(describe(bytes[pos]))", offset: pos)
            }
        }
    }

    /// What `CanonicalJSON.parseObject` collects besides the parsed members of the top-level object: the byte
    /// ranges of the string members named in `names`, and the member being read (for errors).
    struct RawCapture {
        let names: Set<String>
        var found: [String: RawJSONString] = [:]
        var current: String?
    }

    /// The one members loop: reads the object whose `{` is at `pos` (checked by the caller) and leaves `pos` after
    /// its `}`. With a `capture`, the string values of the members it names are validated and recorded as byte
    /// ranges instead of being parsed into the object; a name may occur once across both.
    private mutating func parseMembers(
        _ bytes: Span<UInt8>,
        depth: Int,
        capture: inout RawCapture?
    ) throws(CanonicalJSONError) -> JSONObject {
        pos += 1  // {
        var object = JSONObject()
        skipWhitespace(bytes)
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "}") {
            pos += 1
            return object
        }
        while true {
            let (key, keyOffset) = try memberName(bytes)
            skipWhitespace(bytes)
            let duplicate: Bool
            if capture == nil {
                let value = try parseValue(bytes, depth: depth)
                duplicate = !object.insertIfAbsent(key: key, value: value)
            } else {
                capture?.current = key
                if capture?.names.contains(key) == true, pos < bytes.count, bytes[pos] == UInt8(ascii: "\"") {
                    let start = pos + 1
                    let escaped = try skipString(bytes)
                    let range = RawJSONString(range: start..<(pos - 1), hasEscapes: escaped)
                    duplicate = object[key] != nil || capture?.found.updateValue(range, forKey: key) != nil
                } else {
                    let value = try parseValue(bytes, depth: depth)
                    duplicate = capture?.found[key] != nil || !object.insertIfAbsent(key: key, value: value)
                }
            }
            if duplicate {
                throw CanonicalJSONError(.duplicateKey, "duplicate member name in an object", offset: keyOffset)
            }
            capture?.current = nil
            skipWhitespace(bytes)
            guard pos < bytes.count else {
                throw CanonicalJSONError(
                    .unexpectedEnd, "input ended inside an object; expected ',' or '}'", offset: pos)
            }
            switch bytes[pos] {
            case UInt8(ascii: ","):
                pos += 1
            case UInt8(ascii: "}"):
                pos += 1
                return object
            default:
                throw CanonicalJSONError(
                    .unexpectedCharacter,
                    "expected ',' or '}' after an object member, found \(describe(bytes[pos]))", offset: pos)
            }
        }
    }

    // MARK: Skipping

    /// An array or object being skipped: its kind and, for an object, its names so far and the member being read.
    private struct OpenContainer {
        let isObject: Bool
        var names = Set<CodeUnitKey>()
        var textNames = Set<String>()  // with `namesAsText`
        var member: (name: CodeUnitKey, offset: Int)?
    }

    /// Skips the array or object whose `[` or `{` is at `pos` (checked by the caller), nested in a container
    /// `depth` levels deep, with the grammar, errors and limits of `parseArray` and `parseMembers`, building only
    /// each object's set of names. Iterative: the containers still open are kept in an array, so a value nested
    /// to the limit costs no native stack per level (skipped values are what a hostile body can nest deepest).
    private mutating func skipContainer(_ bytes: Span<UInt8>, depth: Int) throws(CanonicalJSONError) {
        var open: [OpenContainer] = []
        var opening = true  // `pos` is at a value that was counted (`valuesLeft`); else a value just ended
        while true {
            if opening {
                let byte = bytes[pos]
                if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") {
                    try checkDepth(depth + open.count + 1)
                    let isObject = byte == UInt8(ascii: "{")
                    pos += 1
                    skipWhitespace(bytes)
                    if pos < bytes.count, bytes[pos] == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                        pos += 1
                    } else {
                        open.append(OpenContainer(isObject: isObject))
                        if isObject {
                            open[open.count - 1].member = try skippedMemberName(bytes)
                        }
                        try startValue(bytes)
                        continue
                    }
                } else {
                    _ = try value(bytes, depth: depth + open.count, build: false)
                }
                opening = false
            }
            // A value ended: record its member name, then read what follows it in the innermost open container.
            guard !open.isEmpty else { return }
            let last = open.count - 1
            if let member = open[last].member {
                guard open[last].names.insert(member.name).inserted,
                    !namesAsText || open[last].textNames.insert(member.name.string).inserted
                else {
                    throw CanonicalJSONError(.duplicateKey, "duplicate member name in an object", offset: member.offset)
                }
                open[last].member = nil
            }
            let isObject = open[last].isObject
            skipWhitespace(bytes)
            guard pos < bytes.count else {
                throw CanonicalJSONError(
                    .unexpectedEnd,
                    isObject
                        ? "input ended inside an object; expected ',' or '}'"
                        : "input ended inside an array; expected ',' or ']'", offset: pos)
            }
            switch bytes[pos] {
            case UInt8(ascii: ","):
                pos += 1
                if isObject { open[last].member = try skippedMemberName(bytes) }
                try startValue(bytes)
                opening = true
            case isObject ? UInt8(ascii: "}") : UInt8(ascii: "]"):
                pos += 1
                open.removeLast()
            default:
                throw CanonicalJSONError(
                    .unexpectedCharacter,
                    isObject
                        ? "expected ',' or '}' after an object member, found \(describe(bytes[pos]))"
                        : "expected ',' or ']' after an array element, found \(describe(bytes[pos]))",
                    offset: pos)
            }
        }
    }

    /// Reads a member name and its `:` (after white space) and returns the name with the byte where it starts.
    private mutating func memberName(_ bytes: Span<UInt8>) throws(CanonicalJSONError) -> (name: String, offset: Int) {
        skipWhitespace(bytes)
        guard pos < bytes.count else {
            throw CanonicalJSONError(
                .unexpectedEnd, "input ended inside an object; expected a member name", offset: pos)
        }
        guard bytes[pos] == UInt8(ascii: "\"") else {
            throw CanonicalJSONError(
                .unexpectedCharacter, "expected a string member name, found \(describe(bytes[pos]))", offset: pos)
        }
        let offset = pos
        let name = try parseString(bytes)
        skipWhitespace(bytes)
        guard pos < bytes.count else {
            throw CanonicalJSONError(.unexpectedEnd, "input ended inside an object; expected ':'", offset: pos)
        }
        guard bytes[pos] == UInt8(ascii: ":") else {
            throw CanonicalJSONError(
                .unexpectedCharacter, "expected ':' after a member name, found \(describe(bytes[pos]))", offset: pos)
        }
        pos += 1
        return (name, offset)
    }

    /// A member name of a skipped object, by code units, with its `:`.
    private mutating func skippedMemberName(
        _ bytes: Span<UInt8>
    ) throws(CanonicalJSONError) -> (name: CodeUnitKey, offset: Int) {
        let (name, offset) = try memberName(bytes)
        return (CodeUnitKey(name), offset)
    }

    /// The start of a value inside a skipped container (after white space), counted as `value` counts it: leaves
    /// `pos` at its first byte.
    private mutating func startValue(_ bytes: Span<UInt8>) throws(CanonicalJSONError) {
        skipWhitespace(bytes)
        guard pos < bytes.count else {
            throw CanonicalJSONError(.unexpectedEnd, "input ended where a value was expected", offset: pos)
        }
        let byte = bytes[pos]
        guard byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") else { return }
        valuesLeft -= 1
        guard valuesLeft >= 0 else {
            throw CanonicalJSONError(.tooManyValues, "the input holds more than \(maxValues) values", offset: pos)
        }
    }

    // MARK: Strings

    /// Parses a string starting at the opening quote; leaves `pos` after the closing quote.
    package mutating func parseString(_ bytes: Span<UInt8>) throws(CanonicalJSONError) -> String {
        let open = pos
        pos += 1
        let contentStart = pos
        var escaped = false
        scratch.removeAll(keepingCapacity: true)
        var runStart = pos  // start of the not-yet-copied literal run (only meaningful once `escaped`)
        while true {
            pos += plainRun(bytes)
            guard pos < bytes.count else {
                throw CanonicalJSONError(
                    .unexpectedEnd, "input ended inside the string that starts at byte \(open)", offset: pos)
            }
            let byte = bytes[pos]
            if byte == UInt8(ascii: "\"") {
                let string: String
                if escaped {
                    appendToScratch(bytes, runStart..<pos)
                    string = String(decoding: scratch, as: UTF8.self)
                } else {
                    string = Self.string(bytes, contentStart..<pos)
                }
                pos += 1
                return string
            } else if byte == UInt8(ascii: "\\") {
                if !escaped {
                    escaped = true
                }
                appendToScratch(bytes, runStart..<pos)
                try parseEscape(bytes)
                runStart = pos
            } else if byte < 0x20 {
                throw CanonicalJSONError(
                    .controlCharacter, "unescaped control character U+00\(hex2(byte)) inside a string", offset: pos)
            } else if byte < 0x80 {
                pos += 1
            } else {
                try validateUTF8Sequence(bytes)
            }
        }
    }

    /// The number of plain string bytes (printable ASCII other than `"` and `\`) from `pos` on: the common case of
    /// a string's content, scanned from 0 in a span of the rest of the input, so that the span's own index checks
    /// fold away.
    @inline(__always)
    private func plainRun(_ bytes: Span<UInt8>) -> Int {
        let rest = bytes.extracting(droppingFirst: pos)
        var k = 0
        while k < rest.count {
            let b = rest[k]
            guard b >= 0x20, b < 0x80, b != UInt8(ascii: "\""), b != UInt8(ascii: "\\") else { break }
            k += 1
        }
        return k
    }

    /// Appends the input bytes in `range` to `scratch`.
    private mutating func appendToScratch(_ bytes: Span<UInt8>, _ range: Range<Int>) {
        let run = bytes.extracting(range)
        // Safety: the pointer is the span's own (bounds checked by `extracting`), valid for the closure; `append`
        // copies the bytes and keeps no pointer.
        unsafe run.withUnsafeBufferPointer { unsafe scratch.append(contentsOf: $0) }
    }

    /// The input bytes in `range`, well-formed UTF-8 that the parser has validated, as a `String`.
    static func string(_ bytes: Span<UInt8>, _ range: Range<Int>) -> String {
        let text = bytes.extracting(range)
        // Safety: the pointer is the span's own (bounds already checked by `extracting`), valid for the closure;
        // `String(decoding:as:)` copies the bytes and keeps no pointer.
        return unsafe text.withUnsafeBufferPointer { unsafe String(decoding: $0, as: UTF8.self) }
    }

    /// Validates one multi-byte UTF-8 sequence at `pos` (lead byte >= 0x80) and advances past it.
    private mutating func validateUTF8Sequence(_ bytes: Span<UInt8>) throws(CanonicalJSONError) {
        let start = pos
        let lead = bytes[pos]
        let count: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: count = 2
        case 0xE0:
            count = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: count = 3
        case 0xED:
            count = 3
            high = 0x9F
        case 0xF0:
            count = 4
            low = 0x90
        case 0xF1...0xF3: count = 4
        case 0xF4:
            count = 4
            high = 0x8F
        default:
            throw CanonicalJSONError(.invalidUTF8, "byte 0x\(hex2(lead)) cannot start a UTF-8 sequence", offset: start)
        }
        for i in 1..<count {
            guard start + i < bytes.count else {
                throw CanonicalJSONError(.invalidUTF8, "truncated UTF-8 sequence", offset: start)
            }
            let b = bytes[start + i]
            let (lo, hi) = i == 1 ? (low, high) : (UInt8(0x80), UInt8(0xBF))
            guard b >= lo && b <= hi else {
                throw CanonicalJSONError(
                    .invalidUTF8, "ill-formed UTF-8 sequence (lead byte 0x\(hex2(lead)), then 0x\(hex2(b)))",
                    offset: start)
            }
        }
        pos = start + count
    }

    /// Decodes the escape at `pos` (a backslash) into `scratch`; leaves `pos` after it.
    private mutating func parseEscape(_ bytes: Span<UInt8>) throws(CanonicalJSONError) {
        let start = pos
        guard pos + 1 < bytes.count else {
            throw CanonicalJSONError(.unexpectedEnd, "input ended inside an escape sequence", offset: pos)
        }
        let c = bytes[pos + 1]
        pos += 2
        switch c {
        case UInt8(ascii: "\""): scratch.append(0x22)
        case UInt8(ascii: "\\"): scratch.append(0x5C)
        case UInt8(ascii: "/"): scratch.append(0x2F)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try readHex4(bytes, escapeStart: start)
            var scalar = UInt32(unit)
            if unit >= 0xD800 && unit <= 0xDBFF {
                guard pos + 1 < bytes.count, bytes[pos] == UInt8(ascii: "\\"),
                    bytes[pos + 1] == UInt8(ascii: "u")
                else {
                    throw CanonicalJSONError(
                        .loneSurrogate, "high surrogate \\u\(hex4(unit)) is not followed by a low-surrogate escape",
                        offset: start)
                }
                let second = pos
                pos += 2
                let next = try readHex4(bytes, escapeStart: second)
                guard next >= 0xDC00 && next <= 0xDFFF else {
                    throw CanonicalJSONError(
                        .loneSurrogate,
                        "high surrogate \\u\(hex4(unit)) is followed by \\u\(hex4(next)), not a low surrogate",
                        offset: start)
                }
                scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(next) - 0xDC00)
            } else if unit >= 0xDC00 && unit <= 0xDFFF {
                throw CanonicalJSONError(
                    .loneSurrogate, "low surrogate \\u\(hex4(unit)) without a preceding high surrogate", offset: start)
            }
            appendUTF8(scalar)
        default:
            throw CanonicalJSONError(.invalidEscape, "invalid escape \\\(describeBare(c)) in a string", offset: start)
        }
    }

    private mutating func readHex4(_ bytes: Span<UInt8>, escapeStart: Int) throws(CanonicalJSONError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard pos < bytes.count else {
                throw CanonicalJSONError(.unexpectedEnd, "input ended inside a \\u escape", offset: pos)
            }
            let b = bytes[pos]
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default:
                throw CanonicalJSONError(
                    .invalidEscape, "\\u escape needs four hex digits, found \(describe(b))", offset: pos)
            }
            value = value << 4 | UInt16(digit)
            pos += 1
        }
        return value
    }

    private mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | (scalar >> 6)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | (scalar >> 12)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            scratch.append(UInt8(0xF0 | (scalar >> 18)))
            scratch.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }

    // MARK: Numbers

    /// Where a number's parts are in the input: what `scanNumber` read.
    package struct NumberToken {
        /// From the sign (or first digit) to the byte after the last digit.
        package let range: Range<Int>
        /// The digits of the integer part.
        package let integerDigits: Range<Int>
        /// Whether it starts with `-`.
        package let negative: Bool
        /// Whether it has neither a fraction nor an exponent.
        package let isInteger: Bool
    }

    /// Reads the number at `pos` (a `-` or a digit, checked by the caller) by the JSON grammar alone, and leaves
    /// `pos` after it.
    package mutating func scanNumber(_ bytes: Span<UInt8>) throws(CanonicalJSONError) -> NumberToken {
        let start = pos
        var negative = false
        if bytes[pos] == UInt8(ascii: "-") {
            negative = true
            pos += 1
        }
        guard pos < bytes.count else {
            throw CanonicalJSONError(.invalidNumber, "a number needs digits after '-'", offset: pos)
        }
        let intStart = pos
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
            if pos < bytes.count, isDigit(bytes[pos]) {
                throw CanonicalJSONError(.invalidNumber, "a number must not have a leading zero", offset: pos)
            }
        } else if isDigit(bytes[pos]) {
            pos += digitRun(bytes)
        } else {
            throw CanonicalJSONError(
                .invalidNumber, "expected a digit in a number, found \(describe(bytes[pos]))", offset: pos)
        }
        let intEnd = pos
        var isInteger = true
        if pos < bytes.count, bytes[pos] == UInt8(ascii: ".") {
            isInteger = false
            pos += 1
            guard pos < bytes.count, isDigit(bytes[pos]) else {
                throw CanonicalJSONError(
                    .invalidNumber, "a decimal point must be followed by a digit", offset: pos)
            }
            pos += digitRun(bytes)
        }
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E") {
            isInteger = false
            pos += 1
            if pos < bytes.count, bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-") {
                pos += 1
            }
            guard pos < bytes.count, isDigit(bytes[pos]) else {
                throw CanonicalJSONError(.invalidNumber, "an exponent needs at least one digit", offset: pos)
            }
            pos += digitRun(bytes)
        }
        return NumberToken(
            range: start..<pos, integerDigits: intStart..<intEnd, negative: negative, isInteger: isInteger)
    }

    /// The value of `token` as a double: finite, and not 0 for a literal with a non-zero digit (the range rule of
    /// the type's documentation).
    package func double(_ token: NumberToken, _ bytes: Span<UInt8>) throws(CanonicalJSONError) -> Double {
        let start = token.range.lowerBound
        let (intStart, intEnd) = (token.integerDigits.lowerBound, token.integerDigits.upperBound)
        if token.isInteger && intEnd - intStart <= 15 {
            var v: Int64 = 0
            for i in intStart..<intEnd { v = v * 10 + Int64(bytes[i] - UInt8(ascii: "0")) }
            let d = Double(v)
            return token.negative ? -d : d
        }
        let text = Self.string(bytes, token.range)
        guard let value = Double(text) else {
            throw CanonicalJSONError(.invalidNumber, "number could not be converted", offset: start)
        }
        guard value.isFinite else {
            throw CanonicalJSONError(
                .numberOutOfRange, "number is outside the range of an IEEE 754 double", offset: start)
        }
        if value == 0 {
            // A literal with a non-zero digit that becomes 0 (1e-400) would sign as 0: refused like 1e400.
            var mantissaEnd = intStart
            while mantissaEnd < token.range.upperBound, bytes[mantissaEnd] != UInt8(ascii: "e"),
                bytes[mantissaEnd] != UInt8(ascii: "E")
            {
                mantissaEnd += 1
            }
            var nonZeroDigit = false
            for i in intStart..<mantissaEnd where bytes[i] >= UInt8(ascii: "1") && bytes[i] <= UInt8(ascii: "9") {
                nonZeroDigit = true
            }
            if nonZeroDigit {
                throw CanonicalJSONError(
                    .numberOutOfRange, "number is too small for an IEEE 754 double and would become 0", offset: start)
            }
        }
        return value
    }

    /// Refuses `token` as `double` would (out of range), converting it only when its digits cannot show that it is
    /// in range: how a skipped number is checked, so that a body of millions of `0.5`s costs a scan, not millions of
    /// conversions. A literal whose first non-zero digit stands for 10^L with -323 <= L <= 307 is at least 10^-323
    /// (above half the smallest subnormal, so it does not become 0) and below 10^308 (finite); one with no
    /// non-zero digit is 0 whatever its exponent (`0e999999` is 0). Only the rest goes through `double`.
    private func checkRange(_ token: NumberToken, _ bytes: Span<UInt8>) throws(CanonicalJSONError) {
        if token.isInteger && token.integerDigits.count <= 15 { return }
        var k = token.integerDigits.upperBound
        let end = token.range.upperBound
        var leading: Int?  // L without the exponent
        if bytes[token.integerDigits.lowerBound] != UInt8(ascii: "0") { leading = token.integerDigits.count - 1 }
        if k < end, bytes[k] == UInt8(ascii: ".") {
            k += 1
            let fractionStart = k
            while k < end, isDigit(bytes[k]) {
                if leading == nil, bytes[k] != UInt8(ascii: "0") { leading = fractionStart - k - 1 }
                k += 1
            }
        }
        guard let leading else { return }  // no non-zero digit: the value is 0
        var exponent = 0
        if k < end {  // at `e` or `E`
            k += 1
            var negative = false
            if bytes[k] == UInt8(ascii: "+") || bytes[k] == UInt8(ascii: "-") {
                negative = bytes[k] == UInt8(ascii: "-")
                k += 1
            }
            guard end - k <= 6 else {
                _ = try double(token, bytes)
                return
            }
            while k < end {
                exponent = exponent * 10 + Int(bytes[k] - UInt8(ascii: "0"))
                k += 1
            }
            if negative { exponent = -exponent }
        }
        if (-323...307).contains(leading + exponent) { return }
        _ = try double(token, bytes)
    }

    /// A number's value as `CanonicalJSON.parse` reads it: `double` of its token, and an integer exact as a double.
    private mutating func parseNumber(_ bytes: Span<UInt8>) throws(CanonicalJSONError) -> Double {
        let token = try scanNumber(bytes)
        let value = try double(token, bytes)
        if token.isInteger && !Self.isExact(value.magnitude, digits: bytes.extracting(token.integerDigits)) {
            // 9007199254740993 would sign as 9007199254740992, and a signature over one would verify the other.
            throw CanonicalJSONError(
                .numberOutOfRange,
                "integer has more precision than an IEEE 754 double (beyond 2^53 it would be rounded); write it as a string",
                offset: token.range.lowerBound)
        }
        return value
    }

    /// Whether the integer literal `digits` names the double `magnitude` without losing precision: it is either
    /// the double's exact value or its ECMAScript (canonical) form, which for doubles from 2^53 to 1e21 is the
    /// shortest round-trip digits padded with zeros ("18446744073709552000"). So canonical output always parses
    /// back, and a literal such as 9007199254740993, which would silently become ...992, does not.
    static func isExact(_ magnitude: Double, digits: Span<UInt8>) -> Bool {
        if magnitude < 9_007_199_254_740_992 { return true }  // every integer below 2^53 is exactly a double
        if equal(digits, CanonicalJSON.formatNumber(magnitude).utf8) { return true }
        return equal(digits, exactDigits(of: magnitude))
    }

    private static func equal(_ span: Span<UInt8>, _ other: some Collection<UInt8>) -> Bool {
        guard span.count == other.count else { return false }
        var i = 0
        for byte in other {
            guard span[i] == byte else { return false }
            i += 1
        }
        return true
    }

    /// The exact decimal digits of an integral double (significand times a power of two).
    static func exactDigits(of value: Double) -> [UInt8] {
        var little: [UInt8] = []  // decimal digits, least significant first
        var significand = value.significandBitPattern | (1 << 52)
        while significand > 0 {
            little.append(UInt8(significand % 10))
            significand /= 10
        }
        let shift = Int(value.exponent) - 52
        if shift > 0 {
            for _ in 0..<shift {
                var carry: UInt8 = 0
                for i in little.indices {
                    let d = little[i] &* 2 &+ carry
                    little[i] = d % 10
                    carry = d / 10
                }
                if carry > 0 { little.append(carry) }
            }
        }
        return little.reversed().map { $0 + UInt8(ascii: "0") }
    }

    // MARK: Helpers

    /// Moves `pos` past white space.
    package mutating func skipWhitespace(_ bytes: Span<UInt8>) {
        while pos < bytes.count, Self.isWhitespace(bytes[pos]) { pos += 1 }
    }

    /// Whether `byte` is JSON white space (space, tab, line feed, carriage return): the one definition.
    @inlinable
    package static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    private func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    /// The number of ASCII digits from `pos` on, scanned like `plainRun`.
    @inline(__always)
    private func digitRun(_ bytes: Span<UInt8>) -> Int {
        let rest = bytes.extracting(droppingFirst: pos)
        var k = 0
        while k < rest.count, isDigit(rest[k]) { k += 1 }
        return k
    }
}

private let hexDigitsUpper: [UInt8] = Array("0123456789ABCDEF".utf8)

func hex2(_ b: UInt8) -> String {
    String(decoding: [hexDigitsUpper[Int(b >> 4)], hexDigitsUpper[Int(b & 0xF)]], as: UTF8.self)
}

func hex4(_ u: UInt16) -> String { hex2(UInt8(u >> 8)) + hex2(UInt8(u & 0xFF)) }

/// `'x'` for printable ASCII, `byte 0xNN` otherwise. Never more than one character of input.
func describe(_ b: UInt8) -> String {
    if b >= 0x21 && b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
    return "byte 0x\(hex2(b))"
}

private func describeBare(_ b: UInt8) -> String {
    if b >= 0x21 && b < 0x7F { return String(Character(Unicode.Scalar(b))) }
    return "(byte 0x\(hex2(b)))"
}

// MARK: Objects with raw string members

/// A parse error of `CanonicalJSON.parseObject(_:rawMembers:limits:)` with the top-level member it happened in:
/// the duplicated name for a repeated member, the enclosing member for a problem inside a member's value, nil
/// when it happened outside any member value (syntax between members, a bad member name).
package struct ObjectParseError: Error, Sendable {
    /// The parser's error (code and byte offset).
    package let error: CanonicalJSONError
    /// The top-level member name, when known.
    package let member: String?
}

/// Where a string member's text sits in the input: its UTF-8 bytes between the quotes, not decoded.
package struct RawJSONString: Sendable, Hashable {
    /// The byte range of the content (the quotes excluded), as offsets from the input's first byte: not indices
    /// of the collection passed (for a slice, add its start index).
    package let range: Range<Int>
    /// True when the content has at least one backslash escape, so the raw bytes are not the string's UTF-8.
    package let hasEscapes: Bool
}

extension JSONParser {
    /// Parses a top-level object strictly. String values of members named in `rawMembers` are validated
    /// (UTF-8, escapes, surrogates) but not materialised: only their byte range is returned, so that a secret
    /// never becomes a Swift `String`. Every other member is parsed into `object`. Duplicate names are rejected
    /// across both sets.
    mutating func parseTopLevelObject(
        _ bytes: Span<UInt8>,
        rawMembers: Set<String>
    ) throws(ObjectParseError) -> (object: JSONObject, raw: [String: RawJSONString]) {
        var capture: RawCapture? = RawCapture(names: rawMembers)
        do throws(CanonicalJSONError) {
            try Self.refuseByteOrderMark(bytes)
            skipWhitespace(bytes)
            guard pos < bytes.count else {
                throw CanonicalJSONError(.unexpectedEnd, "input ended where an object was expected", offset: pos)
            }
            guard bytes[pos] == UInt8(ascii: "{") else {
                throw CanonicalJSONError(
                    .unexpectedCharacter, "expected an object, found \(describe(bytes[pos]))", offset: pos)
            }
            let object = try parseMembers(bytes, depth: 1, capture: &capture)
            try expectEnd(bytes)
            return (object, capture?.found ?? [:])
        } catch {
            throw ObjectParseError(error: error, member: capture?.current)
        }
    }

    /// Validates the string at `pos` like `parseString` and leaves `pos` after the closing quote, without
    /// building a `String`. Escapes are validated into `scratch`, which is cleared (zeroed) afterwards.
    /// - Returns: whether the string had an escape.
    @discardableResult
    package mutating func skipString(_ bytes: Span<UInt8>) throws(CanonicalJSONError) -> Bool {
        let open = pos
        pos += 1
        var escaped = false
        defer {
            if !scratch.isEmpty {
                for i in scratch.indices { scratch[i] = 0 }
                scratch.removeAll(keepingCapacity: true)
            }
        }
        while true {
            pos += plainRun(bytes)
            guard pos < bytes.count else {
                throw CanonicalJSONError(
                    .unexpectedEnd, "input ended inside the string that starts at byte \(open)", offset: pos)
            }
            let byte = bytes[pos]
            if byte == UInt8(ascii: "\"") {
                pos += 1
                return escaped
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
                try parseEscape(bytes)
            } else if byte < 0x20 {
                throw CanonicalJSONError(
                    .controlCharacter, "unescaped control character U+00\(hex2(byte)) inside a string", offset: pos)
            } else if byte < 0x80 {
                pos += 1
            } else {
                try validateUTF8Sequence(bytes)
            }
        }
    }
}

extension CanonicalJSON {
    /// Parses a JSON object with the strict rules of ``parse(_:limits:)``, leaving the string values of the
    /// members named in `rawMembers` undecoded (see `RawJSONString`), for inputs that carry secrets.
    /// A named member whose value is not a string is parsed into the object like any other member. Pass an input
    /// with contiguous storage (a buffer pointer over wiped memory): another collection is copied into an array
    /// that is not wiped.
    /// - Throws: `ObjectParseError`: the parser's error and the top-level member it happened in.
    package static func parseObject(
        _ utf8: some Collection<UInt8>,
        rawMembers: Set<String>,
        limits: ParseLimits = .default
    ) throws(ObjectParseError) -> (object: JSONObject, raw: [String: RawJSONString]) {
        guard utf8.count <= limits.maxInputBytes else {
            throw ObjectParseError(
                error: CanonicalJSONError(
                    .inputTooLarge, "input of \(utf8.count) bytes exceeds the limit of \(limits.maxInputBytes) bytes",
                    offset: limits.maxInputBytes),
                member: nil)
        }
        return try withSpan(of: utf8) {
            bytes -> Result<(object: JSONObject, raw: [String: RawJSONString]), ObjectParseError> in
            var parser = JSONParser(maxDepth: limits.maxDepth, maxValues: max(0, limits.maxValues))
            do throws(ObjectParseError) {
                return .success(try parser.parseTopLevelObject(bytes, rawMembers: rawMembers))
            } catch {
                return .failure(error)
            }
        }
        .get()
    }
}
