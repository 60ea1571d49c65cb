package import E3DBCanonicalJSON
package import E3DBPrimitives
package import Foundation

// A record body is the hottest JSON of the API: every write sends one and gets one back, every read gets one.
// Foundation's JSONDecoder and JSONEncoder spend tens of microseconds on one (their Codable machinery, not the
// bytes), a large share of a record round trip on loopback. These are a reader and a writer for that one shape.

extension API.Record {
    /// Decodes a record body (`{"meta":…,"data":…,"rec_sig":…}`) with the strict record reader, the one reader of
    /// record bodies: what it takes and what it refuses, case by case, is in `RecordBodyReader`'s documentation.
    /// - Throws: `E3DBError` `.badRequest` saying what is wrong and at which byte (`repeated member "f" in data at
    ///   byte 57`); member names only, never values.
    package static func decodeJSON(_ data: Data) throws(E3DBError) -> API.Record {
        try decodeJSONKeepingText(data).record
    }

    /// Decodes a record body as `decodeJSON(_:)` does, and returns the text of its `meta.plain` and `data` objects
    /// as they came: exact slices of `data`, read through by the reader (objects of string members, no repeated
    /// name, valid UTF-8, no lone surrogate escape), that mean exactly the decoded maps.
    package static func decodeJSONKeepingText(
        _ data: Data
    ) throws(E3DBError) -> (record: API.Record, text: ReceivedRecordText) {
        var reader = RecordBodyReader(bytes: Array(data))
        return try reader.record()
    }

