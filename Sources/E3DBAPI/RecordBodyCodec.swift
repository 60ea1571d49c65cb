package import Foundation

// A record body is the hottest JSON of the API: every write sends one and gets one back, every read gets one.
// Foundation's JSONDecoder and JSONEncoder spend tens of microseconds on one (their Codable machinery, not the
// bytes), a large share of a record round trip on loopback. These are a reader and a writer for that one shape.

extension API.Record {
    /// Decodes a record body (`{"meta":…,"data":…,"rec_sig":…}`) with exactly the result of
    /// `JSONDecoder().decode(API.Record.self, from: data)`.
    ///
    /// A hand-written reader takes the bodies the SDKs and the server send; whatever it does not handle itself (a
    /// duplicate member, a lone surrogate escape, a number with a fraction, a lenient member of an unexpected type,
    /// nesting deeper than 64, anything malformed) it leaves to `JSONDecoder`, which decides and throws its own
    /// `DecodingError`. So the reader changes the speed, never the outcome (`FuzzAPIBodies` checks that it never
    /// returns a record `JSONDecoder` would not).
    package static func decodeJSON(_ data: Data) throws -> API.Record {
        try decodeJSONKeepingText(data).record
    }

    /// Decodes a record body as `decodeJSON(_:)` does, and returns the text of its `meta.plain` and `data` objects
    /// as they came when the hand-written reader read the body (nil when it left the body to `JSONDecoder`). That
    /// text has been read through: an object of string members, no repeated name (by `String` equality, as the
    /// decoded maps see it), valid UTF-8, no lone surrogate escape; it means exactly the decoded maps.
    package static func decodeJSONKeepingText(_ data: Data) throws -> (record: API.Record, text: ReceivedRecordText?) {
        var reader = RecordBodyReader(data)
        if let (record, text) = reader.record() { return (record, text) }
        return (try JSONDecoder().decode(API.Record.self, from: data), nil)
    }

    /// The record as JSON, as `JSONEncoder` writes it up to member order and the escaping of `/` (not escaped):
    /// absent optional members are left out, except `file_meta.file_url`, which is written as `null`.
    package func jsonData() -> Data {
        var w = JSONTextWriter()
        w.byte(UInt8(ascii: "{"))
        w.key("meta", first: true)
        w.meta(meta)
        w.key("data", first: false)
        w.stringMap(data)
        if let recSig {
            w.key("rec_sig", first: false)
            w.string(recSig)
        }
        w.byte(UInt8(ascii: "}"))
        return Data(w.bytes)
    }
}

/// The JSON text of a record body's `meta.plain` and `data` objects, as received (`decodeJSONKeepingText(_:)`).
package struct ReceivedRecordText: Sendable {
    /// `meta.plain`, from `{` to `}`; nil when the member is absent or `null`.
    package var plain: String?
    /// `data`, from `{` to `}`; nil when the member is absent or `null`.
    package var data: String?
}

