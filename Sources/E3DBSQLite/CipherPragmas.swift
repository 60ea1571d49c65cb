internal import CE3DBSQLite3
internal import E3DBPageCodec
internal import E3DBPrimitives

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// SQLCipher's pragmas, answered through `SQLITE_FCNTL_PRAGMA` on the main database file they name:
///
/// | pragma | effect |
/// |---|---|
/// | `key = 'passphrase'`, `key = "x'<hex>'"`, `hexkey = '<hex>'` | sets the key (before the first read) |
/// | `cipher_page_size = N`, `kdf_iter = N`, `cipher_compatibility = 3\|4` | the settings (before the first read) |
/// | `cipher_hmac_algorithm = HMAC_SHA1\|HMAC_SHA256\|HMAC_SHA512`, `cipher_kdf_algorithm = PBKDF2_HMAC_SHA1\|…` | SQLCipher's hashes (before the first read) |
/// | `cipher_plaintext_header_size = N` (SQLite3 Multiple Ciphers: `plaintext_header_size`), `cipher_salt = "x'<32 hex>'"` | page 1's first N bytes in plaintext, the salt given (before the first read); `cipher_salt` alone reads the salt |
/// | `cipher = 'sqlcipher'\|'chacha20'`, `legacy = 0\|1` (chacha20), `legacy_page_size = N` | SQLite3 Multiple Ciphers' selection of the page format (before the key) |
/// | `cipher_version`, `cipher_provider` | name this implementation |
/// | `cipher_integrity_check` | authenticates the pages the header counts; one row naming the first 100 bad pages and the trailing bytes, or none |
/// | `rekey`, `hexrekey` | refused: a rekey is a copy (``E3DBSQLite/rekey(databaseAt:from:to:settings:)``) |
/// | `cipher_default_*` | refused with `invalidParameter` naming the pragma (SQLCipher's process-wide defaults) |
enum CipherPragmas {
    static let version = "E3DBSQLite 1 (SQLCipher 4 and SQLite3 Multiple Ciphers chacha20 file formats)"

