import E3DBCanonicalJSON
import E3DBPrimitives

/// The one reader of record bodies (`API.Record.decodeJSON(_:)`), and of the stored `plain` and `data` text the
/// server splices into responses (`JSONText`). It decides every body itself: what it refuses is a `badRequest`
/// naming what is wrong and the byte where it was found (`repeated member "x" in data at byte 57`). A body is read
/// once, in one linear pass, with no recursion deeper than `JSONParser.maxDepth`; it builds the strings it returns
/// and a set of names per object, nothing else.
///
/// Its tokens (strings, escapes, numbers, literals, white space and the values it skips) are read by the one JSON
/// grammar of the package, E3DBCanonicalJSON's `JSONParser`, which also parses canonical JSON: the edges (byte
/// order mark, depth, numbers out of range, lone surrogates, control characters, size) are decided once, in that
/// type's documentation, and both readers agree on them (`GrammarAgreementTests`). This reader adds the member
/// logic of a record body.
///
/// What it takes and what it refuses, decided case by case (what the SDKs send is in `RecordJSONTests`):
/// - One JSON object (RFC 8259), white space around it allowed; a leading byte order mark is refused (RFC 8259
///   §8.1: no sender adds one), and so is anything after the object.
/// - A member name repeated in any object (by code units, so `"é"` and `"e\u{301}"` are two names) is refused:
///   a body means one record, never "the last one wins".
/// - `meta.writer_id`, `meta.user_id` and `meta.type` are strings; `meta.plain` and `data` are objects of strings
///   (`null` or absent: no `plain`, empty `data`); `rec_sig` and `file_meta`'s `file_url`, `file_name`,
///   `checksum` and `compression` are strings or `null`; `file_meta.size` is an integer that fits in 64 bits
///   (a fraction or an exponent is refused, even `1.0` or `1e3`) or `null`. A member of another type is refused.
/// - `meta`'s `record_id`, `created`, `last_modified` and `version`, which the server sets itself, are read when
///   they are strings and ignored when they are any other JSON value (Go's SDK sends zero times of other types).
/// - Members nobody reads may be any JSON value, the body nesting at most `JSONParser.maxDepth` (512) levels
///   (deeper is refused: the reader's cost stays linear and its stack bounded), with numbers that are finite
///   doubles (`1e999999` is refused) and no repeated name in any object.
/// - Strings are valid UTF-8 without raw control characters; escapes are JSON's, and a `\u` surrogate escape
///   must be a high one followed by a low one (a lone surrogate is no Unicode scalar and is refused).
/// - `plain` and `data` are `RecordData`: two names that differ only in Unicode normalization (equal as Swift
///   `String`s, different in code units) are two members, as in the other SDKs.
/// What `RecordBodyReader.searchResponse()` read: the results (each `access_key` still as its byte range) and
/// the members that were present.
struct SearchResponseText {
    var results: [(result: API.SearchResult, accessKey: Range<Int>?)] = []
    var lastIndex: Int64?
    var totalResults: Int64?
    var searchID: String?
}

struct RecordBodyReader: ~Copyable {
    private let bytes: [UInt8]
    private var i = 0
    /// The shared grammar's parser, moved to `i` for each token (one parser, so its scratch buffer is reused).
    private var parser = JSONParser()
    /// Where the objects of `meta.plain` and `data` were read (for the text `record()` returns).
    private var plainRange: Range<Int>?
    private var dataRange: Range<Int>?

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// A refusal: `what` at the current byte.
    private func refusal(_ what: String) -> E3DBError { E3DBError(.badRequest, "\(what) at byte \(i)") }

    /// A member name for a message: quoted, at most 64 bytes of UTF-8 (cut at a Unicode scalar, so one letter
    /// followed by a million combining marks, one `Character`, is cut too).
    static func quoted(_ name: String) -> String {
        var prefix = String.UnicodeScalarView()
        var bytes = 0
        for scalar in name.unicodeScalars {
            bytes += UTF8.width(scalar)
            guard bytes <= 64 else { return "\"\(String(prefix))…\"" }
            prefix.append(scalar)
        }
        return "\"\(name)\""
    }