/// JSON text as the server and the client write it: strings escaped as `JSONEncoder` does with
/// `.withoutEscapingSlashes` (`"` and `\` escaped, control characters as `\n`, `\r`, `\t`, `\b`, `\f` or `\u00XX`,
/// everything else, `/` included, written as UTF-8).
package enum JSONText {
    /// `{"k":"v",…}` with the keys in `String` order.
    package static func sortedObject(_ map: [String: String]) -> String {
        var w = JSONTextWriter()
        w.stringMap(map, sorted: true)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// Whether `text` is one JSON object of string values and nothing else (white space aside): what the server
    /// checks before it splices stored `plain` or `data` text into a response. The grammar of the record reader's
    /// string maps, in one linear pass that builds no string and no map (a repeated key is not looked for: the
    /// answer stays one well-formed object either way).
    package static func isStringObject(_ text: String) -> Bool {
        var reader = RecordBodyReader(bytes: Array(text.utf8))
        return reader.isStringObject()
    }

    /// Writes `text` as a JSON string, quotes included, handing the pieces in order to `append` (runs of the text
    /// as they are, and escape sequences). A `package` fast path: the pointers are valid only during `append`.
    @inlinable
    package static func writeString(_ text: String, _ append: (UnsafeBufferPointer<UInt8>) -> Void) {
        let quote: StaticString = "\""
        quote.withUTF8Buffer(append)
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            for i in bytes.indices {
                let c = unsafe bytes[i]
                guard c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") else { continue }
                unsafe append(UnsafeBufferPointer(rebasing: bytes[start..<i]))
                start = i + 1
                let escape: StaticString
                switch c {
                case UInt8(ascii: "\""): escape = #"\""#
                case UInt8(ascii: "\\"): escape = #"\\"#
                case 0x0A: escape = #"\n"#
                case 0x0D: escape = #"\r"#
                case 0x09: escape = #"\t"#
                case 0x08: escape = #"\b"#
                case 0x0C: escape = #"\f"#
                default:
                    let digits: StaticString = "0123456789abcdef"
                    let sequence = unsafe [
                        UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                        digits.utf8Start[Int(c >> 4)], digits.utf8Start[Int(c & 15)],
                    ]
                    unsafe sequence.withUnsafeBufferPointer(append)
                    continue
                }
                escape.withUTF8Buffer(append)
            }
            unsafe append(UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        quote.withUTF8Buffer(append)
    }
}

/// Appends JSON text to a byte array.
struct JSONTextWriter {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(1024) }

    mutating func byte(_ b: UInt8) { bytes.append(b) }

    mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { unsafe bytes.append(contentsOf: $0) }
    }

    mutating func key(_ name: StaticString, first: Bool) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        raw(name)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func string(_ s: String) {
        unsafe JSONText.writeString(s) { unsafe bytes.append(contentsOf: $0) }
    }

    mutating func stringMap(_ map: [String: String], sorted: Bool = false) {
        bytes.append(UInt8(ascii: "{"))
        var first = true
        func member(_ k: String, _ v: String) {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            string(k)
            bytes.append(UInt8(ascii: ":"))
            string(v)
        }
        if sorted {
            for k in map.keys.sorted() { member(k, map[k] ?? "") }
        } else {
            for (k, v) in map { member(k, v) }
        }
        bytes.append(UInt8(ascii: "}"))
    }

    mutating func optionalString(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name, first: false)
        string(value)
    }

    mutating func meta(_ m: API.Meta) {
        bytes.append(UInt8(ascii: "{"))
        key("writer_id", first: true)
        string(m.writerID)
        key("user_id", first: false)
        string(m.userID)
        key("type", first: false)
        string(m.type)
        if let plain = m.plain {
            key("plain", first: false)
            stringMap(plain)
        }
        optionalString("record_id", m.recordID)
        optionalString("created", m.created)
        optionalString("last_modified", m.lastModified)
        optionalString("version", m.version)
        if let f = m.fileMeta {
            key("file_meta", first: false)
            bytes.append(UInt8(ascii: "{"))
            key("file_url", first: true)
            if let url = f.fileURL { string(url) } else { raw("null") }
            optionalString("file_name", f.fileName)
            optionalString("checksum", f.checksum)
            optionalString("compression", f.compression)
            if let size = f.size {
                key("size", first: false)
                bytes.append(contentsOf: String(size).utf8)
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: "}"))
    }
}

/// The fast path of `API.Record.decodeJSON(_:)`: every method returns nil to decline (the input is then
/// `JSONDecoder`'s to judge), never a value `JSONDecoder` would not produce.
struct RecordBodyReader {
    private let bytes: [UInt8]
    private var i = 0
    /// Where the objects of `meta.plain` and `data` were read (for the text `record()` returns).
    private var plainRange: Range<Int>?
    private var dataRange: Range<Int>?

    init(_ data: Data) { bytes = Array(data) }

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// The record, with the text of its `meta.plain` and `data` objects as they came (nil to decline).
    mutating func record() -> (API.Record, ReceivedRecordText)? {
        var meta: API.Meta?
        var data: [String: String]?
        var recSig: String?
        let ok = object { r, key in
            switch key {
            case "meta":
                meta = r.meta()
                return meta != nil
            case "data":
                if r.null() { return true }
                let start = r.i
                data = r.stringMap()
                r.dataRange = start..<r.i
                return data != nil
            case "rec_sig":
                if r.null() { return true }
                recSig = r.string()
                return recSig != nil
            default: return r.skipValue(depth: 1)
            }
        }
        skipSpace()
        guard ok, i == bytes.count, let meta else { return nil }
        // The ranges hold whole objects that `stringMap` read: valid UTF-8 (it validated every string).
        func text(_ range: Range<Int>?) -> String? { range.map { String(decoding: bytes[$0], as: UTF8.self) } }
        return (
            API.Record(meta: meta, data: data ?? [:], recSig: recSig),
            ReceivedRecordText(plain: text(plainRange), data: text(dataRange))
        )
    }

