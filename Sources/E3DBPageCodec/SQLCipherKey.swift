public import E3DBPrimitives

/// What opens a SQLCipher database: the three forms of SQLCipher's `PRAGMA key`.
public enum SQLCipherKey: Sendable, CustomStringConvertible {
    /// A passphrase, stretched with PBKDF2 over the file's salt (`PRAGMA key = 'passphrase'`).
    case passphrase(SecureBytes)
    /// A 32-byte AES key used as it is (`PRAGMA key = "x'<64 hex digits>'"`).
    case rawKey(SecureBytes)
    /// A 32-byte key and the 16-byte salt it belongs to (`PRAGMA key = "x'<96 hex digits>'"`); a new database
    /// takes this salt, an existing one must have it.
    case rawKeyAndSalt(key: SecureBytes, salt: [UInt8])

    /// Parses the value of SQLCipher's `PRAGMA key`: `x'…'` with 64 or 96 hex digits is a raw key (with its salt),
    /// anything else a passphrase.
    /// - Throws: ``E3DBError/Code/invalidKey`` for an empty value or an `x'…'` value of another length or with a
    ///   non-hex digit (SQLCipher would take it as a passphrase; here that mistake is refused).
    public static func parse(_ value: SecureBytes) throws(E3DBError) -> SQLCipherKey {
        guard value.count > 0 else { throw E3DBError(.invalidKey, "the key is empty") }
        let isRaw = unsafe value.withUnsafeBytes { bytes in
            unsafe bytes.count >= 3 && (bytes[0] == UInt8(ascii: "x") || bytes[0] == UInt8(ascii: "X"))
                && bytes[1] == UInt8(ascii: "'") && bytes[bytes.count - 1] == UInt8(ascii: "'")
        }
        guard isRaw else { return .passphrase(value) }
        let digits = value.count - 3
        guard digits == 64 || digits == 96 else {
            throw E3DBError(
                .invalidKey, "a raw key is x'…' with 64 hex digits, or 96 with the salt",
                context: .init(part: "key", actual: digits))
        }
        let decoded = try unsafe value.withUnsafeBytes { (bytes) throws(E3DBError) -> SecureBytes in
            try unsafe SecureBytes(count: digits / 2) { (out) throws(E3DBError) in
                for index in 0..<(digits / 2) {
                    guard let high = unsafe Hex.value(of: bytes[2 + 2 * index]),
                        let low = unsafe Hex.value(of: bytes[3 + 2 * index])
                    else {
                        throw E3DBError(
                            .invalidKey, "a raw key holds hex digits only",
                            context: .init(part: "key", offset: 2 + 2 * index))
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

    /// The salt a new database takes: the key's own for ``rawKeyAndSalt(key:salt:)``, else 16 random bytes.
    public func saltForNewDatabase() -> [UInt8] {
        if case .rawKeyAndSalt(_, let salt) = self { return salt }
        return Array(SecureRandom.bytes(count: SQLCipherSettings.saltByteCount))
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