    /// The record, with the text of its `meta.plain` and `data` objects as they came.
    mutating func record() throws(E3DBError) -> (API.Record, ReceivedRecordText) {
        try refuseByteOrderMark("the body")
        var meta: API.Meta?
        var data: RecordData?
        var recSig: String?
        try object("the body") { (r: inout RecordBodyReader, key: String) throws(E3DBError) in
            switch key {
            case "meta": meta = try r.meta()
            case "data":
                if try r.null("data") { return }
                let start = r.i
                data = try r.stringMap("data")
                r.dataRange = start..<r.i
            case "rec_sig": recSig = try r.nullableString("rec_sig")
            default: try r.skipValue(depth: 1, in: "the body")
            }
        }
        skipSpace()
        guard i == bytes.count else { throw refusal("bytes after the body's object") }
        guard let meta else { throw E3DBError(.badRequest, "the body has no member \"meta\"") }
        // The ranges hold whole objects that `stringMap` read: valid UTF-8 (it validated every string).
        func text(_ range: Range<Int>?) -> String? { range.map { String(decoding: bytes[$0], as: UTF8.self) } }
        return (
            API.Record(meta: meta, data: data ?? RecordData(), recSig: recSig),
            ReceivedRecordText(plain: text(plainRange), data: text(dataRange))
        )
    }

    private mutating func meta() throws(E3DBError) -> API.Meta {
        var writer: String?
        var user: String?
        var type: String?
        var plain: RecordData?
        var recordID: String?
        var created: String?
        var lastModified: String?
        var version: String?
        var fileMeta: API.FileMeta?
        try object("meta") { (r: inout RecordBodyReader, key: String) throws(E3DBError) in
            switch key {
            case "writer_id": writer = try r.string("meta.writer_id")
            case "user_id": user = try r.string("meta.user_id")
            case "type": type = try r.string("meta.type")
            case "plain":
                if try r.null("meta.plain") { return }
                let start = r.i
                plain = try r.stringMap("meta.plain")
                r.plainRange = start..<r.i
            case "record_id": recordID = try r.lenientString("meta.record_id")
            case "created": created = try r.lenientString("meta.created")
            case "last_modified": lastModified = try r.lenientString("meta.last_modified")
            case "version": version = try r.lenientString("meta.version")
            case "file_meta":
                if try r.null("meta.file_meta") { return }
                fileMeta = try r.fileMeta()
            default: try r.skipValue(depth: 2, in: "meta")
            }
        }
        func required(_ value: String?, _ name: String) throws(E3DBError) -> String {
            guard let value else { throw E3DBError(.badRequest, "meta has no member \"\(name)\"") }
            return value
        }
        return API.Meta(
            recordID: recordID, writerID: try required(writer, "writer_id"), userID: try required(user, "user_id"),
            type: try required(type, "type"), plain: plain, created: created, lastModified: lastModified,
            version: version, fileMeta: fileMeta)
    }

    private mutating func fileMeta() throws(E3DBError) -> API.FileMeta {
        var url: String?
        var name: String?
        var checksum: String?
        var compression: String?
        var size: Int64?
        try object("meta.file_meta") { (r: inout RecordBodyReader, key: String) throws(E3DBError) in
            switch key {
            case "file_url": url = try r.nullableString("meta.file_meta.file_url")
            case "file_name": name = try r.nullableString("meta.file_meta.file_name")
            case "checksum": checksum = try r.nullableString("meta.file_meta.checksum")
            case "compression": compression = try r.nullableString("meta.file_meta.compression")
            case "size": if try !r.null("meta.file_meta.size") { size = try r.integer("meta.file_meta.size") }
            default: try r.skipValue(depth: 3, in: "meta.file_meta")
            }
        }
        return API.FileMeta(fileURL: url, fileName: name, checksum: checksum, compression: compression, size: size)
    }

    /// A v1 or v2 search response as the server writes it (`API.QueryResponse`, `API.SearchResponse`): each
    /// result's `meta` and `record_data` read as a record's `meta` and `data` (names distinct by code units, a
    /// repeated name refused), `rec_sig` a string or `null`, `last_index` and `total_results` integers,
    /// `search_id` a string. Each `access_key` (no record text) is returned as its byte range, for the caller to
    /// decode; other members are skipped.
    mutating func searchResponse() throws(E3DBError) -> SearchResponseText {
        try refuseByteOrderMark("the response")
        var out = SearchResponseText()
        try object("the response") { (r: inout RecordBodyReader, key: String) throws(E3DBError) in
            switch key {
            case "results":
                try r.expect(UInt8(ascii: "["), "results is not a JSON array")
                if r.take(UInt8(ascii: "]")) { return }
                while true {
                    out.results.append(try r.searchResult())
                    if r.take(UInt8(ascii: ",")) { continue }
                    try r.expect(UInt8(ascii: "]"), "a comma or a closing bracket missing in results")
                    return
                }
            case "last_index": out.lastIndex = try r.integer("last_index")
            case "total_results": out.totalResults = try r.integer("total_results")
            case "search_id": out.searchID = try r.string("search_id")
            default: try r.skipValue(depth: 1, in: "the response")
            }
        }
        skipSpace()
        guard i == bytes.count else { throw refusal("bytes after the response's object") }
        return out
    }

