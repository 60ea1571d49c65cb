internal import CE3DBSQLite3
internal import E3DBPageCodec
internal import E3DBPrimitives
internal import Synchronization

/// The key, settings and codec of one open main database file (one per connection and database), shared with
/// that database's journal and WAL.
///
/// Where the key comes from, in order: `PRAGMA key` (through `SQLITE_FCNTL_PRAGMA`); the `e3db_key` URI parameter
/// (a handle from ``E3DBSQLite/uri(forDatabaseAt:key:settings:)``); for a database attached to a connection (or a
/// `VACUUM INTO` target), the key of that connection's main database, as SQLCipher does. The codec is bound to the
/// file's salt at the first read (or, for an empty file, made with a new salt) and comes from
/// ``PageCodecCache/shared``, so a passphrase is stretched once per database.
final class DatabaseCipher: @unchecked Sendable {
    // @unchecked Sendable: SQLite uses a connection from one thread at a time, and so this object, its files'
    // only user. The registries below only store and hand out references under their locks.
    let filenameAddress: Int
    let path: String
    let readOnly: Bool
    private(set) var ownKey: SQLCipherKey?
    var settings: SQLCipherSettings
    /// Whether the page format was named (`PRAGMA cipher`, `legacy` or `cipher_compatibility`, the URI's `cipher`
    /// or `legacy`, settings other than SQLCipher 4's defaults through the API); when it was not, an existing file
    /// in SQLite3 Multiple Ciphers' chacha20 format is recognised by its page 1.
    var cipherNamed = false
    var codec: PageCodec?
    weak var main: MainDatabaseFile?
    private(set) var connection: Int?
    private(set) var isConnectionMain = false

    private static let open = Mutex<[Int: DatabaseCipher]>([:])
    private static let connectionMains = Mutex<[Int: DatabaseCipher]>([:])

    // Safety: `filename` is the name SQLite passes to `xOpen` for a main database: NUL-terminated, with its URI
    // parameters after it, and alive until the file closes. Strings are copied; the address is kept only as the
    // `open` registry's key (see the note at the top of `VFS.swift`).
    init(filename: sqlite3_filename, readOnly: Bool) {
        filenameAddress = Int(bitPattern: filename)
        path = unsafe String(cString: filename)
        self.readOnly = readOnly
        settings = .v4
        if let handle = unsafe sqlite3_uri_parameter(filename, "e3db_key"),
            let entry = unsafe KeyRegistry.shared.entry(String(cString: handle))
        {
            ownKey = entry.key
            settings = entry.settings
            cipherNamed = entry.settings != .v4
        }
        // SQLite3 Multiple Ciphers' URI parameters: `cipher=chacha20|sqlcipher`, `legacy=0|1`, `kdf_iter=N`. Values
        // that are not valid leave the settings as they are; the key then fails to open the file, typed.
        if let name = unsafe sqlite3_uri_parameter(filename, "cipher"),
            let chosen = unsafe SQLCipherSettings.Cipher(rawValue: String(cString: name).lowercased())
        {
            let legacy = unsafe sqlite3_uri_boolean(filename, "legacy", 0) != 0
            settings = .defaults(chosen, legacy: legacy)
            cipherNamed = true
        } else if unsafe sqlite3_uri_boolean(filename, "legacy", 0) != 0, settings.cipher == .chacha20 {
            settings = .sqleet
            cipherNamed = true
        }
        let rounds = unsafe sqlite3_uri_int64(filename, "kdf_iter", 0)
        if rounds > 0, rounds <= Int64(UInt32.max) { settings.kdfIterations = Int(rounds) }
        // SQLite3 Multiple Ciphers' names of SQLCipher's settings: `hmac_algorithm`, `kdf_algorithm` (0, 1, 2 for
        // SHA-1, SHA-256, SHA-512, or SQLCipher's names), `plaintext_header_size=N`, `cipher_salt=<32 hex digits>`.
        for (parameter, kdf) in [("hmac_algorithm", false), ("kdf_algorithm", true)] {
            guard let text = unsafe sqlite3_uri_parameter(filename, parameter) else { continue }
            let value = unsafe String(cString: text)
            let numbered: [String: SQLCipherSettings.Algorithm] = ["0": .sha1, "1": .sha256, "2": .sha512]
            guard let algorithm = numbered[value] ?? SQLCipherSettings.Algorithm(sqlcipherName: value, kdf: kdf) else {
                continue
            }
            if kdf { settings.kdfAlgorithm = algorithm } else { settings.algorithm = algorithm }
            cipherNamed = true
        }
        let headerSize = unsafe sqlite3_uri_int64(filename, "plaintext_header_size", 0)
        if headerSize > 0, headerSize <= 65536 {
            settings.plaintextHeaderSize = Int(headerSize)
            cipherNamed = true
        }
        if let text = unsafe sqlite3_uri_parameter(filename, "cipher_salt"),
            let salt = unsafe try? Hex.decode(String(cString: text)), salt.count == SQLCipherSettings.saltByteCount
        {
            settings.salt = Array(salt)
        }
        let me = self
        Self.open.withLock { $0[me.filenameAddress] = me }
    }