    // Safety: for SQLITE_FCNTL_PRAGMA SQLite passes `char *[3]`: [0] the answer slot (set to `sqlite3_malloc`
    // memory, which SQLite frees), [1] the pragma's name, [2] its value or NULL, both NUL-terminated and valid for
    // the call; they are copied (the key straight into `SecureBytes` of exactly `length` or `length + 3` bytes).
    /// Handles `PRAGMA name [= value]` (argument vector of SQLITE_FCNTL_PRAGMA), or returns nil for a pragma that
    /// is not SQLCipher's.
    static func handle(_ arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, file: MainDatabaseFile)
        -> Int32?
    {
        guard let namePointer = unsafe arguments[1] else { return nil }
        let name = unsafe String(cString: namePointer).lowercased()
        let value = unsafe arguments[2]
        let cipher = file.cipher
        switch name {
        case "key", "hexkey":
            guard let value = unsafe value else { return unsafe fail(arguments, "PRAGMA \(name) needs a value") }
            let length = unsafe strlen(value)
            let secret = unsafe SecureBytes(count: name == "hexkey" ? length + 3 : length) { out in
                let source = unsafe UnsafeRawBufferPointer(start: value, count: length)
                if name == "hexkey" {
                    unsafe out[0] = UInt8(ascii: "x")
                    unsafe out[1] = UInt8(ascii: "'")
                    unsafe UnsafeMutableRawBufferPointer(rebasing: out[2..<(2 + length)]).copyMemory(from: source)
                    unsafe out[length + 2] = UInt8(ascii: "'")
                } else {
                    unsafe out.copyMemory(from: source)
                }
            }
            do throws(E3DBError) {
                cipher.setKey(try SQLCipherKey.parse(secret))
            } catch {
                return unsafe fail(arguments, error.message)
            }
            return unsafe answer(arguments, "ok")
        case "rekey", "hexrekey":
            return unsafe fail(
                arguments,
                "PRAGMA rekey is not supported by E3DBSQLite: rekey makes a copy under the new key (E3DBSQLite.rekey, e3dbkit sqlite rekey)"
            )
        case "cipher":
            guard let value = unsafe value else { return unsafe answer(arguments, cipher.settings.cipher.rawValue) }
            let requested = unsafe String(cString: value).lowercased()
            guard let chosen = SQLCipherSettings.Cipher(rawValue: requested) else {
                return unsafe fail(
                    arguments,
                    "PRAGMA cipher: E3DBSQLite reads and writes 'sqlcipher' and 'chacha20', not '\(requested)'")
            }
            cipher.settings = .defaults(chosen)
            cipher.cipherNamed = true
            cipher.codec = nil
            return unsafe answer(arguments, chosen.rawValue)
        case "legacy":
            guard let value = unsafe value else {
                let current = cipher.settings
                return unsafe answer(
                    arguments,
                    current.cipher == .chacha20
                        ? (current.legacy ? "1" : "0") : (current.algorithm == .sha1 ? "3" : "4"))
            }
            let level = unsafe Int(String(cString: value))
            var settings: SQLCipherSettings
            switch (cipher.settings.cipher, level) {
            case (.chacha20, 0), (.chacha20, 1): settings = .defaults(.chacha20, legacy: level == 1)
            case (.sqlcipher, 4): settings = .v4
            case (.sqlcipher, 3): settings = .v3
            case (.chacha20, _):
                return unsafe fail(arguments, "PRAGMA legacy takes 0 or 1 for the chacha20 cipher")
            case (.sqlcipher, _):
                return unsafe fail(
                    arguments,
                    "PRAGMA legacy takes 4 or 3 for the sqlcipher cipher (SQLCipher's own layouts; SQLite3 Multiple Ciphers' non-legacy sqlcipher layout is not supported)"
                )
            }
            settings.pageSize = cipher.settings.pageSize
            cipher.settings = settings
            cipher.cipherNamed = true
            cipher.codec = nil
            // The value set, as one row (a pragma without a row leaves SQLite's column name NULL, which Python's
            // sqlite3 module reports as MemoryError).
            return unsafe answer(arguments, level.map(String.init))
        case "cipher_page_size", "legacy_page_size", "kdf_iter":
            if let value = unsafe value {
                guard let number = unsafe Int(String(cString: value)) else {
                    return unsafe fail(arguments, "PRAGMA \(name) takes a number")
                }
                var settings = cipher.settings
                if name == "kdf_iter" { settings.kdfIterations = number } else { settings.pageSize = number }
                do throws(E3DBError) { try settings.validate() } catch { return unsafe fail(arguments, error.message) }
                cipher.settings = settings
                cipher.codec = nil
            }
            return unsafe answer(
                arguments, String(name == "kdf_iter" ? cipher.settings.kdfIterations : cipher.settings.pageSize)
            )
        case "cipher_hmac_algorithm", "cipher_kdf_algorithm":
            let kdf = name == "cipher_kdf_algorithm"
            if let value = unsafe value {
                let requested = unsafe String(cString: value)
                guard let algorithm = SQLCipherSettings.Algorithm(sqlcipherName: requested, kdf: kdf) else {
                    return unsafe fail(
                        arguments,
                        kdf
                            ? "PRAGMA cipher_kdf_algorithm takes PBKDF2_HMAC_SHA1, PBKDF2_HMAC_SHA256 or PBKDF2_HMAC_SHA512"
                            : "PRAGMA cipher_hmac_algorithm takes HMAC_SHA1, HMAC_SHA256 or HMAC_SHA512")
                }
                if kdf { cipher.settings.kdfAlgorithm = algorithm } else { cipher.settings.algorithm = algorithm }
                cipher.cipherNamed = true
                cipher.codec = nil
            }
            let current = kdf ? cipher.settings.kdfAlgorithm.kdfName : cipher.settings.algorithm.hmacName
            return unsafe answer(arguments, current)
        case "cipher_plaintext_header_size", "plaintext_header_size":
            if let value = unsafe value {
                var settings = cipher.settings
                guard let size = unsafe Int(String(cString: value)) else {
                    return unsafe fail(arguments, "PRAGMA cipher_plaintext_header_size takes a number")
                }
                settings.plaintextHeaderSize = size
                do throws(E3DBError) { try settings.validate() } catch { return unsafe fail(arguments, error.message) }
                cipher.settings = settings
                cipher.cipherNamed = true
                cipher.codec = nil
            }
            return unsafe answer(arguments, String(cipher.settings.plaintextHeaderSize))
        case "cipher_salt":
            guard let value = unsafe value else {
                // The salt in use: the one given, else the database's (resolving the codec reads page 1).
                if let salt = cipher.settings.salt { return unsafe answer(arguments, Hex.encode(salt)) }
                switch file.resolveCodec(forWrite: true) {
                case .success(let codec): return unsafe answer(arguments, Hex.encode(codec.salt))
                case .failure(let failure):
                    _ = cipher.fail(failure)
                    return unsafe fail(arguments, failure.error.message)
                }
            }
            // SQLCipher's x'<32 hex digits>', or the 32 digits alone (SQLite3 Multiple Ciphers').
            var digits = unsafe String(cString: value)
            if digits.count == 35, digits.lowercased().hasPrefix("x'"), digits.hasSuffix("'") {
                digits = String(digits.dropFirst(2).dropLast())
            }
            guard digits.count == 32, let salt = try? Hex.decode(digits) else {
                return unsafe fail(arguments, "PRAGMA cipher_salt takes x'<32 hex digits>'")
            }
            guard cipher.codec == nil || cipher.codec?.salt == Array(salt) else {
                return unsafe fail(arguments, "PRAGMA cipher_salt: the database's salt cannot be changed")
            }
            cipher.settings.salt = Array(salt)
            // The value set, as one row (Python's sqlite3 module reports a pragma without a row as MemoryError).
            return unsafe answer(arguments, Hex.encode(salt))
        case "cipher_compatibility":
            guard let value = unsafe value else {
                return unsafe answer(arguments, cipher.settings.algorithm == .sha1 ? "3" : "4")
            }
            var settings: SQLCipherSettings
            switch unsafe String(cString: value) {
            case "3": settings = .v3
            case "4": settings = .v4
            default: return unsafe fail(arguments, "PRAGMA cipher_compatibility takes 3 or 4")
            }
            // As in SQLCipher, the compatibility sets page size, rounds and both hashes, not the plaintext header.
            settings.plaintextHeaderSize = cipher.settings.plaintextHeaderSize
            settings.salt = cipher.settings.salt
            cipher.settings = settings
            cipher.cipherNamed = true
            cipher.codec = nil
            return unsafe answer(arguments, nil)
        case "cipher_version":
            return unsafe answer(arguments, version)
        case "cipher_provider":
            return unsafe answer(arguments, "e3dbkit")
        case "cipher_integrity_check":
            switch file.verifyPages() {
            case .success(let found):
                return unsafe answer(arguments, found.text)
            case .failure(let failure):
                _ = cipher.fail(failure)
                return unsafe fail(arguments, failure.error.message)
            }
        case let other where other.hasPrefix(defaultsPrefix):
            // SQLite ignores a pragma nobody answers: a SQLCipher default silently not applied would write a file
            // with other settings than the app asked for.
            let error = E3DBError(
                .invalidParameter,
                "PRAGMA \(other) is not supported by E3DBSQLite (SQLCipher's process-wide defaults): set the "
                    + "connection's own pragma after the key, or SQLCipherSettings, instead",
                context: .init(part: other))
            _ = cipher.fail(CipherFailure(SQLITE_ERROR, error))
            return unsafe fail(arguments, error.message)
        default:
            return nil
        }
    }

