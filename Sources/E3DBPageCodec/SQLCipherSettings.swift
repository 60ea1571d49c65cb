public import E3DBPrimitives

/// The cipher settings of an encrypted database: page format, page size, key derivation and HMAC.
///
/// SQLCipher 4's defaults are ``v4``: 4096-byte pages, AES-256-CBC, HMAC-SHA512, PBKDF2-HMAC-SHA512 with 256,000
/// rounds, 80 reserve bytes at the end of every page (a 16-byte IV and the 64-byte HMAC). Databases from apps built
/// on SQLCipher 3 use ``v3``. Other page sizes and round counts are the settings SQLCipher's `cipher_page_size`
/// and `kdf_iter` pragmas change; the chosen values must match the ones the file was written with.
///
/// ``chacha20`` is SQLite3 Multiple Ciphers' default scheme (ChaCha20 and Poly1305, PBKDF2-HMAC-SHA256 with 64,007
/// rounds, 32 reserve bytes) and ``sqleet`` its legacy layout, the format of sqleet.
public struct SQLCipherSettings: Sendable, Hashable, CustomStringConvertible {
    /// The page format.
    public enum Cipher: String, Sendable, Hashable, CaseIterable {
        /// SQLCipher's: AES-256-CBC and an HMAC per page (SQLite3 Multiple Ciphers: `sqlcipher` with `legacy = 4`).
        case sqlcipher
        /// SQLite3 Multiple Ciphers' `chacha20` (the sqleet family): ChaCha20 and Poly1305 per page.
        case chacha20
    }

    /// The hash of PBKDF2 or of the page HMAC.
    public enum Algorithm: String, Sendable, Hashable, CaseIterable {
        /// SHA-512: SQLCipher 4.
        case sha512
        /// SHA-1: SQLCipher 3 and earlier.
        case sha1
        /// SHA-256: SQLCipher's `HMAC_SHA256` and `PBKDF2_HMAC_SHA256` (run in hardware on processors with the
        /// SHA extensions).
        case sha256

        /// The HMAC's size in bytes.
        public var macByteCount: Int {
            switch self {
            case .sha512: 64
            case .sha256: 32
            case .sha1: 20
            }
        }

        /// SQLCipher's name of the page HMAC with this hash (`PRAGMA cipher_hmac_algorithm`): `HMAC_SHA512`, ….
        public var hmacName: String { "HMAC_" + rawValue.uppercased() }
        /// SQLCipher's name of PBKDF2 with this hash (`PRAGMA cipher_kdf_algorithm`): `PBKDF2_HMAC_SHA512`, ….
        public var kdfName: String { "PBKDF2_HMAC_" + rawValue.uppercased() }

        /// The hash named by SQLCipher's `HMAC_SHA1`, `HMAC_SHA256`, `HMAC_SHA512` (`kdf` false) or
        /// `PBKDF2_HMAC_SHA1`, … (`kdf` true), in any case; nil for another name.
        public init?(sqlcipherName name: String, kdf: Bool) {
            let wanted = name.uppercased()
            guard let found = Self.allCases.first(where: { (kdf ? $0.kdfName : $0.hmacName) == wanted }) else {
                return nil
            }
            self = found
        }
    }

    /// Bytes per page, a power of two from 512 to 65536.
    public var pageSize: Int
    /// PBKDF2 rounds for a passphrase (raw keys are not stretched).
    public var kdfIterations: Int
    /// The hash of the page HMAC (``Cipher/sqlcipher``, SQLCipher's `cipher_hmac_algorithm`; ``Cipher/chacha20``
    /// uses Poly1305).
    public var algorithm: Algorithm
    /// The hash of PBKDF2, for the key from a passphrase and the HMAC key from the key (``Cipher/sqlcipher``,
    /// SQLCipher's `cipher_kdf_algorithm`; ``Cipher/chacha20`` always uses SHA-256).
    public var kdfAlgorithm: Algorithm
    /// How many bytes at the start of page 1 stay in plaintext (SQLCipher's `cipher_plaintext_header_size`, SQLite3
    /// Multiple Ciphers' `plaintext_header_size`): 0 (the salt is stored there), or, for ``Cipher/sqlcipher``, a
    /// multiple of 16, for ``Cipher/chacha20`` 1 to 100 in the non-legacy layout (which leaves at least 24 bytes
    /// readable; not with ``legacy``).
    /// 32 is what iOS needs to recognise a database in a shared app-group container by its SQLite header. The
    /// salt is then not in the file: give it as ``salt``, or as part of the raw key.
    public var plaintextHeaderSize: Int
    /// The database's 16-byte salt when it is not read from the file (SQLCipher's `cipher_salt`): needed to open a
    /// database with a plaintext header by passphrase or by a raw key without salt; a new database takes it.
    public var salt: [UInt8]?
    /// The page format.
    public var cipher: Cipher
    /// ``Cipher/chacha20`` only: sqleet's layout, page 1 encrypted from byte 0 (SQLite3 Multiple Ciphers'
    /// `legacy = 1`) instead of leaving its bytes 16-23 (page size, reserve) readable. A legacy file's page size
    /// cannot be read from it: ``pageSize`` must be the one it was written with.
    public var legacy: Bool

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
    /// SQLite3 Multiple Ciphers' `chacha20` defaults (`PRAGMA cipher = 'chacha20'`): 4096-byte pages,
    /// PBKDF2-HMAC-SHA256 with 64,007 rounds, page 1's bytes 16-23 readable.
    public static let chacha20 = SQLCipherSettings(
        cipher: .chacha20, pageSize: 4096, kdfIterations: 64_007, legacy: false)
    /// sqleet's format, SQLite3 Multiple Ciphers' `chacha20` with `PRAGMA legacy = 1`: page 1 wholly encrypted,
    /// 12,345 PBKDF2 rounds.
    public static let sqleet = SQLCipherSettings(cipher: .chacha20, pageSize: 4096, kdfIterations: 12_345, legacy: true)

