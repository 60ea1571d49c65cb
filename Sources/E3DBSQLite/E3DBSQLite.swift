internal import CE3DBSQLite3
// The vocabulary of this module's API (SQLCipherKey, SQLCipherSettings, SecureBytes, E3DBError): an app imports
// E3DBSQLite alone.
@_exported public import E3DBPageCodec
@_exported public import E3DBPrimitives
internal import Foundation

/// Transparent whole-database encryption for SQLite apps on the system SQLite, reading and writing SQLCipher 4
/// files, as a VFS: the app keeps its schema, SQL and SQLite layer, and every page that reaches the disk is
/// encrypted and authenticated.
///
/// With GRDB, two lines:
/// ```swift
/// let uri = try E3DBSQLite.uri(forDatabaseAt: path, key: .passphrase(passphrase))
/// let dbPool = try DatabasePool(path: uri)
/// ```
/// With SQLite.swift or the C API, open `file:/path/to/db?vfs=e3dbkit-sqlcipher` after ``register()`` and run
/// `PRAGMA key = '…'` first, as with SQLCipher. See docs/sqlite.md.
public enum E3DBSQLite {
    /// The name the VFS is registered under.
    public static let vfsName = CipherVFS.name

    /// Registers the VFS with SQLite (once per process; not as the default VFS).
    /// - Throws: ``E3DBError/Code/databaseError`` when SQLite refuses it.
    public static func register() throws(E3DBError) {
        try CipherVFS.registration.get()
    }

    /// A `file:` URI that opens `path` through the VFS with `key`: give it to GRDB's `DatabaseQueue` or
    /// `DatabasePool`, or to `sqlite3_open_v2`.
    ///
    /// The key stays in this process, in wiped storage; the URI carries only a random handle to it, valid until
    /// ``forgetKey(inURI:)`` or ``forgetAllKeys()``. The key is derived once per database file (``PageCodecCache``),
    /// however many connections open the URI.
    /// - Throws: ``E3DBError/Code/invalidKey`` for a malformed key, ``E3DBError/Code/invalidParameter`` for bad
    ///   settings.
    public static func uri(forDatabaseAt path: String, key: SQLCipherKey, settings: SQLCipherSettings = .v4)
        throws(E3DBError) -> String
    {
        try uri(forDatabaseAt: path, key: key, settings: settings, owner: .application)
    }

    /// Who registered a key: ``forgetAllKeys()`` forgets the application's keys only.
    package enum KeyOwner: Sendable {
        /// The app, through ``uri(forDatabaseAt:key:settings:)``.
        case application
        /// This package: the store's page keys, the keys `SQLiteConnection` and the operations register for their
        /// own connections. Each owner forgets its own (`forgetKey(inURI:)`, or when the connection closes).
        case package
    }

    /// ``uri(forDatabaseAt:key:settings:)`` for a key of `owner` (the store registers its page key as `.package`,
    /// so that an app's ``forgetAllKeys()`` cannot take it from an open store).
    package static func uri(
        forDatabaseAt path: String, key: SQLCipherKey, settings: SQLCipherSettings = .v4, owner: KeyOwner
    ) throws(E3DBError) -> String {
        try key.validate()
        try settings.validate()
        try register()
        let handle = KeyRegistry.shared.register(key, settings: settings, owner: owner)
        return uri(path: path, parameters: ["vfs": vfsName, "e3db_key": handle])
    }

    /// Forgets the key a URI of ``uri(forDatabaseAt:key:settings:)`` refers to; connections already open keep
    /// working, new ones fail with ``E3DBError/Code/keyMissing``.
    public static func forgetKey(inURI uri: String) {
        guard let handle = keyHandle(inURI: uri) else { return }
        KeyRegistry.shared.remove(handle)
    }

