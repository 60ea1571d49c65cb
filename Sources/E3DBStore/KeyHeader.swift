import E3DBPrimitives
import E3DBRows
import E3DBSQLite
import Foundation
import GRDB

/// How a store keeps its SQLite database file.
public enum DatabaseEncryption: String, Sendable, CaseIterable {
    /// Every page of the database (and of its WAL) encrypted and authenticated in SQLCipher 4's format by E3DBSQLite,
    /// under a raw key derived from the master key: collection names, types, plain metadata, blind-index tokens and
    /// value sizes are not readable in the file. The default for new stores.
    case encrypted
    /// A plain SQLite file (the layout of stores made before the encrypted file): records are E3DB documents, but
    /// the query tables around them are readable in the file (docs/store.md lists what).
    case plain
}

/// The store's key header, `keys.sqlite` beside the database: the one home of the key material that opens the store
/// (`store_meta`: format, store id, KDF and salt, the master key sealed under the credential's key, the store's box
/// key pair; `store_identities`: the EAKs of enrolled clients), and the name and encryption of the database file it
/// belongs to. It must be readable before the database is (the database's key derives from the master key).
///
/// A plain SQLite file in rollback-journal mode: a passphrase change or an enrollment is one transaction, with
/// SQLite's locking between processes, and pointing the header at another database file (a rekey's copy) is one
/// `UPDATE`. It holds nothing that the credential does not protect but public keys, client ids, KDF parameters and
/// the store id.
enum KeyHeader {
    /// The header's file name inside the store directory.
    static let fileName = "keys.sqlite"

    /// The header's schema: the store's `store_meta` and `store_identities` of format 1, with the database file's
    /// name and encryption.
    static let schema = """
        CREATE TABLE store_meta (
            singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
            format INTEGER NOT NULL,
            store_id TEXT NOT NULL,
            kdf TEXT NOT NULL,
            kdf_ops INTEGER,
            kdf_mem INTEGER,
            kdf_salt BLOB NOT NULL,
            wrapped_master BLOB NOT NULL,
            box_public BLOB NOT NULL,
            wrapped_box_private BLOB NOT NULL,
            created TEXT NOT NULL,
            database_file TEXT NOT NULL,
            database_encryption TEXT NOT NULL
        ) STRICT;
        CREATE TABLE store_identities (
            public_key BLOB PRIMARY KEY,
            client_id TEXT,
            eak_info TEXT NOT NULL,
            created TEXT NOT NULL
        ) STRICT;
        """

    /// Writes a new header in `directory`: built in a temporary file (mode 0600 from the start, named as the package's
    /// `AtomicFile` names them) by `fill` (inside one transaction, which SQLite syncs), then renamed into place and
    /// the directory synced (`AtomicFile.replace`), so that a crash leaves either no header or a complete one.
    static func create(in directory: URL, _ fill: (Database) throws -> Void) throws(E3DBError) {
        let url = directory.appendingPathComponent(fileName)
        let temporary = URL(fileURLWithPath: AtomicFile.temporaryPath(in: directory.path))
        try StoreFileSystem.createPrivateFile(temporary)
        // A header that was not put in place leaves nothing behind (a crash may: a `.e3dbkit-<hex>.tmp` file).
        func discard() {
            for suffix in ["", "-journal"] { try? FileManager.default.removeItem(atPath: temporary.path + suffix) }
        }
        do throws(E3DBError) {
            try databaseCall("writing the store's key header") {
                let queue = try DatabaseQueue(path: temporary.path, configuration: configuration)
                try queue.write { db in
                    try db.execute(sql: schema)
                    try fill(db)
                }
                try queue.close()
            }
        } catch {
            discard()
            throw error
        }
        do throws(FileIOError) {
            // rename(2): the header appears whole or not at all.
            try AtomicFile.replace(url.path, with: temporary.path)
        } catch {
            discard()
            throw E3DBError(.databaseError, "cannot put the key header in place in \(directory.path): \(error)")
        }
    }

