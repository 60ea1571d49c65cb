/// A JSON value: the data model the canonical serializer and the strict parser work on.
///
/// Numbers are IEEE 754 doubles, as in ECMAScript and RFC 8785. Strings are compared by their code units
/// (not by Swift's canonical-equivalence `==`), so `.string("é")` and `.string("e\u{301}")` are different values:
/// they serialize to different bytes and therefore sign differently.
public enum JSONValue: Sendable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number. Non-finite values cannot be parsed and serialize as `null` (like ECMAScript `JSON.stringify`).
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object whose member keys are distinct by UTF-16 code units.
    case object(JSONObject)
}

extension JSONValue: Hashable {
    /// Structural equality: strings compare by code units, numbers by IEEE `==` (so `0 == -0`, which also
    /// serialize identically), objects ignore member order.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a.utf8.elementsEqual(b.utf8)
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    /// Hashes consistently with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0 as UInt8)
        case .bool(let b):
            hasher.combine(1 as UInt8)
            hasher.combine(b)
        case .number(let d):
            hasher.combine(2 as UInt8)
            hasher.combine(d == 0 ? 0 : d)
        case .string(let s):
            hasher.combine(3 as UInt8)
            hashCodeUnits(s, into: &hasher)
        case .array(let a):
            hasher.combine(4 as UInt8)
            hasher.combine(a)
        case .object(let o):
            hasher.combine(5 as UInt8)
            hasher.combine(o)
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    /// `null`.
    public init(nilLiteral: ()) { self = .null }
    /// A boolean.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// A number from an integer literal (exact up to ±2^53).
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    /// A number from a floating-point literal.
    public init(floatLiteral value: Double) { self = .number(value) }
    /// A string.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An array.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An object. A repeated key keeps the last value (as `JSONObject.init(_:)` does).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements.map { (key: $0.0, value: $0.1) }))
    }
}

extension JSONValue: CustomStringConvertible {
    /// The canonical serialization (UTF-16 key order).
    public var description: String { CanonicalJSON.serialize(self) }
}

extension JSONValue {
    /// The string, when this is `.string`.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The number, when this is `.number`.
    public var numberValue: Double? {
        if case .number(let d) = self { return d }
        return nil
    }

    /// The boolean, when this is `.bool`.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The elements, when this is `.array`.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The object, when this is `.object`.
    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// True for `.null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The member `key` when this is an object, else nil.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }
}

/// A key compared by its code units (UTF-8 and UTF-16 code-unit equality coincide for valid strings).
///
/// Hashes the UTF-8 code units directly (cheaper than `String`'s normalizing hash, and consistent with the
/// code-unit equality).
package struct CodeUnitKey: Hashable, Sendable {
    package let string: String
    package init(_ string: String) { self.string = string }
    package static func == (lhs: CodeUnitKey, rhs: CodeUnitKey) -> Bool {
        lhs.string.utf8.elementsEqual(rhs.string.utf8)
    }
    package func hash(into hasher: inout Hasher) { hashCodeUnits(string, into: &hasher) }
}

