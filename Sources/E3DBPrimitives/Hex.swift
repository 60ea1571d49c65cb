#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif

/// Hexadecimal text: the one implementation the package's modules use (checksums, fingerprints, percent-escapes,
/// raw SQLCipher keys, UUIDs). Not constant-time: for secrets use it only where the old code was not either.
package enum Hex {
    fileprivate static let lower: [UInt8] = Array("0123456789abcdef".utf8)
    private static let upper: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Hex of `bytes`, two digits per byte, lowercase unless `uppercase`.
    package static func encode(_ bytes: some Sequence<UInt8>, uppercase: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes { append(byte, to: &out, uppercase: uppercase) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the two digits of `byte` to `out`.
    @inline(__always)
    package static func append(_ byte: UInt8, to out: inout [UInt8], uppercase: Bool = false) {
        let digits = uppercase ? upper : lower
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0f)])
    }

    /// The value of one hex digit (either case), or nil.
    @inline(__always)
    package static func value(of digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The bytes of hex text (either case).
    /// - Throws: ``E3DBError/Code/invalidHex`` for an odd number of digits or a character that is not a hex digit
    ///   (its offset is `context.offset`).
    package static func decode(_ text: some StringProtocol) throws(E3DBError) -> Data {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else {
            throw E3DBError(.invalidHex, "hex text has an odd number of characters (\(digits.count))")
        }
        var out = Data(capacity: digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let high = value(of: digits[i]), let low = value(of: digits[i + 1]) else {
                let offset = value(of: digits[i]) == nil ? i : i + 1
                var context = E3DBError.Context()
                context.offset = offset
                throw E3DBError(
                    .invalidHex, "a character that is not a hex digit at offset \(offset)", context: context)
            }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }
}

extension UUID {
    /// The id as E3DB writes it on the wire and in stores: lowercase `8-4-4-4-12` hex.
    /// Formatted directly (no `uuidString` and `lowercased()`: the server writes ids into every response).
    package var lowercasedString: String {
        // Safety: `withUnsafeBytes(of:)` lends the id's 16 bytes for its closure; the closure given to
        // `String(unsafeUninitializedCapacity:)` writes 36 bytes (16 bytes as two digits each, 4 dashes) into the 36
        // it is lent, so `o` stays below 36, and returns that count. One allocation: the string's own storage.
        let digits = Hex.lower
        return unsafe String(unsafeUninitializedCapacity: 36) { out in
            var o = 0
            unsafe withUnsafeBytes(of: uuid) { id in
                for i in 0..<16 {
                    if i == 4 || i == 6 || i == 8 || i == 10 {
                        unsafe out[o] = UInt8(ascii: "-")
                        o += 1
                    }
                    let byte = unsafe id[i]
                    unsafe out[o] = digits[Int(byte >> 4)]
                    unsafe out[o + 1] = digits[Int(byte & 0x0f)]
                    o += 2
                }
            }
            return o
        }
    }

    /// Parses `8-4-4-4-12` hex (either case) without Foundation's parser; nil for anything else.
    package init?(hexText text: String) {
        var text = text
        // Safety: `u` is the string's UTF-8, lent for the closure; the guard checks `u.count == 36`. The groups between
        // the dashes (at 8, 13, 18 and 23) have even lengths (8, 4, 4, 4, 12), so a hex pair starts at 34 at the latest
        // and `u[i + 1]` is inside.
        let parsed = text.withUTF8 { u -> uuid_t? in
            guard u.count == 36 else { return nil }
            var bytes = [UInt8](repeating: 0, count: 16)
            var i = 0
            var b = 0
            while i < 36 {
                if i == 8 || i == 13 || i == 18 || i == 23 {
                    guard unsafe u[i] == UInt8(ascii: "-") else { return nil }
                    i += 1
                    continue
                }
                guard let high = unsafe Hex.value(of: u[i]), let low = unsafe Hex.value(of: u[i + 1]) else {
                    return nil
                }
                bytes[b] = high << 4 | low
                b += 1
                i += 2
            }
            return (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            )
        }
        guard let parsed else { return nil }
        self.init(uuid: parsed)
    }

    /// Parses `text` only when it is already in the form ``lowercasedString`` writes.
    package init?(lowercasedString text: String) {
        guard let id = UUID(hexText: text), id.lowercasedString == text else { return nil }
        self = id
    }
}