    /// ChaCha20 pages: a 16-byte nonce and a 16-byte Poly1305 tag at the end of every page.
    public static let chacha20ReserveByteCount = 32
    /// Where page 1's encrypted bytes start in the non-legacy ``Cipher/chacha20`` layout: after the salt (0-15)
    /// and the readable header bytes 16-23.
    public static let chacha20PageOneOffset = 24

    /// SQLCipher settings.
    /// SQLCipher settings: `algorithm` is the HMAC's hash, and PBKDF2's unless `kdfAlgorithm` says otherwise.
    public init(
        pageSize: Int, kdfIterations: Int, algorithm: Algorithm, kdfAlgorithm: Algorithm? = nil,
        plaintextHeaderSize: Int = 0, salt: [UInt8]? = nil
    ) {
        self.pageSize = pageSize
        self.kdfIterations = kdfIterations
        self.algorithm = algorithm
        self.kdfAlgorithm = kdfAlgorithm ?? algorithm
        self.plaintextHeaderSize = plaintextHeaderSize
        self.salt = salt
        self.cipher = .sqlcipher
        self.legacy = false
    }

    /// Settings of `cipher` (``algorithm`` is SHA-256's stand-in for ``Cipher/chacha20``: unused).
    public init(cipher: Cipher, pageSize: Int, kdfIterations: Int, legacy: Bool = false) {
        self.pageSize = pageSize
        self.kdfIterations = kdfIterations
        self.algorithm = .sha512
        self.kdfAlgorithm = cipher == .chacha20 ? .sha256 : .sha512
        self.plaintextHeaderSize = 0
        self.salt = nil
        self.cipher = cipher
        self.legacy = cipher == .chacha20 && legacy
    }

    /// The defaults of `cipher` in its normal (`legacy` false) or legacy layout: ``v4``, ``chacha20`` or
    /// ``sqleet``.
    public static func defaults(_ cipher: Cipher, legacy: Bool = false) -> SQLCipherSettings {
        switch cipher {
        case .sqlcipher: .v4
        case .chacha20: legacy ? .sqleet : .chacha20
        }
    }

    /// The bytes at the end of every page that hold the IV and the HMAC: their sum rounded up to a whole AES block
    /// (80 with HMAC-SHA512 as in ``v4``, 48 with HMAC-SHA256 or HMAC-SHA1 as in ``v3``). SQLite is told to leave them free (byte 20 of the database header).
    public var reserveByteCount: Int {
        if cipher == .chacha20 { return Self.chacha20ReserveByteCount }
        let needed = Self.ivByteCount + algorithm.macByteCount
        return (needed + 15) / 16 * 16
    }

    /// Checks that the page size is a power of two from 512 to 65536, the round count from 1 to 2³² − 1, a plaintext
    /// header (SQLCipher format only) a multiple of 16 that leaves the page's data room, and a salt 16 bytes.
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
        let headerAllowed =
            switch cipher {
            case .sqlcipher: plaintextHeaderSize % 16 == 0 && plaintextHeaderSize <= pageSize - reserveByteCount
            // Non-legacy only: with sqleet's layout SQLite3 Multiple Ciphers 2.6.1 and this codec did not agree.
            case .chacha20: plaintextHeaderSize <= 100 && (plaintextHeaderSize == 0 || !legacy)
            }
        guard plaintextHeaderSize >= 0, headerAllowed else {
            throw E3DBError(
                .invalidParameter,
                "the plaintext header size is 0, a multiple of 16 within the page's data (sqlcipher) or up to 100 (chacha20, not legacy)",
                context: .init(part: "cipher_plaintext_header_size", actual: plaintextHeaderSize))
        }
        if let salt, salt.count != Self.saltByteCount {
            throw E3DBError(
                .invalidParameter, "a cipher salt is 16 bytes",
                context: .init(part: "cipher_salt", expected: Self.saltByteCount, actual: salt.count))
        }
    }

    public var description: String {
        switch cipher {
        case .sqlcipher:
            "SQLCipherSettings(page size \(pageSize), \(algorithm.hmacName), \(kdfAlgorithm.kdfName), kdf_iter \(kdfIterations), reserve \(reserveByteCount)\(plaintextHeaderSize > 0 ? ", plaintext header \(plaintextHeaderSize)" : "")\(salt == nil ? "" : ", salt given"))"
        case .chacha20:
            "SQLCipherSettings(chacha20\(legacy ? " legacy" : ""), page size \(pageSize), kdf_iter \(kdfIterations), reserve \(reserveByteCount)\(plaintextHeaderSize > 0 ? ", plaintext header \(plaintextHeaderSize)" : "")\(salt == nil ? "" : ", salt given"))"
        }
    }
}
