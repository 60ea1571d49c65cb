// Fuzz target FuzzCanonicalJSON: the strict parser and the canonical serializer of E3DBCanonicalJSON.
//
// For every input: parse it (bounded limits). Parse errors must carry an offset inside the input. When it parses,
// for both key orders: serialize, re-parse (must succeed and give an equal value), serialize again (must give the
// same bytes: idempotence), and the output must be recognised as canonical. The two orders must agree on
// everything but member order (same value after re-parsing). Any violation traps, which libFuzzer reports.
import E3DBCanonicalJSON

private let limits = ParseLimits(maxDepth: 256, maxInputBytes: 1 << 20)

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzCanonicalJSON invariant violated: \(message())") }
}

func fuzzCanonicalJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = unsafe UnsafeBufferPointer(start: data, count: size)
    let value: JSONValue
    do {
        value = try unsafe CanonicalJSON.parse(input, limits: limits)
    } catch {
        if let offset = error.offset { require(offset >= 0 && offset <= size, "offset \(offset) outside 0...\(size)") }
        return 0
    }
    var reparsedValues: [JSONValue] = []
    for order in [KeyOrder.utf16, .javaScript] {
        let once = CanonicalJSON.serializedBytes(value, order: order)
        let reparsed: JSONValue
        do {
            reparsed = try CanonicalJSON.parse(once, limits: ParseLimits(maxDepth: 256, maxInputBytes: .max))
        } catch {
            fatalError("FuzzCanonicalJSON: canonical output does not parse: \(error)")
        }
        require(reparsed == value, "re-parsed value differs (\(order))")
        let twice = CanonicalJSON.serializedBytes(reparsed, order: order)
        require(once == twice, "serialization is not idempotent (\(order))")
        require(String(decoding: once, as: UTF8.self).utf8.elementsEqual(once), "output is not valid UTF-8")
        reparsedValues.append(reparsed)
    }
    require(reparsedValues[0] == reparsedValues[1], "the two key orders disagree on the value")
    return 0
}
