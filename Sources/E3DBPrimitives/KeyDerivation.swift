internal import CE3DBSodium
internal import Crypto
internal import CryptoExtras

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// PBKDF2-HMAC-SHA512 (swift-crypto), used by E3DB identity and note-credential derivation
/// (10,000 rounds, 32-byte output).
public enum PBKDF2: Sendable {
    /// Derives `outputByteCount` bytes from `password` and `salt` with HMAC-SHA512.
    /// - Parameters:
    ///   - password: The password bytes (E3DB: UTF-8 of the password).
    ///   - salt: The salt bytes.
    ///   - rounds: The iteration count (E3DB identities use 10,000; new designs should prefer ``Argon2id``).
    ///   - outputByteCount: 1 or more bytes.
    /// - Returns: The derived bytes in wiped storage.
    /// - Throws: ``E3DBError/Code/invalidParameter`` for non-positive rounds or output size,
    ///   ``E3DBError/Code/kdfFailure`` if the derivation fails.
    public static func sha512(
        password: some DataProtocol,
        salt: some DataProtocol,
        rounds: Int,
        outputByteCount: Int
    ) throws(E3DBError) -> SecureBytes {
        try derive(.sha512, password: password, salt: salt, rounds: rounds, outputByteCount: outputByteCount)
    }

    /// PBKDF2-HMAC-SHA256, for formats that use it (SQLite3 Multiple Ciphers' `chacha20` databases); the parameters
    /// and errors are those of ``sha512(password:salt:rounds:outputByteCount:)``.
    public static func sha256(
        password: some DataProtocol,
        salt: some DataProtocol,
        rounds: Int,
        outputByteCount: Int
    ) throws(E3DBError) -> SecureBytes {
        try derive(.sha256, password: password, salt: salt, rounds: rounds, outputByteCount: outputByteCount)
    }

    /// PBKDF2-HMAC-SHA1, for formats that still use it (SQLCipher 3 databases); the parameters and errors are
    /// those of ``sha512(password:salt:rounds:outputByteCount:)``.
    public static func sha1(
        password: some DataProtocol,
        salt: some DataProtocol,
        rounds: Int,
        outputByteCount: Int
    ) throws(E3DBError) -> SecureBytes {
        try derive(.insecureSHA1, password: password, salt: salt, rounds: rounds, outputByteCount: outputByteCount)
    }

    private static func derive(
        _ hash: KDF.Insecure.PBKDF2.HashFunction,
        password: some DataProtocol,
        salt: some DataProtocol,
        rounds: Int,
        outputByteCount: Int
    ) throws(E3DBError) -> SecureBytes {
        guard rounds > 0 else {
            throw E3DBError(
                .invalidParameter, "PBKDF2 rounds must be positive", context: .init(part: "rounds", actual: rounds))
        }
        guard outputByteCount > 0 else {
            throw E3DBError(
                .invalidParameter, "PBKDF2 output size must be positive",
                context: .init(part: "outputByteCount", actual: outputByteCount))
        }
        let key: SymmetricKey
        do {
            key = try KDF.Insecure.PBKDF2.deriveKey(
                from: password, salt: salt, using: hash, outputByteCount: outputByteCount,
                unsafeUncheckedRounds: rounds)
        } catch {
            throw E3DBError(.kdfFailure, "PBKDF2 failed")
        }
        // Safety: the derived key's bytes are lent for the closure and copied into wiped storage.
        return unsafe key.withUnsafeBytes { unsafe SecureBytes(copying: $0) }
    }
}

/// Argon2id (libsodium `crypto_pwhash`, algorithm ARGON2ID13) for new passphrase-protected keys.
public enum Argon2id: Sendable {
    /// 16: salt size.
    public static let saltByteCount = 16

    /// Cost parameters.
    public struct Parameters: Sendable, Hashable {
        /// Passes over memory (`opslimit`), at least 1.
        public var opsLimit: Int
        /// Memory in bytes (`memlimit`), at least 8 KiB.
        public var memoryLimit: Int

        public init(opsLimit: Int, memoryLimit: Int) {
            self.opsLimit = opsLimit
            self.memoryLimit = memoryLimit
        }

        /// libsodium's interactive limits (2 passes, 64 MiB).
        public static var interactive: Parameters {
            Parameters(
                opsLimit: Int(crypto_pwhash_opslimit_interactive()),
                memoryLimit: Int(crypto_pwhash_memlimit_interactive()))
        }
        /// libsodium's moderate limits (3 passes, 256 MiB).
        public static var moderate: Parameters {
            Parameters(
                opsLimit: Int(crypto_pwhash_opslimit_moderate()), memoryLimit: Int(crypto_pwhash_memlimit_moderate()))
        }
        /// libsodium's minimum limits (1 pass, 8 KiB): anything lower is refused.
        public static var minimum: Parameters {
            Parameters(opsLimit: Int(crypto_pwhash_opslimit_min()), memoryLimit: Int(crypto_pwhash_memlimit_min()))
        }
        /// libsodium's sensitive limits (4 passes, 1 GiB).
        public static var sensitive: Parameters {
            Parameters(
                opsLimit: Int(crypto_pwhash_opslimit_sensitive()),
                memoryLimit: Int(crypto_pwhash_memlimit_sensitive()))
        }
    }

    /// Derives `outputByteCount` bytes from `password` and a 16-byte `salt`.
    /// - Throws: ``E3DBError/Code/invalidLength`` for a salt that is not 16 bytes,
    ///   ``E3DBError/Code/invalidParameter`` for out-of-range limits or output size,
    ///   ``E3DBError/Code/kdfFailure`` when libsodium fails (usually out of memory).
    public static func deriveKey(
        password: some DataProtocol,
        salt: some DataProtocol,
        outputByteCount: Int = 32,
        parameters: Parameters = .interactive
    ) throws(E3DBError) -> SecureBytes {
        Sodium.ensure()
        guard salt.count == saltByteCount else {
            throw E3DBError.length(.invalidLength, "argon2id salt", expected: saltByteCount, actual: salt.count)
        }
        guard outputByteCount >= Int(crypto_pwhash_bytes_min()) else {
            throw E3DBError(
                .invalidParameter, "Argon2id output must be at least 16 bytes",
                context: .init(part: "outputByteCount", actual: outputByteCount))
        }
        guard parameters.opsLimit >= Parameters.minimum.opsLimit,
            parameters.memoryLimit >= Parameters.minimum.memoryLimit
        else {
            throw E3DBError(.invalidParameter, "Argon2id limits are below libsodium's minimums")
        }
        var status: Int32 = 0
        // Safety: every buffer is lent for its closure: `o` is the `outputByteCount` bytes `crypto_pwhash` writes, `p`
        // and `s` are read for their own counts (the salt's checked above), and an empty password passes the never-read
        // `EmptyBuffer` address with length 0.
        let out = unsafe SecureBytes(count: outputByteCount) { o in
            unsafe withBytes(password) { p in
                unsafe withBytes(salt) { s in
                    status = unsafe p.withMemoryRebound(to: CChar.self) { pc in
                        unsafe crypto_pwhash(
                            o.u8, UInt64(o.count),
                            pc.baseAddress ?? UnsafeRawPointer(EmptyBuffer.address).assumingMemoryBound(to: CChar.self),
                            UInt64(p.count), s.u8,
                            UInt64(parameters.opsLimit), Int(parameters.memoryLimit), crypto_pwhash_ALG_ARGON2ID13)
                    }
                }
            }
        }
        guard status == 0 else { throw E3DBError(.kdfFailure, "Argon2id failed (out of memory?)") }
        return out
    }
}
