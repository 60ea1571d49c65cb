/// The plaintext (or encrypted) `data` or `plain` map of a record: string keys to string values, in
/// insertion order. It is also the type of the maps of the API's record bodies (E3DBAPI's `API.Record.data` and
/// `API.Meta.plain`), so a record travels from the client's fields to the wire and back without a copy into a
/// Swift dictionary.
///
/// Keys are distinct by their code units, as in Java and JavaScript. A Swift `[String: String]` cannot hold
/// `"é"` (U+00E9) and `"e\u{301}"` together, because Swift `String ==` uses canonical equivalence, so records
/// from other SDKs holding both would silently lose a member; `RecordData` keeps both. (E3DBDocuments adds the
/// initializers that refuse a repeated key or a value that is not a string with an `E3DBError`.)
public struct RecordData: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    /// One member.
    public typealias Member = (key: String, value: String)

    /// The members as a JSON object (the project's ordered JSON model) whose values are all strings; every
    /// initializer and mutation keeps that invariant.
    public private(set) var jsonObject: JSONObject

    /// An empty map.
    public init() { jsonObject = JSONObject() }

    /// An empty map with room for `capacity` members.
    package init(capacity: Int) { jsonObject = JSONObject(minimumCapacity: capacity) }

    /// A map of `object`, whose values the caller has checked are all strings.
    package init(checkedObject object: JSONObject) { jsonObject = object }

    /// A map from a Swift dictionary, in UTF-16 key order.
    ///
    /// - Note: a Swift dictionary has already merged canonically equivalent keys (`"é"` and `"e\u{301}"`);
    ///   use `init(_:)` with pairs (E3DBDocuments) to keep such keys distinct.
    public init(_ dictionary: [String: String]) {
        self.init(capacity: dictionary.count)
        for (key, value) in dictionary.sorted(by: { CanonicalJSON.keyPrecedes($0.key, $1.key) }) {
            insert(key: key, value: value)
        }
    }

    /// A map from a literal. A repeated key keeps its first position and takes the last value.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }

    /// Appends a member unless its key (by code units) is present.
    /// - Returns: false when the key was present; the map is unchanged.
    @discardableResult
    package mutating func insert(key: String, value: String) -> Bool {
        jsonObject.insertIfAbsent(key: key, value: .string(value))
    }

    /// The members in insertion order.
    public var members: [Member] { Array(self) }
    /// The keys in insertion order.
    public var keys: [String] { jsonObject.keys }
    /// The number of members.
    public var count: Int { jsonObject.count }
    /// True without members.
    public var isEmpty: Bool { jsonObject.isEmpty }

    /// The value for `key` (matched by code units). Setting nil removes the member; setting a new key appends.
    public subscript(key: String) -> String? {
        get {
            if case .string(let s)? = jsonObject[key] { return s }
            return nil
        }
        set { jsonObject[key] = newValue.map { .string($0) } }
    }

    /// Iterates members in insertion order.
    public struct Iterator: IteratorProtocol {
        var base: IndexingIterator<[JSONObject.Member]>

        /// The next member.
        public mutating func next() -> Member? {
            while let member = base.next() {
                // Every value is a string by construction; anything else would be skipped, never invented.
                if case .string(let s) = member.value { return (key: member.key, value: s) }
            }
            return nil
        }
    }

    /// Iterates members in insertion order.
    public func makeIterator() -> Iterator { Iterator(base: jsonObject.makeIterator()) }
}

extension RecordData: Hashable {
    /// Order-independent equality; keys and values compare by code units.
    public static func == (a: RecordData, b: RecordData) -> Bool { a.jsonObject == b.jsonObject }

    /// Hashes consistently with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) { hasher.combine(jsonObject) }
}

extension RecordData: Signable {
    /// The map as a JSON object (canonical serialization sorts it).
    public var signableJSON: JSONValue { .object(jsonObject) }
}

extension RecordData: CustomStringConvertible {
    /// The canonical JSON of the map. Do not log decrypted data.
    public var description: String { canonicalString() }
}

extension RecordData: Codable {
    /// Encodes the members in order, as an object of strings.
    /// - Parameter encoder: the encoder.
    /// - Throws: whatever the encoder throws.
    public func encode(to encoder: any Encoder) throws { try jsonObject.encode(to: encoder) }

    /// Decodes an object of strings (through `JSONObject`, so the decoder's own key handling applies).
    /// - Parameter decoder: the decoder.
    /// - Throws: `DecodingError.typeMismatch` when a value is not a string.
    public init(from decoder: any Decoder) throws {
        let object = try JSONObject(from: decoder)
        for member in object {
            guard case .string = member.value else {
                throw DecodingError.typeMismatch(
                    String.self,
                    .init(codingPath: decoder.codingPath, debugDescription: "a record map's values are strings"))
            }
        }
        self.init(checkedObject: object)
    }
}
