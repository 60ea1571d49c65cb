import ArgumentParser
import E3DBCommandLine
import E3DBKit
import E3DBPageCodec
import E3DBSQLite
import Foundation

/// `--cipher`'s values: the page formats of `SQLCipherSettings.Cipher`.
enum SQLiteCipherOption: String, ExpressibleByArgument, CaseIterable {
    case sqlcipher, chacha20

    var cipher: SQLCipherSettings.Cipher {
        switch self {
        case .sqlcipher: .sqlcipher
        case .chacha20: .chacha20
        }
    }
}

/// `e3dbkit sqlite …`: SQLCipher 4 and SQLite3 Multiple Ciphers chacha20 databases on the system SQLite
/// (E3DBSQLite).
struct SQLiteCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "sqlite",
        abstract: "Encrypted SQLite databases in SQLCipher 4's or SQLite3 Multiple Ciphers' chacha20 format.",
        discussion: """
            Every command takes one key source: --passphrase-file FILE (surrounding whitespace removed) or \
            --key-file FILE (a raw key: 64 hex digits, or 96 with the salt); never the key itself on \
            the command line. --cipher chacha20 (with --legacy for sqleet's layout) selects SQLite3 Multiple \
            Ciphers' format; an existing non-legacy file is recognised without it. A wrong key exits 77, a page that does not authenticate 2, a malformed database 65. \
            See docs/sqlite.md.
            """,
        subcommands: [SQLiteExec.self, SQLiteEncrypt.self, SQLiteDecrypt.self, SQLiteRekey.self, SQLiteVerify.self]
    )
}

/// The key and cipher settings of a database.
struct SQLiteKeyOptions: ParsableArguments {
    @Option(help: "A file holding the passphrase ('-' for stdin; surrounding whitespace is removed).")
    var passphraseFile: String?

    @Option(help: "A file holding SQLCipher's raw key: 64 hex digits, or 96 with the salt ('-' for stdin).")
    var keyFile: String?

    @Option(
        help: """
            The page format: sqlcipher (SQLCipher 4, the default for new databases) or chacha20 (SQLite3 Multiple \
            Ciphers' default). Without it an existing database in either format is recognised, except a --legacy one.
            """)
    var cipher: SQLiteCipherOption?

    @Flag(help: "With --cipher chacha20: sqleet's legacy layout (SQLite3 Multiple Ciphers' legacy = 1).")
    var legacy = false

    @Option(help: "SQLCipher settings: 4 (default) or 3 (databases of apps built on SQLCipher 3).")
    var compatibility: Int = 4

    @Option(help: "Page size, if not the settings' default (SQLCipher's cipher_page_size).")
    var pageSize: Int?

    @Option(help: "PBKDF2 rounds for a passphrase, if not the settings' default (SQLCipher's kdf_iter).")
    var kdfIter: Int?

    @Option(
        help:
            "SQLCipher's page HMAC, if not the settings' (cipher_hmac_algorithm): HMAC_SHA1, HMAC_SHA256, HMAC_SHA512.")
    var hmacAlgorithm: String?

    @Option(
        help:
            "SQLCipher's PBKDF2 hash, if not the settings' (cipher_kdf_algorithm): PBKDF2_HMAC_SHA1, PBKDF2_HMAC_SHA256, PBKDF2_HMAC_SHA512."
    )
    var kdfAlgorithm: String?

    @Option(
        help: """
            Bytes of page 1 left in plaintext (SQLCipher's cipher_plaintext_header_size, 32 for iOS shared \
            containers); the salt is then not in the file: give --cipher-salt or a key file with the salt.
            """)
    var plaintextHeaderSize: Int?

    @Option(help: "The database's salt, 32 hex digits (SQLCipher's cipher_salt), for a plaintext header.")
    var cipherSalt: String?

    func validate() throws {
        if passphraseFile != nil && keyFile != nil {
            throw ValidationError("pass only one of --passphrase-file and --key-file")
        }
        guard compatibility == 3 || compatibility == 4 else { throw ValidationError("--compatibility is 3 or 4") }
        if legacy && cipher != .chacha20 { throw ValidationError("--legacy goes with --cipher chacha20") }
        if cipher == .chacha20 && compatibility != 4 {
            throw ValidationError("--compatibility is SQLCipher's setting, not chacha20's")
        }
    }

    var hasKey: Bool { passphraseFile != nil || keyFile != nil }

