import E3DBCanonicalJSON
import Testing

private struct ClientMetaLike: Encodable {
    let writerID: String
    let userID: String
    let type: String
    let plain: [String: String]?

    enum CodingKeys: String, CodingKey {
        case writerID = "writer_id"
        case userID = "user_id"
        case type
        case plain
    }
}

private struct Lowercased: Encodable, Signable {
    let raw: String
    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(raw)
    }
    var signableJSON: JSONValue { .string(raw.lowercased()) }
}

private struct Holder: Encodable {
    let id: Lowercased
    let values: [Double]
    let flag: Bool?
    let nested: [String: [Int]]
}

private struct NonFinite: Encodable {
    let x: Double
}

private struct BigInteger: Encodable {
    let n: Int64
}

private class Base: Encodable {
    var a = 1
    private enum CodingKeys: String, CodingKey { case a }
}

private final class Derived: Base {
    var b = 2
    private enum CodingKeys: String, CodingKey { case b }
    override func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(b, forKey: .b)
        try super.encode(to: c.superEncoder())
    }
}

@Suite("Signable and JSONValueEncoder")
struct SignableTests {
    @Test("scalar conformances")
    func scalars() {
        #expect("a\"b".canonicalString() == "\"a\\\"b\"")
        #expect(true.canonicalString() == "true")
        #expect(42.canonicalString() == "42")
        #expect(Int8(-8).canonicalString() == "-8")
        #expect(UInt64(1 << 60).canonicalString() == "1152921504606847000")
        #expect(1.5.canonicalString() == "1.5")
        #expect(Float(0.1).canonicalString() == "0.10000000149011612")
        #expect(Optional<String>.none.canonicalString() == "null")
        #expect(Optional("x").canonicalString() == "\"x\"")
        #expect(Array("ab".utf8).canonicalBytes() == Array("[97,98]".utf8))
    }

    @Test("collections and heterogeneous dictionaries")
    func collections() {
        #expect(["b": "2", "a": "1"].canonicalString() == "{\"a\":\"1\",\"b\":\"2\"}")
        let mixed: [String: any Signable] = ["s": "x", "n": 1, "o": Optional<Bool>.none, "l": ["a", "b"]]
        #expect(mixed.canonicalString() == "{\"l\":[\"a\",\"b\"],\"n\":1,\"o\":null,\"s\":\"x\"}")
        let list: [any Signable] = ["x", 2, false]
        #expect(list.canonicalString() == "[\"x\",2,false]")
        #expect(["9": 1, "10": 2].canonicalString(order: .javaScript) == "{\"9\":1,\"10\":2}")
    }

    @Test("ClientMeta-shaped Encodable gives the E3DB signing form")
    func clientMeta() throws {
        let meta = ClientMetaLike(
            writerID: "d405a1ce-0000-4000-8000-000000000001", userID: "d405a1ce-0000-4000-8000-000000000002",
            type: "t", plain: ["z": "1", "a": "2"])
        let bytes = try JSONValueEncoder().canonicalBytes(meta)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "{\"plain\":{\"a\":\"2\",\"z\":\"1\"},\"type\":\"t\",\"user_id\":\"d405a1ce-0000-4000-8000-000000000002\","
                + "\"writer_id\":\"d405a1ce-0000-4000-8000-000000000001\"}")
    }

    @Test("nested Signable values use their signable form; optionals are omitted like Codable does")
    func nestedSignable() throws {
        let holder = Holder(id: Lowercased(raw: "ABC"), values: [0.5, 1e21], flag: nil, nested: ["k": [1, 2]])
        let value = try JSONValueEncoder().encode(holder)
        #expect(value == ["id": "abc", "values": [0.5, 1e21], "nested": ["k": [1, 2]]])
        #expect(CanonicalJSON.serialize(value) == "{\"id\":\"abc\",\"nested\":{\"k\":[1,2]},\"values\":[0.5,1e+21]}")
        // The top-level value always uses its Encodable implementation.
        #expect(try JSONValueEncoder().encode(Lowercased(raw: "ABC")) == "ABC")
    }

    @Test("unrepresentable numbers are typed errors")
    func unrepresentable() {
        #expect(throws: CanonicalJSONError(.unrepresentableValue, "")) {
            _ = try JSONValueEncoder().encode(NonFinite(x: .nan))
        }
        #expect(throws: CanonicalJSONError(.unrepresentableValue, "")) {
            _ = try JSONValueEncoder().encode(BigInteger(n: (1 << 53) + 1))
        }
        #expect(throws: Never.self) {
            _ = try JSONValueEncoder().encode(BigInteger(n: 1 << 60))
        }
    }

    @Test("JSONValue encodes as itself and superEncoder nests")
    func passThroughAndSuper() throws {
        let value: JSONValue = ["k": [1, "two", nil]]
        #expect(try JSONValueEncoder().encode(["outer": value]) == ["outer": value])
        #expect(try JSONValueEncoder().encode(Derived()) == ["b": 2, "super": ["a": 1]])
    }
}
