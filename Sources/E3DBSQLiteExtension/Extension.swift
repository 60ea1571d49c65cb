internal import CE3DBSQLite3
internal import E3DBSQLite

// A SQLite loadable extension built from E3DBSQLite: any program on the system SQLite (Python's sqlite3, the sqlite3
// shell) loads it with `load_extension` and can then open `file:…?vfs=e3dbkit-sqlcipher` with `PRAGMA key`, that is,
// read and write SQLCipher 4 databases without SQLCipher, and SQLite3 Multiple Ciphers' chacha20 databases
// (`PRAGMA cipher = 'chacha20'` and `legacy` before the key, or `cipher=chacha20` in the URI). It links the same
// libsqlite3 as its host, so it needs no `sqlite3_api_routines` indirection; it registers the VFS and stays loaded
// for the life of the process.

/// `SQLITE_OK_LOAD_PERMANENTLY`: the extension (and so the VFS) stays when the loading connection closes.
private let loadPermanently: Int32 = 256

/// The entry point SQLite looks for first when `load_extension` names no other.
@_cdecl("sqlite3_extension_init")
public func sqlite3ExtensionInit(
    _ connection: OpaquePointer?, _ errorMessage: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ api: UnsafeRawPointer?
) -> Int32 {
    do {
        try E3DBSQLite.register()
    } catch {
        return SQLITE_ERROR
    }
    return loadPermanently
}
