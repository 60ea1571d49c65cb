package import E3DBPageCodec
import E3DBPrimitives
import Foundation
import Synchronization

/// Vector suite for E3DBPageCodec: `TestVectors/sqlcipher/pages.json`, pages of databases written by SQLCipher
/// 4.12 (passphrase, raw key, raw key with salt, SQLCipher 3 compatibility, 8 KiB pages, 10,000 KDF rounds) and
/// decrypted by the generator with `hashlib`, `hmac` and `cryptography`, not by SQLCipher.
///
/// A valid case is a whole database (or one page): every stored page must decrypt to the expected plaintext (page 1
/// starting with `SQLite format 3\0`, the reserved tail zero), and the codec's own encryption of that plaintext
/// must decrypt back to it. An invalid case is one changed, moved or wrongly keyed page with the expected error
/// code (`pageTampered`, or `wrongKey` when a raw key's salt is not the file's).
package enum SQLCipherSuites {
    package static let all: [VectorSuite] = [pages]

    /// One case of `pages.json`.
    package struct PagesVector: Decodable, Sendable {
        package let tcId: Int
        package let comment: String
        package let result: VectorResult
        package let flags: [String]
        /// The database this case comes from (several cases share one).
        package let database: String
        /// `passphrase`, `rawKey` or `rawKeyAndSalt`.
        package let keyForm: String
        /// The passphrase, or the raw key's hex digits (64, or 96 with the salt).
        package let key: String
        /// The value given to SQLCipher's `PRAGMA key` (`x'…'` for raw keys).
        package let pragmaKey: String
        package let settings: Settings
        /// The codec's reserve (IV, HMAC and padding).
        package let reserve: Int
        /// SQLite's header byte 20 of page 1 (may exceed `reserve`: see the generator).
        package let headerReserve: Int
        package let salt: String
        package let pages: [Page]
        /// The rows SQLCipher reads, per table, ordered by rowid (valid whole-database cases only).
        package let rows: [String: [[SQLValue]]]?
        /// The expected error code of an invalid case.
        package let error: String?

        /// The cipher settings of the case.
        package var cipherSettings: SQLCipherSettings {
            get throws {
                guard let algorithm = SQLCipherSettings.Algorithm(rawValue: settings.algorithm) else {
                    throw VectorFormatError("case \(tcId): unknown algorithm \(settings.algorithm)")
                }
                return SQLCipherSettings(
                    pageSize: settings.pageSize, kdfIterations: settings.kdfIterations, algorithm: algorithm)
            }
        }
    }

    /// Page size, KDF rounds and hash.
    package struct Settings: Decodable, Sendable {
        package let pageSize: Int
        package let kdfIterations: Int
        package let algorithm: String
    }

    /// One page: its number, its bytes on disk and (valid cases) its plaintext.
    package struct Page: Decodable, Sendable {
        package let number: UInt32
        package let stored: String
        package let plaintext: String?
    }

    /// A column value as the generator writes it: JSON null, number or string, or `{"base64": …}` for a blob.
    /// JSON does not tell `1.0` from `1`, so ``matches(_:)`` compares integers and reals by value.
    package enum SQLValue: Decodable, Sendable, Equatable, CustomStringConvertible {
        case null
        case integer(Int64)
        case real(Double)
        case text(String)
        case blob([UInt8])

        private struct Blob: Decodable { let base64: String }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let text = try? container.decode(String.self) {
                self = .text(text)
            } else if let blob = try? container.decode(Blob.self) {
                guard let bytes = Data(base64Encoded: blob.base64) else {
                    throw DecodingError.dataCorruptedError(in: container, debugDescription: "bad base64")
                }
                self = .blob(Array(bytes))
            } else if let integer = try? container.decode(Int64.self) {
                self = .integer(integer)
            } else {
                self = .real(try container.decode(Double.self))
            }
        }

        /// Equality, with an integer equal to a real of the same value.
        package func matches(_ other: SQLValue) -> Bool {
            switch (self, other) {
            case (.integer(let a), .real(let b)), (.real(let b), .integer(let a)): Double(a) == b
            default: self == other
            }
        }

        package var description: String {
            switch self {
            case .null: "NULL"
            case .integer(let value): String(value)
            case .real(let value): String(value)
            case .text(let value): "'\(value)'"
            case .blob(let value): "x'\(Hex.encode(value))'"
            }
        }
    }

    /// Loads the vector file.
    package static func load(_ locations: VectorLocations = .default) throws -> [PagesVector] {
        try VectorFile<PagesVector>.load(locations.projectFile("sqlcipher/pages.json")).tests
    }

    /// The key of a case, through ``SQLCipherKey/parse(_:)`` of the `PRAGMA key` value (which must give the
    /// recorded key form).
    package static func key(of t: PagesVector) throws -> SQLCipherKey {
        let key = try SQLCipherKey.parse(SecureBytes(copying: Array(t.pragmaKey.utf8)))
        let form =
            switch key {
            case .passphrase: "passphrase"
            case .rawKey: "rawKey"
            case .rawKeyAndSalt: "rawKeyAndSalt"
            }
        try requireEqual(form, t.keyForm, "case \(t.tcId): key form of PRAGMA key")
        return key
    }

    /// The codec of a case.
    package static func codec(for t: PagesVector) throws -> PageCodec {
        try PageCodec(key: key(of: t), salt: Array(Hex.decode(t.salt)), settings: t.cipherSettings)
    }

    /// The plaintext pages of a valid case, decrypted by ``PageCodec`` (in page order).
    package static func decryptedPages(_ t: PagesVector) throws -> [[UInt8]] {
        let codec = try codec(for: t)
        return try t.pages.map { try codec.decrypt(page: Array(Hex.decode($0.stored)), number: $0.number) }
    }

    package static let pages = VectorSuite(name: "sqlcipher/pages") { locations in
        let tests = try load(locations)
        // Derive each database's keys once (256,000 PBKDF2 rounds): cases of a database share a codec.
        let codecs = CodecCache()
        return tests.map { t in
            VectorCase(suite: "sqlcipher/pages", id: String(t.tcId), comment: t.comment) {
                switch t.result {
                case .valid: try checkValid(t, codec: codecs.codec(for: t))
                case .invalid, .acceptable: try checkInvalid(t)
                }
            }
        }
    }

    static func checkValid(_ t: PagesVector, codec: PageCodec) throws {
        let settings = try t.cipherSettings
        try requireEqual(settings.reserveByteCount, t.reserve, "reserve of \(settings)")
        for page in t.pages {
            let stored = Array(try Hex.decode(page.stored))
            guard let hex = page.plaintext else {
                throw VectorFormatError("case \(t.tcId): page \(page.number) lacks plaintext")
            }
            let expected = Array(try Hex.decode(hex))
            try requireEqual(
                try codec.decrypt(page: stored, number: page.number), expected, "page \(page.number) decrypted")
            if page.number == 1 {
                try requireEqual(Array(stored[0..<16]), Array(try Hex.decode(t.salt)), "page 1 starts with the salt")
                try requireEqual(Array(expected[0..<16]), PageCodec.sqliteHeader, "page 1 plaintext header")
                try requireEqual(Int(expected[20]), t.headerReserve, "header reserve byte")
            }
            let mine = try codec.encrypt(page: expected, number: page.number)
            try requireEqual(mine.count, settings.pageSize, "encrypted page \(page.number) size")
            if page.number == 1 {
                try requireEqual(
                    Array(mine[0..<16]), Array(try Hex.decode(t.salt)), "encrypted page 1 starts with the salt")
            }
            try requireEqual(
                try codec.decrypt(page: mine, number: page.number), expected, "page \(page.number) re-encrypted")
        }
    }

    static func checkInvalid(_ t: PagesVector) throws {
        guard let expected = t.error else { throw VectorFormatError("case \(t.tcId) names no error") }
        try requireFailure("case \(t.tcId)", matches: { ($0 as? E3DBError)?.code.rawValue == expected }) {
            let codec = try codec(for: t)
            for page in t.pages {
                _ = try codec.decrypt(page: Array(try Hex.decode(page.stored)), number: page.number)
            }
        }
    }
}

/// One codec per database (key, salt and settings), shared by that database's cases.
private final class CodecCache: Sendable {
    private let codecs = Mutex<[String: PageCodec]>([:])

    func codec(for t: SQLCipherSuites.PagesVector) throws -> PageCodec {
        let id = [
            t.database, t.keyForm, t.key, t.salt, String(t.settings.pageSize), String(t.settings.kdfIterations),
            t.settings.algorithm,
        ].joined(separator: "|")
        if let codec = codecs.withLock({ $0[id] }) { return codec }
        let codec = try SQLCipherSuites.codec(for: t)
        return codecs.withLock { cache in
            if let existing = cache[id] { return existing }
            cache[id] = codec
            return codec
        }
    }
}
