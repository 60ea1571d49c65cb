/// Turns any `Encodable` value into a ``JSONValue`` (and so into its canonical form), without Foundation.
///
/// Keyed containers become objects, unkeyed containers arrays, single values scalars. Nested values that
/// conform to ``Signable`` are encoded as their ``Signable/signableJSON`` (the top-level value always uses its
/// `Encodable` implementation), so a type can define its signed form once and be embedded anywhere.
///
/// Foundation types keep their own `Encodable` behaviour: `Date` encodes as a number of seconds since 2001,
/// `Data` as an array of byte values, and `UUID` as an **uppercase** string. E3DB signs lowercase UUIDs, so give
/// such fields a ``Signable`` wrapper (the documents layer provides one) or encode them as lowercase strings.
public struct JSONValueEncoder: Sendable {
    /// Values made available to `encode(to:)` implementations through `Encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable]

    /// An encoder with empty `userInfo`.
    public init() { userInfo = [:] }

    /// Encodes `value` into the JSON value model.
    /// - Parameter value: the value.
    /// - Returns: its JSON value; an object key encoded twice keeps the last value.
    /// - Throws: ``CanonicalJSONError`` `unrepresentableValue` for a non-finite floating-point value or an
    ///   integer that no double represents exactly (beyond ±2^53 and not a multiple of a power of two that fits);
    ///   otherwise whatever the value's `encode(to:)` throws.
    public func encode(_ value: some Encodable) throws -> JSONValue {
        var info: [CodingUserInfoKey: Any] = [:]
        for (k, v) in userInfo { info[k] = v }
        let encoder = NodeEncoder(codingPath: [], userInfo: info)
        try value.encode(to: encoder)
        return encoder.node?.resolve() ?? .object(JSONObject())
    }

    /// Encodes `value` and returns its canonical serialization.
    /// - Parameters:
    ///   - value: the value.
    ///   - order: the member order (default ``KeyOrder/utf16``).
    /// - Returns: the canonical UTF-8 bytes.
    /// - Throws: as ``encode(_:)``.
    public func canonicalBytes(_ value: some Encodable, order: KeyOrder = .utf16) throws -> [UInt8] {
        CanonicalJSON.serializedBytes(try encode(value), order: order)
    }
}

// MARK: - Node tree

final class ArrayNode {
    var items: [Node] = []
}

final class ObjectNode {
    var members: [(String, Node)] = []
}

enum Node {
    case value(JSONValue)
    case array(ArrayNode)
    case object(ObjectNode)

    func resolve() -> JSONValue {
        switch self {
        case .value(let v): return v
        case .array(let a): return .array(a.items.map { $0.resolve() })
        case .object(let o): return .object(JSONObject(o.members.map { (key: $0.0, value: $0.1.resolve()) }))
        }
    }
}

struct StringKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}

func unrepresentable(_ what: String, _ path: [any CodingKey]) -> CanonicalJSONError {
    let location = path.isEmpty ? "the top-level value" : path.map(\.stringValue).joined(separator: ".")
    return CanonicalJSONError(.unrepresentableValue, "\(what) at \(location) cannot be represented exactly in JSON")
}

func numberNode(_ value: Double, _ path: [any CodingKey]) throws -> Node {
    guard value.isFinite else { throw unrepresentable("a non-finite number", path) }
    return .value(.number(value))
}

func integerNode<T: BinaryInteger>(_ value: T, _ path: [any CodingKey]) throws -> Node {
    guard let d = Double(exactly: value) else { throw unrepresentable("the integer \(value)", path) }
    return .value(.number(d))
}

func encodeNested<T: Encodable>(_ value: T, path: [any CodingKey], userInfo: [CodingUserInfoKey: Any]) throws -> Node {
    if let json = value as? JSONValue { return .value(json) }
    if let signable = value as? any Signable { return .value(signable.signableJSON) }
    let encoder = NodeEncoder(codingPath: path, userInfo: userInfo)
    try value.encode(to: encoder)
    return encoder.node ?? .object(ObjectNode())
}

final class NodeEncoder: Encoder {
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]
    var node: Node?

    init(codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]) {
        self.codingPath = codingPath
        self.userInfo = userInfo
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let object: ObjectNode
        if case .object(let existing) = node {
            object = existing
        } else {
            object = ObjectNode()
            node = .object(object)
        }
        return KeyedEncodingContainer(
            KeyedNodeContainer<Key>(object: object, codingPath: codingPath, userInfo: userInfo))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: ArrayNode
        if case .array(let existing) = node {
            array = existing
        } else {
            array = ArrayNode()
            node = .array(array)
        }
        return UnkeyedNodeContainer(array: array, codingPath: codingPath, userInfo: userInfo)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleNodeContainer(encoder: self)
    }
}

