import E3DBCanonicalJSON
import PropertyBased
import Testing

/// Builds a JSON value from a list of words, so that PropertyBased can generate and shrink values through an
/// ordinary `[UInt64]` generator.
enum JSONBuilder {
    static let keys: [String] = [
        "", "a", "b", "A", "Z", "0", "9", "10", "01", "4294967294", "4294967295", "-1", "\u{E9}", "e\u{301}",
        "😀", "～", "\u{E000}", "\u{FFFF}", "\u{10FFFF}", "\"", "\\", "\u{0}", "\u{1F}", "\u{7F}", "\u{2028}",
        "\u{FEFF}", "key", "key2",
    ]

    static func build(_ words: [UInt64]) -> JSONValue {
        var iterator = words.makeIterator()
        return value(&iterator, depth: 0)
    }

    static func scalarString(_ w: UInt64) -> String {
        var s = String.UnicodeScalarView()
        var x = w
        for _ in 0..<Int(w % 7) {
            let pick = x % 4
            x = x >> 2 &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let raw: UInt32
            switch pick {
            case 0: raw = UInt32(x % 0x80)
            case 1: raw = UInt32(x % 0x800)
            case 2: raw = UInt32(x % 0x10000)
            default: raw = UInt32(0x10000 + x % 0x100000)
            }
            s.append(Unicode.Scalar(raw) ?? "?")
        }
        return String(s)
    }

    static func value(_ it: inout IndexingIterator<[UInt64]>, depth: Int) -> JSONValue {
        guard let w = it.next() else { return .null }
        switch w % 9 {
        case 0: return .null
        case 1: return .bool(w & 8 != 0)
        case 2:
            let d = Double(bitPattern: w)
            return .number(d.isFinite ? d : Double(w >> 11))
        case 3: return .number(Double(Int64(truncatingIfNeeded: w) >> 20))
        case 4: return .string(keys[Int((w >> 4) % UInt64(keys.count))])
        case 5: return .string(scalarString(w >> 4))
        case 6 where depth < 6:
            return .array((0..<Int((w >> 4) % 5)).map { _ in value(&it, depth: depth + 1) })
        case 7, 8:
            guard depth < 6 else { return .string(scalarString(w)) }
            var object = JSONObject()
            for i in 0..<Int((w >> 4) % 7) {
                let key =
                    (w >> (8 + i)) & 1 == 0 ? keys[Int((w >> (12 + i)) % UInt64(keys.count))] : scalarString(w >> i)
                object[key] = value(&it, depth: depth + 1)
            }
            return .object(object)
        default: return .number(Double(w % 1000) / 8)
        }
    }

    /// The same value with every object's members inserted in a different order.
    static func permuted(_ value: JSONValue, seed: UInt64) -> JSONValue {
        switch value {
        case .array(let items): return .array(items.map { permuted($0, seed: seed) })
        case .object(let object):
            var members = object.members
            if !members.isEmpty {
                let r = Int(seed % UInt64(members.count))
                members = Array(members[r...] + members[..<r])
                if seed & 1 == 1 { members.reverse() }
            }
            return .object(JSONObject(members.map { (key: $0.key, value: permuted($0.value, seed: seed &+ 1)) }))
        default: return value
        }
    }
}

@Suite("Canonical JSON properties")
struct PropertyTests {
    static let words = Gen<UInt64>.value(in: UInt64.min...UInt64.max).array(of: 0...80)

    @Test("parse(serialize(v)) == v, in both key orders")
    func roundTrip() async {
        await propertyCheck(count: 300, input: Self.words) { words throws in
            let value = JSONBuilder.build(words)
            for order in KeyOrder.allCases {
                let text = CanonicalJSON.serializedBytes(value, order: order)
                #expect(try CanonicalJSON.parse(text) == value)
            }
        }
    }

    @Test("serializing is idempotent: the output is canonical")
    func idempotent() async {
        await propertyCheck(count: 300, input: Self.words) { words throws in
            let value = JSONBuilder.build(words)
            for order in KeyOrder.allCases {
                let once = CanonicalJSON.serializedBytes(value, order: order)
                let twice = CanonicalJSON.serializedBytes(try CanonicalJSON.parse(once), order: order)
                #expect(once == twice)
                #expect(try CanonicalJSON.isCanonical(once, order: order))
            }
        }
    }

    @Test("member order never depends on insertion order, except in JavaScript insertion order")
    func insertionOrder() async {
        await propertyCheck(count: 300, input: Self.words, Gen<UInt64>.value(in: 0...UInt64.max)) {
            words, seed throws in
            let value = JSONBuilder.build(words)
            let shuffled = JSONBuilder.permuted(value, seed: seed)
            #expect(shuffled == value)
            for order in KeyOrder.allCases where order != .javaScriptInsertion {
                #expect(
                    CanonicalJSON.serializedBytes(shuffled, order: order)
                        == CanonicalJSON.serializedBytes(value, order: order))
            }
        }
    }

    @Test("JavaScript insertion order: array indices first in numeric order, then the others as inserted")
    func javaScriptInsertionOrder() throws {
        let object = JSONObject([
            (key: "z", value: .string("1")), (key: "10", value: .string("2")), (key: "a", value: .string("3")),
            (key: "9", value: .string("4")), (key: "01", value: .string("5")), (key: "4294967295", value: .string("6")),
            (key: "4294967294", value: .string("7")),
        ])
        let text = String(
            decoding: CanonicalJSON.serializedBytes(.object(object), order: .javaScriptInsertion), as: UTF8.self)
        #expect(text == #"{"9":"4","10":"2","4294967294":"7","z":"1","a":"3","01":"5","4294967295":"6"}"#)
        #expect(try CanonicalJSON.isCanonical(Array(text.utf8), order: .javaScriptInsertion))
        #expect(try !CanonicalJSON.isCanonical(Array(#"{"a":"1","9":"2"}"#.utf8), order: .javaScriptInsertion))
        #expect(CanonicalJSON.keyPrecedes("9", "a", order: .javaScriptInsertion))
        #expect(!CanonicalJSON.keyPrecedes("b", "a", order: .javaScriptInsertion))
        #expect(!CanonicalJSON.keyPrecedes("a", "b", order: .javaScriptInsertion))
    }

    @Test("sorted keys are in UTF-16 code-unit order")
    func keyOrderMatchesUTF16() async {
        await propertyCheck(
            count: 300, input: Gen<UInt64>.value(in: 0...UInt64.max), Gen<UInt64>.value(in: 0...UInt64.max)
        ) { a, b in
            let x = JSONBuilder.scalarString(a)
            let y = JSONBuilder.scalarString(b)
            #expect(CanonicalJSON.keyPrecedes(x, y) == x.utf16.lexicographicallyPrecedes(y.utf16))
        }
    }

    @Test("every finite double survives format -> parse bit for bit")
    func numbers() async {
        await propertyCheck(count: 2000, input: Gen<UInt64>.value(in: 0...UInt64.max)) { bits throws in
            let d = Double(bitPattern: bits)
            guard d.isFinite, d != 0 else { return }
            let text = CanonicalJSON.formatNumber(d)
            #expect(try CanonicalJSON.parse(text).numberValue?.bitPattern == bits, "\(text)")
        }
    }
}
