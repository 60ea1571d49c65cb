import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import Foundation
import Testing

/// The record reader (`API.Record.decodeJSON`) and the canonical parser (`CanonicalJSON.parse`) read JSON with one
/// grammar (`JSONParser`): every edge input, standing as a member nobody reads in a record body (or, for the byte
/// order mark, before it), is taken by both or refused by both, and a refusal of the record reader is a
/// `badRequest` that says where.
@Suite("One JSON grammar: the record reader and the canonical parser agree at the edges")
struct GrammarAgreementTests {
    struct Edge: CustomTestStringConvertible, Sendable {
        let name: String
        let body: [UInt8]
        let taken: Bool
        var testDescription: String { name }

        /// A record body whose member `x` is `value`.
        init(_ name: String, _ value: String, taken: Bool) {
            self.init(name, bytes: Array(value.utf8), taken: taken)
        }

        init(_ name: String, bytes value: [UInt8], taken: Bool) {
            self.name = name
            self.body = Array(#"{"meta":{"writer_id":"w","user_id":"u","type":"t"},"x":"#.utf8) + value + [0x7D]
            self.taken = taken
        }

        init(_ name: String, body: [UInt8], taken: Bool) {
            self.name = name
            self.body = body
            self.taken = taken
        }
    }

    /// `levels` nested arrays: with the body's object, `levels + 1` levels.
    static func nested(_ levels: Int) -> String {
        String(repeating: "[", count: levels) + String(repeating: "]", count: levels)
    }

