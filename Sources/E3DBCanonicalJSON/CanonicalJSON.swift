/// The order of object members in canonical output.
public enum KeyOrder: Sendable, Hashable, CaseIterable {
    /// Members sorted by the UTF-16 code units of their keys: RFC 8785, Java (`TreeMap`), the old Swift SDK.
    /// The default everywhere.
    case utf16
    /// The order the JavaScript SDK's `Signable.stringify` produces: keys that are array indices (the canonical
    /// decimal integers `0` ... `4294967294`) first, in numeric order, then the other keys in UTF-16 order.
    /// Only the member order changes; arrays stay arrays (js-sdk would turn them into `{"0":...}` objects).
    case javaScript
    /// The order a JavaScript engine enumerates an object it parsed or built: array-index keys first, in numeric
    /// order, then the other keys in insertion order, unsorted. js-sdk's `RecordInfo.stringify` (the record
    /// signature, spec §4.5) writes `plain` and `data` this way. The insertion order is the member order of the
    /// `JSONObject` (for parsed JSON, the order in the text).
    case javaScriptInsertion
}

/// Strict JSON parsing and canonical (RFC 8785 / E3DB `Signable`) serialization. Standard library only.
///
/// The canonical form has no whitespace, sorts object members by ``KeyOrder`` (UTF-16 code units by default),
/// escapes strings exactly as ECMAScript `JSON.stringify` (`\"`, `\\`, `\b \t \n \f \r`, other C0 controls as
/// lowercase `\u00xx`, everything else literal UTF-8) and writes numbers in ECMAScript Number-to-string form.
public enum CanonicalJSON {
    /// The canonical serialization of `value` as a string.
    /// - Parameters:
    ///   - value: the value. Non-finite numbers are written as `null`, as `JSON.stringify` does.
    ///   - order: the member order (default ``KeyOrder/utf16``).
    /// - Returns: the canonical JSON text.
    public static func serialize(_ value: JSONValue, order: KeyOrder = .utf16) -> String {
        let bytes = serializedBytes(value, order: order)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The canonical serialization of `value` as UTF-8 bytes: the bytes that get signed.
    /// - Parameters:
    ///   - value: the value. Non-finite numbers are written as `null`, as `JSON.stringify` does.
    ///   - order: the member order (default ``KeyOrder/utf16``).
    /// - Returns: the UTF-8 of the canonical JSON text.
    public static func serializedBytes(_ value: JSONValue, order: KeyOrder = .utf16) -> [UInt8] {
        var writer = CanonicalWriter(order: order)
        writer.write(value)
        return writer.out
    }

    /// Parses exactly one JSON text from UTF-8 bytes.
    /// - Parameters:
    ///   - utf8: the input bytes (no byte order mark).
    ///   - limits: nesting and size limits (default ``ParseLimits/default``).
    /// - Returns: the value.
    /// - Throws: ``CanonicalJSONError`` with the byte offset of the problem: `invalidUTF8`, `unexpectedCharacter`,
    ///   `unexpectedEnd`, `invalidEscape`, `loneSurrogate`, `controlCharacter`, `invalidNumber`, `numberOutOfRange`,
    ///   `duplicateKey`, `nestingTooDeep`, `inputTooLarge`, `tooManyValues` or `trailingData`.
    public static func parse(
        _ utf8: some Collection<UInt8>,
        limits: ParseLimits = .default
    ) throws(CanonicalJSONError) -> JSONValue {
        guard utf8.count <= limits.maxInputBytes else {
            throw CanonicalJSONError(
                .inputTooLarge, "input of \(utf8.count) bytes exceeds the limit of \(limits.maxInputBytes) bytes",
                offset: limits.maxInputBytes)
        }
        return try withSpan(of: utf8) { bytes -> Result<JSONValue, CanonicalJSONError> in
            var parser = JSONParser(maxDepth: max(0, limits.maxDepth), maxValues: max(0, limits.maxValues))
            do throws(CanonicalJSONError) {
                return .success(try parser.parseDocument(bytes))
            } catch {
                return .failure(error)
            }
        }
        .get()
    }

    /// Parses exactly one JSON text from a string.
    /// - Parameters:
    ///   - text: the JSON text.
    ///   - limits: nesting and size limits (default ``ParseLimits/default``); the size limit counts UTF-8 bytes.
    /// - Returns: the value.
    /// - Throws: ``CanonicalJSONError`` as for the byte-input overload; offsets count UTF-8 bytes of `text`.
    public static func parse(_ text: String, limits: ParseLimits = .default) throws(CanonicalJSONError) -> JSONValue {
        try parse(text.utf8, limits: limits)
    }

    /// Calls `body` with the bytes of `utf8` as a `Span`: the collection's own storage when it has contiguous
    /// storage (arrays, `Data`, a native string's UTF-8 view, buffer pointers), a copy otherwise.
    static func withSpan<R>(of utf8: some Collection<UInt8>, _ body: (Span<UInt8>) -> R) -> R {
        // Safety: `buffer` is the collection's storage, borrowed for the closure; the span made from it cannot
        // escape the closure (`Span` is non-escapable and `R` cannot hold one), so it is only read while the
        // storage is alive. Every read through it is bounds-checked.
        if let result = utf8.withContiguousStorageIfAvailable({ buffer in unsafe body(Span(_unsafeElements: buffer)) })
        {
            return result
        }
        let copy = ArraySlice(utf8)
        return body(copy.span)
    }

    /// Whether `utf8` is valid JSON that is already in canonical form (byte for byte).
    /// - Parameters:
    ///   - utf8: the input bytes.
    ///   - order: the member order to check against (default ``KeyOrder/utf16``).
    ///   - limits: parse limits.
    /// - Returns: true when `serializedBytes(parse(utf8), order:)` equals `utf8`.
    /// - Throws: ``CanonicalJSONError`` when the input does not parse.
    public static func isCanonical(
        _ utf8: some Collection<UInt8>,
        order: KeyOrder = .utf16,
        limits: ParseLimits = .default
    ) throws(CanonicalJSONError) -> Bool {
        let value = try parse(utf8, limits: limits)
        return serializedBytes(value, order: order).elementsEqual(utf8)
    }
}

// MARK: - Writer

/// 0 = copy literally; otherwise the escape letter (`u` for `\u00xx`).
private let escapeTable: [UInt8] = {
    var table = [UInt8](repeating: 0, count: 256)
    for c in 0..<0x20 { table[c] = UInt8(ascii: "u") }
    table[0x08] = UInt8(ascii: "b")
    table[0x09] = UInt8(ascii: "t")
    table[0x0A] = UInt8(ascii: "n")
    table[0x0C] = UInt8(ascii: "f")
    table[0x0D] = UInt8(ascii: "r")
    table[0x22] = UInt8(ascii: "\"")
    table[0x5C] = UInt8(ascii: "\\")
    return table
}()

private let lowerHex: [UInt8] = Array("0123456789abcdef".utf8)

struct CanonicalWriter {
    var out: [UInt8] = []
    let order: KeyOrder