struct KeyedNodeContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let object: ObjectNode
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    private func put(_ node: Node, _ key: Key) { object.members.append((key.stringValue, node)) }
    private func path(_ key: Key) -> [any CodingKey] { codingPath + [key] }

    mutating func encodeNil(forKey key: Key) throws { put(.value(.null), key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(.value(.bool(value)), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(.value(.string(value)), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(try numberNode(value, path(key)), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(try numberNode(Double(value), path(key)), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(try integerNode(value, path(key)), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        put(try encodeNested(value, path: path(key), userInfo: userInfo), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type,
        forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let nested = ObjectNode()
        put(.object(nested), key)
        return KeyedEncodingContainer(
            KeyedNodeContainer<NestedKey>(object: nested, codingPath: path(key), userInfo: userInfo))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = ArrayNode()
        put(.array(nested), key)
        return UnkeyedNodeContainer(array: nested, codingPath: path(key), userInfo: userInfo)
    }

    mutating func superEncoder() -> any Encoder { makeSuperEncoder(StringKey(stringValue: "super")) }

    mutating func superEncoder(forKey key: Key) -> any Encoder { makeSuperEncoder(key) }

    private func makeSuperEncoder(_ key: any CodingKey) -> any Encoder {
        let encoder = NodeEncoder(codingPath: codingPath + [key], userInfo: userInfo)
        let object = self.object
        let name = key.stringValue
        let index = object.members.count
        object.members.append((name, .object(ObjectNode())))
        // The super encoder's node replaces this placeholder member as soon as it has one.
        return SuperEncoder(inner: encoder) { node in object.members[index] = (name, node) }
    }
}

/// An encoder whose finished node is written back into its parent container.
final class SuperEncoder: Encoder {
    let inner: NodeEncoder
    let attach: (Node) -> Void
    init(inner: NodeEncoder, attach: @escaping (Node) -> Void) {
        self.inner = inner
        self.attach = attach
    }
    var codingPath: [any CodingKey] { inner.codingPath }
    var userInfo: [CodingUserInfoKey: Any] { inner.userInfo }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let c = inner.container(keyedBy: type)
        if let node = inner.node { attach(node) }
        return c
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let c = inner.unkeyedContainer()
        if let node = inner.node { attach(node) }
        return c
    }
    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleNodeContainer(encoder: inner) { [attach] node in attach(node) }
    }
}

struct UnkeyedNodeContainer: UnkeyedEncodingContainer {
    let array: ArrayNode
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]
    var count: Int { array.items.count }

    private func put(_ node: Node) { array.items.append(node) }
    private var nextPath: [any CodingKey] { codingPath + [StringKey(intValue: array.items.count)] }

    mutating func encodeNil() throws { put(.value(.null)) }
    mutating func encode(_ value: Bool) throws { put(.value(.bool(value))) }
    mutating func encode(_ value: String) throws { put(.value(.string(value))) }
    mutating func encode(_ value: Double) throws { put(try numberNode(value, nextPath)) }
    mutating func encode(_ value: Float) throws { put(try numberNode(Double(value), nextPath)) }
    mutating func encode(_ value: Int) throws { put(try integerNode(value, nextPath)) }
    mutating func encode(_ value: Int8) throws { put(try integerNode(value, nextPath)) }
    mutating func encode(_ value: Int16) throws { put(try integerNode(value, nextPath)) }
    mutating func encode(_ value: Int32) throws { put(try integerNode(value, nextPath)) }
    mutating func encode(_ value: Int64) throws { put(try integerNode(value, nextPath)) }
    mutating func encode(_ value: UInt) throws { put(try integerNode(value, nextPath)) }
    mutating func encode(_ value: UInt8) throws { put(try integerNode(value, nextPath)) }
    mutating func encode(_ value: UInt16) throws { put(try integerNode(value, nextPath)) }
    mutating func encode(_ value: UInt32) throws { put(try integerNode(value, nextPath)) }
    mutating func encode(_ value: UInt64) throws { put(try integerNode(value, nextPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        put(try encodeNested(value, path: nextPath, userInfo: userInfo))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<
        NestedKey
    > {
        let nested = ObjectNode()
        let path = nextPath
        put(.object(nested))
        return KeyedEncodingContainer(
            KeyedNodeContainer<NestedKey>(object: nested, codingPath: path, userInfo: userInfo))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = ArrayNode()
        let path = nextPath
        put(.array(nested))
        return UnkeyedNodeContainer(array: nested, codingPath: path, userInfo: userInfo)
    }

    mutating func superEncoder() -> any Encoder {
        let encoder = NodeEncoder(codingPath: nextPath, userInfo: userInfo)
        let array = self.array
        let index = array.items.count
        array.items.append(.object(ObjectNode()))
        return SuperEncoder(inner: encoder) { node in array.items[index] = node }
    }
}

struct SingleNodeContainer: SingleValueEncodingContainer {
    let encoder: NodeEncoder
    var attach: ((Node) -> Void)? = nil
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func set(_ node: Node) {
        encoder.node = node
        attach?(node)
    }

    mutating func encodeNil() throws { set(.value(.null)) }
    mutating func encode(_ value: Bool) throws { set(.value(.bool(value))) }
    mutating func encode(_ value: String) throws { set(.value(.string(value))) }
    mutating func encode(_ value: Double) throws { set(try numberNode(value, codingPath)) }
    mutating func encode(_ value: Float) throws { set(try numberNode(Double(value), codingPath)) }
    mutating func encode(_ value: Int) throws { set(try integerNode(value, codingPath)) }
    mutating func encode(_ value: Int8) throws { set(try integerNode(value, codingPath)) }
    mutating func encode(_ value: Int16) throws { set(try integerNode(value, codingPath)) }
    mutating func encode(_ value: Int32) throws { set(try integerNode(value, codingPath)) }
    mutating func encode(_ value: Int64) throws { set(try integerNode(value, codingPath)) }
    mutating func encode(_ value: UInt) throws { set(try integerNode(value, codingPath)) }
    mutating func encode(_ value: UInt8) throws { set(try integerNode(value, codingPath)) }
    mutating func encode(_ value: UInt16) throws { set(try integerNode(value, codingPath)) }
    mutating func encode(_ value: UInt32) throws { set(try integerNode(value, codingPath)) }
    mutating func encode(_ value: UInt64) throws { set(try integerNode(value, codingPath)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        set(try encodeNested(value, path: codingPath, userInfo: encoder.userInfo))
    }
}
