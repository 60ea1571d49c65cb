public import E3DBPrimitives

/// The cipher settings of a SQLCipher database: page size, key derivation and HMAC.
///
/// SQLCipher 4's defaults are ``v4``: 4096-byte pages, AES-256-CBC, HMAC-SHA512, PBKDF2-HMAC-SHA512 with 256,000
/// rounds, 80 reserve bytes at the end of every page (a 16-byte IV and the 64-byte HMAC). Databases from apps built
/// on SQLCipher 3 use ``v3``. Other page sizes and round counts are the settings SQLCipher's `cipher_page_size`
/// and `kdf_iter` pragmas change; the chosen values must match the ones the file was written with.
public struct SQLCipherSettings: Sendable, Hashable, CustomStringConvertible {
    /// The hash of both PBKDF2 and the page HMAC.
    public enum Algorithm: String, Sendable, Hashable, CaseIterable {
        /// SHA-512: SQLCipher 4.
        case sha512
        /// SHA-1: SQLCipher 3 and earlier.
        case sha1

        /// The HMAC's size in bytes.
        public var macByteCount: Int { self == .sha512 ? 64 : 20 }
    }

    /// Bytes per page, a power of two from 512 to 65536.
    public var pageSize: Int
    /// PBKDF2 rounds for a passphrase (raw keys are not stretched).
    public var kdfIterations: Int
    /// The hash of PBKDF2 and of the page HMAC.
    public var algorithm: Algorithm

    /// SQLCipher's salt size, stored as the first 16 bytes of the file.
    public static let saltByteCount = 16
    /// AES-256 key size, the size of a raw key.
    public static let keyByteCount = 32
    /// The IV size: one AES block.
    public static let ivByteCount = 16
    /// The byte that each salt byte is XORed with to derive the HMAC key's salt.
    public static let hmacSaltMask: UInt8 = 0x3a
    /// PBKDF2 rounds that derive the HMAC key from the encryption key.
    public static let hmacKeyIterations = 2

    /// SQLCipher 4 defaults.
    public static let v4 = SQLCipherSettings(pageSize: 4096, kdfIterations: 256_000, algorithm: .sha512)
    /// SQLCipher 3 defaults (`PRAGMA cipher_compatibility = 3`).
    public static let v3 = SQLCipherSettings(pageSize: 1024, kdfIterations: 64_000, algorithm: .sha1)

    public init(pageSize: Int, kdfIterations: Int, algorithm: Algorithm) {
        self.pageSize = pageSize
        self.kdfIterations = kdfIterations
        self.algorithm = algorithm
    }

    /// The bytes at the end of every page that hold the IV and the HMAC: their sum rounded up to a whole AES block
    /// (80 for ``v4``, 48 for ``v3``). SQLite is told to leave them free (byte 20 of the database header).
    public var reserveByteCount: Int {
        let needed = Self.ivByteCount + algorithm.macByteCount
        return (needed + 15) / 16 * 16
    }

    /// Checks that the page size is a power of two from 512 to 65536 and the round count from 1 to 2³² − 1.
    /// - Throws: ``E3DBError/Code/invalidParameter`` naming the setting.
    public func validate() throws(E3DBError) {
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
            throw E3DBError(
                .invalidParameter, "the page size must be a power of two from 512 to 65536",
                context: .init(part: "cipher_page_size", actual: pageSize))
        }
        guard kdfIterations > 0, kdfIterations <= Int(UInt32.max) else {
            throw E3DBError(
                .invalidParameter, "the KDF round count must be from 1 to 4294967295",
                context: .init(part: "kdf_iter", actual: kdfIterations))
        }
    }

    public var description: String {
        "SQLCipherSettings(page size \(pageSize), \(algorithm.rawValue), kdf_iter \(kdfIterations), reserve \(reserveByteCount))"
    }
}
