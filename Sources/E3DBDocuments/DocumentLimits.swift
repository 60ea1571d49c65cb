public import E3DBCanonicalJSON
public import E3DBPrimitives

extension E3DBError.Code {
    /// A document that would be written is larger than what reading it back accepts (``DocumentLimits``).
    public static let documentTooLarge = Self("documentTooLarge", category: .malformedInput)
}

/// One set of limits for both directions (D7): whatever encrypt or sign writes, decrypt and verify read.
///
/// Reading parses with `ParseLimits.default` (64 MiB of text, 1,048,576 values, nesting 512), so writing checks
/// the document it produced against the same numbers before anything is output. A record field grows about 1.4×
/// (base64 plus 80 bytes), a note field about 2.3× plus 150 bytes (TFSP1 header and base64), which is why an input
/// well under 64 MiB can still be refused.
public enum DocumentLimits {
    /// The limits that reading applies.
    public static let parse = ParseLimits.default

    /// Checks a document about to be written.
    /// - Parameters:
    ///   - byteCount: its JSON text's length in bytes.
    ///   - valueCount: the number of JSON values in it (`JSONValue.valueCount`).
    ///   - what: what it is, for the message (`record`, `note`, `signed document`).
    /// - Throws: `E3DBError` `.documentTooLarge` naming the limit that would be exceeded.
    public static func checkOutput(byteCount: Int, valueCount: Int, what: String) throws(E3DBError) {
        if byteCount > parse.maxInputBytes {
            throw E3DBError(
                .documentTooLarge,
                "the \(what) would be \(byteCount) bytes, more than the \(parse.maxInputBytes) that reading accepts",
                context: .init(expected: parse.maxInputBytes, actual: byteCount))
        }
        if valueCount > parse.maxValues {
            throw E3DBError(
                .documentTooLarge,
                "the \(what) would hold \(valueCount) JSON values, more than the \(parse.maxValues) that reading accepts",
                context: .init(expected: parse.maxValues, actual: valueCount))
        }
    }

    /// Checks a value about to be written as canonical JSON.
    /// - Parameters:
    ///   - value: the value (its canonical form is what gets written).
    ///   - byteCount: the length of its serialization.
    ///   - what: what it is, for the message.
    /// - Throws: `E3DBError` `.documentTooLarge`.
    public static func checkOutput(_ value: JSONValue, byteCount: Int, what: String) throws(E3DBError) {
        try checkOutput(byteCount: byteCount, valueCount: value.valueCount, what: what)
    }
}

extension JSONValue {
    /// The number of values in this value, itself included (what `ParseLimits.maxValues` counts).
    public var valueCount: Int {
        switch self {
        case .null, .bool, .number, .string: 1
        case .array(let items): items.reduce(1) { $0 + $1.valueCount }
        case .object(let object): object.reduce(1) { $0 + $1.value.valueCount }
        }
    }
}
