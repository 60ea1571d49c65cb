internal import CE3DBSQLite3
public import E3DBPrimitives

extension E3DBError.Code {
    /// A database's content is malformed: SQLite found the file not a database or its b-tree damaged ("database
    /// disk image is malformed") where no page failed to authenticate (a file cut at a page boundary), or a schema
    /// entry of a database being exported (encrypt, decrypt, rekey to other settings) is not exactly one statement
    /// creating that entry (context: item, the entry's name; part `sqlite_schema`).
    public static let databaseMalformed = Self("databaseMalformed", category: .malformedInput)
}

// SQLite's extended I/O result codes: sqlite3.h defines them as expressions, which Swift does not import.
let SQLITE_IOERR_READ = SQLITE_IOERR | (1 << 8)
let SQLITE_IOERR_SHORT_READ = SQLITE_IOERR | (2 << 8)
let SQLITE_IOERR_WRITE = SQLITE_IOERR | (3 << 8)
let SQLITE_IOERR_FSYNC = SQLITE_IOERR | (4 << 8)
let SQLITE_IOERR_TRUNCATE = SQLITE_IOERR | (6 << 8)
let SQLITE_IOERR_FSTAT = SQLITE_IOERR | (7 << 8)
let SQLITE_IOERR_UNLOCK = SQLITE_IOERR | (8 << 8)
let SQLITE_IOERR_CHECKRESERVEDLOCK = SQLITE_IOERR | (14 << 8)
let SQLITE_IOERR_LOCK = SQLITE_IOERR | (15 << 8)
let SQLITE_IOERR_SHMLOCK = SQLITE_IOERR | (20 << 8)
let SQLITE_IOERR_SHMMAP = SQLITE_IOERR | (21 << 8)
/// The code SQLite's checksum VFS uses for data that failed its check: here, a page that did not authenticate.
let SQLITE_IOERR_DATA = SQLITE_IOERR | (32 << 8)