    init(order: KeyOrder, capacity: Int = 256) {
        self.order = order
        out.reserveCapacity(capacity)
    }

    mutating func write(_ value: JSONValue) {
        switch value {
        case .null:
            appendASCII("null")
        case .bool(let b):
            appendASCII(b ? "true" : "false")
        case .number(let d):
            ECMAScriptNumber.append(d, to: &out)
        case .string(let s):
            writeString(s)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                write(element)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            writeObject(object)
        }
    }

    private mutating func appendASCII(_ s: String) {
        out.append(contentsOf: s.utf8)
    }

    mutating func writeObject(_ object: JSONObject) {
        let members = object.members
        out.append(UInt8(ascii: "{"))
        if members.count == 1 {
            writeString(members[0].key)
            out.append(UInt8(ascii: ":"))
            write(members[0].value)
        } else if members.count > 1 {
            let sorted = KeySorter.sortedIndices(members, order: order)
            var first = true
            for i in sorted {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                writeString(members[i].key)
                out.append(UInt8(ascii: ":"))
                write(members[i].value)
            }
        }
        out.append(UInt8(ascii: "}"))
    }

    mutating func writeString(_ string: String) { JSONString.append(string, to: &out) }
}

/// The one JSON string escaper, of the canonical form and of the wire (E3DBAPI's `JSONTextWriter`): `"` and `\`
/// escaped, control characters as `\b`, `\t`, `\n`, `\f`, `\r` or `\u00xx` (lowercase hex), every other
/// character as its UTF-8 (`/` and non-ASCII not escaped): RFC 8785's rule.
package enum JSONString {
    /// Appends `string` to `out` as a JSON string, quotes included.
    // Safety: `buffer` and `table` are borrowed for their closures and not kept; `table` has 256 entries, so any
    // byte indexes it; `i < n == buffer.count` guards every read, and the copied runs are `runStart <= i <= n`.
    package static func append(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = string
        s.withUTF8 { buffer in
            unsafe escapeTable.withUnsafeBufferPointer { table in
                var runStart = 0
                var i = 0
                let n = buffer.count
                while i < n {
                    let escape = unsafe table[Int(buffer[i])]
                    if escape == 0 {
                        i += 1
                        continue
                    }
                    if runStart < i {
                        unsafe out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[runStart..<i]))
                    }
                    out.append(UInt8(ascii: "\\"))
                    out.append(escape)
                    if escape == UInt8(ascii: "u") {
                        let b = unsafe buffer[i]
                        out.append(UInt8(ascii: "0"))
                        out.append(UInt8(ascii: "0"))
                        out.append(lowerHex[Int(b >> 4)])
                        out.append(lowerHex[Int(b & 0xF)])
                    }
                    i += 1
                    runStart = i
                }
                if runStart < n { unsafe out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[runStart..<n])) }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

// MARK: - Key sorting

enum KeySorter {
    /// Member indices in canonical order. Keys' UTF-8 is copied once into one buffer; comparisons then run on
    /// bytes with a lead-byte fix-up that turns UTF-8 byte order into UTF-16 code-unit order.
    static func sortedIndices(_ members: [JSONObject.Member], order: KeyOrder) -> [Int] {
        var bytes: [UInt8] = []
        var spans: [(start: Int, count: Int, arrayIndex: UInt64)] = []
        spans.reserveCapacity(members.count)
        var total = 0
        for m in members { total += m.key.utf8.count }
        bytes.reserveCapacity(total)
        for m in members {
            let start = bytes.count
            bytes.append(contentsOf: m.key.utf8)
            let count = bytes.count - start
            let index = order == .utf16 ? noIndex : arrayIndexValue(bytes, start: start, count: count)
            spans.append((start, count, index))
        }
        var indices = Array(0..<members.count)
        let keys = bytes[...]
        let buf = keys.span
        indices.sort { a, b in
            let sa = spans[a]
            let sb = spans[b]
            if sa.arrayIndex != sb.arrayIndex { return sa.arrayIndex < sb.arrayIndex }
            if order == .javaScriptInsertion { return a < b }
            return utf16Less(buf, sa.start, sa.count, sb.start, sb.count)
        }
        return indices
    }

