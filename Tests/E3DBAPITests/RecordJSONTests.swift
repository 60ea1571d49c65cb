import E3DBAPI
import Foundation
import Testing

/// `API.Record.decodeJSON` and `jsonData()` against Foundation's JSONDecoder: the same outcome for every body,
/// the fast reader's and the fallback's alike.
@Suite("Record JSON reader and writer")
struct RecordJSONTests {
    static let me = "6f1c1a3e-5a7b-4c2d-9e8f-0a1b2c3d4e5f"

    /// The fast reader and JSONDecoder agree: both succeed with equal records or both throw.
    func expectSameOutcome(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) {
        expectSameOutcome(Data(json.utf8), sourceLocation: sourceLocation)
    }

    func expectSameOutcome(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) {
        let foundation = try? JSONDecoder().decode(API.Record.self, from: data)
        let fast = try? API.Record.decodeJSON(data)
        #expect(fast == foundation, "\(String(decoding: data, as: UTF8.self))", sourceLocation: sourceLocation)
    }

    @Test("the bodies the SDKs and the server send decode as JSONDecoder decodes them")
    func sdkBodies() throws {
        let bodies = [
            // Python (ensure_ascii escapes), Go (null plain, zero times), js (file_meta), old Swift, the server.
            #"{"meta": {"writer_id": "\#(Self.me)", "user_id": "\#(Self.me)", "type": "t", "plain": {"k": "caf\u00e9 \ud83d\ude00"}}, "data": {"f": "a.b.c.d"}}"#,
            #"{"meta":{"record_id":"","writer_id":"\#(Self.me)","user_id":"\#(Self.me)","type":"t","plain":null,"created":"0001-01-01T00:00:00Z","last_modified":"0001-01-01T00:00:00Z","version":""},"data":{"f":"a.b.c.d"}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"file","plain":{},"file_meta":{"file_url":null,"checksum":"DPb7oJVFD4O0cXsAkVRltA==","compression":"raw","size":131251}},"data":null}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","record_id":"r","version":"v","created":"2026-11-26T10:00:00.000000Z","last_modified":"2026-11-26T10:00:00.000000Z","file_meta":null},"data":{},"rec_sig":"c2ln"}"#,
            " \n{\"meta\":{\"writer_id\":\"w\",\"user_id\":\"u\",\"type\":\"t\"},\"rec_sig\":null}\t\r\n",
            // Members nobody reads, of every kind.
            #"{"x":[1,-2,{"y":[true,false,null]},"s\"\\\/"],"meta":{"extra":{"a":[]},"writer_id":"w","user_id":"u","type":"t"},"data":{"f":"\b\f\n\r\t\u0000"}}"#,
        ]
        for body in bodies {
            let fast = try API.Record.decodeJSON(Data(body.utf8))
            #expect(fast == (try JSONDecoder().decode(API.Record.self, from: Data(body.utf8))), "\(body)")
        }
        let python = try API.Record.decodeJSON(Data(bodies[0].utf8))
        #expect(python.meta.plain == ["k": "café 😀"])
        let file = try API.Record.decodeJSON(Data(bodies[2].utf8))
        #expect(file.meta.fileMeta?.size == 131_251 && file.meta.fileMeta?.fileURL == nil && file.data == [:])
    }

