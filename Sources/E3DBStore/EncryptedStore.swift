import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
public import Foundation
import GRDB
import Synchronization

/// An embedded encrypted store: E3DB records in one SQLite database (WAL mode) under a key hierarchy.
///
/// A passphrase (Argon2id), a raw key or an enrolled E3DB client identity (an EAK of the master key for its
/// public key) opens the store's master key; the master key wraps one E3DB access key
/// per collection and derives the key that binds every record to its place. Each record is an E3DB
/// `EncryptedDocument` (fields `edk.edkN.ef.efN` under the collection's access key), so a record taken out of the
/// store decrypts in the other SDKs. Its type, `plain` metadata, id, version and timestamps stay in plaintext and
/// are queryable, as in E3DB (docs/store.md lists what the file reveals).
///
/// ```swift
/// let store = try EncryptedStore.create(at: url, credential: .passphrase(secret), kdf: .moderate)
/// let ref = try store.put(collection: "notes", type: "note", data: ["body": "hello"])
/// let record = try store.get(collection: "notes", id: ref.id)
/// ```
///
/// Reads authenticate every record in its place (collection, id, version, timestamps) with a keyed BLAKE2b MAC
/// before decrypting it; a moved or edited record is `E3DBError.Code.recordTampered` naming the record.
/// The type is safe to share between threads and tasks: SQLite's WAL lets readers run beside one writer.
public final class EncryptedStore: Sendable {
    /// The database file's name inside the store directory.
    public static let databaseFileName = "store.sqlite"

    /// The store's directory.
    public let directory: URL
    /// The store's id (the `writer_id` and `user_id` of its records).
    public let storeID: UUID
    /// The store's id as lowercase text (part of every binding MAC).
    let storeIDText: String

    let pool: DatabasePool
    /// Read-only connections for `get` and query pages (no schema check per read).
    let readers: RecordReaders
    let state: Mutex<UnlockedState?>
    /// Decrypted records by binding MAC (nil while locked): bounded, cleared on lock.
    let cache: Mutex<RecordCache?>
    /// How new records' fields get their data keys (see ``fieldKeyMode``).
    let keyMode = Mutex<FieldKeyMode>(.perField)

    struct UnlockedState {
        var keys: StoreKeys
        var accessKeys: [String: CollectionKeys]
        /// Blind-index keys derived from the master key, by collection and index name (see `blindIndexKey`).
        var indexKeys: [IndexKeyName: SecureBytes] = [:]
    }

    /// A store over an open pool; `databasePath` is the pool's file when it is not the store's own (a rekey's copy).
    init(directory: URL, storeID: UUID, pool: DatabasePool, keys: StoreKeys, databasePath: String? = nil) {
        self.directory = directory
        self.storeID = storeID
        self.storeIDText = storeID.lowercasedString
        self.pool = pool
        self.readers = RecordReaders(
            path: databasePath ?? directory.appendingPathComponent(EncryptedStore.databaseFileName).path)
        self.state = Mutex(UnlockedState(keys: keys, accessKeys: [:]))
        self.cache = Mutex(RecordCache(capacity: EncryptedStore.defaultCacheCapacity))
    }

    /// How many decrypted records the cache keeps (YapDatabase keeps 250 objects per connection).
    public static let defaultCacheCapacity = 256

    /// Changes the cache's capacity (0 turns it off); the cached records are dropped.
    public func setCacheCapacity(_ capacity: Int) {
        cache.withLock { $0 = RecordCache(capacity: max(0, capacity)) }
    }

    /// The number of decrypted records in the cache.
    public var cachedRecordCount: Int { cache.withLock { $0?.count ?? 0 } }

    // MARK: Create and open

    /// Creates a new, empty store in `directory` (created if missing; it must not hold a store).
    /// - Parameters:
    ///   - directory: the store's directory.
    ///   - credential: a passphrase or a raw 32-byte key.
    ///   - kdf: the Argon2id cost for a passphrase (ignored for a raw key).
    /// - Throws: `E3DBError.Code.storeExists`, `databaseError`, KDF errors.
    public static func create(
        at directory: URL, credential: StoreCredential, kdf: KDFPreset = .moderate
    ) throws(E3DBError) -> EncryptedStore {
        try create(at: directory, credential: credential, kdfParameters: kdf.parameters)
    }