    /// Gives a URI of ``uri(forDatabaseAt:key:settings:)`` its key again after ``forgetKey(inURI:)`` (a store that
    /// forgets its page key while locked and gets it back at unlock, with connections that keep the URI), as a key of
    /// this package (`KeyOwner.package`).
    /// - Throws: ``E3DBError/Code/invalidKey`` for a malformed key, ``E3DBError/Code/invalidParameter`` for bad
    ///   settings or a URI without a key handle.
    package static func restoreKey(_ key: SQLCipherKey, settings: SQLCipherSettings = .v4, inURI uri: String)
        throws(E3DBError)
    {
        try key.validate()
        try settings.validate()
        guard let handle = keyHandle(inURI: uri) else {
            throw E3DBError(.invalidParameter, "the URI has no key handle")
        }
        KeyRegistry.shared.register(key, settings: settings, handle: handle)
    }

    /// Whether `uri` names a key handle that is not registered in this process (forgotten, or never given here), so
    /// that a new connection through it cannot read the database. False for a URI without a key handle.
    package static func isKeyMissing(inURI uri: String) -> Bool {
        guard let handle = keyHandle(inURI: uri) else { return false }
        return KeyRegistry.shared.entry(handle) == nil
    }

    /// The key handle of a URI of ``uri(forDatabaseAt:key:settings:)``.
    private static func keyHandle(inURI uri: String) -> String? {
        guard let range = uri.range(of: "e3db_key=") else { return nil }
        return String(uri[range.upperBound...].prefix { $0 != "&" })
    }

    /// Forgets every key registered through ``uri(forDatabaseAt:key:settings:)`` and every cached derived key
    /// (``PageCodecCache``) but those an open connection uses under a key another owner still has registered. Keys
    /// other owners in this process registered stay theirs: an `EncryptedStore`'s page key (the store forgets it
    /// when it locks or closes) and those of connections this module opens for its own operations, so a store open
    /// in the same process keeps working without deriving its page key again (its writer connection holds the
    /// derived keys while it is unlocked). Connections already open keep working.
    public static func forgetAllKeys() {
        let kept = KeyRegistry.shared.removeAll(of: .application)
        PageCodecCache.shared.removeAll(keeping: kept)
    }

    /// The typed reason of the last failure of the VFS on the database at `path`: what SQLite reports as
    /// `SQLITE_NOTADB` ("file is not a database") or `SQLITE_IOERR_DATA` told apart as a wrong key, a missing key,
    /// a tampered page (`context.actual` is its number), a page size or reserve mismatch.
    public static func lastFailure(forDatabaseAt path: String) -> E3DBError? {
        FailureLog.last(path: canonicalPath(path))
    }

    // MARK: Paths and URIs

    /// `path` made absolute, its directory's symbolic links resolved, as SQLite names the file.
    static func canonicalPath(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let url = URL(fileURLWithPath: absolute).standardizedFileURL
        let directory = url.deletingLastPathComponent().resolvingSymlinksInPath().path
        return (directory == "/" ? "" : directory) + "/" + url.lastPathComponent
    }

    /// A `file:` URI for `path` with query `parameters` (the path percent-encoded as SQLite decodes it).
    static func uri(path: String, parameters: [String: String]) -> String {
        uri(canonicalPath: canonicalPath(path), parameters: parameters)
    }

    /// A `file:` URI for a path already made canonical (``canonicalPath(_:)``).
    static func uri(canonicalPath absolute: String, parameters: [String: String]) -> String {
        var allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/".utf8)
        allowed.insert(UInt8(ascii: "/"))
        var encoded = "file:"
        for byte in absolute.utf8 {
            if allowed.contains(byte) {
                encoded.append(Character(Unicode.Scalar(byte)))
            } else {
                encoded += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        let query = parameters.keys.sorted().map { "\($0)=\(parameters[$0] ?? "")" }.joined(separator: "&")
        return query.isEmpty ? encoded : encoded + "?" + query
    }

    // Safety: the VFS structs SQLite registers live as long as the process, and `zName` is NUL-terminated; the name is
    // copied.
    /// The name of the VFS this one wraps (plaintext databases are attached through it).
    static var baseVFSName: String {
        guard let base = unsafe CipherVFS.base ?? sqlite3_vfs_find(nil), let name = unsafe base.pointee.zName else {
            return "unix"
        }
        return unsafe String(cString: name)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