    /// SQLCipher's process-wide defaults (`cipher_default_kdf_iter`, `cipher_default_compatibility`, …), refused.
    private static let defaultsPrefix = "cipher_default_"

    // Safety: `arguments` is the `char *[3]` of SQLITE_FCNTL_PRAGMA (see `handle`); slot 0 is the answer SQLite reads
    // and frees with `sqlite3_free`, so it gets `sqlite3_malloc` memory from `copyToSQLite`.
    /// One row holding `text` (or no row for nil).
    private static func answer(_ arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, _ text: String?)
        -> Int32
    {
        if let text { unsafe arguments[0] = copyToSQLite(text) }
        return SQLITE_OK
    }

    // Safety: as `answer`: slot 0 of SQLite's argument vector, set to `sqlite3_malloc` memory that SQLite frees.
    /// An error whose message SQLite reports.
    private static func fail(_ arguments: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, _ message: String)
        -> Int32
    {
        unsafe arguments[0] = copyToSQLite(message)
        return SQLITE_ERROR
    }

    // Safety: `memory` is `bytes.count + 1` bytes from `sqlite3_malloc64` (nil when it fails), bound to `CChar` for
    // that count; the loop writes indices below `bytes.count` and the terminator at `bytes.count`. Ownership passes to
    // SQLite with the returned pointer.
    /// A NUL-terminated copy in `sqlite3_malloc` memory, which SQLite frees.
    private static func copyToSQLite(_ text: String) -> UnsafeMutablePointer<CChar>? {
        let bytes = Array(text.utf8)
        guard let memory = unsafe sqlite3_malloc64(UInt64(bytes.count + 1)) else { return nil }
        let out = unsafe memory.bindMemory(to: CChar.self, capacity: bytes.count + 1)
        for (index, byte) in bytes.enumerated() { unsafe out[index] = CChar(bitPattern: byte) }
        unsafe out[bytes.count] = 0
        return unsafe out
    }
}

