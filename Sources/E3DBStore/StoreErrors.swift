public import E3DBPrimitives
import E3DBRows
import GRDB

extension E3DBError.Code {
    /// A blind-index entry is missing, differs from the token its record's data gives, or points at no record
    /// (`verify()`, and a query that found a record through an entry its data does not give; the record id or
    /// index name in `context.item`).
    public static let indexEntryMismatch = Self("indexEntryMismatch", category: .verification)
    /// There is no store at the path given.
    public static let storeNotFound = Self("storeNotFound", category: .invalidArgument)
    /// A store already exists where a new one was to be created.
    public static let storeExists = Self("storeExists", category: .invalidArgument)
    /// The store's own tables hold something its format does not allow (a damaged or foreign database), or SQLite
    /// found the file damaged (`SQLITE_CORRUPT`, `SQLITE_NOTADB`: a malformed page, a truncated file).
    public static let storeCorrupted = Self("storeCorrupted", category: .malformedInput)
    /// The store's format version is newer than this library reads.
    public static let unsupportedStoreVersion = Self("unsupportedStoreVersion", category: .malformedInput)
    /// Another connection holds the store's write lock past the busy timeout (a rekey holds it while it copies the
    /// store), or has the store open when a rekey swaps its file.
    public static let storeBusy = Self("storeBusy", category: .io)
    /// The store was locked (``EncryptedStore/lock()``); its keys are gone from memory.
    public static let storeLocked = Self("storeLocked", category: .invalidArgument)
    /// No record with this id in this collection. `context.item` names it.
    public static let recordNotFound = Self("recordNotFound", category: .invalidArgument)
    /// No collection of that name.
    public static let collectionNotFound = Self("collectionNotFound", category: .invalidArgument)
    /// The record changed since the version the caller read (safe update or delete). `context.item` names it,
    /// `context.expected` and `context.actual` hold the versions.
    public static let versionConflict = Self("versionConflict", category: .invalidArgument)
    /// A stored record does not authenticate in its place: its bytes were edited, or it was moved from another
    /// row, collection or version; or its plaintext query columns (`type`, `plain`) differ from its authenticated
    /// meta, so a query selected it wrongly (or would miss it). `context.item` names the record.
    public static let recordTampered = Self("recordTampered", category: .verification)
    /// The store's authenticated state does not match: a collection's state row (record count and digest) or the
    /// store's write-counter row is missing or does not authenticate (at open, unlock and any write), or a
    /// collection's records are not the ones its state counts (`verify()`: a record row deleted, a deleted row put
    /// back, an older version of a row restored). `context.item` names the collection, or `store`. Also a key header
    /// naming another database file or encryption than the master key sealed (`context.part`
    /// `store_meta.database_file`), and a `files/` that is a symbolic link or not a directory (item `files`).
    public static let storeTampered = Self("storeTampered", category: .verification)
    /// The store's authenticated write counter is lower than the minimum the caller expects
    /// (`EncryptedStore.open(at:credential:expectedMinimumWriteCounter:)`): the file is an older copy of the store.
    /// `context.expected` holds the minimum, `context.actual` the store's counter.
    public static let storeRolledBack = Self("storeRolledBack", category: .verification)
}

extension UntrustedRow {
    /// A row of the store's database or key header: a value of the wrong type, a NULL where a value belongs or a
    /// missing column is `storeCorrupted` naming `table.column`.
    init(store row: Row, table: String) { self.init(row, table: table, failure: .storeCorrupted, owner: "the store's") }

    /// The first column of every row `sql` selects from `table` (`column` names it in errors), read untrusted.
    static func storeColumn<Value: DatabaseValueConvertible>(
        _ db: Database, _ sql: String, arguments: StatementArguments = [], table: String, column: String,
        as type: Value.Type = Value.self
    ) throws -> [Value] {
        try Row.fetchAll(db, sql: sql, arguments: arguments).map { row throws(E3DBError) in
            try UntrustedRow(store: row, table: table).value(at: 0, column, as: type)
        }
    }
}
