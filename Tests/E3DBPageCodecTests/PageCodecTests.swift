import Crypto
import CryptoExtras
import E3DBPageCodec
import E3DBPrimitives
import Testing

@Suite("E3DBPageCodec: the SQLCipher page transform")
struct PageCodecTests {
    @Test("a raw key of another length is invalidKey from the initialiser, never a trap in the cipher")
    func rawKeyLength() throws {
        let salt = [UInt8](repeating: 0, count: 16)
        for settings in [SQLCipherSettings.v4, .chacha20] {
            for count in [0, 16, 31, 33, 40] {
                let bytes = SecureBytes(randomCount: count)
                for key in [SQLCipherKey.rawKey(bytes), .rawKeyAndSalt(key: bytes, salt: salt)] {
                    let error = #expect(throws: E3DBError.self) {
                        _ = try PageCodec(key: key, salt: salt, settings: settings)
                    }
                    #expect(error?.code == .invalidKey)
                }
            }
        }
    }

    @Test("a page encrypts and decrypts back, under a fresh IV each time")
    func roundTrip() throws {
        let codec = try PageCodec(
            key: .rawKey(SecureBytes(randomCount: 32)), salt: Array(repeating: 7, count: 16), settings: .v4)
        var page = [UInt8](repeating: 0, count: 4096)
        for index in page.indices { page[index] = UInt8(truncatingIfNeeded: index &* 31) }
        let first = try codec.encrypt(page: page, number: 3)
        let second = try codec.encrypt(page: page, number: 3)
        #expect(first != second)
        let back = try codec.decrypt(page: first, number: 3)
        #expect(Array(back[0..<4016]) == Array(page[0..<4016]))
        #expect(throws: E3DBError(.pageTampered)) { try codec.decrypt(page: first, number: 4) }
    }
}

@Suite("E3DBPageCodec: SQLCipher pages against swift-crypto's own AES-CBC and HMAC")
struct PageCodecOracleTests {
    /// The codec writes AES-CBC and the HMAC through BoringSSL's block functions into the page; swift-crypto's Swift
    /// API (`AES._CBC`, `HMAC`) must read the same page: the ciphertext decrypts to the page, the tag is the HMAC of
    /// ciphertext ‖ IV ‖ page number under the key SQLCipher derives.
    @Test(
        "a stored page is AES-256-CBC and the HMAC as swift-crypto computes them, for each HMAC hash",
        arguments: [SQLCipherSettings.Algorithm.sha512, .sha256, .sha1])
    func pageMatchesSwiftCrypto(algorithm: SQLCipherSettings.Algorithm) throws {
        var settings = SQLCipherSettings.v4
        settings.algorithm = algorithm
        let rawKey = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        let salt = (0..<16).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ 1) }
        let codec = try PageCodec(key: .rawKey(SecureBytes(copying: rawKey)), salt: salt, settings: settings)
        let page = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        for number: UInt32 in [2, 0x0102_0304] {
            let stored = try codec.encrypt(page: page, number: number)
            let end = 4096 - settings.reserveByteCount
            let iv = try AES._CBC.IV(ivBytes: stored[end..<(end + 16)])
            let plaintext = try AES._CBC.decrypt(
                stored[0..<end], using: SymmetricKey(data: rawKey), iv: iv, noPadding: true)
            #expect(Array(plaintext) == Array(page[0..<end]))

            let hmacSalt = salt.map { $0 ^ 0x3a }
            // The HMAC key: PBKDF2 with the KDF's hash (SHA-512 here), whatever the HMAC's hash.
            let macKey = try PBKDF2.sha512(password: rawKey, salt: hmacSalt, rounds: 2, outputByteCount: 32)
            let key = macKey.withUnsafeBytes { SymmetricKey(data: $0) }
            let covered = Array(stored[0..<(end + 16)]) + withUnsafeBytes(of: number.littleEndian) { Array($0) }
            let expected: [UInt8] =
                switch algorithm {
                case .sha512: Array(HMAC<SHA512>.authenticationCode(for: covered, using: key))
                case .sha256: Array(HMAC<SHA256>.authenticationCode(for: covered, using: key))
                case .sha1: Array(HMAC<Insecure.SHA1>.authenticationCode(for: covered, using: key))
                }
            #expect(Array(stored[(end + 16)..<(end + 16 + algorithm.macByteCount)]) == expected)
            #expect(try codec.decrypt(page: stored, number: number)[0..<end] == page[0..<end])
        }
    }
}
