import E3DBCanonicalJSON
import Testing

@Suite("Canonical serializer")
struct SerializerTests {
    @Test("escapes strings exactly like JSON.stringify")
    func escaping() {
        var all = ""
        for scalar in 0..<0x20 { all.unicodeScalars.append(Unicode.Scalar(UInt8(scalar))) }
        all += "\"\\/\u{7F}\u{85}\u{2028}\u{2029}\u{FEFF}é😀"
        let expected =
            "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f"
            + "\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d"
            + "\\u001e\\u001f\\\"\\\\/\u{7F}\u{85}\u{2028}\u{2029}\u{FEFF}é😀\""
        #expect(CanonicalJSON.serialize(.string(all)) == expected)
    }

    @Test("keys are escaped exactly like values")
    func keyEscaping() {
        let value: JSONValue = ["a\"b\\c\n\u{1}": "x"]
        #expect(CanonicalJSON.serialize(value) == "{\"a\\\"b\\\\c\\n\\u0001\":\"x\"}")
    }

    @Test("long strings with escapes between safe runs")
    func longRuns() {
        let chunk = String(repeating: "abcdefgh", count: 100)
        let s = chunk + "\"" + chunk + "\n" + chunk
        #expect(CanonicalJSON.serialize(.string(s)) == "\"" + chunk + "\\\"" + chunk + "\\n" + chunk + "\"")
    }