    func settings() throws -> SQLCipherSettings {
        var settings: SQLCipherSettings =
            compatibility == 3 ? .v3 : .defaults(cipher?.cipher ?? .sqlcipher, legacy: legacy)
        if let pageSize { settings.pageSize = pageSize }
        if let kdfIter { settings.kdfIterations = kdfIter }
        for (text, kdf) in [(hmacAlgorithm, false), (kdfAlgorithm, true)] {
            guard let text else { continue }
            guard let algorithm = SQLCipherSettings.Algorithm(sqlcipherName: text, kdf: kdf) else {
                throw ValidationError(
                    kdf
                        ? "--kdf-algorithm is PBKDF2_HMAC_SHA1, PBKDF2_HMAC_SHA256 or PBKDF2_HMAC_SHA512"
                        : "--hmac-algorithm is HMAC_SHA1, HMAC_SHA256 or HMAC_SHA512")
            }
            if kdf { settings.kdfAlgorithm = algorithm } else { settings.algorithm = algorithm }
        }
        if let plaintextHeaderSize { settings.plaintextHeaderSize = plaintextHeaderSize }
        if let cipherSalt {
            guard cipherSalt.count == 32, let salt = try? Hex.decode(cipherSalt) else {
                throw ValidationError("--cipher-salt is 32 hex digits")
            }
            settings.salt = Array(salt)
        }
        do {
            try settings.validate()
        } catch {
            throw CLIError(error, while: "checking the cipher settings")
        }
        return settings
    }

    /// The key, or nil when no key source was given.
    func key() throws -> SQLCipherKey? {
        try SQLiteKeyOptions.key(passphraseFile: passphraseFile, keyFile: keyFile)
    }

    func requiredKey() throws -> SQLCipherKey {
        guard let key = try key() else {
            throw CLIError("pass --passphrase-file or --key-file", exitCode: ExitStatus.usage)
        }
        return key
    }

    /// The database a command reads: a missing one, or a directory, exits 66 as every missing input does.
    static func requireDatabase(_ path: String) throws {
        let type = (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType
        guard let type, type != .typeDirectory else {
            let why = type == nil ? "no such file" : "it is a directory"
            throw CLIError("cannot open the database \(path): \(why)", exitCode: ExitStatus.noInput)
        }
    }

    static func key(passphraseFile: String?, keyFile: String?) throws -> SQLCipherKey? {
        try libraryCall("reading the key") {
            if let keyFile { return try SQLCipherKey.rawKey(hex: try CLIIO.readSecret(keyFile, what: "key file")) }
            if let passphraseFile {
                let passphrase = try CLIIO.readSecret(passphraseFile, what: "passphrase file")
                guard passphrase.count > 0 else {
                    throw CLIError("the passphrase file is empty", exitCode: ExitStatus.usage)
                }
                return .passphrase(passphrase)
            }
            return nil
        }
    }
}

/// One result row as a JSON object, members in column order: integers and reals as numbers, text as strings,
/// NULL as null, blobs as base64.
enum SQLiteJSON {
    static func line(_ row: SQLiteRow) -> String {
        var out = "{"
        for (index, name) in row.columns.enumerated() {
            if index > 0 { out += "," }
            out += CanonicalJSON.serialize(.string(name)) + ":"
            switch row.values[index] {
            case .null: out += "null"
            case .integer(let value): out += String(value)
            case .real(let value): out += CanonicalJSON.serialize(.number(value))
            case .text(let value): out += CanonicalJSON.serialize(.string(value))
            case .blob(let value): out += CanonicalJSON.serialize(.string(Data(value).base64EncodedString()))
            }
        }
        return out + "}"
    }
}

struct SQLiteExec: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exec",
        abstract: "Run SQL statements (separated by ;) and print each result row as one line of JSON.",
        discussion: """
            Rows are objects keyed by column name in column order: integers and reals as numbers, text as \
            strings, NULL as null, blobs as base64. Without a key the database is opened as plaintext SQLite. \
            Without SQL, the statements are read from standard input.
            """
    )

    @OptionGroup var keys: SQLiteKeyOptions

    @Argument(help: "The database file (created when missing).")
    var database: String

    @Argument(help: "The SQL to run.")
    var sql: String?

    func run() throws {
        let statements: String
        if let sql {
            statements = sql
        } else {
            statements = String(decoding: try CLIIO.readAll("-", what: "SQL"), as: UTF8.self)
        }
        let connection = try libraryCall("opening \(database)") {
            try SQLiteConnection(path: database, key: try keys.key(), settings: try keys.settings())
        }
        var pending = ""
        do {
            // Written after each statement (and every 64 KiB): a reader sees a statement's rows once it is done.
            try connection.execute(
                statements,
                row: { row in
                    pending += SQLiteJSON.line(row) + "\n"
                    if pending.utf8.count >= 1 << 16 {
                        try StandardOutput.write(pending)
                        pending = ""
                    }
                },
                afterStatement: {
                    if !pending.isEmpty {
                        try StandardOutput.write(pending)
                        pending = ""
                    }
                })
        } catch {
            try? StandardOutput.write(pending)
            throw CLIError(error, while: "running SQL on \(database)")
        }
        try StandardOutput.write(pending)
    }
}