    static let edges: [Edge] = [
        Edge("a plain body", "1", taken: true),
        Edge(
            "a byte order mark before the body", body: [0xEF, 0xBB, 0xBF] + Edge("", "1", taken: true).body,
            taken: false),
        Edge("U+FEFF inside a string", "\"\u{FEFF}\"", taken: true),
        Edge("nesting at the limit", nested(JSONParser.maxDepth - 1), taken: true),
        Edge("nesting one level beyond the limit", nested(JSONParser.maxDepth), taken: false),
        Edge("1e999999 (beyond a double)", "1e999999", taken: false),
        Edge("-1e999999", "-1e999999", taken: false),
        Edge("1e-400 (a non-zero literal that would become 0)", "1e-400", taken: false),
        Edge("0e-400", "0e-400", taken: true),
        Edge("the largest double", "1.7976931348623157e308", taken: true),
        Edge("1e308", "1e308", taken: true),
        Edge("1e309 (beyond a double)", "1e309", taken: false),
        Edge("10e307 and 0.1e309 (1e308 written otherwise)", "[10e307,0.1e309,1e0308]", taken: true),
        Edge("1.8e308 (rounds beyond the largest double)", "1.8e308", taken: false),
        Edge("1e-323 and 5e-324 (subnormal, not 0)", "[1e-323,5e-324,-5e-324]", taken: true),
        Edge("1e-324 (would become 0)", "1e-324", taken: false),
        Edge("a long fraction that would become 0", "0." + String(repeating: "0", count: 400) + "1", taken: false),
        Edge("a long integer beyond a double", "1" + String(repeating: "0", count: 309), taken: false),
        Edge("a long integer within a double", "1" + String(repeating: "0", count: 300) + ".5", taken: true),
        Edge("0e999999 (zero whatever its exponent)", "[0e999999,-0.0e-999999,0.000E+1234567]", taken: true),
        Edge("1e0000001 (an exponent with leading zeros)", "[1e0000001,1e-0000000000400]", taken: false),
        Edge("fractions and exponents", "[0.5,0.5,-12.25e-3,1E+2,123456789.123456789e10]", taken: true),
        Edge("1.5e3", "[1.5e3,-0,0.25E-2]", taken: true),
        Edge("a leading zero", "012", taken: false),
        Edge("a fraction without digits", "1.", taken: false),
        Edge("an exponent without digits", "1e", taken: false),
        Edge("a lone high surrogate", #""\ud800""#, taken: false),
        Edge("a lone low surrogate", #""\udc00x""#, taken: false),
        Edge("a high surrogate followed by a non-surrogate", #""\ud800\u0041""#, taken: false),
        Edge("a surrogate pair", #""\ud83d\ude00""#, taken: true),
        Edge("a raw control character", "\"a\u{1}b\"", taken: false),
        Edge("a raw tab", "\"a\tb\"", taken: false),
        Edge("an escaped control character", #""a\u0001b\tc""#, taken: true),
        Edge("an unknown escape", #""\x""#, taken: false),
        Edge("a short \\u escape", #""\u12""#, taken: false),
        Edge("an overlong UTF-8 sequence", bytes: [0x22, 0xC0, 0xAF, 0x22], taken: false),
        Edge("an encoded surrogate", bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], taken: false),
        Edge("a truncated UTF-8 sequence", bytes: [0x22, 0xE2, 0x82, 0x22], taken: false),
        Edge("four-byte UTF-8", "\"\u{1F600}\"", taken: true),
        Edge("a repeated name", #"{"a":1,"a":2}"#, taken: false),
        Edge("a repeated name, escaped", #"{"a":1,"\u0061":2}"#, taken: false),
        Edge("names that differ only in normalization", "{\"\u{e9}\":1,\"e\u{301}\":2}", taken: true),
        Edge("literals", "[true,false,null]", taken: true),
        Edge("a broken literal", "nul", taken: false),
        Edge("a trailing comma", "[1,]", taken: false),
        Edge("a missing comma", "[1 2]", taken: false),
        Edge("an unterminated array", "[1", taken: false),
    ]

    @Test("each edge: taken by both readers or refused by both", arguments: edges)
    func bothReadersAgree(_ edge: Edge) {
        let canonical = Result { () throws(CanonicalJSONError) in try CanonicalJSON.parse(edge.body) }
        let record = Result { () throws(E3DBError) in try API.Record.decodeJSON(Data(edge.body)) }
        #expect(((try? canonical.get()) != nil) == edge.taken, "CanonicalJSON.parse: \(canonical)")
        #expect(((try? record.get()) != nil) == edge.taken, "decodeJSON: \(record)")
        if case .failure(let error) = record {
            #expect(error.code == .badRequest && error.message.contains(" at byte "), "\(error.message)")
        }
    }

    @Test("the record reader's refusals at the edges say what the grammar refused")
    func refusalsSayWhat() {
        func reason(_ value: String) -> String {
            do {
                _ = try API.Record.decodeJSON(Data(Edge("", value, taken: false).body))
                return "taken"
            } catch {
                return error.message
            }
        }
        #expect(reason("1e999999") == "a number beyond the range of a double in the body at byte 55")
        #expect(reason(Self.nested(JSONParser.maxDepth)).hasPrefix("nesting deeper than 512 in the body at byte "))
        #expect(reason(#"{"a":1,"a":2}"#) == #"repeated member "a" in the body at byte 62"#)
        #expect(reason("[1 2]") == "not a JSON value in the body at byte 58")
        let bom = [0xEF, 0xBB, 0xBF] + Edge("", "1", taken: true).body
        #expect(throws: E3DBError(.badRequest)) { try API.Record.decodeJSON(Data(bom)) }
        do { _ = try API.Record.decodeJSON(Data(bom)) } catch {
            #expect(error.message.hasPrefix("a byte order mark (U+FEFF)") && error.message.hasSuffix(" at byte 0"))
        }
    }

    /// The one rule of canonical values that is not a rule of the grammar: an integer beyond 2^53 that a double
    /// cannot hold exactly would sign as another number, so the canonical parser refuses it; the record reader
    /// skips it (and reads `file_meta.size` as an exact 64-bit integer).
    @Test("an integer a double cannot hold exactly: refused as a canonical value, skipped by the record reader")
    func inexactIntegers() throws {
        let edge = Edge("", "9007199254740993", taken: true)
        #expect(throws: CanonicalJSONError.self) { try CanonicalJSON.parse(edge.body) }
        #expect(try API.Record.decodeJSON(Data(edge.body)).meta.type == "t")
    }

    /// A hostile body nested to the limit (`{"a":` 511 times in a member nobody reads, about 3 KB) is read on a
    /// 64 KB thread (smaller than musl's 128 KB default and the 512 KB of Swift's cooperative threads on Apple
    /// platforms) in a debug build:
    /// skipping a value keeps its open containers in a small array, not one native frame per level, so it costs no
    /// stack per level. (Recursive skipping, two frames a level, crashed this test.)
    @Test("skipping a value nested to the limit needs no stack per level")
    func deepSkipOnASmallStack() async {
        let levels = JSONParser.maxDepth - 1
        let value = String(repeating: #"{"a":"#, count: levels) + "1" + String(repeating: "}", count: levels)
        let taken = Edge("", value, taken: true).body
        let refused = Edge("", "[" + value + "]", taken: false).body
        let results: (String?, String?) = await withCheckedContinuation { continuation in
            let thread = Thread {
                func read(_ body: [UInt8]) -> String? {
                    do { return try API.Record.decodeJSON(Data(body)).meta.type } catch { return error.message }
                }
                continuation.resume(returning: (read(taken), read(refused)))
            }
            thread.stackSize = 64 * 1024
            thread.start()
        }
        #expect(results.0 == "t")
        #expect(
            results.1?.hasPrefix("nesting deeper than 512 in the body at byte ") == true,
            "\(String(describing: results.1))")
    }

    @Test("one depth bound: ParseLimits' default is the grammar's")
    func oneDepthBound() {
        #expect(ParseLimits.default.maxDepth == JSONParser.maxDepth && JSONParser.maxDepth == 512)
    }
}