    /// Sorts after every real array index (whose values are at most 4294967294).
    static let noIndex: UInt64 = .max

    /// The numeric value when the key is an ECMAScript array index (canonical decimal, at most 4294967294).
    static func arrayIndexValue(_ bytes: [UInt8], start: Int, count: Int) -> UInt64 {
        guard count >= 1 && count <= 10 else { return noIndex }
        if count > 1 && bytes[start] == UInt8(ascii: "0") { return noIndex }
        var value: UInt64 = 0
        for i in start..<(start + count) {
            let b = bytes[i]
            guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { return noIndex }
            value = value * 10 + UInt64(b - UInt8(ascii: "0"))
        }
        return value <= 4_294_967_294 ? value : noIndex
    }

    /// Whether the key at `aStart..<aStart + aCount` of `buf` sorts before the one at `bStart..<bStart + bCount`.
    @inline(__always)
    static func utf16Less(_ buf: Span<UInt8>, _ aStart: Int, _ aCount: Int, _ bStart: Int, _ bCount: Int) -> Bool {
        let a = buf.extracting(aStart..<(aStart + aCount))
        let b = buf.extracting(bStart..<(bStart + bCount))
        let n = min(a.count, b.count)
        var i = 0
        while i < n {
            let x = a[i]
            let y = b[i]
            if x != y { return utf16Rank(x) < utf16Rank(y) }
            i += 1
        }
        return aCount < bCount
    }

    /// At the first differing byte both keys are at the same position of the same kind (lead or continuation).
    /// UTF-8 byte order equals code-point order; UTF-16 order differs only in that U+E000...U+FFFF (lead bytes
    /// 0xEE, 0xEF) sort after the supplementary planes (lead bytes 0xF0...0xF4, surrogates in UTF-16).
    @inline(__always)
    static func utf16Rank(_ b: UInt8) -> UInt8 {
        b == 0xEE || b == 0xEF ? b &+ 0x10 : b
    }

    /// UTF-16 code-unit comparison of two strings (reference implementation for tests and callers).
    /// - Returns: true when `a` sorts before `b`.
    static func utf16Precedes(_ a: String, _ b: String) -> Bool {
        a.utf16.lexicographicallyPrecedes(b.utf16)
    }
}

extension CanonicalJSON {
    /// Whether `a` sorts before `b` in the member order `order` (the comparison the serializer uses).
    /// - Parameters:
    ///   - a: a member key.
    ///   - b: another member key.
    ///   - order: the key order.
    /// - Returns: true when a member named `a` is written before one named `b`. For
    ///   ``KeyOrder/javaScriptInsertion`` only array-index keys have a fixed place; two other keys keep their
    ///   insertion order, so neither precedes the other here (false).
    public static func keyPrecedes(_ a: String, _ b: String, order: KeyOrder = .utf16) -> Bool {
        let ua = Array(a.utf8)
        let ub = Array(b.utf8)
        if order != .utf16 {
            let ia = KeySorter.arrayIndexValue(ua, start: 0, count: ua.count)
            let ib = KeySorter.arrayIndexValue(ub, start: 0, count: ub.count)
            if ia != ib { return ia < ib }
            if order == .javaScriptInsertion { return false }
        }
        let joined = (ua + ub)[...]
        return KeySorter.utf16Less(joined.span, 0, ua.count, ua.count, ub.count)
    }
}