    /// Creates a new store with explicit Argon2id parameters (for tests and tuning).
    public static func create(
        at directory: URL, credential: StoreCredential, kdfParameters: Argon2id.Parameters
    ) throws(E3DBError) -> EncryptedStore {
        try create(at: directory, credential: credential, kdfParameters: kdfParameters, clientID: nil)
    }

    /// Creates a new store; `clientID` names the identity of an `.identity` credential.
    static func create(
        at directory: URL, credential: StoreCredential, kdfParameters: Argon2id.Parameters, clientID: UUID?
    ) throws(E3DBError) -> EncryptedStore {
        let path = directory.appendingPathComponent(databaseFileName).path
        if FileManager.default.fileExists(atPath: path) {
            throw E3DBError(.storeExists, "a store already exists in \(directory.path)")
        }
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw E3DBError(.databaseError, "cannot create \(directory.path): \(error.localizedDescription)")
        }
        let master = SecretBox.Key()
        let wrapping = try StoreKeys.wrapping(master, for: credential, kdfParameters: kdfParameters)
        let boxKey = Box.PrivateKey()
        let wrappedBox = StoreKeys.wrap(boxKey, under: master)
        let keys = try StoreKeys(master: master, wrappedBoxKey: wrappedBox)
        let storeID = UUID()
        let enrollment = try IdentityEnrollment(
            credential: credential, clientID: clientID, keys: keys, storeID: storeID)
        let pool = try openPool(path: path)
        try databaseCall("creating the store") {
            try StoreSchema.migrator.migrate(pool)
            try pool.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO store_meta (singleton, format, store_id, kdf, kdf_ops, kdf_mem, kdf_salt,
                            wrapped_master, box_public, wrapped_box_private, created)
                        VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        StoreSchema.formatVersion, storeID.lowercasedString, wrapping.kdfName,
                        wrapping.parameters?.opsLimit, wrapping.parameters?.memoryLimit, wrapping.salt,
                        wrapping.wrappedMaster, boxKey.publicKey.rawRepresentation, wrappedBox,
                        StoreTime.format(StoreTime.now()),
                    ])
                if let enrollment { try enrollment.insert(db) }
            }
        }
        let store = EncryptedStore(directory: directory, storeID: storeID, pool: pool, keys: keys)
        try store.checkState(keys, minimumWriteCounter: nil)
        return store
    }

    /// Opens an existing store, and checks its authenticated state (O(collections): every collection's state row
    /// and the store's write counter authenticate).
    ///
    /// A store opened with an older version of this library gets its state here, from its authenticated records.
    ///
    /// - Parameters:
    ///   - directory: the store's directory.
    ///   - credential: a passphrase, raw key or enrolled identity.
    ///   - expectedMinimumWriteCounter: the ``writeCounter`` the app saw last and keeps outside the file (keychain,
    ///     server); a store whose counter is lower is an older copy and is refused. Nil checks nothing.
    /// - Throws: `E3DBError.Code.storeNotFound`; `E3DBError.Code.wrongKey` when the credential does not open
    ///   the master key (checked before any record is read); `storeTampered` when a state row is missing or edited;
    ///   `storeRolledBack` when the write counter is below `expectedMinimumWriteCounter`; `storeCorrupted`,
    ///   `unsupportedStoreVersion`, `databaseError`.
    public static func open(
        at directory: URL, credential: StoreCredential, expectedMinimumWriteCounter: Int? = nil
    ) throws(E3DBError) -> EncryptedStore {
        let path = directory.appendingPathComponent(databaseFileName).path
        guard FileManager.default.fileExists(atPath: path) else {
            throw E3DBError(.storeNotFound, "there is no store in \(directory.path)")
        }
        let pool = try openPool(path: path)
        try databaseCall("migrating the store") { try StoreSchema.migrator.migrate(pool) }
        let header = try readHeader(pool)
        let keys = try unlockKeys(pool, header, with: credential)
        let store = EncryptedStore(directory: directory, storeID: header.storeID, pool: pool, keys: keys)
        try store.checkState(keys, minimumWriteCounter: expectedMinimumWriteCounter)
        return store
    }

    struct Header {
        let storeID: UUID
        let parameters: Argon2id.Parameters?
        let salt: Data
        /// Empty when the store has no passphrase or key (it opens with an enrolled identity only).
        let wrappedMaster: Data
        let wrappedBoxKey: Data
        /// The store's Curve25519 public key (the authorizer of the EAKs that open it for identities).
        let boxPublicKey: Data
    }

    static func readHeader(_ pool: DatabasePool) throws(E3DBError) -> Header {
        let row = try databaseCall("reading the store header") {
            try pool.read { db in try Row.fetchOne(db, sql: "SELECT * FROM store_meta WHERE singleton = 1") }
        }
        guard let row else { throw E3DBError(.storeCorrupted, "the store has no header row") }
        guard let format = row["format"] as Int?, format >= 1 else {
            throw E3DBError(.storeCorrupted, "the store header has no format version")
        }
        guard format <= StoreSchema.formatVersion else {
            throw E3DBError(
                .unsupportedStoreVersion,
                "the store is format \(format); this library reads up to \(StoreSchema.formatVersion)",
                context: .init(version: String(format)))
        }
        guard let idText = row["store_id"] as String?, let storeID = UUID(uuidString: idText),
            let kdf = row["kdf"] as String?, let salt = row["kdf_salt"] as Data?, salt.count == Argon2id.saltByteCount,
            let wrapped = row["wrapped_master"] as Data?, let wrappedBox = row["wrapped_box_private"] as Data?,
            let boxPublic = row["box_public"] as Data?
        else {
            throw E3DBError(.storeCorrupted, "the store header is damaged")
        }
        guard kdf == "none" || !wrapped.isEmpty else {
            throw E3DBError(.storeCorrupted, "the store header has no wrapped master key")
        }
        var parameters: Argon2id.Parameters?
        switch kdf {
        case "raw", "none": parameters = nil
        case "argon2id13":
            guard let ops = row["kdf_ops"] as Int?, let mem = row["kdf_mem"] as Int?, ops > 0, mem > 0 else {
                throw E3DBError(.storeCorrupted, "the store header's Argon2id parameters are damaged")
            }
            parameters = Argon2id.Parameters(opsLimit: ops, memoryLimit: mem)
        default:
            throw E3DBError(.storeCorrupted, "the store header names an unknown KDF")
        }
        return Header(
            storeID: storeID, parameters: parameters, salt: salt, wrappedMaster: kdf == "none" ? Data() : wrapped,
            wrappedBoxKey: wrappedBox, boxPublicKey: boxPublic)
    }

    static func openPool(path: String) throws(E3DBError) -> DatabasePool {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // Keep SQLite's temporary tables and sort files in memory, and zero deleted content.
            try db.execute(sql: "PRAGMA temp_store = MEMORY; PRAGMA secure_delete = ON")
        }
        return try databaseCall("opening \(path)") { try DatabasePool(path: path, configuration: configuration) }
    }
}

