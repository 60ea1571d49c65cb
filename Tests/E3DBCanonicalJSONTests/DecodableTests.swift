import E3DBCanonicalJSON
import Foundation
import Testing

@Suite("JSONValue as Decodable")
struct DecodableTests {
    @Test(
        "Foundation's JSONDecoder gives the value the strict parser gives",
        arguments: [
            #"{"a":[1,2.5,-0,1e300],"b":{"c":null,"d":true,"e":false},"é":"e\u0301","":""}"#,
            #"[]"#, #"{}"#, #""text""#, #"42"#, #"null"#, #"[[[{"x":[null]}]]]"#,
        ])
    func matchesParser(_ text: String) throws {
        let decoded = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(decoded == (try CanonicalJSON.parse(Array(text.utf8))))
        #expect(CanonicalJSON.serialize(decoded) == CanonicalJSON.serialize(try CanonicalJSON.parse(Array(text.utf8))))
    }

    @Test("an Encodable value round-trips through JSONValue")
    func roundTrip() throws {
        let value: JSONValue = ["theme": "dark", "sizes": [12, 14], "on": true, "none": nil]
        let bytes = try JSONEncoder().encode(value)
        #expect(try JSONDecoder().decode(JSONValue.self, from: bytes) == value)
    }

    @Test("text that is not JSON is the decoder's error, not a value")
    func rejects() {
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(JSONValue.self, from: Data("{".utf8)) }
    }
}
