import E3DBPrimitives
import Foundation
import Testing

@Suite("E3DBPrimitives: HMAC-SHA256 against RFC 4231")
struct HMACTests {
    /// RFC 4231 §4.2-§4.8: key, data and HMAC-SHA256 (test case 5's output is truncated to 128 bits there).
    static let cases: [(name: String, key: [UInt8], data: [UInt8], mac: String)] = [
        (
            "1", [UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        ),
        (
            "2", Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ),
        (
            "3", [UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
        ),
        (
            "4", Array(1...25), [UInt8](repeating: 0xcd, count: 50),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
        ),
        (
            "5", [UInt8](repeating: 0x0c, count: 20), Array("Test With Truncation".utf8),
            "a3b6167473100ee06e0c796c2955552b"
        ),
        (
            "6", [UInt8](repeating: 0xaa, count: 131),
            Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
        (
            "7", [UInt8](repeating: 0xaa, count: 131),
            Array(
                ("This is a test using a larger than block-size key and a larger than block-size data. The key needs "
                    + "to be hashed before being used by the HMAC algorithm.").utf8),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        ),
    ]

    @Test("every RFC 4231 case, with the key as bytes and as SecureBytes")
    func rfc4231() {
        for c in Self.cases {
            let plain = Hex.encode(Hashes.hmacSHA256(key: c.key, message: c.data))
            let wiped = Hex.encode(Hashes.hmacSHA256(key: SecureBytes(copying: c.key), message: c.data))
            #expect(plain.count == 64, "case \(c.name)")
            #expect(plain.hasPrefix(c.mac), "case \(c.name)")
            #expect(wiped == plain, "case \(c.name)")
        }
    }

    @Test("a sliced key and message give the same MAC; one changed bit changes it")
    func inputs() {
        let key = Array("Jefe".utf8)
        let message = Array("what do ya want for nothing?".utf8)
        let expected = Hashes.hmacSHA256(key: key, message: message)
        #expect(Hashes.hmacSHA256(key: Data([0] + key)[1...], message: Data([9, 9] + message)[2...]) == expected)
        var flipped = message
        flipped[0] ^= 1
        #expect(Hashes.hmacSHA256(key: key, message: flipped) != expected)
        #expect(Hashes.hmacSHA256(key: [UInt8](), message: [UInt8]()).count == 32)
    }
}
