import E3DBPrimitives
import Foundation
import Testing

/// The table-driven base64url paths for data that is not secret must be indistinguishable from the branch-free
/// ones in everything but speed: the same bytes, the same errors with the same offsets.
@Suite("Base64URL public-data paths")
struct Base64PublicTests {
    static func decode(_ text: [UInt8], lenient: Bool, public usePublic: Bool) -> Result<[UInt8], E3DBError> {
        var out = [UInt8](repeating: 0, count: Base64URL.maximumDecodedLength(ofEncodedLength: text.count))
        return text.withUnsafeBufferPointer { u in
            out.withUnsafeMutableBytes { o in
                Result { () throws(E3DBError) -> [UInt8] in
                    let n =
                        usePublic
                        ? try Base64URL.decodePublic(utf8: u, into: o, lenient: lenient)
                        : try Base64URL.decode(utf8: u, into: o, lenient: lenient)
                    return Array(o.prefix(n))
                }
            }
        }
    }

    @Test("decodePublic matches decode on valid, damaged and random text, strict and lenient")
    func decodeMatches() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=".utf8)
        var checked = 0
        var failures = 0
        for round in 0..<4000 {
            var text: [UInt8]
            switch round % 3 {
            case 0: text = Array(Base64URL.encode(SecureRandom.bytes(count: round % 97)).utf8)
            case 1:
                text = (0..<(round % 71)).map { _ in alphabet.randomElement(using: &generator) ?? 65 }
            default:
                text = (0..<(round % 53)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            }
            if round % 5 == 0, !text.isEmpty { text[Int.random(in: 0..<text.count, using: &generator)] = 0x2E }
            for lenient in [false, true] {
                let a = Self.decode(text, lenient: lenient, public: false)
                let b = Self.decode(text, lenient: lenient, public: true)
                switch (a, b) {
                case (.success(let x), .success(let y)): #expect(x == y)
                case (.failure(let x), .failure(let y)):
                    failures += 1
                    #expect(x.code == y.code)
                    #expect(x.context.offset == y.context.offset)
                    #expect(x.message == y.message)
                default: Issue.record("decode and decodePublic disagree on \(text.count) bytes (lenient \(lenient))")
                }
                checked += 1
            }
        }
        #expect(checked == 8000)
        #expect(failures > 1000)
    }

    @Test("encodePublic writes what encode writes")
    func encodeMatches() throws {
        for n in 0..<300 {
            let bytes = [UInt8](SecureRandom.bytes(count: n))
            var a = [UInt8](repeating: 0, count: Base64URL.encodedLength(of: n))
            var b = a
            let na = try bytes.withUnsafeBytes { r in
                try a.withUnsafeMutableBufferPointer { try Base64URL.encode(r, into: $0) }
            }
            let nb = try bytes.withUnsafeBytes { r in
                try b.withUnsafeMutableBufferPointer { try Base64URL.encodePublic(r, into: $0) }
            }
            #expect(na == nb)
            #expect(a == b)
            #expect(String(decoding: a, as: UTF8.self) == Base64URL.encode(bytes))
        }
    }
}