struct SQLiteEncrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Encrypt a plaintext SQLite database into a new SQLCipher 4 file (like sqlcipher_export; 0600).",
        discussion: """
            Each schema entry of the input runs as exactly one CREATE statement of its type; an input whose schema \
            holds anything else (a second statement, ATTACH, a PRAGMA) is refused with exit 65, naming the entry.
            """
    )

    @OptionGroup var keys: SQLiteKeyOptions
    @Argument(help: "The plaintext database.") var input: String
    @Argument(help: "The new encrypted database (must not exist).") var output: String

    func run() throws {
        try SQLiteKeyOptions.requireDatabase(input)
        try libraryCall("encrypting \(input)") {
            try E3DBSQLite.encrypt(
                plaintextDatabaseAt: input, to: output, key: try keys.requiredKey(), settings: try keys.settings())
        }
    }
}

struct SQLiteDecrypt: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt an encrypted database into a new plaintext SQLite file (created 0600)."
    )

    @OptionGroup var keys: SQLiteKeyOptions
    @Argument(help: "The encrypted database.") var input: String
    @Argument(help: "The new plaintext database (must not exist).") var output: String

    func run() throws {
        try SQLiteKeyOptions.requireDatabase(input)
        try libraryCall("decrypting \(input)") {
            try E3DBSQLite.decrypt(
                databaseAt: input, key: try keys.requiredKey(), settings: try keys.settings(), to: output)
        }
    }
}

struct SQLiteRekey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rekey",
        abstract: "Re-encrypt a database under a new passphrase or key (a copy, then an atomic rename).",
        discussion: "No other connection may use the database meanwhile. Its time and disk space grow with its size."
    )

    @OptionGroup var keys: SQLiteKeyOptions

    @Option(help: "A file holding the new passphrase.")
    var newPassphraseFile: String?

    @Option(help: "A file holding the new raw key (64 or 96 hex digits).")
    var newKeyFile: String?

    @Argument(help: "The encrypted database.") var database: String

    func validate() throws {
        guard (newPassphraseFile == nil) != (newKeyFile == nil) else {
            throw ValidationError("pass one of --new-passphrase-file and --new-key-file")
        }
    }

    func run() throws {
        try SQLiteKeyOptions.requireDatabase(database)
        let old = try keys.requiredKey()
        guard let new = try SQLiteKeyOptions.key(passphraseFile: newPassphraseFile, keyFile: newKeyFile) else {
            throw CLIError("pass one of --new-passphrase-file and --new-key-file", exitCode: ExitStatus.usage)
        }
        try libraryCall("rekeying \(database)") {
            try E3DBSQLite.rekey(databaseAt: database, from: old, settings: try keys.settings(), to: new)
        }
    }
}

struct SQLiteVerify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract:
            "Authenticate every page and check the b-tree; print the result as JSON, exit 2 naming the bad pages.",
        discussion: """
            Prints {"pages": N, "bad_pages": [...], "bad_page_count": N, "trailing_bytes": N, "integrity": [...]}: \
            the pages up to the header's page count are checked, the first 100 bad ones listed and all counted; \
            bytes after the last page are one problem. Exits 0 when every page authenticates, nothing trails and \
            integrity_check says ok, 2 otherwise (each listed bad page named on stderr), 77 for a wrong key.
            """
    )

    @OptionGroup var keys: SQLiteKeyOptions
    @Argument(help: "The encrypted database.") var database: String

    func run() throws {
        try SQLiteKeyOptions.requireDatabase(database)
        let result = try libraryCall("verifying \(database)") {
            try E3DBSQLite.verify(databaseAt: database, key: try keys.requiredKey(), settings: try keys.settings())
        }
        let bad = result.badPages.map(String.init).joined(separator: ",")
        let integrity = result.integrity.map { CanonicalJSON.serialize(.string($0)) }.joined(separator: ",")
        try StandardOutput.line(
            "{\"pages\":\(result.pageCount),\"bad_pages\":[\(bad)],\"bad_page_count\":\(result.badPageCount),"
                + "\"trailing_bytes\":\(result.trailingBytes),\"integrity\":[\(integrity)]}")
        guard result.isIntact else {
            for page in result.badPages { StandardError.line("page \(page) did not authenticate") }
            if result.badPageCount > result.badPages.count {
                StandardError.line("and \(result.badPageCount - result.badPages.count) more pages did not authenticate")
            }
            if result.trailingBytes > 0 {
                StandardError.line(
                    "\(result.trailingBytes) trailing bytes after page \(result.pageCount), the header's last page")
            }
            if result.badPages.isEmpty && result.integrity != ["ok"] {
                StandardError.line("integrity_check: " + result.integrity.joined(separator: "; "))
            }
            throw ExitCode(ExitStatus.authentication.rawValue)
        }
    }
}
