import E3DBCanonicalJSON
import Testing

/// One rejection: input text, expected code, expected byte offset.
struct Rejection: Sendable, CustomTestStringConvertible {
    let name: String
    let input: [UInt8]
    let code: CanonicalJSONError.Code
    let offset: Int?
    var limits: ParseLimits = .default

    init(
        _ name: String, _ input: String, _ code: CanonicalJSONError.Code, at offset: Int?,
        limits: ParseLimits = .default
    ) {
        self.name = name
        self.input = Array(input.utf8)
        self.code = code
        self.offset = offset
        self.limits = limits
    }

    init(_ name: String, bytes: [UInt8], _ code: CanonicalJSONError.Code, at offset: Int?) {
        self.name = name
        self.input = bytes
        self.code = code
        self.offset = offset
    }

    var testDescription: String { name }
}

@Suite("Strict parser")
struct ParserTests {
    static let rejections: [Rejection] = [
        // Structure
        Rejection("empty input", "", .unexpectedEnd, at: 0),
        Rejection("only whitespace", " \n\t", .unexpectedEnd, at: 3),
        Rejection("unknown character", "@", .unexpectedCharacter, at: 0),
        Rejection("single quotes", "{'a':1}", .unexpectedCharacter, at: 1),
        Rejection("trailing comma in array", "[1,]", .unexpectedCharacter, at: 3),
        Rejection("trailing comma in object", "{\"a\":1,}", .unexpectedCharacter, at: 7),
        Rejection("missing colon", "{\"a\" 1}", .unexpectedCharacter, at: 5),
        Rejection("missing comma", "[1 2]", .unexpectedCharacter, at: 3),
        Rejection("unterminated array", "[1", .unexpectedEnd, at: 2),
        Rejection("unterminated object", "{\"a\":1", .unexpectedEnd, at: 6),
        Rejection("unquoted key", "{a:1}", .unexpectedCharacter, at: 1),
        Rejection("bad literal", "tru", .unexpectedEnd, at: 3),
        Rejection("misspelled literal", "nul1", .unexpectedCharacter, at: 3),
        Rejection("NaN", "NaN", .unexpectedCharacter, at: 0),
        Rejection("comment", "[1/*x*/]", .unexpectedCharacter, at: 2),
        Rejection("byte order mark", "\u{FEFF}{}", .unexpectedCharacter, at: 0),
        Rejection("non-JSON whitespace (form feed)", "\u{0C}1", .unexpectedCharacter, at: 0),
        // Trailing data
        Rejection("two values", "{} {}", .trailingData, at: 3),
        Rejection("garbage after number", "1 x", .trailingData, at: 2),
        Rejection("NUL after value", "true\u{0}", .trailingData, at: 4),
        // Strings
        Rejection("unterminated string", "\"abc", .unexpectedEnd, at: 4),
        Rejection("raw newline in string", "\"a\nb\"", .controlCharacter, at: 2),
        Rejection("raw NUL in string", "[\"\u{0}\"]", .controlCharacter, at: 2),
        Rejection("invalid escape \\x", "\"\\x41\"", .invalidEscape, at: 1),
        Rejection("invalid escape \\'", "\"a\\'\"", .invalidEscape, at: 2),
        Rejection("short \\u escape", "\"\\u12\"", .invalidEscape, at: 5),
        Rejection("non-hex \\u escape", "\"\\u00g1\"", .invalidEscape, at: 5),
        Rejection("escape at end", "\"\\", .unexpectedEnd, at: 1),
        Rejection("lone high surrogate", "\"\\ud800\"", .loneSurrogate, at: 1),
        Rejection("lone low surrogate", "\"ab\\udc00\"", .loneSurrogate, at: 3),
        Rejection("high then non-surrogate", "\"\\ud800\\u0041\"", .loneSurrogate, at: 1),
        Rejection("high then high", "\"\\udbff\\ud800\"", .loneSurrogate, at: 1),
        Rejection("reversed pair", "\"\\udc00\\ud800\"", .loneSurrogate, at: 1),
        Rejection("lone surrogate in a key", "{\"\\ud834\":1}", .loneSurrogate, at: 2),
        // UTF-8
        Rejection("invalid lead byte 0xFF", bytes: [0x22, 0xFF, 0x22], .invalidUTF8, at: 1),
        Rejection("continuation without lead", bytes: [0x22, 0x61, 0x80, 0x22], .invalidUTF8, at: 2),
        Rejection("overlong '/' (C0 AF)", bytes: [0x22, 0xC0, 0xAF, 0x22], .invalidUTF8, at: 1),
        Rejection("overlong 3-byte (E0 80 80)", bytes: [0x22, 0xE0, 0x80, 0x80, 0x22], .invalidUTF8, at: 1),
        Rejection("UTF-8 encoded surrogate (ED A0 80)", bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], .invalidUTF8, at: 1),
        Rejection("beyond U+10FFFF (F4 90 80 80)", bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], .invalidUTF8, at: 1),
        Rejection("truncated sequence at end", bytes: [0x22, 0xE2, 0x82], .invalidUTF8, at: 1),
        Rejection("truncated sequence before quote", bytes: [0x22, 0xE2, 0x82, 0x22], .invalidUTF8, at: 1),
        Rejection("Latin-1 byte outside a string", bytes: [0xE9], .unexpectedCharacter, at: 0),
        // Numbers
        Rejection("leading zero", "01", .invalidNumber, at: 1),
        Rejection("negative leading zero", "[-01]", .invalidNumber, at: 3),
        Rejection("plus sign", "+1", .unexpectedCharacter, at: 0),
        Rejection("bare minus", "-", .invalidNumber, at: 1),
        Rejection("minus then letter", "-a", .invalidNumber, at: 1),
        Rejection("leading decimal point", ".5", .unexpectedCharacter, at: 0),
        Rejection("trailing decimal point", "1.", .invalidNumber, at: 2),
        Rejection("point then exponent", "1.e5", .invalidNumber, at: 2),
        Rejection("empty exponent", "1e", .invalidNumber, at: 2),
        Rejection("signed empty exponent", "[1e+]", .invalidNumber, at: 4),
        Rejection("hex number", "0x10", .trailingData, at: 1),
        Rejection("Infinity literal", "Infinity", .unexpectedCharacter, at: 0),
        Rejection("overflow 1e309", "[1e309]", .numberOutOfRange, at: 1),
        Rejection("overflow -1.8e308", "{\"a\":-1.8e308}", .numberOutOfRange, at: 5),
        Rejection("overflow long integer", "1" + String(repeating: "0", count: 400), .numberOutOfRange, at: 0),
        // Duplicate keys
        Rejection("duplicate key", "{\"a\":1,\"a\":2}", .duplicateKey, at: 7),
        Rejection("duplicate key via escape", "{\"a\":1,\"\\u0061\":2}", .duplicateKey, at: 7),
        Rejection("duplicate nested key", "[{\"x\":{\"k\":1,\"k\":1}}]", .duplicateKey, at: 13),
        Rejection("duplicate astral key", "{\"😀\":1,\"\\ud83d\\ude00\":2}", .duplicateKey, at: 10),
        // Limits
        Rejection("nesting beyond the default 512", String(repeating: "[", count: 513), .nestingTooDeep, at: 512),
        Rejection(
            "nesting beyond a custom limit", "[[{\"a\":[]}]]", .nestingTooDeep, at: 7,
            limits: ParseLimits(maxDepth: 3)),
        Rejection(
            "input larger than the limit", "[1, 2, 3]", .inputTooLarge, at: 4, limits: ParseLimits(maxInputBytes: 4)),
    ]

    @Test("rejects malformed input with the right code and byte offset", arguments: rejections)
    func rejects(_ r: Rejection) {
        #expect {
            _ = try CanonicalJSON.parse(r.input, limits: r.limits)
        } throws: { error in
            guard let error = error as? CanonicalJSONError else { return false }
            #expect(error.code == r.code, "\(error)")
            #expect(error.offset == r.offset, "\(error)")
            #expect(!error.description.contains("\n"))
            return error.code == r.code && error.offset == r.offset
        }
    }

    @Test("the string overload reports the same errors as the byte overload", arguments: rejections.prefix(30))
    func stringOverload(_ r: Rejection) throws {
        let text = String(decoding: r.input, as: UTF8.self)
        guard Array(text.utf8) == r.input else { return }  // not valid UTF-8: no String form
        #expect(throws: CanonicalJSONError(r.code, "", offset: r.offset)) {
            _ = try CanonicalJSON.parse(text, limits: r.limits)
        }
    }

    @Test("accepts nesting exactly at the limit")
    func nestingAtLimit() throws {
        let text = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        let value = try CanonicalJSON.parse(text)
        #expect(CanonicalJSON.serialize(value) == text)
        let custom = ParseLimits(maxDepth: 3)
        #expect(try CanonicalJSON.parse("[[{\"a\":1}]]", limits: custom) == [[["a": 1]]])
    }

    @Test("accepts input exactly at the size limit")
    func sizeAtLimit() throws {
        #expect(try CanonicalJSON.parse("[1]", limits: ParseLimits(maxInputBytes: 3)) == [1])
    }

    @Test("error messages name the problem and the offset on one line")
    func messages() {
        do {
            _ = try CanonicalJSON.parse("{\"a\":1,\"a\":2}")
            Issue.record("expected a duplicate-key error")
        } catch {
            #expect(error.description == "duplicateKey at byte 7: duplicate member name in an object")
        }
    }

    @Test("parses every JSON type, escapes and whitespace")
    func accepts() throws {
        let text =
            " {\"s\":\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\", \"n\":[0,-0,1.5e3,-2E-2,0e-400],\r\n\"t\":true,\"f\":false,\"z\":null,\"o\":{}} "
        let value = try CanonicalJSON.parse(text)
        #expect(value["s"] == .string("a\"\\/\u{8}\u{C}\n\r\té😀"))
        #expect(value["n"] == [0, 0, 1500, -0.02, 0])
        #expect(value["t"] == true)
        #expect(value["f"] == false)
        #expect(value["z"] == .null)
        #expect(value["o"] == .object([:]))
    }

    @Test("D18: numbers that would silently change are refused; canonical forms of large doubles parse")
    func imprecise() throws {
        for text in [
            "9007199254740993", "-9007199254740993", "18446744073709551617", "1e-400", "-1e-400", "0.1e-330",
            "123456789012345678901234567890",
        ] {
            do {
                _ = try CanonicalJSON.parse(text)
                Issue.record("\(text) was accepted")
            } catch {
                #expect(error.code == .numberOutOfRange, "\(text)")
            }
        }
        #expect(try CanonicalJSON.parse("9007199254740992") == .number(9_007_199_254_740_992))
        #expect(try CanonicalJSON.parse("18446744073709551616") == .number(18_446_744_073_709_551_616))
        #expect(try CanonicalJSON.parse("18446744073709552000") == .number(18_446_744_073_709_551_616))
        #expect(try CanonicalJSON.parse("9.007199254740993e15") == .number(9_007_199_254_740_992))
        #expect(try CanonicalJSON.parse("0e-400") == .number(0))
        #expect(try CanonicalJSON.parse("1e22") == .number(1e22))
        #expect(try CanonicalJSON.parse("10000000000000000000000") == .number(1e22))
    }

    @Test("D9: memory is bounded by the number of values, whatever the shape")
    func valueLimit() throws {
        let limits = ParseLimits(maxValues: 10)
        #expect(try CanonicalJSON.parse("[1,2,3,4,5,6,7,8,9]", limits: limits) != .null)
        do {
            _ = try CanonicalJSON.parse("[{},{},{},{},{},{},{},{},{},{}]", limits: limits)
            Issue.record("eleven values were accepted")
        } catch {
            #expect(error.code == .tooManyValues && error.offset == 28)
        }
        #expect(ParseLimits.default.maxValues == 1 << 20)
    }

    @Test("large integers take the correctly rounded double")
    func integers() throws {
        #expect(try CanonicalJSON.parse("9007199254740994") == .number(9_007_199_254_740_994))
        #expect(try CanonicalJSON.parse("123456789012345") == .number(123_456_789_012_345))
        #expect(try CanonicalJSON.parse("-0").numberValue?.sign == .minus)
        #expect(try CanonicalJSON.parse("1.7976931348623157e308") == .number(.greatestFiniteMagnitude))
        #expect(try CanonicalJSON.parse("5e-324") == .number(.leastNonzeroMagnitude))
    }

    @Test("keys that Swift's == treats as equal are distinct members")
    func equivalentKeys() throws {
        let value = try CanonicalJSON.parse("{\"\u{E9}\":1,\"e\u{301}\":2}")
        let object = try #require(value.objectValue)
        #expect(object.count == 2)
        #expect(object["\u{E9}"] == 1)
        #expect(object["e\u{301}"] == 2)
    }

    @Test("a raw U+FEFF inside a string is kept (unlike Foundation)")
    func bomInsideString() throws {
        let value = try CanonicalJSON.parse("[\"\u{FEFF}\"]")
        #expect(value == [.string("\u{FEFF}")])
        #expect(value.arrayValue?.first?.stringValue?.unicodeScalars.count == 1)
    }

    @Test("non-contiguous collections parse like arrays")
    func nonContiguous() throws {
        let bytes = Array("{\"b\":[1,2],\"a\":\"x\"}".utf8)
        let viaArray = try CanonicalJSON.parse(bytes)
        let viaLazy = try CanonicalJSON.parse(bytes.lazy.map { $0 })
        #expect(viaArray == viaLazy)
    }
}