    /// Inserts the header's one `store_meta` row: `values` are format, store id, KDF name, Argon2id ops and memory
    /// (NULL for a raw key), salt, wrapped master key, box public key, wrapped box private key, creation time,
    /// database file name and encryption, in this order.
    static func insertMeta(_ db: Database, _ values: StatementArguments) throws {
        try db.execute(
            sql: """
                INSERT INTO store_meta (singleton, format, store_id, kdf, kdf_ops, kdf_mem, kdf_salt,
                    wrapped_master, box_public, wrapped_box_private, created, database_file, database_encryption)
                VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: values)
    }

    /// Opens the header of a store (rollback-journal mode, as SQLite creates it).
    static func open(in directory: URL) throws(E3DBError) -> DatabaseQueue {
        let path = directory.appendingPathComponent(fileName).path
        return try databaseCall("opening the store's key header") {
            try DatabaseQueue(path: path, configuration: configuration)
        }
    }

    static var configuration: Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA secure_delete = ON") }
        return configuration
    }

    /// Moves the key material of a store made before the key header (its `store_meta` and `store_identities` rows in
    /// the database, which is plain) into a new header. The header is written first and the tables are dropped later
    /// by migration `v7-key-header`, so a crash in between leaves both, and an open uses the header.
    /// - Throws: `storeCorrupted` when the database has no `store_meta`.
    static func migrate(in directory: URL, databaseFile: String) throws(E3DBError) {
        let path = directory.appendingPathComponent(databaseFile).path
        let pool = try EncryptedStore.openPool(location: path, lock: nil)
        let rows = try databaseCall("reading the store's key material") {
            try pool.read { db -> (Row?, [Row]) in
                guard try db.tableExists("store_meta") else { return (nil, []) }
                let meta = try Row.fetchOne(db, sql: "SELECT * FROM store_meta WHERE singleton = 1")
                let identities =
                    try db.tableExists("store_identities")
                    ? try Row.fetchAll(db, sql: "SELECT * FROM store_identities ORDER BY rowid") : []
                return (meta, identities)
            }
        }
        try databaseCall("closing the store's database") { try pool.close() }
        guard let fetched = rows.0 else { throw E3DBError(.storeCorrupted, "the store has no key header") }
        // Copied as they are (the header's STRICT table refuses a value of the wrong type; `readHeader` checks them).
        let meta = UntrustedRow(store: fetched, table: "store_meta")
        var values: [DatabaseValue] = []
        for column in [
            "format", "store_id", "kdf", "kdf_ops", "kdf_mem", "kdf_salt", "wrapped_master", "box_public",
            "wrapped_box_private", "created",
        ] {
            values.append(try meta.databaseValue(column))
        }
        var identities: [[DatabaseValue]] = []
        for fetched in rows.1 {
            let row = UntrustedRow(store: fetched, table: "store_identities")
            var identity: [DatabaseValue] = []
            for column in ["public_key", "client_id", "eak_info", "created"] {
                identity.append(try row.databaseValue(column))
            }
            identities.append(identity)
        }
        try create(in: directory) { db in
            try insertMeta(
                db,
                StatementArguments(
                    values + [databaseFile.databaseValue, DatabaseEncryption.plain.rawValue.databaseValue]))
            for identity in identities {
                try db.execute(
                    sql: "INSERT INTO store_identities (public_key, client_id, eak_info, created) VALUES (?, ?, ?, ?)",
                    arguments: StatementArguments(identity))
            }
        }
    }
}

extension KeyHeader {
    /// The table of an unfinished rekey (created by the first rekey): the name of its copy of the database and the
    /// copy's master key sealed under the current one. The copy may be encrypted under a key of its own master key,
    /// so the key that resumes it cannot be only inside it; the commit point deletes the row.
    static let rekeySchema = """
        CREATE TABLE IF NOT EXISTS rekey_pending (
            singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
            database_file TEXT NOT NULL,
            sealed_master BLOB NOT NULL
        ) STRICT
        """

    /// The unfinished rekey's copy (its file name and sealed master key), nil when there is none.
    /// - Throws: `storeCorrupted` naming the column when the row is damaged or names a file that is not a rekey
    ///   copy's (`store-<8 hex>.sqlite`): the name steers what a rekey removes, so nothing else is accepted.
    static func pendingRekey(_ db: Database) throws -> (file: String, sealedMaster: Data)? {
        guard try db.tableExists("rekey_pending"),
            let fetched = try Row.fetchOne(db, sql: "SELECT database_file, sealed_master FROM rekey_pending")
        else { return nil }
        let row = UntrustedRow(store: fetched, table: "rekey_pending")
        let file = try row.value("database_file", as: String.self)
        guard isRekeyCopyName(file) else {
            throw row.error("database_file", "is not a name the store gives a rekey's copy")
        }
        return (file, try row.value("sealed_master", as: Data.self))
    }

    /// Whether `name` (without its `-wal`, `-shm` or `-journal`) is a name the store gives a database file:
    /// `store.sqlite` or a rekey's `store-<8 hex>.sqlite`. The key header, and anything else in the directory (a
    /// `store.sqlite.bak` of the user's), is not.
    static func isDatabaseFileName(_ name: String) -> Bool {
        name == EncryptedStore.databaseFileName || isRekeyCopyName(name)
    }

    /// Whether `name` is a rekey's copy: `store-<8 lowercase hex>.sqlite`.
    static func isRekeyCopyName(_ name: String) -> Bool {
        guard name.hasPrefix("store-"), name.hasSuffix(".sqlite") else { return false }
        let hex = name.utf8.dropFirst("store-".count).dropLast(".sqlite".count)
        return hex.count == 8 && hex.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// The database files the store gave names to (and their `-wal`, `-shm`, `-journal`) that are neither `live` (the
    /// open store's own database file) nor an unfinished rekey's copy: an old database a rekey left when it stopped
    /// between its commit point and the removal. They are removed only by `rekey` itself and by an explicit
    /// `store gc` (`EncryptedStore.removeStaleDatabaseFiles()`), on a store that opened and authenticated, never at
    /// open. The directory is listed inside a read transaction of the header, so a rekey cannot name a new copy
    /// meanwhile (it names its copy in the header before it creates the file). Only regular files are removed.
    /// - Returns: the names removed, sorted.
    static func removeStaleDatabaseFiles(in directory: URL, live: String, _ keyHeader: DatabaseQueue) throws(E3DBError)
        -> [String]
    {
        try databaseCall("removing old database files") {
            try keyHeader.inDatabase { db -> [String] in
                var removed: [String] = []
                try db.inTransaction(.deferred) {
                    var keep: Set<String> = [live]
                    if let pending = try pendingRekey(db) { keep.insert(pending.file) }
                    let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
                    for name in names.sorted() {
                        var base = name
                        for suffix in ["-wal", "-shm", "-journal"] where base.hasSuffix(suffix) {
                            base.removeLast(suffix.count)
                        }
                        let url = directory.appendingPathComponent(name)
                        guard isDatabaseFileName(base), !keep.contains(base),
                            try StoreFileSystem.kind(of: url) == .regularFile
                        else { continue }
                        try FileManager.default.removeItem(at: url)
                        removed.append(name)
                    }
                    return .commit
                }
                return removed
            }
        }
    }
}