    private mutating func meta() -> API.Meta? {
        var writer: String?
        var user: String?
        var type: String?
        var plain: [String: String]?
        var recordID: String?
        var created: String?
        var lastModified: String?
        var version: String?
        var fileMeta: API.FileMeta?
        let ok = object { r, key in
            switch key {
            case "writer_id":
                writer = r.string()
                return writer != nil
            case "user_id":
                user = r.string()
                return user != nil
            case "type":
                type = r.string()
                return type != nil
            case "plain":
                if r.null() { return true }
                let start = r.i
                plain = r.stringMap()
                r.plainRange = start..<r.i
                return plain != nil
            case "record_id": return r.nullableString(&recordID)
            case "created": return r.nullableString(&created)
            case "last_modified": return r.nullableString(&lastModified)
            case "version": return r.nullableString(&version)
            case "file_meta":
                if r.null() { return true }
                fileMeta = r.fileMeta()
                return fileMeta != nil
            default: return r.skipValue(depth: 2)
            }
        }
        guard ok, let writer, let user, let type else { return nil }
        return API.Meta(
            recordID: recordID, writerID: writer, userID: user, type: type, plain: plain, created: created,
            lastModified: lastModified, version: version, fileMeta: fileMeta)
    }

    private mutating func fileMeta() -> API.FileMeta? {
        var url: String?
        var name: String?
        var checksum: String?
        var compression: String?
        var size: Int64?
        let ok = object { r, key in
            switch key {
            case "file_url": return r.nullableString(&url)
            case "file_name": return r.nullableString(&name)
            case "checksum": return r.nullableString(&checksum)
            case "compression": return r.nullableString(&compression)
            case "size":
                if r.null() { return true }
                size = r.integer()
                return size != nil
            default: return r.skipValue(depth: 3)
            }
        }
        guard ok else { return nil }
        return API.FileMeta(fileURL: url, fileName: name, checksum: checksum, compression: compression, size: size)
    }

    // MARK: Grammar

    private mutating func skipSpace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    /// Consumes `b` (after white space).
    private mutating func take(_ b: UInt8) -> Bool {
        skipSpace()
        guard i < bytes.count, bytes[i] == b else { return false }
        i += 1
        return true
    }

    /// Consumes `null` if it comes next.
    private mutating func null() -> Bool { literal("null") }

    private mutating func literal(_ word: String) -> Bool {
        skipSpace()
        let n = word.utf8.count
        guard bytes.count - i >= n else { return false }
        for (k, c) in word.utf8.enumerated() where bytes[i + k] != c { return false }
        i += n
        return true
    }

    /// A string or `null` into `value`; false (decline) for anything else.
    private mutating func nullableString(_ value: inout String?) -> Bool {
        if null() { return true }
        value = string()
        return value != nil
    }

    /// An object whose members `member` reads (it is called after the colon with the key). A repeated key declines
    /// (found through a set: a body of many members costs linear time, not quadratic).
    private mutating func object(_ member: (inout RecordBodyReader, String) -> Bool) -> Bool {
        guard take(UInt8(ascii: "{")) else { return false }
        var seen = Set<String>()
        if take(UInt8(ascii: "}")) { return true }
        while true {
            skipSpace()
            guard let key = string(), seen.insert(key).inserted, take(UInt8(ascii: ":")) else { return false }
            guard member(&self, key) else { return false }
            if take(UInt8(ascii: ",")) { continue }
            return take(UInt8(ascii: "}"))
        }
    }

    /// An object of string values (a repeated key, by `String` equality as a dictionary sees it, declines).
    private mutating func stringMap() -> [String: String]? {
        var map: [String: String] = [:]
        let ok = stringMembers { r in
            guard let key = r.string(), r.take(UInt8(ascii: ":")), let value = r.string() else { return false }
            return map.updateValue(value, forKey: key) == nil
        }
        return ok ? map : nil
    }

    /// Whether the whole input is one object of string values, read with the grammar of `stringMap()` but building
    /// no string and no map (so a repeated key is not looked for): the check of stored text (`JSONText`).
    mutating func isStringObject() -> Bool {
        let ok = stringMembers { r in r.skipString() && r.take(UInt8(ascii: ":")) && r.skipString() }
        skipSpace()
        return ok && i == bytes.count
    }

