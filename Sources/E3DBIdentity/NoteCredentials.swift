public import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Identity (TozID) note credentials derived from a username, password and realm (spec §7.3): the name of the
/// note holding the user's credentials and the key pairs that open and verify it.
///
/// ```
/// nameSeed = [prefix] lower(username) "@realm:" realm     // prefix: "" | "broker:" | "tozny_otp:"
/// noteName = b64u(BLAKE2b-256(utf8(nameSeed)))
/// seedBox  = PBKDF2-HMAC-SHA512(utf8(password), utf8(nameSeed), 10000, 32) → crypto_box_seed_keypair
/// seedSign = PBKDF2-HMAC-SHA512(utf8(password), utf8(b64u(boxPk) || b64u(boxSk)), 10000, 32)
///            → crypto_sign_seed_keypair
/// ```
public struct NoteCredentials: Sendable {
    /// The PBKDF2 iteration count every SDK uses for identity credentials (10,000).
    public static let rounds = 10_000

    /// The kind of credential, which selects the name-seed prefix.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Password login: no prefix.
        case password
        /// Email OTP broker login: `broker:`.
        case emailOTP = "email_otp"
        /// Tozny OTP broker login: `tozny_otp:`.
        case toznyOTP = "tozny_otp"

        /// The name-seed prefix.
        public var prefix: String {
            switch self {
            case .password: ""
            case .emailOTP: "broker:"
            case .toznyOTP: "tozny_otp:"
            }
        }
    }

    /// The name seed, e.g. `alice@realm:MyRealm`.
    public let nameSeed: String
    /// The note name, `b64u(BLAKE2b-256(nameSeed))`.
    public let noteName: String
    /// The derived Curve25519 key pair.
    public let boxKey: Box.PrivateKey
    /// The derived Ed25519 key pair.
    public let signingKey: Ed25519.PrivateKey

    /// The name seed for a user.
    /// - Parameters:
    ///   - username: lowercased here (`String.lowercased()`, which agrees with the other SDKs for ASCII).
    ///   - realm: the realm name, verbatim (case-sensitive).
    ///   - kind: the credential kind.
    public static func nameSeed(username: String, realm: String, kind: Kind = .password) -> String {
        kind.prefix + username.lowercased() + "@realm:" + realm
    }

    /// `b64u(BLAKE2b-256(utf8(text)))`, the E3DB `hash` helper used for note names.
    /// - Throws: `E3DBError` from BLAKE2b if hashing fails (it never falls back to an empty digest).
    public static func hashName(_ text: String) throws(E3DBError) -> String {
        Base64URL.encode(try BLAKE2b.hash(data: Data(text.utf8), outputByteCount: 32))
    }

    /// Derives the credentials.
    /// - Parameters:
    ///   - username: the username (lowercased).
    ///   - password: the password (for broker kinds, the broker key).
    ///   - realm: the realm name.
    ///   - kind: the credential kind (default password).
    /// - Returns: the credentials.
    /// - Throws: `E3DBError` `.kdfFailure` if PBKDF2 fails, or the BLAKE2b error if the note name cannot be hashed.
    public static func derive(username: String, password: String, realm: String, kind: Kind = .password)
        throws(E3DBError)
        -> NoteCredentials
    {
        let seed = nameSeed(username: username, realm: realm, kind: kind)
        let passwordBytes = Data(password.utf8)
        let boxSeed = try PBKDF2.sha512(
            password: passwordBytes, salt: Data(seed.utf8), rounds: rounds, outputByteCount: Box.seedByteCount)
        let box = try Box.PrivateKey(seed: boxSeed)
        let signSalt = Data((box.publicKey.base64URLEncoded + box.base64URLEncoded).utf8)
        let signSeed = try PBKDF2.sha512(
            password: passwordBytes, salt: signSalt, rounds: rounds, outputByteCount: Ed25519.seedByteCount)
        let signing = try Ed25519.PrivateKey(seed: signSeed)
        return NoteCredentials(nameSeed: seed, noteName: try hashName(seed), boxKey: box, signingKey: signing)
    }
}
