#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import E3DBKeys

/// Base64url decoding of one part of a field string, straight from its UTF-8 bytes (no intermediate `String` or
/// array). Same rules as `Base64URL.decode` (strict: URL-safe alphabet, no padding, length not 1 mod 4, zero
/// trailing bits) and `Base64URL.decodeLenient` (also `+` `/` and `=` padding at the end; trailing bits ignored).
enum FieldBase64 {
    /// 0...63 for alphabet characters; 64 for "not in the alphabet". URL-safe and standard characters are both
    /// mapped; the strict mode rejects `+` and `/` separately.
    static let table: [UInt8] = {
        var t = [UInt8](repeating: 64, count: 256)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        for (i, c) in alphabet.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(UInt8(ascii: "-"))] = 62
        t[Int(UInt8(ascii: "_"))] = 63
        t[Int(UInt8(ascii: "+"))] = 62
        t[Int(UInt8(ascii: "/"))] = 63
        return t
    }()

    /// Decodes `text`; nil when it is not valid under `decoding`.
    static func decode(_ input: UnsafeBufferPointer<UInt8>, _ decoding: Base64Decoding) -> Data? {
        var text = input
        if decoding == .lenient {
            // Padding only at the end, at most two, and only to complete a group.
            var end = text.count
            while end > 0, text[end - 1] == UInt8(ascii: "=") { end -= 1 }
            let pads = text.count - end
            if pads > 2 || (pads > 0 && text.count % 4 != 0) { return nil }
            text = UnsafeBufferPointer(rebasing: text[0..<end])
        }
        let n = text.count
        if n % 4 == 1 { return nil }
        let full = n / 4
        let rem = n % 4
        var out = Data(count: full * 3 + (rem == 0 ? 0 : rem - 1))
        let ok = out.withUnsafeMutableBytes { (o: UnsafeMutableRawBufferPointer) -> Bool in
            table.withUnsafeBufferPointer { t in
                var bad: UInt8 = 0
                if decoding == .strict {
                    for c in text where c == UInt8(ascii: "+") || c == UInt8(ascii: "/") { bad = 64 }
                }
                var i = 0
                var j = 0
                for _ in 0..<full {
                    let a = t[Int(text[i])], b = t[Int(text[i + 1])], c = t[Int(text[i + 2])], d = t[Int(text[i + 3])]
                    bad |= a | b | c | d
                    o[j] = a << 2 | b >> 4
                    o[j + 1] = b << 4 | c >> 2
                    o[j + 2] = c << 6 | d
                    i += 4
                    j += 3
                }
                if rem >= 2 {
                    let a = t[Int(text[i])], b = t[Int(text[i + 1])]
                    bad |= a | b
                    o[j] = a << 2 | b >> 4
                    if rem == 3 {
                        let c = t[Int(text[i + 2])]
                        bad |= c
                        o[j + 1] = b << 4 | c >> 2
                        if decoding == .strict, c & 0x03 != 0 { return false }
                    } else if decoding == .strict, b & 0x0F != 0 {
                        return false
                    }
                }
                return bad & 64 == 0
            }
        }
        return ok ? out : nil
    }
}
