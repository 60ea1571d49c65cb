import E3DBAPI
import E3DBCanonicalJSON
import E3DBConformance
import E3DBIdentity
import E3DBPrimitives
import E3DBTestSupport
import Foundation
import Testing

@Suite("Identity vectors")
struct IdentityVectorTests {
    @Test("note credential derivation", arguments: try IdentitySuites.derivation.cases())
    func derivation(_ c: VectorCase) throws { try c.check() }

    @Test("TSV1 request signing", arguments: try IdentitySuites.tsv1.cases())
    func tsv1(_ c: VectorCase) throws { try c.check() }

    @Test("PKCE", arguments: try IdentitySuites.pkce.cases())
    func pkce(_ c: VectorCase) throws { try c.check() }
}

@Suite("E3DBIdentity")
struct IdentityTests {
    @Test("name seeds per credential kind")
    func nameSeeds() {
        #expect(NoteCredentials.nameSeed(username: "FRED", realm: "R") == "fred@realm:R")
        #expect(NoteCredentials.nameSeed(username: "Fred", realm: "R", kind: .emailOTP) == "broker:fred@realm:R")
        #expect(NoteCredentials.nameSeed(username: "x", realm: "R", kind: .toznyOTP) == "tozny_otp:x@realm:R")
    }

    @Test("query canonicalization sorts by name then value and re-encodes")
    func query() {
        #expect(TSV1.canonicalQuery("e=f&a=b&c=d") == "a=b&c=d&e=f")
        #expect(TSV1.canonicalQuery("b=2&a=%20x&a=1") == "a=+x&a=1&b=2")
        #expect(TSV1.canonicalQuery("") == "")
    }

    @Test("a fresh Authorization header verifies with the public key")
    func freshHeader() throws {
        let key = Ed25519.PrivateKey()
        let header = try TSV1.authorization(
            path: "/v1/x", query: "b=1&a=2", method: "GET", clientID: UUID(), signingKey: key)
        let parts = header.components(separatedBy: "; ")
        #expect(parts.count == 6)
        #expect(parts[0] == TSV1.method)
        #expect(parts[1] == key.publicKey.base64URLEncoded)
        let signed = "/v1/x; a=2&b=1; GET; " + parts[0..<5].joined(separator: "; ")
        let digest = try BLAKE2b.hash(data: Data(signed.utf8))
        #expect(key.publicKey.isValidSignature(try Base64URL.decode(parts[5]), for: digest))
    }

    @Test("PKCE verifiers are 43 characters and challenges match")
    func pkce() {
        let v = PKCE.makeVerifier()
        #expect(v.count == 43)
        #expect(PKCE.challenge(for: v) == Base64URL.encode(Hashes.sha256(Data(v.utf8))))
    }
}
