/// A value with an E3DB canonical ("Signable") form: the JSON whose canonical serialization gets signed.
///
/// Conformances ship for `String`, `Bool`, the standard integer and floating-point types, `Optional` (`nil` is
/// `null`), `Array`, `[String: V]` dictionaries, ``JSONValue`` and ``JSONObject``. `[String: any Signable]` and
/// `[any Signable]` get the same API through extensions (an existential cannot satisfy a conditional
/// conformance). `UUID` lives in Foundation, so its conformance (lowercase string) is provided by the documents
/// layer, not here. Any `Encodable` value can be canonicalized with ``JSONValueEncoder``.
///
/// Numbers are doubles: integers beyond ±2^53 are rounded to the nearest double, as in JavaScript. Swift
/// dictionaries merge canonically equivalent keys (`"é"` and `"e\u{301}"`); use ``JSONObject`` to keep them apart.
public protocol Signable {
    /// The JSON value whose canonical serialization is this value's signed form.
    var signableJSON: JSONValue { get }
}

extension Signable {
    /// The canonical serialization of ``signableJSON``.
    /// - Parameter order: the member order (default ``KeyOrder/utf16``).
    /// - Returns: the canonical JSON text.
    public func canonicalString(order: KeyOrder = .utf16) -> String {
        CanonicalJSON.serialize(signableJSON, order: order)
    }

    /// The UTF-8 bytes of the canonical serialization: exactly what an E3DB signature covers.
    /// - Parameter order: the member order (default ``KeyOrder/utf16``).
    /// - Returns: the canonical bytes.
    public func canonicalBytes(order: KeyOrder = .utf16) -> [UInt8] {
        CanonicalJSON.serializedBytes(signableJSON, order: order)
    }
}

extension JSONValue: Signable {
    /// The value itself.
    public var signableJSON: JSONValue { self }
}

extension JSONObject: Signable {
    /// `.object(self)`.
    public var signableJSON: JSONValue { .object(self) }
}

extension String: Signable {
    /// `.string(self)`.
    public var signableJSON: JSONValue { .string(self) }
}

extension Substring: Signable {
    /// `.string(String(self))`.
    public var signableJSON: JSONValue { .string(String(self)) }
}

extension Bool: Signable {
    /// `.bool(self)`.
    public var signableJSON: JSONValue { .bool(self) }
}

extension Double: Signable {
    /// `.number(self)`. NaN and infinities serialize as `null`.
    public var signableJSON: JSONValue { .number(self) }
}

extension Float: Signable {
    /// `.number(Double(self))`: the exact value of the float, written with the shortest digits of that double
    /// (so `Float(0.1)` is `0.10000000149011612`, as JavaScript would print it).
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension Int: Signable {
    /// `.number(Double(self))` (exact up to ±2^53).
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension Int8: Signable {
    /// `.number(Double(self))`.
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension Int16: Signable {
    /// `.number(Double(self))`.
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension Int32: Signable {
    /// `.number(Double(self))`.
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension Int64: Signable {
    /// `.number(Double(self))` (exact up to ±2^53).
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension UInt: Signable {
    /// `.number(Double(self))` (exact up to 2^53).
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension UInt8: Signable {
    /// `.number(Double(self))`.
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension UInt16: Signable {
    /// `.number(Double(self))`.
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension UInt32: Signable {
    /// `.number(Double(self))`.
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension UInt64: Signable {
    /// `.number(Double(self))` (exact up to 2^53).
    public var signableJSON: JSONValue { .number(Double(self)) }
}

extension Optional: Signable where Wrapped: Signable {
    /// `null` for `nil`, else the wrapped value's form.
    public var signableJSON: JSONValue {
        switch self {
        case .none: return .null
        case .some(let wrapped): return wrapped.signableJSON
        }
    }
}

extension Array: Signable where Element: Signable {
    /// An array of the elements' forms.
    public var signableJSON: JSONValue { .array(map(\.signableJSON)) }
}

extension Dictionary: Signable where Key == String, Value: Signable {
    /// An object of the values' forms (members are sorted when serialized).
    public var signableJSON: JSONValue {
        var object = JSONObject()
        for (key, value) in self { object.appendUnchecked(key: key, value: value.signableJSON) }
        return .object(object)
    }
}

extension Dictionary where Key == String, Value == any Signable {
    /// An object of the values' forms, for heterogeneous dictionaries.
    public var signableJSON: JSONValue {
        var object = JSONObject()
        for (key, value) in self { object.appendUnchecked(key: key, value: value.signableJSON) }
        return .object(object)
    }

    /// The canonical serialization of ``signableJSON``.
    /// - Parameter order: the member order (default ``KeyOrder/utf16``).
    /// - Returns: the canonical JSON text.
    public func canonicalString(order: KeyOrder = .utf16) -> String {
        CanonicalJSON.serialize(signableJSON, order: order)
    }

    /// The UTF-8 bytes of the canonical serialization.
    /// - Parameter order: the member order (default ``KeyOrder/utf16``).
    /// - Returns: the canonical bytes.
    public func canonicalBytes(order: KeyOrder = .utf16) -> [UInt8] {
        CanonicalJSON.serializedBytes(signableJSON, order: order)
    }
}

extension Array where Element == any Signable {
    /// An array of the elements' forms, for heterogeneous arrays.
    public var signableJSON: JSONValue { .array(map(\.signableJSON)) }

    /// The canonical serialization of ``signableJSON``.
    /// - Parameter order: the member order (default ``KeyOrder/utf16``).
    /// - Returns: the canonical JSON text.
    public func canonicalString(order: KeyOrder = .utf16) -> String {
        CanonicalJSON.serialize(signableJSON, order: order)
    }

    /// The UTF-8 bytes of the canonical serialization.
    /// - Parameter order: the member order (default ``KeyOrder/utf16``).
    /// - Returns: the canonical bytes.
    public func canonicalBytes(order: KeyOrder = .utf16) -> [UInt8] {
        CanonicalJSON.serializedBytes(signableJSON, order: order)
    }
}
