public import E3DBPrimitives

/// What opens an encrypted database: the three forms of `PRAGMA key` (SQLCipher's, and SQLite3 Multiple Ciphers'
/// for its chacha20 format).
public enum SQLCipherKey: Sendable, CustomStringConvertible {
    /// A passphrase, stretched with PBKDF2 over the file's salt (`PRAGMA key = 'passphrase'`).
    case passphrase(SecureBytes)
    /// A 32-byte AES key used as it is (`PRAGMA key = "x'<64 hex digits>'"`).
    case rawKey(SecureBytes)
    /// A 32-byte key and the 16-byte salt it belongs to (`PRAGMA key = "x'<96 hex digits>'"`); a new database
    /// takes this salt, an existing one must have it.
    case rawKeyAndSalt(key: SecureBytes, salt: [UInt8])

    // Safety: `bytes` is the key's wiped storage, lent for each closure. The notation test reads index 0, 1 and `count
    // - 1` only when `count >= 3` (`starts(with:)` stays within the count); `digitRange` lies inside the value, and the
    // decoder reads `at` and `at + 1` with `at + 1 < digitRange.upperBound` while writing `out[index]` for `index <
    // digits / 2`, the size of `out`. The 96-digit form splits the 48 decoded bytes at 32.
    /// Parses the value of `PRAGMA key`: `x'…'` with 64 or 96 hex digits (SQLCipher's notation) or `raw:` and 64 or
    /// 96 hex digits (SQLite3 Multiple Ciphers') is a raw key (with its salt), anything else a passphrase.
    /// - Throws: ``E3DBError/Code/invalidKey`` for an empty value or a raw key of another length or with a non-hex
    ///   digit (SQLCipher and SQLite3 Multiple Ciphers would take it as a passphrase; here that mistake is
    ///   refused).
    public static func parse(_ value: SecureBytes) throws(E3DBError) -> SQLCipherKey {
        guard value.count > 0 else { throw E3DBError(.invalidKey, "the key is empty") }
        // The hex digits' range in `value`, for the two raw notations.
        let digitRange: Range<Int>? = unsafe value.withUnsafeBytes { bytes in
            if unsafe bytes.count >= 3 && (bytes[0] == UInt8(ascii: "x") || bytes[0] == UInt8(ascii: "X"))
                && bytes[1] == UInt8(ascii: "'") && bytes[bytes.count - 1] == UInt8(ascii: "'")
            {
                return 2..<(bytes.count - 1)
            }
            if unsafe bytes.count >= 4 && bytes.starts(with: Array("raw:".utf8)) { return 4..<bytes.count }
            return nil
        }
        guard let digitRange else { return .passphrase(value) }
        let digits = digitRange.count
        guard digits == 64 || digits == 96 else {
            throw E3DBError(
                .invalidKey, "a raw key is x'…' or raw: with 64 hex digits, or 96 with the salt",
                context: .init(part: "key", actual: digits))
        }
        let decoded = try unsafe value.withUnsafeBytes { (bytes) throws(E3DBError) -> SecureBytes in
            try unsafe SecureBytes(count: digits / 2) { (out) throws(E3DBError) in
                for index in 0..<(digits / 2) {
                    let at = digitRange.lowerBound + 2 * index
                    guard let high = unsafe Hex.value(of: bytes[at]), let low = unsafe Hex.value(of: bytes[at + 1])
                    else {
                        throw E3DBError(
                            .invalidKey, "a raw key holds hex digits only", context: .init(part: "key", offset: at))
                    }
                    unsafe out[index] = high << 4 | low
                }
            }
        }
        if digits == 64 { return .rawKey(decoded) }
        let key = unsafe decoded.withUnsafeBytes { unsafe SecureBytes(copying: $0[0..<SQLCipherSettings.keyByteCount]) }
        let salt = unsafe decoded.withUnsafeBytes { unsafe Array($0[SQLCipherSettings.keyByteCount...]) }
        return .rawKeyAndSalt(key: key, salt: salt)
    }

    // Safety: `out` is `hexBytes.count + 3` bytes: the prefix at 0 and 1, the digits at `2..<2 + hexBytes.count` (a
    // slice of exactly their count) and the quote at `count - 1`; both buffers are lent for their closures only.
    /// A raw key, as 64 hex digits (a key file's contents; surrounding whitespace is ignored by the caller).
    /// - Throws: ``E3DBError/Code/invalidKey``.
    public static func rawKey(hex: SecureBytes) throws(E3DBError) -> SQLCipherKey {
        guard hex.count == 64 || hex.count == 96 else {
            throw E3DBError(
                .invalidKey, "a raw key is 64 hex digits (96 with the salt)",
                context: .init(part: "key", actual: hex.count))
        }
        let wrapped = unsafe hex.withUnsafeBytes { hexBytes in
            unsafe SecureBytes(count: hexBytes.count + 3) { out in
                unsafe out[0] = UInt8(ascii: "x")
                unsafe out[1] = UInt8(ascii: "'")
                unsafe UnsafeMutableRawBufferPointer(rebasing: out[2..<(2 + hexBytes.count)]).copyMemory(from: hexBytes)
                unsafe out[out.count - 1] = UInt8(ascii: "'")
            }
        }
        return try parse(wrapped)
    }

    /// The salt a new database takes: the settings' (`cipher_salt`), else the key's own for
    /// ``rawKeyAndSalt(key:salt:)``, else 16 random bytes.
    public func saltForNewDatabase(_ settings: SQLCipherSettings) -> [UInt8] {
        externalSalt(settings) ?? Array(SecureRandom.bytes(count: SQLCipherSettings.saltByteCount))
    }

    /// The salt of an existing database that does not store it (a plaintext header): the settings'
    /// (`cipher_salt`), else the key's own; nil when neither gives one.
    public func externalSalt(_ settings: SQLCipherSettings) -> [UInt8]? {
        if let salt = settings.salt { return salt }
        if case .rawKeyAndSalt(_, let salt) = self { return salt }
        return nil
    }

    /// Checks that a raw key is 32 bytes and its salt 16.
    /// - Throws: ``E3DBError/Code/invalidKey``.
    public func validate() throws(E3DBError) {
        switch self {
        case .passphrase(let value):
            guard value.count > 0 else { throw E3DBError(.invalidKey, "the passphrase is empty") }
        case .rawKey(let key):
            guard key.count == SQLCipherSettings.keyByteCount else {
                throw E3DBError(.invalidKey, "a raw key is 32 bytes", context: .init(part: "key", actual: key.count))
            }
        case .rawKeyAndSalt(let key, let salt):
            guard key.count == SQLCipherSettings.keyByteCount, salt.count == SQLCipherSettings.saltByteCount else {
                throw E3DBError(
                    .invalidKey, "a raw key is 32 bytes and its salt 16", context: .init(part: "key", actual: key.count)
                )
            }
        }
    }

    public var description: String {
        switch self {
        case .passphrase: "SQLCipherKey.passphrase(redacted)"
        case .rawKey: "SQLCipherKey.rawKey(redacted)"
        case .rawKeyAndSalt: "SQLCipherKey.rawKeyAndSalt(redacted)"
        }
    }
}