    /// One element of a search response's `results`.
    private mutating func searchResult() throws(E3DBError) -> (result: API.SearchResult, accessKey: Range<Int>?) {
        var meta: API.Meta?
        var data: RecordData?
        var recSig: String?
        var accessKey: Range<Int>?
        try object("a search result") { (r: inout RecordBodyReader, key: String) throws(E3DBError) in
            switch key {
            case "meta": meta = try r.meta()
            case "record_data": if try !r.null("record_data") { data = try r.stringMap("record_data") }
            case "access_key":
                if try r.null("access_key") { return }
                r.skipSpace()
                let start = r.i
                try r.skipValue(depth: 3, in: "access_key")
                accessKey = start..<r.i
            case "rec_sig": recSig = try r.nullableString("rec_sig")
            default: try r.skipValue(depth: 3, in: "a search result")
            }
        }
        guard let meta else { throw refusal("a search result ending here has no member \"meta\"") }
        return (API.SearchResult(meta: meta, recordData: data, accessKey: nil, recSig: recSig), accessKey)
    }

    /// Checks any JSON text with the one grammar (refusals worded as the record reader's: what and at which byte)
    /// before `JSONDecoder` reads it: a byte order mark and a repeated name are refused, and, unless
    /// `allowingTwinNames`, two names equal as Swift `String`s (which `JSONDecoder` would merge into one).
    mutating func checkJSON(allowingTwinNames: Bool = false) throws(E3DBError) {
        parser = JSONParser(namesAsText: !allowingTwinNames)
        try refuseByteOrderMark("the body")
        try skipValue(depth: 0, in: "the body")
        skipSpace()
        guard i == bytes.count else { throw refusal("bytes after the body's value") }
    }

    // MARK: Grammar

    private mutating func skipSpace() {
        while i < bytes.count, JSONParser.isWhitespace(bytes[i]) { i += 1 }
    }

    /// Consumes `b` if it comes next (after white space).
    private mutating func take(_ b: UInt8) -> Bool {
        skipSpace()
        guard i < bytes.count, bytes[i] == b else { return false }
        i += 1
        return true
    }

    /// Consumes `b` (after white space), or refuses with `what`.
    private mutating func expect(_ b: UInt8, _ what: @autoclosure () -> String) throws(E3DBError) {
        guard take(b) else { throw refusal(what()) }
    }