    /// An object whose members are `key: "value"` pairs, each read by `member` (from its key, after white space).
    private mutating func stringMembers(_ member: (inout RecordBodyReader) -> Bool) -> Bool {
        guard take(UInt8(ascii: "{")) else { return false }
        if take(UInt8(ascii: "}")) { return true }
        while true {
            guard member(&self) else { return false }
            if take(UInt8(ascii: ",")) { continue }
            return take(UInt8(ascii: "}"))
        }
    }

    /// A string (after white space).
    private mutating func string() -> String? {
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return nil }
        i += 1
        let start = i
        var ascii = true
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                let text = bytes[start..<i]
                i += 1
                return ascii ? String(decoding: text, as: UTF8.self) : String(validating: text, as: UTF8.self)
            }
            if b == UInt8(ascii: "\\") {
                i = start
                return escapedString()
            }
            if b < 0x20 { return nil }
            if b >= 0x80 { ascii = false }
            i += 1
        }
        return nil
    }

    /// The rest of a string that has escapes, from its first byte.
    private mutating func escapedString() -> String? {
        var out: [UInt8] = []
        while i < bytes.count {
            let b = bytes[i]
            i += 1
            switch b {
            case UInt8(ascii: "\""): return String(validating: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let scalar = escape(), let encoded = UTF8.encode(scalar) else { return nil }
                out.append(contentsOf: encoded)
            default:
                if b < 0x20 { return nil }
                out.append(b)
            }
        }
        return nil
    }

    /// Skips a string (after white space) that `string()` would read, building nothing. For text that came as a
    /// Swift `String` (valid UTF-8 already): the bytes between escapes are not validated again.
    private mutating func skipString() -> Bool {
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { return false }
        i += 1
        while i < bytes.count {
            let b = bytes[i]
            i += 1
            switch b {
            case UInt8(ascii: "\""): return true
            case UInt8(ascii: "\\"): guard escape() != nil else { return false }
            default: if b < 0x20 { return false }
            }
        }
        return false
    }

    /// The scalar of an escape sequence, from the byte after its backslash (a surrogate pair is one sequence; a lone
    /// surrogate or an unknown escape is nil).
    private mutating func escape() -> Unicode.Scalar? {
        guard i < bytes.count else { return nil }
        let e = bytes[i]
        i += 1
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): return Unicode.Scalar(e)
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            guard let unit = hex4() else { return nil }
            var scalarValue = UInt32(unit)
            if (0xD800...0xDBFF).contains(unit) {
                guard bytes.count - i >= 2, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u")
                else { return nil }
                i += 2
                guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            }
            return Unicode.Scalar(scalarValue)
        default: return nil
        }
    }

    private mutating func hex4() -> UInt16? {
        guard bytes.count - i >= 4 else { return nil }
        var v: UInt16 = 0
        for _ in 0..<4 {
            let b = bytes[i]
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: return nil
            }
            v = v << 4 | UInt16(d)
            i += 1
        }
        return v
    }

    /// An integer without fraction or exponent that fits in `Int64`, followed by a delimiter.
    private mutating func integer() -> Int64? {
        skipSpace()
        var negative = false
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") {
            negative = true
            i += 1
        }
        let start = i
        var value: Int64 = 0
        while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let digit = Int64(bytes[i] - UInt8(ascii: "0"))
            let (s, o2) = negative ? m.subtractingReportingOverflow(digit) : m.addingReportingOverflow(digit)
            guard !o1, !o2 else { return nil }
            value = s
            i += 1
        }
        let digits = i - start
        guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        if i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D: break
            default: return nil
            }
        }
        return value
    }

    /// Skips one value of any kind (a member the record does not read), declining deep or unusual ones.
    private mutating func skipValue(depth: Int) -> Bool {
        guard depth < 64 else { return false }
        skipSpace()
        guard i < bytes.count else { return false }
        switch bytes[i] {
        case UInt8(ascii: "\""): return string() != nil
        case UInt8(ascii: "{"):
            return object { r, _ in r.skipValue(depth: depth + 1) }
        case UInt8(ascii: "["):
            i += 1
            if take(UInt8(ascii: "]")) { return true }
            while true {
                guard skipValue(depth: depth + 1) else { return false }
                if take(UInt8(ascii: ",")) { continue }
                return take(UInt8(ascii: "]"))
            }
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        default: return integer() != nil
        }
    }
}
