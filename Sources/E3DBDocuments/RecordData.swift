public import E3DBCanonicalJSON
public import E3DBPrimitives

/// The plaintext (or encrypted) `data` or `plain` map of a record: string keys to string values, in
/// insertion order.
///
/// Keys are distinct by their code units, as in Java and JavaScript. A Swift `[String: String]` cannot hold
/// `"é"` (U+00E9) and `"e\u{301}"` together, because Swift `String ==` uses canonical equivalence, so records
/// from other SDKs holding both would silently lose a member; `RecordData` keeps both.
public struct RecordData: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    /// One member.
    public typealias Member = (key: String, value: String)

    private var storage: [Member]
    private var index: [CodeUnitKey: Int]

    /// A dictionary key that compares and hashes a string by its UTF-8 code units (not by canonical equivalence).
    struct CodeUnitKey: Hashable {
        let string: String
        init(_ string: String) { self.string = string }
        static func == (a: CodeUnitKey, b: CodeUnitKey) -> Bool { a.string.utf8.elementsEqual(b.string.utf8) }
        func hash(into hasher: inout Hasher) {
            var s = string
            s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// An empty map.
    public init() {
        storage = []
        index = [:]
    }

    /// An empty map with room for `capacity` members.
    init(capacity: Int) {
        storage = []
        storage.reserveCapacity(capacity)
        index = Dictionary(minimumCapacity: capacity)
    }

    /// A map from members in order.
    /// - Parameter members: key-value pairs; keys must be distinct by code units.
    /// - Throws: `E3DBError` `.invalidDocument` naming the first repeated key.
    public init(_ members: some Sequence<(String, String)>) throws(E3DBError) {
        self.init()
        for (key, value) in members {
            guard insert(key: key, value: value) else {
                throw E3DBError(.invalidDocument, "the key \"\(key)\" appears twice", context: .init(field: key))
            }
        }
    }

    /// A map from a Swift dictionary, in UTF-16 key order.
    ///
    /// - Note: a Swift dictionary has already merged canonically equivalent keys (`"é"` and `"e\u{301}"`);
    ///   use ``init(_:)`` with pairs to keep such keys distinct.
    public init(_ dictionary: [String: String]) {
        self.init()
        for (key, value) in dictionary.sorted(by: { CanonicalJSON.keyPrecedes($0.key, $1.key) }) {
            insert(key: key, value: value)
        }
    }

    /// A map from a literal. A repeated key keeps its first position and takes the last value.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }

    @discardableResult
    mutating func insert(key: String, value: String) -> Bool {
        let k = CodeUnitKey(key)
        if index[k] != nil { return false }
        index[k] = storage.count
        storage.append((key: key, value: value))
        return true
    }

    /// The members in insertion order.
    public var members: [Member] { storage }
    /// The keys in insertion order.
    public var keys: [String] { storage.map(\.key) }
    /// The number of members.
    public var count: Int { storage.count }
    /// True without members.
    public var isEmpty: Bool { storage.isEmpty }

    /// The value for `key` (matched by code units). Setting nil removes the member; setting a new key appends.
    public subscript(key: String) -> String? {
        get { index[CodeUnitKey(key)].map { storage[$0].value } }
        set {
            let k = CodeUnitKey(key)
            if let newValue {
                if let i = index[k] { storage[i].value = newValue } else { insert(key: key, value: newValue) }
            } else if let i = index.removeValue(forKey: k) {
                storage.remove(at: i)
                for j in i..<storage.count { index[CodeUnitKey(storage[j].key)] = j }
            }
        }
    }

    /// Iterates members in insertion order.
    public func makeIterator() -> IndexingIterator<[Member]> { storage.makeIterator() }

    /// Builds a map from a JSON object whose values are all strings.
    /// - Parameters:
    ///   - value: the JSON value.
    ///   - what: the member name used in errors (`data`, `plain`).
    /// - Throws: `E3DBError` `.invalidDocument` when `value` is not an object (field `what`) or a value is not a
    ///   string (field = that key).
    public init(jsonValue value: JSONValue, what: String = "data") throws(E3DBError) {
        guard case .object(let object) = value else {
            throw E3DBError(.invalidDocument, "\"\(what)\" is not a JSON object", context: .init(field: what))
        }
        self.init()
        for member in object {
            guard case .string(let s) = member.value else {
                throw E3DBError(
                    .invalidDocument, "the value of \"\(member.key)\" in \"\(what)\" is not a string",
                    context: .init(field: member.key))
            }
            insert(key: member.key, value: s)
        }
    }
}

extension RecordData: Hashable {
    /// Order-independent equality; keys and values compare by code units.
    public static func == (a: RecordData, b: RecordData) -> Bool {
        guard a.count == b.count else { return false }
        for (key, value) in a.storage {
            guard let other = b[key], other.utf8.elementsEqual(value.utf8) else { return false }
        }
        return true
    }

    /// Hashes the member count and an order-independent combination of the members.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        var sum = 0
        for (key, value) in storage {
            var h = Hasher()
            h.combine(Array(key.utf8))
            h.combine(Array(value.utf8))
            sum = sum &+ h.finalize()
        }
        hasher.combine(sum)
    }
}

extension RecordData: Signable {
    /// The map as a JSON object (canonical serialization sorts it).
    public var signableJSON: JSONValue {
        .object(JSONObject(storage.lazy.map { (key: $0.key, value: JSONValue.string($0.value)) }))
    }
}

extension RecordData: CustomStringConvertible {
    /// The canonical JSON of the map. Do not log decrypted data.
    public var description: String { canonicalString() }
}