    @Test("members are sorted by UTF-16 code units, not code points or Swift String order")
    func utf16Order() {
        let value: JSONValue = ["～": 3, "😀": 2, "\u{E000}": 4, "a": 1, "\u{D7FF}": 5, "": 0, "é": 6, "Z": 7]
        #expect(
            CanonicalJSON.serialize(value)
                == "{\"\":0,\"Z\":7,\"a\":1,\"é\":6,\"\u{D7FF}\":5,\"😀\":2,\"\u{E000}\":4,\"～\":3}")
    }

    @Test("spec Appendix A.4: Java/UTF-16 order and js-sdk order")
    func appendixA4() {
        let value: JSONValue = ["a\"b": "x", "9": "1", "10": "2", "é": "e", "😀": "f", "～": "g"]
        #expect(
            CanonicalJSON.serialize(value)
                == "{\"10\":\"2\",\"9\":\"1\",\"a\\\"b\":\"x\",\"é\":\"e\",\"😀\":\"f\",\"～\":\"g\"}")
        #expect(
            CanonicalJSON.serialize(value, order: .javaScript)
                == "{\"9\":\"1\",\"10\":\"2\",\"a\\\"b\":\"x\",\"é\":\"e\",\"😀\":\"f\",\"～\":\"g\"}")
    }

    @Test("JavaScript order: only canonical array indices up to 4294967294 are hoisted")
    func javaScriptOrder() {
        let keys = ["b", "4294967295", "4294967294", "01", "10", "2", "0", "-1", "1.0", "a"]
        let value = JSONValue.object(JSONObject(keys.map { (key: $0, value: JSONValue.null) }))
        let js = CanonicalJSON.serialize(value, order: .javaScript)
        #expect(
            js == "{\"0\":null,\"2\":null,\"10\":null,\"4294967294\":null,\"-1\":null,\"01\":null,\"1.0\":null,"
                + "\"4294967295\":null,\"a\":null,\"b\":null}")
        #expect(CanonicalJSON.keyPrecedes("9", "10", order: .javaScript))
        #expect(!CanonicalJSON.keyPrecedes("9", "10"))
    }

    @Test("canonically equivalent keys stay two members, in code-unit order")
    func equivalentKeys() {
        let object = JSONObject([(key: "\u{E9}", value: 1), (key: "e\u{301}", value: 2)])
        #expect(object.count == 2)
        #expect(CanonicalJSON.serialize(.object(object)) == "{\"e\u{301}\":2,\"\u{E9}\":1}")
    }

    @Test(
        "the byte comparison agrees with UTF-16 code-unit comparison",
        arguments: [
            ("a", "b"), ("", "a"), ("ab", "a"), ("😀", "～"), ("\u{E000}", "\u{10000}"), ("\u{FFFF}", "\u{10FFFF}"),
            ("\u{D7FF}", "\u{10000}"), ("\u{7FF}", "\u{800}"), ("e\u{301}", "\u{E9}"), ("\u{1F600}a", "\u{1F600}"),
            ("\u{1F600}", "\u{1F601}"), ("\u{EFFF}", "\u{F000}"),
        ])
    func comparison(_ pair: (String, String)) {
        let (a, b) = pair
        #expect(CanonicalJSON.keyPrecedes(a, b) == a.utf16.lexicographicallyPrecedes(b.utf16))
        #expect(CanonicalJSON.keyPrecedes(b, a) == b.utf16.lexicographicallyPrecedes(a.utf16))
    }

    @Test(
        "numbers use ECMAScript Number-to-string",
        arguments: [
            (0.0, "0"), (-0.0, "0"), (1, "1"), (-1, "-1"), (1.5, "1.5"), (0.1, "0.1"), (1e21, "1e+21"),
            (1e20, "100000000000000000000"), (123_456_789_012_345_683_968, "123456789012345680000"), (5e-7, "5e-7"),
            (1e-6, "0.000001"), (1.5e-7, "1.5e-7"), (0.000001234, "0.000001234"), (1e-7, "1e-7"),
            (9_007_199_254_740_992, "9007199254740992"), (9_007_199_254_740_994, "9007199254740994"),
            (1_152_921_504_606_846_976, "1152921504606847000"), (1.7976931348623157e308, "1.7976931348623157e+308"),
            (.leastNonzeroMagnitude, "5e-324"), (-2.2250738585072014e-308, "-2.2250738585072014e-308"), (4.35, "4.35"),
            (1e23, "1e+23"), (333333333.33333329, "333333333.3333333"), (1.2345e21, "1.2345e+21"),
            (-1e-7, "-1e-7"), (100, "100"), (0.5, "0.5"),
        ] as [(Double, String)])
    func numbers(_ pair: (Double, String)) {
        #expect(CanonicalJSON.formatNumber(pair.0) == pair.1)
    }

    @Test("non-finite numbers are written as null, as JSON.stringify does")
    func nonFinite() {
        #expect(
            CanonicalJSON.serialize([.number(.nan), .number(.infinity), .number(-.infinity)]) == "[null,null,null]")
    }

    @Test("no whitespace; arrays keep their order; nested objects are sorted")
    func structure() {
        let value: JSONValue = ["z": [3, 1, 2], "a": ["y": nil, "x": [true, false]], "m": []]
        #expect(CanonicalJSON.serialize(value) == "{\"a\":{\"x\":[true,false],\"y\":null},\"m\":[],\"z\":[3,1,2]}")
    }

    @Test("isCanonical detects whitespace, order and escape differences")
    func isCanonical() throws {
        #expect(try CanonicalJSON.isCanonical(Array("{\"a\":1,\"b\":[]}".utf8)))
        #expect(try !CanonicalJSON.isCanonical(Array("{\"b\":1,\"a\":2}".utf8)))
        #expect(try !CanonicalJSON.isCanonical(Array("{\"a\": 1}".utf8)))
        #expect(try !CanonicalJSON.isCanonical(Array("\"\\u00E9\"".utf8)))
        #expect(try !CanonicalJSON.isCanonical(Array("1.0".utf8)))
        #expect(try CanonicalJSON.isCanonical(Array("{\"9\":1,\"10\":2}".utf8), order: .javaScript))
        #expect(try !CanonicalJSON.isCanonical(Array("{\"9\":1,\"10\":2}".utf8)))
    }

    @Test("JSONObject: insertion order is kept for iteration, ignored for equality and output")
    func objectSemantics() {
        var a = JSONObject()
        a["x"] = 1
        a["y"] = 2
        var b = JSONObject()
        b["y"] = 2
        b["x"] = 1
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a.keys == ["x", "y"])
        #expect(b.keys == ["y", "x"])
        #expect(a.description == b.description)
        a["x"] = nil
        #expect(a.keys == ["y"])
        #expect(a["y"] == 2)
        let repeated = JSONObject([(key: "k", value: 1), (key: "k", value: 2)])
        #expect(repeated.count == 1)
        #expect(repeated["k"] == 2)
    }

    @Test("strings compare by code units")
    func stringEquality() {
        #expect(JSONValue.string("\u{E9}") != JSONValue.string("e\u{301}"))
        #expect(JSONValue.number(0) == JSONValue.number(-0.0))
        #expect(JSONValue.number(0).hashValue == JSONValue.number(-0.0).hashValue)
    }
}
