import E3DBPageCodec
import E3DBPrimitives
import Testing

@Suite("E3DBPageCodec: PageCodecCache")
struct PageCodecCacheTests {
    @Test("removeAll(keeping:) forgets the codecs of the other keys only; a kept one is not derived again")
    func removeAllKeepingSomeKeys() throws {
        let cache = PageCodecCache(capacity: 8)
        let keyBytes = (0..<32).map { UInt8($0 * 7 + 1) }
        let kept = SQLCipherKey.rawKey(SecureBytes(copying: keyBytes))
        let passphrase = SQLCipherKey.passphrase(SecureBytes(copying: Array("kept".utf8)))
        let dropped = SQLCipherKey.rawKey(SecureBytes(randomCount: 32))
        let (salt, otherSalt) = ([UInt8](repeating: 1, count: 16), [UInt8](repeating: 2, count: 16))
        var settings = SQLCipherSettings.v4
        settings.kdfIterations = 2  // a passphrase entry without 256,000 rounds
        // One key over two salts (two databases), a passphrase, and a key to forget; one codec held open.
        let open = try cache.codec(key: kept, salt: salt, settings: .v4)
        _ = try cache.codec(key: kept, salt: otherSalt, settings: .v4)
        _ = try cache.codec(key: passphrase, salt: salt, settings: settings)
        _ = try cache.codec(key: dropped, salt: salt, settings: .v4)
        #expect(cache.count == 4)

        // The same key, a new value of it (not the same storage), is what the registry holds.
        cache.removeAll(keeping: [.rawKey(SecureBytes(copying: keyBytes)), passphrase])
        #expect(cache.count == 3)
        #expect(!cache.contains(key: dropped, salt: salt, settings: .v4))
        let kepts: [(SQLCipherKey, [UInt8], SQLCipherSettings)] = [
            (kept, salt, .v4), (kept, otherSalt, .v4), (passphrase, salt, settings),
        ]
        for (key, salt, settings) in kepts {
            #expect(cache.contains(key: key, salt: salt, settings: settings))
            _ = try cache.codec(key: key, salt: salt, settings: settings)
            #expect(cache.derivations(key: key, salt: salt, settings: settings) == 1, "not derived again")
        }
        #expect(try cache.codec(key: kept, salt: salt, settings: .v4) === open)
        _ = try cache.codec(key: dropped, salt: salt, settings: .v4)
        #expect(cache.derivations(key: dropped, salt: salt, settings: .v4) == 2, "a forgotten key is derived again")

        cache.removeAll(keeping: [])
        #expect(cache.count == 0 && !cache.contains(key: kept, salt: salt, settings: .v4))
    }
}