    /// The context of the open main database SQLite named `filename` (the pointer it passed to xOpen).
    static func open(filename: sqlite3_filename) -> DatabaseCipher? {
        let address = Int(bitPattern: filename)
        return open.withLock { $0[address] }
    }

    // Safety: the `sqlite3*` is only turned into an integer key for the `connectionMains` registry, never dereferenced
    // (the note at the top of `VFS.swift`).
    /// `SQLITE_FCNTL_PDB`: the connection this file belongs to. The first file a connection announces is its main
    /// database; the others (attached, `VACUUM INTO`) may borrow its key.
    func attach(connection: OpaquePointer?) {
        guard let connection = unsafe connection else { return }
        let key = Int(bitPattern: connection)
        self.connection = key
        let me = self
        isConnectionMain = Self.connectionMains.withLock { mains in
            if mains[key] == nil {
                mains[key] = me
                return true
            }
            return mains[key] === me
        }
    }

    func close() {
        let me = self
        Self.open.withLock { if $0[me.filenameAddress] === me { $0[me.filenameAddress] = nil } }
        if let connection, isConnectionMain {
            Self.connectionMains.withLock { if $0[connection] === me { $0[connection] = nil } }
        }
        codec = nil
        ownKey = nil
    }

    // Safety: the guard checks `header.count >= 24` before any read, and the highest offset read is 23.
    /// The settings for an existing file whose page 1 starts with `header` (at least 24 bytes): SQLite3 Multiple
    /// Ciphers' chacha20 when the format was not named and bytes 16-23 are a readable SQLite header reserving 32
    /// bytes (SQLCipher's page 1 is encrypted there), else the settings as they are.
    func recognisedSettings(header: UnsafeRawBufferPointer) -> SQLCipherSettings {
        guard !cipherNamed, settings.cipher == .sqlcipher, settings.algorithm == .sha512,
            settings.plaintextHeaderSize == 0, header.count >= 24
        else {
            return settings
        }
        let encoded = unsafe Int(header[16]) << 8 | Int(header[17])
        let pageSize = encoded == 1 ? 65536 : encoded
        let readable =
            unsafe pageSize >= 512 && pageSize & (pageSize - 1) == 0 && (1...2).contains(header[18])
            && (1...2).contains(header[19]) && header[21] == 64 && header[22] == 32 && header[23] == 32
        guard readable, unsafe Int(header[20]) == SQLCipherSettings.chacha20ReserveByteCount else { return settings }
        var recognised = SQLCipherSettings.chacha20
        recognised.pageSize = pageSize
        if settings.kdfIterations != SQLCipherSettings.v4.kdfIterations {
            recognised.kdfIterations = settings.kdfIterations
        }
        return recognised
    }

    func setKey(_ key: SQLCipherKey) {
        ownKey = key
        codec = nil
    }

    /// The key and settings to use: this file's own, else its connection's main database's.
    func effectiveKey() -> (key: SQLCipherKey, settings: SQLCipherSettings)? {
        if let ownKey { return (ownKey, settings) }
        guard let connection, !isConnectionMain else { return nil }
        guard let main = Self.connectionMains.withLock({ $0[connection] }), main !== self, let key = main.ownKey else {
            return nil
        }
        return (key, main.settings)
    }