    @Test("what the fast reader declines gets JSONDecoder's outcome: leniency kept, errors thrown")
    func declinedBodies() {
        let cases = [
            // Lenient members of other types are nil (JSONDecoder's `try?`).
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","created":0,"last_modified":{},"version":null,"record_id":7}}"#,
            // Duplicates, lone surrogates, fractions, overflow, bad literals, deep nesting, trailing bytes.
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t"},"data":{"f":"1","f":"2"}}"#,
            #"{"meta":{"writer_id":"w","writer_id":"x","user_id":"u","type":"t"}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"\ud800"}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"\udc00x"}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","file_meta":{"size":1.5}}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","file_meta":{"size":1e3}}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","file_meta":{"size":99999999999999999999}}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","file_meta":{"size":-0}}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","file_meta":{"size":012}}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t"},"x":nul}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t"},"x":"#
                + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}",
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t"}} x"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t"},}"#,
            #"{"meta":{"writer_id":"w","user_id":"u"}}"#,
            #"{"meta":{"writer_id":null,"user_id":"u","type":"t"}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","plain":{"k":5}}}"#,
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t"},"data":{"f":["x"]}}"#,
            "{\"meta\":{\"writer_id\":\"w\",\"user_id\":\"u\",\"type\":\"t\u{1}\"}}",
            "", "null", "[]", "{", #"{"meta":"#,
        ]
        for body in cases { expectSameOutcome(body) }
        // Invalid UTF-8 inside a string, and a NUL outside one.
        var bytes = Data(#"{"meta":{"writer_id":"w","user_id":"u","type":"X"}}"#.utf8)
        let x = bytes.firstIndex(of: UInt8(ascii: "X"))!
        for bad: UInt8 in [0xFF, 0xC0, 0x80, 0xED] {
            bytes[x] = bad
            expectSameOutcome(bytes)
        }
        expectSameOutcome(Data(#"{"meta":{"writer_id":"w","user_id":"u","type":"t"}}"#.utf8) + Data([0]))
    }

    @Test("bodies of many members: a large data map, an unknown object of distinct and of repeated keys")
    func manyMembers() throws {
        let n = 50_000
        let members = (0..<n).map { #""f\#($0)":"v\#($0)""# }.joined(separator: ",")
        let meta = #""meta":{"writer_id":"w","user_id":"u","type":"t"}"#
        let large = try API.Record.decodeJSON(Data(#"{\#(meta),"data":{\#(members)}}"#.utf8))
        #expect(large.data.count == n && large.data["f49999"] == "v49999")
        expectSameOutcome(#"{\#(meta),"x":{\#(members)},"data":{}}"#)
        expectSameOutcome(#"{\#(meta),"data":{\#(members),"f7":"again"}}"#)
    }

    /// Every prefix of `body`, and six random single-byte changes at each of its offsets.
    static func truncationsAndMutations(of body: Data) -> [Data] {
        var out = (0...body.count).map { Data(body.prefix($0)) }
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ u0123456789abcdefnrtl-.eE"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xFF]
        for i in 0..<body.count {
            for _ in 0..<6 {
                var mutated = body
                mutated[i] = alphabet.randomElement(using: &generator)!
                out.append(mutated)
            }
        }
        return out
    }

    @Test("every truncation and every single-byte change of a body gets JSONDecoder's outcome")
    func mutations() {
        let body = Data(
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","plain":{"p":"é"},"record_id":"r","file_meta":{"file_url":null,"size":12}},"data":{"f":"a\nb"},"rec_sig":"s"}"#
                .utf8)
        for variant in Self.truncationsAndMutations(of: body) { expectSameOutcome(variant) }
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
            #expect(try JSONDecoder().decode(API.Record.self, from: data) == record)
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

    @Test("sortedObject is a JSON object in key order that decodes to the map")
    func sortedObjects() throws {
        let map = ["b": "2", "a": "1\"\\/\u{1}", "é": "x", "": "empty"]
        let text = JSONText.sortedObject(map)
        #expect(try JSONDecoder().decode([String: String].self, from: Data(text.utf8)) == map)
        #expect(text.hasPrefix(#"{"":"empty","a":"1\"\\/\u0001","b":"2""#))
        #expect(JSONText.sortedObject([:]) == "{}")
    }

    /// When `decodeJSONKeepingText` returns text, the text is the objects as they came and decodes to the maps.
    func expectTextMeansMaps(_ data: Data, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let result = try? API.Record.decodeJSONKeepingText(data), let text = result.text else { return }
        func map(_ json: String?) -> [String: String]? {
            json.flatMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) }
        }
        let body = String(decoding: data, as: UTF8.self)
        #expect(map(text.plain) == result.record.meta.plain, "\(body)", sourceLocation: sourceLocation)
        #expect(map(text.data) ?? [:] == result.record.data, "\(body)", sourceLocation: sourceLocation)
        for member in [text.plain, text.data].compactMap(\.self) {
            #expect(body.contains(member), "\(body)", sourceLocation: sourceLocation)
        }
    }

    @Test("decodeJSONKeepingText: plain and data as they came, only when the fast reader read them")
    func keptText() throws {
        // Python's separators and escapes stay as sent; the server stores this text and never writes it again.
        let python =
            #"{"meta": {"writer_id": "w", "user_id": "u", "type": "t", "plain": {"k": "caf\u00e9", "z": "1"}}, "data": {"f": "a.b", "\/": "c"}}"#
        let (record, text) = try API.Record.decodeJSONKeepingText(Data(python.utf8))
        #expect(record == (try API.Record.decodeJSON(Data(python.utf8))))
        #expect(text?.plain == #"{"k": "caf\u00e9", "z": "1"}"#)
        #expect(text?.data == #"{"f": "a.b", "\/": "c"}"#)
        // plain absent or null, data null: no text.
        let bare = try API.Record.decodeJSONKeepingText(
            Data(#"{"meta":{"writer_id":"w","user_id":"u","type":"t","plain":null},"data":null}"#.utf8))
        #expect(bare.text?.plain == nil && bare.text?.data == nil && bare.text != nil)
        // A repeated field is left to JSONDecoder: then there is no text, and the server writes the map anew.
        let repeatedBody = Data(#"{"meta":{"writer_id":"w","user_id":"u","type":"t"},"data":{"f":"1","f":"2"}}"#.utf8)
        let repeated = try API.Record.decodeJSONKeepingText(repeatedBody)
        #expect(repeated.text == nil)
        #expect(repeated.record == (try JSONDecoder().decode(API.Record.self, from: repeatedBody)))
        // Every truncation and single-byte change: any text returned means exactly the decoded maps.
        let body = Data(
            #"{"meta":{"writer_id":"w","user_id":"u","type":"t","plain":{"p":"é"}},"data":{"f":"a\nb","g":""}}"#.utf8)
        for variant in Self.truncationsAndMutations(of: body) { expectTextMeansMaps(variant) }
    }
}