/// What `cipher_integrity_check` found, and its one-row text: `pages that did not authenticate: 2, 4 (and 7 more)`
/// and `1073725440 trailing bytes after page 4`, joined by `; `.
struct PageVerification: Equatable {
    /// The first bad pages (at most ``SQLiteVerification/listedBadPages``).
    var bad: [UInt32] = []
    /// Every bad page.
    var badCount = 0
    var trailingBytes: Int64 = 0
    /// The last page checked (the header's page count).
    var pageCount: Int64 = 0

    init() {}

    mutating func add(bad page: UInt32) {
        if bad.count < SQLiteVerification.listedBadPages { bad.append(page) }
        badCount += 1
    }

    /// The row's text, nil when nothing was found.
    var text: String? {
        var parts: [String] = []
        if badCount > 0 {
            let more = badCount > bad.count ? " (and \(badCount - bad.count) more)" : ""
            parts.append("pages that did not authenticate: " + bad.map(String.init).joined(separator: ", ") + more)
        }
        if trailingBytes > 0 { parts.append("\(trailingBytes) trailing bytes after page \(pageCount)") }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }

    /// Reads ``text`` back (``E3DBSQLite/verify(databaseAt:key:settings:)``).
    init(parsing text: String) {
        for part in text.split(separator: "; ") {
            if let listed = part.split(separator: ": ", maxSplits: 1).last, part.hasPrefix("pages that did not") {
                let list = listed.split(separator: " (and ").first ?? ""
                bad = list.split(separator: ",").compactMap { UInt32($0.filter { $0 != " " }) }
                let more = listed.split(separator: " (and ").dropFirst().first.flatMap {
                    Int($0.prefix { $0.isNumber })
                }
                badCount = bad.count + (more ?? 0)
            } else if part.contains(" trailing bytes after page ") {
                trailingBytes = Int64(part.prefix { $0.isNumber }) ?? 0
                pageCount = Int64(part.split(separator: " ").last ?? "") ?? 0
            }
        }
    }
}
