/// ECMAScript Number::toString (ECMA-262 §6.1.6.1.20, RFC 8785 §3.2.2.3) for finite doubles.
///
/// The shortest round-trip digits come from Swift's `Double.description` (shortest, and closest to the exact
/// value among the shortest, like ECMAScript requires); this type only re-places the decimal point and the
/// exponent the ECMAScript way: plain notation for 1e-7 < |x| < 1e21, otherwise `d.ddde+XX` / `de-XX`.
enum ECMAScriptNumber {
    static func append(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite else {
            out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])  // null, as JSON.stringify writes NaN and ±Infinity
            return
        }
        if value == 0 {
            out.append(UInt8(ascii: "0"))  // also -0
            return
        }
        // Fast path: integers up to 2^53 print as plain decimal integers.
        if value.magnitude <= 9_007_199_254_740_992, value == value.rounded(.towardZero) {
            appendInteger(Int64(value), to: &out)
            return
        }
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var description = value.magnitude.description
        description.withUTF8 { text in
            // Safety: `text` and the 40-byte `digits` scratch are lent for their closures only; `format` (see its
            // note) reads and writes inside their counts and appends copies to `out`.
            unsafe withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 40) { digits in
                unsafe format(text, digits: digits, into: &out)
            }
        }
    }

    // Safety: `text` (Swift's own description, borrowed for the call) is read only at `i < text.count`. `digits`
    // is uninitialized scratch of 40 bytes: writes are guarded by `k < digits.count`, and reads touch only the
    // `k` bytes written. `k >= 1` whenever the last branch reads `digits[0]`, because `append` returns early for
    // zero and a non-zero finite double has a non-zero digit; the middle branch's `n` is below `k` there.
    /// Reformats Swift's shortest-digits description (`"1.2345e-07"`, `"0.001"`, `"123.5"`, `"1e+16"`).
    private static func format(
        _ text: UnsafeBufferPointer<UInt8>,
        digits: UnsafeMutableBufferPointer<UInt8>,
        into out: inout [UInt8]
    ) {
        var k = 0  // number of significant digits collected
        var intDigits = 0
        var leadingFractionZeros = 0
        var seenPoint = false
        var exponent = 0
        var exponentNegative = false
        var i = 0
        while i < text.count {
            let c = unsafe text[i]
            if c == UInt8(ascii: ".") {
                seenPoint = true
            } else if c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                i += 1
                if i < text.count, unsafe text[i] == UInt8(ascii: "-") {
                    exponentNegative = true
                    i += 1
                } else if i < text.count, unsafe text[i] == UInt8(ascii: "+") {
                    i += 1
                }
                while i < text.count {
                    exponent = unsafe exponent * 10 + Int(text[i] &- UInt8(ascii: "0"))
                    i += 1
                }
                break
            } else {
                if k == 0 && c == UInt8(ascii: "0") {
                    if seenPoint { leadingFractionZeros += 1 }
                } else if k < digits.count {
                    unsafe digits[k] = c
                    k += 1
                    if !seenPoint { intDigits += 1 }
                }
            }
            i += 1
        }
        if exponentNegative { exponent = -exponent }
        while unsafe k > 1 && digits[k - 1] == UInt8(ascii: "0") { k -= 1 }
        // value = 0.d1d2...dk × 10^n
        let n = (intDigits > 0 ? intDigits : -leadingFractionZeros) + exponent
        if k <= n && n <= 21 {
            unsafe out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[0..<k]))
            for _ in 0..<(n - k) { out.append(UInt8(ascii: "0")) }
        } else if 0 < n && n <= 21 {
            unsafe out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[0..<n]))
            out.append(UInt8(ascii: "."))
            unsafe out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[n..<k]))
        } else if -6 < n && n <= 0 {
            out.append(UInt8(ascii: "0"))
            out.append(UInt8(ascii: "."))
            for _ in 0..<(-n) { out.append(UInt8(ascii: "0")) }
            unsafe out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[0..<k]))
        } else {
            unsafe out.append(digits[0])
            if k > 1 {
                out.append(UInt8(ascii: "."))
                unsafe out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[1..<k]))
            }
            out.append(UInt8(ascii: "e"))
            let e = n - 1
            out.append(e < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
            appendInteger(Int64(e.magnitude), to: &out)
        }
    }

    // Safety: an `Int64` magnitude has at most 19 decimal digits, so `i` stays in `1...20` of the 20-byte scratch,
    // and only the written bytes `i..<20` are copied out.
    static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        var v = value.magnitude
        if value < 0 { out.append(UInt8(ascii: "-")) }
        unsafe withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buf in
            var i = 20
            repeat {
                i -= 1
                unsafe buf[i] = UInt8(ascii: "0") &+ UInt8(v % 10)
                v /= 10
            } while v > 0
            unsafe out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[i..<20]))
        }
    }
}

extension CanonicalJSON {
    /// The ECMAScript / RFC 8785 string form of a number, as the canonical serializer writes it.
    /// - Parameter value: the number. `-0` gives `"0"`; NaN and infinities give `"null"` (as `JSON.stringify`).
    /// - Returns: the shortest round-trip form, e.g. `"1e+21"`, `"5e-7"`, `"0.1"`, `"123"`.
    public static func formatNumber(_ value: Double) -> String {
        var out: [UInt8] = []
        ECMAScriptNumber.append(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