/// Adds the record's id to an error from the documents layer.
func withItem<T>(_ item: String, _ body: () throws(E3DBError) -> T) throws(E3DBError) -> T {
    do {
        return try body()
    } catch {
        var context = error.context
        context.item = item
        throw E3DBError(error.code, "record \(item): \(error.message)", context: context)
    }
}

/// Runs a GRDB call, turning its errors into `E3DBError` (see ``storeError(_:doing:)``; E3DBErrors thrown inside pass
/// through).
func databaseCall<T>(_ doing: String, _ body: () throws -> T) throws(E3DBError) -> T {
    do {
        return try body()
    } catch {
        throw storeError(error, doing: doing)
    }
}

/// The one mapping of a database failure to an `E3DBError`: a damaged file (`SQLITE_CORRUPT`, `SQLITE_NOTADB`: a
/// malformed page, a truncated file, a header that is not SQLite's) is `storeCorrupted`; a lock another connection
/// holds past the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`) is `storeBusy`; any other SQLite or I/O failure is
/// `databaseError`. `doing` says what the store was doing, for the message.
func storeError(_ error: any Error, doing: String) -> E3DBError {
    switch error {
    case let error as E3DBError:
        return error
    case let error as DatabaseError where error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB:
        return E3DBError(
            .storeCorrupted,
            "\(doing): the store's database file is damaged (SQLite error \(error.resultCode.rawValue): "
                + "\(error.message ?? "")); restore it from a backup")
    case let error as DatabaseError where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED:
        return E3DBError(
            .storeBusy,
            "\(doing): the store is busy (SQLite error \(error.resultCode.rawValue): \(error.message ?? "")); another "
                + "connection holds its write lock (a rekey holds it while it copies the store)")
    case let error as DatabaseError:
        return E3DBError(.databaseError, "\(doing): SQLite error \(error.resultCode.rawValue): \(error.message ?? "")")
    default:
        return E3DBError(.databaseError, "\(doing): \(error)")
    }
}