    /// Consumes `null` if it comes next (after white space); a value that starts with `n` and is not `null` is
    /// refused in `path`.
    private mutating func null(_ path: @autoclosure () -> String) throws(E3DBError) -> Bool {
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "n") else { return false }
        try token(path()) { (p, span) throws(CanonicalJSONError) in try p.expectLiteral(span, .null) }
        return true
    }

    /// A string or `null`.
    private mutating func nullableString(_ path: @autoclosure () -> String) throws(E3DBError) -> String? {
        if try null(path()) { return nil }
        return try string(path())
    }

    /// A string; any other value is skipped and read as nil (the lenient members of `meta`).
    private mutating func lenientString(_ path: @autoclosure () -> String) throws(E3DBError) -> String? {
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
            try skipValue(depth: 2, in: path())
            return nil
        }
        return try string(path())
    }

    /// An object whose members `member` reads (called after the colon, with the name). A repeated name (by code
    /// units) is refused, found through a set: an object of many members costs linear time, not quadratic.
    private mutating func object(
        _ path: String, _ member: (inout RecordBodyReader, String) throws(E3DBError) -> Void
    ) throws(E3DBError) {
        try expect(UInt8(ascii: "{"), "\(path) is not a JSON object")
        if take(UInt8(ascii: "}")) { return }
        var seen = Set<CodeUnitKey>()
        while true {
            skipSpace()
            let start = i
            let key = try string("a member name in \(path)")
            guard seen.insert(CodeUnitKey(key)).inserted else {
                i = start
                throw refusal("repeated member \(Self.quoted(key)) in \(path)")
            }
            try expect(UInt8(ascii: ":"), "a colon missing after a member name in \(path)")
            try member(&self, key)
            if take(UInt8(ascii: ",")) { continue }
            try expect(UInt8(ascii: "}"), "a comma or a closing brace missing in \(path)")
            return
        }
    }

    /// An object of string values, names distinct by code units (`"é"` and `"e\u{301}"` are two).
    private mutating func stringMap(_ path: String) throws(E3DBError) -> RecordData {
        var map = RecordData()
        try stringMembers(path) { (r: inout RecordBodyReader) throws(E3DBError) in
            r.skipSpace()
            let start = r.i
            let key = try r.string("a member name in \(path)")
            try r.expect(UInt8(ascii: ":"), "a colon missing after a member name in \(path)")
            guard map.insert(key: key, value: try r.string("the value of \(Self.quoted(key)) in \(path)")) else {
                r.i = start
                throw r.refusal("repeated member \(Self.quoted(key)) in \(path)")
            }
        }
        return map
    }

    /// An object whose members are `name: "value"` pairs, each read by `member` (from its name, after white
    /// space): the members loop of `stringMap` and `storedObject`.
    private mutating func stringMembers(
        _ path: String, _ member: (inout RecordBodyReader) throws(E3DBError) -> Void
    ) throws(E3DBError) {
        try expect(UInt8(ascii: "{"), "\(path) is not a JSON object")
        if take(UInt8(ascii: "}")) { return }
        while true {
            try member(&self)
            if take(UInt8(ascii: ",")) { continue }
            try expect(UInt8(ascii: "}"), "a comma or a closing brace missing in \(path)")
            return
        }
    }

    /// Checks that the whole input is one object of string values whose names are distinct by code units (stored
    /// text, `JSONText.checkStringObject`): the grammar of `stringMap`, building the names and no value.
    mutating func checkStoredObject() throws(E3DBError) {
        try storedObject { (r: inout RecordBodyReader, _: String, _: Int) throws(E3DBError) in try r.skipString() }
    }

    /// The members of the whole input, one object of string values whose names are distinct by code units: each
    /// name, its value decoded when `values` (nil otherwise: the value is skipped, not copied), and the member's
    /// text (from the name's opening quote to the value's closing quote) as a byte range.
    mutating func storedMembers(values: Bool) throws(E3DBError) -> [(name: String, value: String?, text: Range<Int>)] {
        var members: [(name: String, value: String?, text: Range<Int>)] = []
        try storedObject { (r: inout RecordBodyReader, name: String, start: Int) throws(E3DBError) in
            var value: String?
            if values { value = try r.string("the value of a member of the stored object") } else { try r.skipString() }
            members.append((name, value, start..<r.i))
        }
        return members
    }

    /// The members loop of stored text: the whole input is one object; `value` reads each member's value (called
    /// after the colon, with the name and the byte where the member starts). A name repeated by code units is
    /// refused: a row that holds `{"role":"user","role":"admin"}` means two things (a search matches the first
    /// value, the SDKs show the last).
    private mutating func storedObject(
        _ value: (inout RecordBodyReader, String, Int) throws(E3DBError) -> Void
    ) throws(E3DBError) {
        var seen = Set<CodeUnitKey>()
        try stringMembers("the stored object") { (r: inout RecordBodyReader) throws(E3DBError) in
            r.skipSpace()
            let start = r.i
            let name = try r.string("a member name in the stored object")
            guard seen.insert(CodeUnitKey(name)).inserted else {
                r.i = start
                throw r.refusal("repeated member \(Self.quoted(name)) in the stored object")
            }
            try r.expect(UInt8(ascii: ":"), "a colon missing after a member name in the stored object")
            try value(&r, name, start)
        }
        skipSpace()
        guard i == bytes.count else { throw refusal("bytes after the stored object") }
    }

    /// The whole input as `file_meta` (stored text), nil when it is not.
    mutating func storedFileMeta() -> API.FileMeta? {
        guard let fileMeta = try? fileMeta() else { return nil }
        skipSpace()
        return i == bytes.count ? fileMeta : nil
    }

    /// Reads one token with the shared grammar (E3DBCanonicalJSON's `JSONParser`, the one home of JSON's strings,
    /// escapes, numbers, literals and skipped values): `scan` runs on a parser at `i`, and `i` moves past what it
    /// read. A grammar error becomes this reader's refusal in `path`, at the error's byte; `unterminated` names
    /// what an input that ends early leaves open.
    @inline(__always) @discardableResult
    private mutating func token<T>(
        _ path: @autoclosure () -> String, unterminated: String = "value",
        _ scan: (inout JSONParser, Span<UInt8>) throws(CanonicalJSONError) -> T
    ) throws(E3DBError) -> T {
        let bytes = self.bytes
        parser.position = i
        do throws(CanonicalJSONError) {
            let value = try scan(&parser, bytes.span)
            i = parser.position
            return value
        } catch {
            i = error.offset ?? parser.position
            throw refusal(reason(error, path(), unterminated: unterminated))
        }
    }

    /// What the reader says for a grammar error at `i` (the error's byte).
    private func reason(_ error: CanonicalJSONError, _ path: String, unterminated: String) -> String {
        switch error.code {
        case .controlCharacter: return "a control character in \(path)"
        case .invalidUTF8: return "invalid UTF-8 in \(path)"
        case .loneSurrogate: return "a lone surrogate escape in \(path)"
        case .invalidEscape:
            // The error is at the backslash for an unknown escape, at the bad digit for a `\u` escape.
            return i < bytes.count && bytes[i] == UInt8(ascii: "\\")
                ? "an invalid escape in \(path)" : "an invalid \\u escape in \(path)"
        case .unexpectedEnd: return "an unterminated \(unterminated) in \(path)"
        case .invalidNumber: return "a malformed number in \(path)"
        case .numberOutOfRange: return "a number beyond the range of a double in \(path)"
        case .nestingTooDeep: return "nesting deeper than \(JSONParser.maxDepth) in \(path)"
        case .duplicateKey:
            // The error is at the repeated name, which the parser has read once already.
            var name = JSONParser(at: i)
            let quoted = (try? name.parseString(bytes.span)).map(Self.quoted) ?? "name"
            return "repeated member \(quoted) in \(path)"
        case .unexpectedCharacter where i == 0 && bytes.starts(with: [0xEF, 0xBB, 0xBF]):
            return "a byte order mark (U+FEFF), which JSON text must not start with, before \(path)"
        default: return "not a JSON value in \(path)"
        }
    }

    /// Refuses a byte order mark before the input (the shared grammar's rule).
    private mutating func refuseByteOrderMark(_ path: String) throws(E3DBError) {
        try token(path) { (_, span) throws(CanonicalJSONError) in try JSONParser.refuseByteOrderMark(span) }
    }

    /// A string (after white space).
    private mutating func string(_ path: @autoclosure () -> String) throws(E3DBError) -> String {
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw refusal("\(path()) is not a string") }
        return try token(path(), unterminated: "string") { (p, span) throws(CanonicalJSONError) in
            try p.parseString(span)
        }
    }

    /// Skips a string (after white space) that `string` would read, building nothing.
    private mutating func skipString() throws(E3DBError) {
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw refusal("not a string") }
        try token("a string", unterminated: "string") { (p, span) throws(CanonicalJSONError) in
            try p.skipString(span)
        }
    }

    /// An integer without fraction or exponent that fits in `Int64`.
    private mutating func integer(_ path: @autoclosure () -> String) throws(E3DBError) -> Int64 {
        skipSpace()
        let start = i
        let negative = i < bytes.count && bytes[i] == UInt8(ascii: "-")
        guard i + (negative ? 1 : 0) < bytes.count,
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i + (negative ? 1 : 0)])
        else {
            throw refusal("\(path()) is not an integer")
        }
        let number: JSONParser.NumberToken
        do throws(E3DBError) {
            number = try token(path()) { (p, span) throws(CanonicalJSONError) in try p.scanNumber(span) }
        } catch {
            i = start
            throw refusal("\(path()) is not a JSON value")
        }
        guard number.isInteger else {
            i = start
            throw refusal("\(path()) is not an integer (it has a fraction or an exponent)")
        }
        var value: Int64 = 0
        for k in number.integerDigits {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let digit = Int64(bytes[k] - UInt8(ascii: "0"))
            let (s, o2) = negative ? m.subtractingReportingOverflow(digit) : m.addingReportingOverflow(digit)
            guard !o1, !o2 else {
                i = start
                throw refusal("\(path()) does not fit in 64 bits")
            }
            value = s
        }
        return value
    }

    /// Skips one value of any kind (a member nobody reads, in `path`, whose container is `depth` levels deep) with
    /// the shared grammar: at most `JSONParser.maxDepth` deep, names distinct by code units, nothing built.
    private mutating func skipValue(depth: Int, in path: String) throws(E3DBError) {
        try token(path) { (p, span) throws(CanonicalJSONError) in try p.skipValue(span, depth: depth) }
    }
}
