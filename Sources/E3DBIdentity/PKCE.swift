import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// PKCE (RFC 7636 S256) as the identity login uses it (spec §8.3):
/// `verifier = b64u(32 random bytes)`, `challenge = b64u(SHA-256(utf8(verifier)))`.
public enum PKCE {
    /// A new verifier (43 characters).
    public static func makeVerifier() -> String { Base64URL.encode(SecureRandom.bytes(count: 32)) }

    /// The verifier for given random bytes (to reproduce known answers).
    public static func verifier(fromRandomBytes bytes: some Sequence<UInt8>) -> String {
        Base64URL.encode(Array(bytes))
    }

    /// The S256 challenge for a verifier.
    public static func challenge(for verifier: String) -> String {
        Base64URL.encode(Hashes.sha256(Data(verifier.utf8)))
    }
}
