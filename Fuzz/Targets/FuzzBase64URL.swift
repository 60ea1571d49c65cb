// Fuzz target FuzzBase64URL: the strict and lenient base64url decoders of E3DBPrimitives.
//
// Invariants: whatever the strict decoder accepts, the lenient decoder accepts with the same bytes
// (strict ⊂ lenient); strict decode -> encode gives back the input text exactly (the strict form is canonical);
// lenient output re-encodes to a text that the strict decoder accepts and that decodes to the same bytes.
// Errors must be typed E3DBError values (the decoders throw only those), never a crash.
import E3DBPrimitives

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzBase64URL invariant violated: \(message())") }
}

func fuzzBase64URL(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = unsafe String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let strict = try? Base64URL.decode(text)
    let lenient = try? Base64URL.decodeLenient(text)
    if let strict {
        require(lenient != nil, "strict accepted but lenient rejected")
        require(lenient == strict, "strict and lenient decoded different bytes")
        require(Base64URL.encode(strict) == text, "strict decode -> encode does not round-trip")
    }
    if let lenient {
        let canonical = Base64URL.encode(lenient)
        require((try? Base64URL.decode(canonical)) == lenient, "re-encoded lenient output does not strict-decode")
    }
    return 0
}
