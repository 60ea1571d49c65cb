import E3DBConformance
import E3DBTestSupport
import Testing

/// Every case of every primitives vector suite, one test case per vector id.
@Suite("Primitives vectors")
struct PrimitivesVectorTests {
    @Test("box", arguments: try PrimitivesSuites.box.cases())
    func box(_ c: VectorCase) throws { try c.check() }

    @Test("sealed box", arguments: try PrimitivesSuites.sealedBox.cases())
    func sealedBox(_ c: VectorCase) throws { try c.check() }

    @Test("secretbox", arguments: try PrimitivesSuites.secretBox.cases())
    func secretBox(_ c: VectorCase) throws { try c.check() }

    @Test("ed25519", arguments: try PrimitivesSuites.ed25519.cases())
    func ed25519(_ c: VectorCase) throws { try c.check() }

    @Test("secretstream", arguments: try PrimitivesSuites.secretStream.cases())
    func secretStream(_ c: VectorCase) throws { try c.check() }

    @Test("BLAKE2b", arguments: try PrimitivesSuites.blake2b.cases())
    func blake2b(_ c: VectorCase) throws { try c.check() }

    @Test("SHA-2 and MD5", arguments: try PrimitivesSuites.hashes.cases())
    func hashes(_ c: VectorCase) throws { try c.check() }

    @Test("PBKDF2-HMAC-SHA512", arguments: try PrimitivesSuites.pbkdf2.cases())
    func pbkdf2(_ c: VectorCase) throws { try c.check() }

    @Test("Argon2id", arguments: try PrimitivesSuites.argon2id.cases())
    func argon2id(_ c: VectorCase) throws { try c.check() }

    @Test("base64", arguments: try PrimitivesSuites.base64.cases())
    func base64(_ c: VectorCase) throws { try c.check() }

    @Test(
        "Wycheproof Ed25519",
        .enabled(if: VectorLocations.default.sharedVectors != nil, "\(VectorLocations.sharedMissingMessage)"),
        arguments: try PrimitivesSuites.wycheproofEd25519.cases())
    func wycheproofEd25519(_ c: VectorCase) throws { try c.check() }

    @Test(
        "Wycheproof X25519",
        .enabled(if: VectorLocations.default.sharedVectors != nil, "\(VectorLocations.sharedMissingMessage)"),
        arguments: try PrimitivesSuites.wycheproofX25519.cases())
    func wycheproofX25519(_ c: VectorCase) throws { try c.check() }
}