    /// Checks a body that `JSONDecoder` will read with the one JSON grammar, as the record reader reads a record:
    /// no byte order mark, no repeated member name, and, unless `allowingTwinNames`, no two names equal as Swift
    /// `String`s in one object (`JSONDecoder` would merge them into one, "the last one wins").
    /// - Throws: `E3DBError` `.badRequest` saying what is wrong and at which byte.
    package static func checkJSON(_ data: Data, allowingTwinNames: Bool = false) throws(E3DBError) {
        var reader = RecordBodyReader(bytes: Array(data))
        try reader.checkJSON(allowingTwinNames: allowingTwinNames)
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

extension API.SearchResult {
    /// Reads a v1 or v2 search response with the strict record reader (`RecordBodyReader.searchResponse()`): each
    /// result's `meta` and `record_data` as a record's `meta` and `data`; each `access_key` (no record text) with
    /// `API.decodeChecked(_:from:)`.
    /// - Throws: `E3DBError` `.badRequest` saying what is wrong and where.
    static func readResponse(
        _ data: Data
    ) throws(E3DBError) -> (results: [API.SearchResult], lastIndex: Int64?, totalResults: Int64?, searchID: String?) {
        let bytes = Array(data)
        var reader = RecordBodyReader(bytes: bytes)
        let read = try reader.searchResponse()
        var results: [API.SearchResult] = []
        results.reserveCapacity(read.results.count)
        for (index, item) in read.results.enumerated() {
            var result = item.result
            if let range = item.accessKey {
                do { result.accessKey = try API.decodeChecked(API.EAKInfo.self, from: Data(bytes[range])) } catch {
                    throw E3DBError(.badRequest, "the access_key of result \(index) is not an access key")
                }
            }
            results.append(result)
        }
        return (results, read.lastIndex, read.totalResults, read.searchID)
    }

    /// A v1 or v2 search response as the server writes it, with the record writer: `{"results":[…],
    /// "last_index":…}` and, for v2, `"total_results":…,"search_id":…`; each result `{"meta":…,"record_data":…,
    /// "access_key":…,"rec_sig":…}`, `record_data` and `access_key` `null` when absent (the Python SDK reads the
    /// keys), `rec_sig` when set. The access key is written by the wire `JSONEncoder`, as the server writes it.
    static func writeResponse(
        _ results: [API.SearchResult], lastIndex: Int64, v2: (totalResults: Int, searchID: String)? = nil
    ) throws -> Data {
        var w = JSONTextWriter()
        w.beginSearchResponse()
        let encoder = JSONEncoders.wire()
        for (n, result) in results.enumerated() {
            if n > 0 { w.byte(UInt8(ascii: ",")) }
            w.byte(UInt8(ascii: "{"))
            w.key("meta", first: true)
            w.meta(result.meta)
            w.key("record_data", first: false)
            if let data = result.recordData { w.stringMap(data) } else { w.raw("null") }
            w.key("access_key", first: false)
            if let key = result.accessKey { w.json(utf8: try encoder.encode(key)) } else { w.raw("null") }
            w.optionalString("rec_sig", result.recSig)
            w.byte(UInt8(ascii: "}"))
        }
        w.endSearchResponse(lastIndex: lastIndex, v2: v2)
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
    /// Checks that `text` is one JSON object of string values whose names are distinct by code units, and nothing
    /// else (white space aside): what the server checks before it splices stored `plain` or `data` text into a
    /// response. The grammar of the record reader's string maps, in one linear pass that builds the names and no
    /// value.
    /// - Throws: `badRequest` saying what is wrong and at which byte (a caller reading stored text reports it as
    ///   its own error).
    package static func checkStringObject(_ text: String) throws(E3DBError) {
        var reader = RecordBodyReader(bytes: Array(text.utf8))
        try reader.checkStoredObject()
    }

    /// The members of `text`, one JSON object of string values (what `checkStringObject(_:)` checks), in order:
    /// each name, its value decoded when `values` (nil otherwise, the value skipped without a copy), and the
    /// member's text as it is in `text` (from the name's opening quote to the value's closing quote), for a
    /// response that keeps stored text as it is. Read with the record reader's members loop.
    /// - Throws: `badRequest` as `checkStringObject(_:)` does.
    package static func members(of text: String, values: Bool) throws(E3DBError) -> [(
        name: String, value: String?, text: Substring
    )] {
        var reader = RecordBodyReader(bytes: Array(text.utf8))
        let members = try reader.storedMembers(values: values)
        let utf8 = text.utf8
        return members.map { member in
            let start = utf8.index(utf8.startIndex, offsetBy: member.text.lowerBound)
            let end = utf8.index(start, offsetBy: member.text.count)
            return (member.name, member.value, text[start..<end])
        }
    }

    /// `file_meta` as the server stores and sends it: `file_url` first (`null` when absent: the Python SDK reads
    /// the key), then the members that are set, in `API.FileMeta`'s order.
    package static func fileMeta(_ fileMeta: API.FileMeta) -> String {
        var w = JSONTextWriter()
        w.fileMeta(fileMeta)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// Reads stored `file_meta` text with the record reader's `file_meta` grammar (what a request's
    /// `meta.file_meta` may be); nil when `text` is not such an object and nothing else.
    package static func fileMeta(_ text: String) -> API.FileMeta? {
        var reader = RecordBodyReader(bytes: Array(text.utf8))
        return reader.storedFileMeta()
    }
}

/// Appends JSON text to a byte array: the one JSON text writer of the wire (`API.Record.jsonData()`, the server's
/// record responses and stored `file_meta`), with the one string escaper (E3DBCanonicalJSON's `JSONString`, the canonical form's).
package struct JSONTextWriter {
    /// The text written so far.
    package private(set) var bytes: [UInt8] = []

    /// A writer with room for `capacity` bytes.
    package init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    /// One byte of JSON syntax.
    package mutating func byte(_ b: UInt8) { bytes.append(b) }

    /// A literal (`null`, `true`) as it is.
    package mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { unsafe bytes.append(contentsOf: $0) }
    }

    /// JSON text the caller has checked (stored `plain` or `data`, a member as stored), spliced as it is.
    package mutating func json(_ text: some StringProtocol) { bytes.append(contentsOf: text.utf8) }

    /// The UTF-8 of JSON text the caller has checked (a slice of a stored body), spliced as it is.
    package mutating func json(utf8: some Sequence<UInt8>) { bytes.append(contentsOf: utf8) }

    /// `,"name":` (no comma when `first`).
    package mutating func key(_ name: StaticString, first: Bool) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        raw(name)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// A JSON string, escaped.
    package mutating func string(_ s: String) {
        JSONString.append(s, to: &bytes)
    }

    /// `{"results":[`, the start of a v1 or v2 search response (the server's and `API.QueryResponse.encodeBody()`);
    /// the results follow, separated by commas.
    package mutating func beginSearchResponse() { raw(#"{"results":["#) }

    /// `],"last_index":…}`, and for v2 `"total_results":…,"search_id":…` before the `}`: the end of a search
    /// response begun with `beginSearchResponse()`.
    package mutating func endSearchResponse(lastIndex: Int64, v2: (totalResults: Int, searchID: String)?) {
        raw(#"],"last_index":"#)
        json(String(lastIndex))
        if let v2 {
            key("total_results", first: false)
            json(String(v2.totalResults))
            key("search_id", first: false)
            string(v2.searchID)
        }
        byte(UInt8(ascii: "}"))
    }

    mutating func stringMap(_ map: RecordData) {
        bytes.append(UInt8(ascii: "{"))
        var first = true
        for (k, v) in map {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            string(k)
            bytes.append(UInt8(ascii: ":"))
            string(v)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// `,"name":"value"` when `value` is set.
    package mutating func optionalString(_ name: StaticString, _ value: String?) {
        guard let value else { return }
        key(name, first: false)
        string(value)
    }

    /// Where the `plain` member of `meta` comes from.
    package enum MetaPlain {
        /// Written from the map, in its order.
        case members(RecordData)
        /// JSON text of an object of strings the caller has checked (a stored `plain`, or the text of the request
        /// being answered), spliced as it is.
        case text(String)
    }

    /// `meta` in `API.Meta`'s member order (`record_id`, `writer_id`, `user_id`, `type`, `plain`, `created`,
    /// `last_modified`, `version`, `file_meta`), absent members left out: the one writer of a record's `meta`, for
    /// `API.Meta` (`meta(_:)`) and for the server's stored rows.
    package mutating func meta(
        recordID: String?, writerID: String, userID: String, type: String, plain: MetaPlain?, created: String?,
        lastModified: String?, version: String?, fileMeta: API.FileMeta?
    ) {
        bytes.append(UInt8(ascii: "{"))
        if let recordID {
            key("record_id", first: true)
            string(recordID)
            key("writer_id", first: false)
        } else {
            key("writer_id", first: true)
        }
        string(writerID)
        key("user_id", first: false)
        string(userID)
        key("type", first: false)
        string(type)
        switch plain {
        case .members(let map):
            key("plain", first: false)
            stringMap(map)
        case .text(let text):
            key("plain", first: false)
            json(text)
        case nil: break
        }
        optionalString("created", created)
        optionalString("last_modified", lastModified)
        optionalString("version", version)
        if let fileMeta {
            key("file_meta", first: false)
            self.fileMeta(fileMeta)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// `meta` of an `API.Meta`.
    mutating func meta(_ m: API.Meta) {
        meta(
            recordID: m.recordID, writerID: m.writerID, userID: m.userID, type: m.type,
            plain: m.plain.map { .members($0) },
            created: m.created, lastModified: m.lastModified, version: m.version, fileMeta: m.fileMeta)
    }

    /// `file_meta`: `file_url` first (`null` when absent), then the members that are set.
    package mutating func fileMeta(_ f: API.FileMeta) {
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
}
