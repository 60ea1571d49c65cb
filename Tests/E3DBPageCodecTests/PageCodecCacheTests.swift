import E3DBPageCodec
import E3DBPrimitives
import Testing

@Suite("E3DBPageCodec: PageCodecCache")
struct PageCodecCacheTests {
    @Test("removeAll(keeping:) keeps only the codecs open databases use under the kept keys, and their counts")
    func removeAllKeepingSomeKeys() throws {
        let cache = PageCodecCache(capacity: 8)
        let keyBytes = (0..<32).map { UInt8($0 * 7 + 1) }
        let kept = SQLCipherKey.rawKey(SecureBytes(copying: keyBytes))
        let passphrase = SQLCipherKey.passphrase(SecureBytes(copying: Array("kept".utf8)))
        let dropped = SQLCipherKey.rawKey(SecureBytes(randomCount: 32))
        let (salt, otherSalt) = ([UInt8](repeating: 1, count: 16), [UInt8](repeating: 2, count: 16))
        var settings = SQLCipherSettings.v4
        settings.kdfIterations = 2  // a passphrase entry without 256,000 rounds
        // A kept key over two salts (two databases: one open, one only in the recent list), a kept passphrase
        // (recent only), and a key to forget held open.
        let open = try cache.codec(key: kept, salt: salt, settings: .v4)
        _ = try cache.codec(key: kept, salt: otherSalt, settings: .v4)
        _ = try cache.codec(key: passphrase, salt: salt, settings: settings)
        let droppedOpen = try cache.codec(key: dropped, salt: salt, settings: .v4)
        #expect(cache.count == 4)

        // The same key, a new value of it (not the same storage), is what the registry holds.
        cache.removeAll(keeping: [.rawKey(SecureBytes(copying: keyBytes)), passphrase])
        #expect(cache.count == 0, "nothing is kept for recent use")
        #expect(cache.contains(key: kept, salt: salt, settings: .v4), "an open database's codec of a kept key stays")
        #expect(cache.derivations(key: kept, salt: salt, settings: .v4) == 1)
        #expect(try cache.codec(key: kept, salt: salt, settings: .v4) === open)
        #expect(cache.derivations(key: kept, salt: salt, settings: .v4) == 1, "not derived again")
        // A kept key's codecs that no open database holds go, with their counts: derived again, counted from 0.
        let gone: [(SQLCipherKey, [UInt8], SQLCipherSettings)] = [
            (kept, otherSalt, .v4), (passphrase, salt, settings), (dropped, salt, .v4),
        ]
        for (key, salt, settings) in gone {
            #expect(!cache.contains(key: key, salt: salt, settings: settings))
            #expect(cache.derivations(key: key, salt: salt, settings: settings) == 0)
        }
        // A codec held open under a key that is not kept is not found either.
        #expect(try cache.codec(key: dropped, salt: salt, settings: .v4) !== droppedOpen)
        #expect(cache.derivations(key: dropped, salt: salt, settings: .v4) == 1, "a forgotten key is derived again")

        cache.removeAll()
        #expect(cache.count == 0 && !cache.contains(key: kept, salt: salt, settings: .v4))
        #expect(cache.derivations(key: kept, salt: salt, settings: .v4) == 0, "removeAll() forgets the counts")
    }
}