    /// The codec, resolving it through the main database file (which reads and authenticates page 1).
    func resolvedCodec() -> Result<PageCodec, CipherFailure> {
        if let codec { return .success(codec) }
        guard let main else {
            return .failure(CipherFailure(SQLITE_IOERR, E3DBError(.databaseError, "the database is closed")))
        }
        // A journal or WAL resolves it to write (a frame or record under a new database's salt keeps that salt).
        return main.resolveCodec(forWrite: true)
    }

    /// Records `error` (for ``E3DBSQLite/lastFailure(forDatabaseAt:)`` and SQLite's error log) and returns `code`.
    func fail(_ failure: CipherFailure) -> Int32 {
        FailureLog.record(failure.error, path: path, connection: connection)
        // Safety: the message is lent to the C shim as a NUL-terminated copy for the call; `sqlite3_log` formats it
        // with `%s` and keeps nothing. The error carries no key material.
        unsafe e3db_sqlite_log(failure.code, "E3DBSQLite: \(failure.error.description)")
        return failure.code
    }
}

/// A SQLite result code with the typed error behind it.
struct CipherFailure: Error {
    let code: Int32
    let error: E3DBError
    init(_ code: Int32, _ error: E3DBError) {
        self.code = code
        self.error = error
    }
}

/// Keys handed to SQLite by handle in a `file:` URI (`e3db_key=`), so that no key travels in a string. Each key
/// has an owner: `forgetAllKeys()` drops the application's keys and leaves those of this package's own users.
final class KeyRegistry: Sendable {
    static let shared = KeyRegistry()
    struct Entry: Sendable {
        let key: SQLCipherKey
        let settings: SQLCipherSettings
        let owner: E3DBSQLite.KeyOwner
    }
    private let entries = Mutex<[String: Entry]>([:])

    func register(_ key: SQLCipherKey, settings: SQLCipherSettings, owner: E3DBSQLite.KeyOwner = .package)
        -> String
    {
        let handle = SecureRandom.bytes(count: 16).map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
        }.joined()
        register(key, settings: settings, handle: handle, owner: owner)
        return handle
    }

    /// Registers `key` under an existing `handle` (a key forgotten and given back, for URIs already in use).
    func register(
        _ key: SQLCipherKey, settings: SQLCipherSettings, handle: String, owner: E3DBSQLite.KeyOwner = .package
    ) {
        entries.withLock { $0[handle] = Entry(key: key, settings: settings, owner: owner) }
    }

    func entry(_ handle: String) -> Entry? { entries.withLock { $0[handle] } }
    func remove(_ handle: String) { entries.withLock { $0[handle] = nil } }
    /// Removes every key `owner` registered; returns the keys other owners still have registered.
    func removeAll(of owner: E3DBSQLite.KeyOwner) -> [SQLCipherKey] {
        entries.withLock { entries in
            entries = entries.filter { $0.value.owner != owner }
            return entries.values.map(\.key)
        }
    }
}

/// The last typed failure per database path: what SQLite reports as `SQLITE_NOTADB` or `SQLITE_IOERR_DATA`, told
/// apart (wrong key, tampered page N, page size mismatch, …).
/// Kept by path (for GRDB and C callers) and by connection (for ``SQLiteConnection``, whose attached databases
/// have other paths).
enum FailureLog {
    private static let failures = Mutex<(byPath: [String: E3DBError], byConnection: [Int: E3DBError])>(([:], [:]))

    static func record(_ error: E3DBError, path: String, connection: Int?) {
        failures.withLock { logs in
            logs.byPath[path] = error
            if let connection { logs.byConnection[connection] = error }
        }
    }

    static func last(path: String) -> E3DBError? { failures.withLock { $0.byPath[path] } }
    static func last(connection: Int) -> E3DBError? { failures.withLock { $0.byConnection[connection] } }

    static func clear(path: String) { _ = failures.withLock { $0.byPath.removeValue(forKey: path) } }
    static func clear(connection: Int) { _ = failures.withLock { $0.byConnection.removeValue(forKey: connection) } }
}
