import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import Foundation
import Testing

/// `API.Record.decodeJSON` (the strict record reader) and `jsonData()`: the bodies the SDKs send read as
/// Foundation's `JSONSerialization` reads them (`FoundationRecordOracle`), everything the reader refuses is a
/// `badRequest` saying what and where, and the reader is never more lenient than Foundation.
@Suite("Record JSON reader and writer")
struct RecordJSONTests {
    static let me = "6f1c1a3e-5a7b-4c2d-9e8f-0a1b2c3d4e5f"

    /// The reader is never more lenient than Foundation: a body it takes, the oracle reads as the same record;
    /// a body it refuses is a `badRequest`. Whatever text it keeps is the objects as they came, meaning the maps.
    func expectStrictOutcome(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) {
        let body = String(decoding: data, as: UTF8.self)
        do {
            let (record, text) = try API.Record.decodeJSONKeepingText(data)
            let foundation = FoundationRecordOracle.record(data)
            #expect(foundation == record, "\(body)", sourceLocation: sourceLocation)
            expectTextMeansMaps(record, text, in: data, sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .badRequest, "\(body)", sourceLocation: sourceLocation)
        }
    }

    /// The kept text is exact slices of the body that read back to the record's maps.
    func expectTextMeansMaps(
        _ record: API.Record, _ text: ReceivedRecordText, in data: Data,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        func map(_ json: String?) -> RecordData? {
            guard let members = json.flatMap({ try? JSONText.members(of: $0, values: true) }) else { return nil }
            var map = RecordData()
            for member in members { map[member.name] = member.value }
            return members.count == map.count ? map : nil
        }
        let body = String(decoding: data, as: UTF8.self)
        #expect(map(text.plain) == record.meta.plain, "\(body)", sourceLocation: sourceLocation)
        #expect(map(text.data) ?? [:] == record.data, "\(body)", sourceLocation: sourceLocation)
        for member in [text.plain, text.data].compactMap(\.self) {
            #expect(
                Array(data).firstRange(of: Array(member.utf8)) != nil
                    && (try? JSONText.checkStringObject(member)) != nil, "\(body)",
                sourceLocation: sourceLocation)
        }
    }

    /// The reader refuses `body` with a `badRequest` whose message holds `reason`.
    func expectRefused(_ body: String, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let record = try API.Record.decodeJSON(Data(body.utf8))
            Issue.record("taken: \(body) as \(record)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .badRequest, sourceLocation: sourceLocation)
            #expect(error.message.contains(reason), "\(error.message)", sourceLocation: sourceLocation)
        }
    }

    @Test("the bodies the SDKs and the server send decode as Foundation reads them")
    func sdkBodies() throws {
        let bodies = [
            // Python (ensure_ascii escapes), Go (null plain, zero times), js (file_meta), old Swift, the server.
            #"{"meta": {"writer_id": "\#(Self.me)", "user_id": "\#(Self.me)", "type": "t", "plain": {"k": "caf\u00e9 \ud83d\ude00"}}, "data": {"f": "a.b.c.d"}}"#,
            #"{"meta":{"record_id":"","writer_id":"\#(Self.me)","user_id":"\#(Self.me)","type":"t","plain":null,"created":"0001-01-01T00:00:00Z","last_modified":"0001-01-01T00:00:00Z","version":""},"data":{"f":"a.b.c.d"}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"file","plain":{},"file_meta":{"file_url":null,"checksum":"DPb7oJVFD4O0cXsAkVRltA==","compression":"raw","size":131251}},"data":null}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","record_id":"r","version":"v","created":"2026-11-26T10:00:00.000000Z","last_modified":"2026-11-26T10:00:00.000000Z","file_meta":null},"data":{},"rec_sig":"c2ln"}"#,
            " \n{\"meta\":{\"writer_id\":\"w\",\"user_id\":\"u\",\"type\":\"t\"},\"rec_sig\":null}\t\r\n",
            // Members nobody reads, of every kind.
            #"{"x":[1,-2,0.5,-1.25e+3,7E-2,{"y":[true,false,null]},"s\"\\\/"],"meta":{"extra":{"a":[]},"writer_id":"w","user_id":"u","type":"t"},"data":{"f":"\b\f\n\r\t\u0000"}}"#,
        ]
        for body in bodies {
            let fast = try API.Record.decodeJSON(Data(body.utf8))
            #expect(fast == FoundationRecordOracle.record(Data(body.utf8)), "\(body)")
        }
        let python = try API.Record.decodeJSON(Data(bodies[0].utf8))
        #expect(python.meta.plain == ["k": "café 😀"])
        let file = try API.Record.decodeJSON(Data(bodies[2].utf8))
        #expect(file.meta.fileMeta?.size == 131_251 && file.meta.fileMeta?.fileURL == nil && file.data == [:])
    }

    @Test("the lenient members of meta take any value; what the reader refuses is a badRequest saying where")
    func refusedBodies() throws {
        // Members the server sets itself are read as strings and ignored otherwise (Go sends zero times).
        let lenient = try API.Record.decodeJSON(
            Data(
                #"{"meta":{"writer_id":"w","user_id":"u","type":"t","created":0,"last_modified":{"a":[1.5e3]},"version":null,"record_id":7}}"#
                    .utf8))
        #expect(lenient.meta.created == nil && lenient.meta.recordID == nil && lenient.meta.version == nil)
        #expect(lenient.meta.lastModified == nil && lenient.meta.type == "t")
        // A UTF-8 byte order mark is refused, as the canonical parser refuses it (one grammar; RFC 8259 §8.1: no
        // sender adds one). It was ignored before the record reader was built on the shared grammar.
        expectRefused("\u{FEFF}" + #"{"meta":{"writer_id":"w","user_id":"u","type":"t"}}"#, "a byte order mark")
        let meta = #""meta":{"writer_id":"w","user_id":"u","type":"t""#
        let cases: [(String, String)] = [
            (#"{\#(meta)},"data":{"f":"1","f":"2"}}"#, #"repeated member "f" in data at byte 67"#),
            (
                #"{"meta":{"writer_id":"w","writer_id":"x","user_id":"u","type":"t"}}"#,
                #"repeated member "writer_id" in meta"#
            ),
            (#"{\#(meta)},"x":{"a":1,"a":2}}"#, #"repeated member "a" in the body"#),
            (#"{\#(meta)},"data":{"f":"\ud800"}}"#, #"a lone surrogate escape in the value of "f" in data"#),
            (#"{\#(meta)},"data":{"f":"\udc00x"}}"#, "a lone surrogate escape"),
            (#"{\#(meta),"file_meta":{"size":1.5}}}"#, "meta.file_meta.size is not an integer"),
            (#"{\#(meta),"file_meta":{"size":1e3}}}"#, "meta.file_meta.size is not an integer"),
            (
                #"{\#(meta),"file_meta":{"size":99999999999999999999}}}"#,
                "meta.file_meta.size does not fit in 64 bits"
            ),
            (#"{\#(meta),"file_meta":{"size":012}}}"#, "meta.file_meta.size is not a JSON value"),
            (#"{\#(meta),"file_meta":{"checksum":5}}}"#, "meta.file_meta.checksum is not a string"),
            (#"{\#(meta)},"x":nul}"#, "not a JSON value in the body"),
            (#"{\#(meta)},"x":1.}"#, "a malformed number in the body"),
            (
                #"{\#(meta)},"x":"# + String(repeating: "[", count: 512) + String(repeating: "]", count: 512) + "}",
                "nesting deeper than 512 in the body"
            ),
            (#"{\#(meta)}} x"#, "bytes after the body's object at byte 52"),
            (#"{\#(meta)},}"#, "a member name in the body is not a string"),
            (#"{"meta":{"writer_id":"w","user_id":"u"}}"#, #"meta has no member "type""#),
            (#"{"data":{}}"#, #"the body has no member "meta""#),
            (#"{"meta":{"writer_id":null,"user_id":"u","type":"t"}}"#, "meta.writer_id is not a string"),
            (#"{\#(meta),"plain":{"k":5}}}"#, #"the value of "k" in meta.plain is not a string"#),
            (#"{\#(meta),"plain":[]}}"#, "meta.plain is not a JSON object"),
            (#"{\#(meta)},"data":{"f":["x"]}}"#, #"the value of "f" in data is not a string"#),
            (#"{\#(meta)},"rec_sig":1}"#, "rec_sig is not a string"),
            (
                "{\"meta\":{\"writer_id\":\"w\",\"user_id\":\"u\",\"type\":\"t\u{1}\"}}",
                "a control character in meta.type"
            ),
            (#"{\#(meta)},"data":{"f":"\x"}}"#, "an invalid escape"),
            (#"{\#(meta)},"data":{"f":"\u12"}}"#, #"an invalid \u escape"#),
            (#"{\#(meta)},"data":{"f":"x}}"#, "an unterminated string"),
            ("", "the body is not a JSON object at byte 0"),
            ("null", "the body is not a JSON object"),
            ("[]", "the body is not a JSON object"),
            ("{", "a member name in the body is not a string"),
            (#"{"meta":"#, "meta is not a JSON object"),
            (#"{"meta":{"writer_id":"w","user_id":"u","type":"t"}}"# + "\u{0}", "bytes after the body's object"),
        ]
        for (body, reason) in cases { expectRefused(body, reason) }
        // Invalid UTF-8 inside a string.
        var bytes = Data(#"{"meta":{"writer_id":"w","user_id":"u","type":"X"}}"#.utf8)
        let x = try #require(bytes.firstIndex(of: UInt8(ascii: "X")))
        for bad: UInt8 in [0xFF, 0xC0, 0x80, 0xED] {
            bytes[x] = bad
            do {
                _ = try API.Record.decodeJSON(bytes)
                Issue.record("invalid UTF-8 \(bad) was taken")
            } catch {
                #expect(error.message == "invalid UTF-8 in meta.type at byte \(x)")
            }
        }
    }

    @Test("names that differ only in Unicode normalization are two members, written back as two")
    func normalizationTwins() throws {
        let body =
            "{\"meta\":{\"writer_id\":\"w\",\"user_id\":\"u\",\"type\":\"t\",\"plain\":{\"\u{e9}\":\"p\",\"e\u{301}\":\"q\"}},"
            + "\"data\":{\"\u{e9}\":\"1\",\"e\u{301}\":\"2\",\"\\u00e9\":\"3\"}}"
        // The third name is the first one escaped: the same code units, so a repeated member.
        expectRefused(body, #"repeated member "é" in data"#)
        let twins = body.replacingOccurrences(of: #","\u00e9":"3""#, with: "")
        let record = try API.Record.decodeJSON(Data(twins.utf8))
        #expect(record.data.count == 2 && record.data["\u{e9}"] == "1" && record.data["e\u{301}"] == "2")
        #expect(record.meta.plain?.count == 2 && record.data.keys == ["\u{e9}", "e\u{301}"])
        #expect(try API.Record.decodeJSON(record.jsonData()) == record)
    }

    @Test("bodies of many members: a large data map, an unknown object of distinct and of repeated keys")
    func manyMembers() throws {
        let n = 50_000
        let members = (0..<n).map { #""f\#($0)":"v\#($0)""# }.joined(separator: ",")
        let meta = #""meta":{"writer_id":"w","user_id":"u","type":"t"}"#
        let large = try API.Record.decodeJSON(Data(#"{\#(meta),"data":{\#(members)}}"#.utf8))
        #expect(large.data.count == n && large.data["f49999"] == "v49999")
        let unknown = try API.Record.decodeJSON(Data(#"{\#(meta),"x":{\#(members)},"data":{}}"#.utf8))
        #expect(unknown.data.isEmpty)
        expectRefused(#"{\#(meta),"data":{\#(members),"f7":"again"}}"#, #"repeated member "f7" in data"#)
    }

    /// Every prefix of `body`, and six random single-byte changes at each of its offsets.
    static func truncationsAndMutations(of body: Data) -> [Data] {
        var out = (0...body.count).map { Data(body.prefix($0)) }
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ u0123456789abcdefnrtl-.eE"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xFF]
        for i in 0..<body.count {
            for _ in 0..<6 {
                var mutated = body
                mutated[i] = alphabet.randomElement(using: &generator) ?? 0
                out.append(mutated)
            }
        }
        return out
    }

    @Test("every truncation and every single-byte change of a body: refused, or read as Foundation reads it")
    func mutations() {
        let body = Data(
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","plain":{"p":"é"},"record_id":"r","file_meta":{"file_url":null,"size":12}},"data":{"f":"a\nb"},"rec_sig":"s"}"#
                .utf8)
        for variant in Self.truncationsAndMutations(of: body) { expectStrictOutcome(variant) }
    }

    @Test("jsonData decodes back to the same record, whatever the strings hold")
    func writerRoundTrips() throws {
        let awkward = ["", "\"", "\\", "/", "\u{0}\u{1}\u{1F}\u{7F}", "é", "e\u{301}", "😀", "\u{2028}", "a\nb\tc"]
        for (n, s) in awkward.enumerated() {
            let record = API.Record(
                meta: API.Meta(
                    recordID: n % 2 == 0 ? s : nil, writerID: s, userID: "u\(s)", type: s,
                    plain: n % 3 == 0 ? nil : [s: s, "k": s], created: s, lastModified: nil, version: s,
                    fileMeta: n % 2 == 0
                        ? nil
                        : API.FileMeta(
                            fileURL: n % 4 == 1 ? nil : s, fileName: s,
                            checksum: s, compression: nil,
                            size: Int64(n) - 5)),
                data: [s: s, "f\(n)": s], recSig: n % 2 == 0 ? s : nil)
            let data = record.jsonData()
            #expect(FoundationRecordOracle.record(data) == record)
            #expect(try API.Record.decodeJSON(data) == record)
            // Absent optional members stay absent, except file_url, which the Python SDK reads.
            let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let meta = try #require(object["meta"] as? [String: Any])
            #expect((object["rec_sig"] != nil) == (record.recSig != nil))
            #expect((meta["plain"] != nil) == (record.meta.plain != nil))
            #expect((meta["last_modified"] == nil))
            if let fileMeta = meta["file_meta"] as? [String: Any] {
                #expect(fileMeta.keys.contains("file_url") && fileMeta["compression"] == nil)
            }
        }
    }

    @Test("meta has one writer and one member order, API.Meta's: record_id first, file_meta last")
    func metaMemberOrder() {
        let full = API.Record(
            meta: API.Meta(
                recordID: "r", writerID: "w", userID: "u", type: "t", plain: ["p": "1", "a": "2"], created: "c",
                lastModified: "l", version: "v",
                fileMeta: API.FileMeta(fileName: "n", checksum: nil, compression: nil, size: 3)),
            data: ["f": "x"], recSig: "s")
        #expect(
            String(decoding: full.jsonData(), as: UTF8.self)
                == #"{"meta":{"record_id":"r","writer_id":"w","user_id":"u","type":"t","plain":{"p":"1","a":"2"},"#
                + #""created":"c","last_modified":"l","version":"v","file_meta":{"file_url":null,"file_name":"n","#
                + #""size":3}},"data":{"f":"x"},"rec_sig":"s"}"#)
        let bare = API.Record(meta: API.Meta(writerID: "w", userID: "u", type: "t", plain: nil), data: [:])
        #expect(
            String(decoding: bare.jsonData(), as: UTF8.self)
                == #"{"meta":{"writer_id":"w","user_id":"u","type":"t"},"data":{}}"#)
    }

    @Test("decodeJSONKeepingText: plain and data as they came")
    func keptText() throws {
        // Python's separators and escapes stay as sent; the server stores this text and never writes it again.
        let python =
            #"{"meta": {"writer_id": "w", "user_id": "u", "type": "t", "plain": {"k": "caf\u00e9", "z": "1"}}, "data": {"f": "a.b", "\/": "c"}}"#
        let (record, text) = try API.Record.decodeJSONKeepingText(Data(python.utf8))
        #expect(record == FoundationRecordOracle.record(Data(python.utf8)))
        #expect(text.plain == #"{"k": "caf\u00e9", "z": "1"}"#)
        #expect(text.data == #"{"f": "a.b", "\/": "c"}"#)
        // plain absent or null, data null: no text.
        let bare = try API.Record.decodeJSONKeepingText(
            Data(#"{"meta":{"writer_id":"w","user_id":"u","type":"t","plain":null},"data":null}"#.utf8))
        #expect(bare.text.plain == nil && bare.text.data == nil)
        // Every truncation and single-byte change: any text returned means exactly the decoded maps.
        let body = Data(
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","plain":{"p":"é"}},"data":{"f":"a\nb","g":""}}"#.utf8)
        for variant in Self.truncationsAndMutations(of: body) { expectStrictOutcome(variant) }
    }

    @Test("members(of:values:) reads stored text: names and values decoded, each member's text as it is")
    func storedMembers() throws {
        let text = #" { "f" : "a\u00e9" ,"\/g":"" } "#
        let members = try JSONText.members(of: text, values: true)
        #expect(members.map(\.name) == ["f", "/g"] && members.map(\.value) == ["aé", ""])
        #expect(members.map { String($0.text) } == [#""f" : "a\u00e9""#, #""\/g":"""#])
        let skipped = try JSONText.members(of: text, values: false)
        #expect(skipped.map(\.name) == ["f", "/g"] && skipped.allSatisfy { $0.value == nil })
        #expect(skipped.map { String($0.text) } == members.map { String($0.text) })
        // A name repeated by code units (a search would match one value, an SDK show another) is refused; names
        // that differ only in normalization are two.
        let repeated = [#"{"role":"user","role":"admin"}"#, #"{"r":"a","\u0072":"b"}"#]
        for bad in ["", "{", #"{"f":1}"#, #"{"f":"x"} x"#, #"{"f":"\ud800"}"#, "[]", #"{"f" "x"}"#] + repeated {
            for values in [true, false] {
                #expect(throws: E3DBError.self, "\(bad)") { try JSONText.members(of: bad, values: values) }
            }
            #expect(throws: E3DBError.self, "\(bad)") { try JSONText.checkStringObject(bad) }
        }
        do { try JSONText.checkStringObject(repeated[0]) } catch {
            #expect(
                error.code == .badRequest && error.message == #"repeated member "role" in the stored object at byte 15"#
            )
        }
        try JSONText.checkStringObject(#"{"\u00e9":"a","e\u0301":"b"}"#)
        #expect(try JSONText.members(of: "{}", values: true).isEmpty)
    }

    @Test("a refusal quotes at most 64 bytes of a name, cut at a scalar (one letter and a million combining marks)")
    func longNamesInMessages() throws {
        let long = "e" + String(repeating: "\u{301}", count: 1_000_000)
        #expect(long.count == 1)
        let body = #"{"meta":{"writer_id":"w","user_id":"u","type":"t"},"data":{"\#(long)":"a","\#(long)":"b"}}"#
        do {
            _ = try API.Record.decodeJSON(Data(body.utf8))
            Issue.record("a repeated name was accepted")
        } catch {
            let quoted = "repeated member \"e" + String(repeating: "\u{301}", count: 31) + "…\" in data at byte "
            #expect(error.code == .badRequest && error.message.utf8.starts(with: quoted.utf8))
            #expect(error.message.utf8.count < 200, "\(error.message.utf8.count) bytes")
        }
        let name = String(repeating: "é", count: 40)
        do { try JSONText.checkStringObject(#"{"\#(name)":"a","\#(name)":"b"}"#) } catch {
            let cut = String(repeating: "é", count: 32)
            #expect(error.message == #"repeated member "\#(cut)…" in the stored object at byte 88"#)
        }
    }
}

/// Search responses (v1 and v2) are read with the strict record reader on the client: each result's `meta` and
/// `record_data` as a record's.
@Suite("Search responses through the record reader")
struct SearchResponseReaderTests {
    static let meta = #"{"record_id":"r","writer_id":"w","user_id":"u","type":"t","plain":{"p":"q"},"version":"v"}"#

    static func v1(_ result: String) -> Data { Data(#"{"results":[\#(result)],"last_index":7}"#.utf8) }

    @Test("a v1 and a v2 response read as the server writes them; twins stay two names")
    func readsResponses() throws {
        let eak = API.EAKInfo(
            eak: "e", authorizerID: "a", authorizerPublicKey: .init(curve25519: "k"), signerID: nil,
            signerSigningKey: nil)
        let eakText = String(decoding: try JSONEncoder().encode(eak), as: UTF8.self)
        let result =
            #"{"meta":\#(Self.meta),"record_data":{"\u00e9":"1","e\u0301":"2"},"access_key":\#(eakText),"rec_sig":"s"}"#
        let page = try API.QueryResponse.decodeBody(
            Self.v1(result + #",{"meta":\#(Self.meta),"record_data":null,"access_key":null}"#))
        #expect(page.lastIndex == 7 && page.results.count == 2)
        #expect(page.results[0].recordData?.count == 2 && page.results[0].accessKey == eak)
        #expect(page.results[0].recSig == "s" && page.results[0].meta.plain == RecordData(["p": "q"]))
        #expect(page.results[1].recordData == nil && page.results[1].accessKey == nil)
        let v2 = try API.SearchResponse.decodeBody(
            Data(#"{"results":[\#(result)],"last_index":7,"total_results":1,"search_id":"x"}"#.utf8))
        #expect(v2.totalResults == 1 && v2.searchID == "x" && v2.results == [page.results[0]])
    }

    @Test("a repeated name in record_data or meta.plain, a fractional size, or a missing member is refused")
    func refusesWhatARecordReadRefuses() {
        let bad = [
            Self.v1(#"{"meta":\#(Self.meta),"record_data":{"f":"1","f":"2"}}"#),
            Self.v1(#"{"meta":{"writer_id":"w","user_id":"u","type":"t","plain":{"r":"a","r":"b"}}}"#),
            Self.v1(#"{"meta":{"writer_id":"w","user_id":"u","type":"t","file_meta":{"size":1.0}}}"#),
            Self.v1(#"{"record_data":{}}"#),
            Data(#"{"results":[]}"#.utf8),
            Data(#"{"results":[],"last_index":1,"total_results":1.5,"search_id":"x"}"#.utf8),
        ]
        for body in bad.prefix(5) {
            #expect(throws: E3DBError.self, "\(String(decoding: body, as: UTF8.self))") {
                try API.QueryResponse.decodeBody(body)
            }
        }
        for body in bad {
            #expect(throws: E3DBError.self, "\(String(decoding: body, as: UTF8.self))") {
                try API.SearchResponse.decodeBody(body)
            }
        }
    }
}
