import E3DBAPI
import E3DBIdentity
import E3DBPrimitives
import Foundation

/// Vector suites for E3DBIdentity: `TestVectors/identity/*.json` from Tozny's Python SDK (e3db 2.3.0).
package enum IdentitySuites {
    package static let all: [VectorSuite] = [derivation, tsv1, pkce]

    struct DerivationTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let username: String, password: String, realm: String, type: String, nameSeed: String, noteName: String
        let boxPublicKey: String, boxSecretKey: String, signingPublicKey: String, signingSecretKey: String
    }

    package static let derivation = KeysSuites.suite("identity/derivation", file: "identity/derivation.json") {
        (t: DerivationTest) in
        guard let kind = NoteCredentials.Kind(rawValue: t.type) else { throw VectorFormatError("kind \(t.type)") }
        let c = try NoteCredentials.derive(username: t.username, password: t.password, realm: t.realm, kind: kind)
        try requireEqual(c.nameSeed, t.nameSeed, "name seed")
        try requireEqual(c.noteName, t.noteName, "note name")
        try requireEqual(c.boxKey.publicKey.base64URLEncoded, t.boxPublicKey, "box public key")
        try requireEqual(c.boxKey.base64URLEncoded, t.boxSecretKey, "box secret key")
        try requireEqual(c.signingKey.publicKey.base64URLEncoded, t.signingPublicKey, "signing public key")
        try requireEqual(c.signingKey.base64URLEncoded, t.signingSecretKey, "signing secret key")
    }

    struct TSV1Test: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let signingKey: String, publicKey: String, path: String, query: String, method: String
        let timestamp: Int64, nonce: String, clientId: String, authorization: String
    }

    package static let tsv1 = KeysSuites.suite("identity/tsv1", file: "identity/tsv1.json") { (t: TSV1Test) in
        let key = try Ed25519.PrivateKey(base64URLEncoded: t.signingKey)
        try requireEqual(key.publicKey.base64URLEncoded, t.publicKey, "public signing key")
        try requireEqual(TSV1.canonicalQuery(t.query), t.query, "canonical query is stable")
        let header = try TSV1.authorization(
            path: t.path, query: t.query, method: t.method, timestamp: t.timestamp, nonce: t.nonce,
            clientID: t.clientId, signingKey: key)
        try requireEqual(header, t.authorization, "Authorization header")
    }

    struct PKCETest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let verifierBytes: String, verifier: String, challenge: String
    }

    package static let pkce = KeysSuites.suite("identity/pkce", file: "identity/pkce.json") { (t: PKCETest) in
        try requireEqual(PKCE.verifier(fromRandomBytes: Hex.decode(t.verifierBytes)), t.verifier, "verifier")
        try requireEqual(PKCE.challenge(for: t.verifier), t.challenge, "challenge")
    }
}
