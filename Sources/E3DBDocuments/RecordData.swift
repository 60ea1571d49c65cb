public import E3DBCanonicalJSON
public import E3DBPrimitives

// `RecordData` itself lives in E3DBCanonicalJSON, below E3DBAPI, whose record bodies carry it; these are its
// initializers that refuse bad members with an `E3DBError`.

extension RecordData {
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
        for member in object {
            guard case .string = member.value else {
                throw E3DBError(
                    .invalidDocument, "the value of \"\(member.key)\" in \"\(what)\" is not a string",
                    context: .init(field: member.key))
            }
        }
        self.init(checkedObject: object)
    }
}