/// Feeds the UTF-8 code units of `string` (and its length) to `hasher`.
func hashCodeUnits(_ string: String, into hasher: inout Hasher) {
    let utf8 = string.utf8
    hasher.combine(utf8.count)
    // Safety: the string's storage is lent for the closure and `combine(bytes:)` only reads its `count` bytes.
    if unsafe utf8.withContiguousStorageIfAvailable({ unsafe hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil
    {
        for byte in utf8 { hasher.combine(byte) }
    }
}

/// A JSON object: members with keys that are distinct by UTF-16 code units.
///
/// Unlike `[String: JSONValue]`, whose keys are merged when Swift's `String ==` finds them canonically
/// equivalent, `JSONObject` keeps `"é"` (U+00E9) and `"e\u{301}"` as two members, as every other E3DB SDK does.
/// Members remember insertion order (iteration order), but equality and hashing ignore order and the canonical
/// serializer sorts members, so insertion order never changes the signed bytes.
public struct JSONObject: Sendable {
    /// One member.
    public typealias Member = (key: String, value: JSONValue)

    private var storage: [Member]
    private var index: [CodeUnitKey: Int]

    /// An empty object.
    public init() {
        storage = []
        index = [:]
    }

    /// An object with `members` in order. When a key repeats, the later value replaces the earlier one and keeps
    /// the earlier position (as ECMAScript property assignment does). Use `CanonicalJSON.parse` to reject
    /// duplicate keys instead.
    public init(_ members: some Sequence<Member>) {
        let expected = members.underestimatedCount
        storage = []
        storage.reserveCapacity(expected)
        index = Dictionary(minimumCapacity: expected)
        for member in members {
            let key = CodeUnitKey(member.key)
            if let existing = index.updateValue(storage.count, forKey: key) {
                index[key] = existing  // a repeated key: keep the first position, take the last value
                storage[existing].value = member.value
            } else {
                storage.append(member)
            }
        }
    }

    /// An object from a Swift dictionary (whose keys are already distinct under `String ==`).
    public init(_ dictionary: [String: JSONValue]) {
        self.init(dictionary.lazy.map { (key: $0.key, value: $0.value) })
    }

    /// Appends a member known not to be present (used by the parser after its duplicate check).
    mutating func appendUnchecked(key: String, value: JSONValue) {
        index[CodeUnitKey(key)] = storage.count
        storage.append((key: key, value: value))
    }

    /// An empty object with room for `capacity` members.
    public init(minimumCapacity capacity: Int) {
        storage = []
        storage.reserveCapacity(capacity)
        index = Dictionary(minimumCapacity: capacity)
    }

    /// Inserts `value` for `key` unless the key is present.
    /// - Returns: false when a member with this key (by code units) already exists; the object is unchanged.
    @discardableResult
    public mutating func insertIfAbsent(key: String, value: JSONValue) -> Bool {
        let k = CodeUnitKey(key)
        if let existing = index.updateValue(storage.count, forKey: k) {
            index[k] = existing
            return false
        }
        storage.append((key: key, value: value))
        return true
    }

    /// The members in insertion order.
    public var members: [Member] { storage }

    /// The keys in insertion order.
    public var keys: [String] { storage.map(\.key) }

    /// The number of members.
    public var count: Int { storage.count }

    /// True when the object has no members.
    public var isEmpty: Bool { storage.isEmpty }

    /// The value for `key`, matched by code units. Setting nil removes the member.
    public subscript(key: String) -> JSONValue? {
        get {
            guard let i = index[CodeUnitKey(key)] else { return nil }
            return storage[i].value
        }
        set {
            let k = CodeUnitKey(key)
            if let newValue {
                if let i = index[k] {
                    storage[i].value = newValue
                } else {
                    index[k] = storage.count
                    storage.append((key: key, value: newValue))
                }
            } else if let i = index.removeValue(forKey: k) {
                storage.remove(at: i)
                for j in i..<storage.count { index[CodeUnitKey(storage[j].key)] = j }
            }
        }
    }
}

extension JSONObject: Sequence {
    /// Iterates members in insertion order.
    public func makeIterator() -> IndexingIterator<[Member]> { storage.makeIterator() }
}

extension JSONObject: Hashable {
    /// Order-independent equality: same key set (by code units) and equal values.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.storage.count == rhs.storage.count else { return false }
        for member in lhs.storage {
            guard let other = rhs[member.key], other == member.value else { return false }
        }
        return true
    }

    /// Order-independent hash.
    public func hash(into hasher: inout Hasher) {
        var combined = 0
        for member in storage {
            var h = Hasher()
            hashCodeUnits(member.key, into: &h)
            h.combine(member.value)
            combined = combined &+ h.finalize()
        }
        hasher.combine(storage.count)
        hasher.combine(combined)
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    /// An object literal. A repeated key keeps the last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements.map { (key: $0.0, value: $0.1) })
    }
}

extension JSONObject: CustomStringConvertible {
    /// The canonical serialization (UTF-16 key order).
    public var description: String { CanonicalJSON.serialize(.object(self)) }
}

extension JSONValue: Encodable {
    /// Encodes the value with any `Encoder` (objects through keyed containers, in insertion order).
    /// - Parameter encoder: the encoder.
    /// - Throws: whatever the encoder throws (for example for non-finite numbers).
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var c = encoder.singleValueContainer()
            try c.encodeNil()
        case .bool(let b):
            var c = encoder.singleValueContainer()
            try c.encode(b)
        case .number(let d):
            var c = encoder.singleValueContainer()
            try c.encode(d)
        case .string(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .array(let items):
            var c = encoder.unkeyedContainer()
            for item in items { try c.encode(item) }
        case .object(let object):
            try object.encode(to: encoder)
        }
    }
}

extension JSONObject: Encodable {
    /// Encodes the members through a keyed container, in insertion order.
    /// - Parameter encoder: the encoder.
    /// - Throws: whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: StringKey.self)
        for member in storage { try c.encode(member.value, forKey: StringKey(stringValue: member.key)) }
    }
}

extension JSONValue: Decodable {
    /// Decodes any JSON value from any `Decoder` (for example a stored `Codable` value read back as JSON). Objects
    /// take their members in the order the decoder lists them; numbers are doubles, as everywhere in this type.
    /// - Parameter decoder: the decoder.
    /// - Throws: whatever the decoder throws for a value that is none of JSON's kinds.
    public init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: StringKey.self) {
            var members: [JSONObject.Member] = []
            for key in keyed.allKeys {
                members.append((key.stringValue, try keyed.decode(JSONValue.self, forKey: key)))
            }
            self = .object(JSONObject(members))
        } else if var unkeyed = try? decoder.unkeyedContainer() {
            var items: [JSONValue] = []
            while !unkeyed.isAtEnd { items.append(try unkeyed.decode(JSONValue.self)) }
            self = .array(items)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .null
            } else if let bool = try? single.decode(Bool.self) {
                self = .bool(bool)
            } else if let number = try? single.decode(Double.self) {
                self = .number(number)
            } else {
                self = .string(try single.decode(String.self))
            }
        }
    }
}

extension JSONObject: Decodable {
    /// Decodes a JSON object from any `Decoder`, as ``JSONValue/init(from:)`` decodes one.
    /// - Parameter decoder: the decoder.
    /// - Throws: `DecodingError.typeMismatch` when the value is not an object; whatever the decoder throws.
    public init(from decoder: any Decoder) throws {
        guard case .object(let object) = try JSONValue(from: decoder) else {
            throw DecodingError.typeMismatch(
                JSONObject.self,
                DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "not an object"))
        }
        self = object
    }
}
