import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import E3DBRows
import E3DBSQLite
public import Foundation
import GRDB
import Synchronization

/// An embedded encrypted store: E3DB records in one SQLite database (WAL mode, encrypted by default) under a key
/// hierarchy.
///
/// A passphrase (Argon2id), a raw key or an enrolled E3DB client identity (an EAK of the master key for its
/// public key) opens the store's master key; the master key wraps one E3DB access key
/// per collection and derives the key that binds every record to its place. Each record is an E3DB
/// `EncryptedDocument` (fields `edk.edkN.ef.efN` under the collection's access key), so a record taken out of the
/// store decrypts in the other SDKs. Its type, `plain` metadata, id, version and timestamps stay outside the E3DB
/// record and are queryable, as in E3DB; by default the SQLite file is encrypted by E3DBSQLite under a key derived
/// from the master key, so they are not readable in the file (``DatabaseEncryption``; docs/store.md lists what the
/// file reveals). The key material sits in a key header beside the database (``keyHeaderFileName``).
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
    /// The database file's name inside the store directory (a new store's; the key header names the file of an
    /// existing one).
    public static let databaseFileName = "store.sqlite"
    /// The key header's name inside the store directory: the key material that opens the store, readable before
    /// the database (whose pages may be encrypted under a key derived from the master key).
    public static let keyHeaderFileName = KeyHeader.fileName

    /// The store's directory.
    public let directory: URL
    /// The store's id (the `writer_id` and `user_id` of its records).
    public let storeID: UUID
    /// The store's id as lowercase text (part of every binding MAC).
    let storeIDText: String
    /// Whether the store's database file is encrypted (E3DBSQLite) or plain.
    public let databaseEncryption: DatabaseEncryption

    let pool: DatabasePool
    /// The key header (`keys.sqlite`): the credential wrappings and enrolled identities.
    let keyHeader: DatabaseQueue
    /// The database file's path (the file the key header names).
    let databasePath: String
    /// The URI that opens the encrypted database (nil for a plain file): it names the page key in this process by a
    /// handle, which ``lock()`` forgets and `unlock(_:)` gives back.
    let databaseURI: String?
    /// Read-only connections for `get` and query pages (no schema check per read).
    let readers: RecordReaders
    /// The store's one lock state: its keys while unlocked (what every call reads), and whether new connections
    /// may open (what every new connection checks first). ``lock()`` never waits; an `unlock(_:)` that a lock
    /// overtook fails.
    let lockState: StoreLock
    /// Decrypted records by binding MAC (nil when turned off): bounded, emptied by ``lock()``; a record enters it
    /// only while the store is unlocked (see `decode`).
    let cache: Mutex<RecordCache?>
    /// How new records' fields get their data keys (see ``fieldKeyMode``).
    let keyMode = Mutex<FieldKeyMode>(.perField)
    /// Tests only: what runs at each ``TestPoint`` (see `setTestHook`).
    let testHooks = Mutex<[TestPoint: @Sendable () -> Void]>([:])
    /// The permits of this store's async calls that run on a thread of their own (`blocking`, EncryptedStore+Async).
    let blockingPermits = AsyncPermits<Never>(EncryptedStore.blockingLimit)

    /// Places in the store's operations where a test can make something happen deterministically (a concurrent key
    /// rotation, a look at the files).
    package enum TestPoint: Sendable, Hashable {
        /// In every `put`, after its records are encrypted, before its write transaction opens.
        case beforeInsertTransaction
        /// In `export`, after each page of records is written to the unpublished records file.
        case afterExportPage
        /// In `export`, after the first of its two files is published, before the second is.
        case betweenExportFiles
        /// In `unlock`, after its key derivation, before the page key is given back.
        case unlockAfterKeyDerivation
        /// In `unlock`, after the page key is back and the store is marked unlocking, before its state check.
        case unlockBeforeStateCheck
        /// In `unlock`, after its state check passed, before the keys become the store's.
        case unlockBeforeCommit
        /// In a record read, after the record is decrypted, before it enters the cache.
        case beforeCacheInsert
    }

    /// Tests only: `hook` runs at `point` from now on (nil: nothing does).
    package func setTestHook(_ point: TestPoint, _ hook: (@Sendable () -> Void)?) {
        testHooks.withLock { $0[point] = hook }
    }

    /// Runs the test hook at `point`, if any (outside the hooks' lock, so that a hook may set hooks).
    func testHook(_ point: TestPoint) {
        testHooks.withLock { $0[point] }?()
    }

    struct UnlockedState {
        var keys: StoreKeys
        var accessKeys: [String: CollectionKeys]
        /// Blind-index keys derived from the master key, by collection and index name (see `blindIndexKey`).
        var indexKeys: [IndexKeyName: SecureBytes] = [:]
    }

    init(directory: URL, header: Header, keyHeader: DatabaseQueue, database: OpenDatabase, keys: StoreKeys) {
        self.directory = directory
        self.storeID = header.storeID
        self.storeIDText = header.storeID.lowercasedString
        self.databaseEncryption = header.encryption
        self.pool = database.pool
        self.keyHeader = keyHeader
        self.databaseURI = database.uri
        self.databasePath = database.path
        self.lockState = database.lock
        self.readers = RecordReaders(location: database.location, lock: database.lock)
        database.lock.open(UnlockedState(keys: keys, accessKeys: [:]))
        self.cache = Mutex(RecordCache(capacity: EncryptedStore.defaultCacheCapacity))
    }

    deinit {
        if let databaseURI { E3DBSQLite.forgetKey(inURI: databaseURI) }
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
    ///   - databaseEncryption: whether the database file is encrypted (the default) or plain.
    /// - Throws: `E3DBError.Code.storeExists`, `databaseError`, KDF errors.
    public static func create(
        at directory: URL, credential: StoreCredential, kdf: KDFPreset = .moderate,
        databaseEncryption: DatabaseEncryption = .encrypted
    ) throws(E3DBError) -> EncryptedStore {
        try create(
            at: directory, credential: credential, kdfParameters: kdf.parameters, databaseEncryption: databaseEncryption
        )
    }

    /// Creates a new store with explicit Argon2id parameters (for tests and tuning).
    public static func create(
        at directory: URL, credential: StoreCredential, kdfParameters: Argon2id.Parameters,
        databaseEncryption: DatabaseEncryption = .encrypted
    ) throws(E3DBError) -> EncryptedStore {
        try create(
            at: directory, credential: credential, kdfParameters: kdfParameters, clientID: nil,
            databaseEncryption: databaseEncryption)
    }

    /// Creates a new store; `clientID` names the identity of an `.identity` credential. The key header is written
    /// first (complete or absent after a crash), then the database under the key the header's master key derives.
    static func create(
        at directory: URL, credential: StoreCredential, kdfParameters: Argon2id.Parameters, clientID: UUID?,
        databaseEncryption: DatabaseEncryption
    ) throws(E3DBError) -> EncryptedStore {
        for name in [KeyHeader.fileName, databaseFileName]
        where FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).path) {
            throw E3DBError(.storeExists, "a store already exists in \(directory.path)")
        }
        try StoreFileSystem.create(directory)
        let master = SecretBox.Key()
        let wrapping = try StoreKeys.wrapping(master, for: credential, kdfParameters: kdfParameters)
        let boxKey = Box.PrivateKey()
        let wrappedBox = StoreKeys.wrap(
            boxKey, under: master,
            binding: .init(databaseFile: databaseFileName, encryption: databaseEncryption))
        let keys = try StoreKeys(master: master, wrappedBoxKey: wrappedBox)
        let storeID = UUID()
        let enrollment = try IdentityEnrollment(
            credential: credential, clientID: clientID, keys: keys, storeID: storeID)
        try KeyHeader.create(in: directory) { db in
            try KeyHeader.insertMeta(
                db,
                [
                    StoreSchema.formatVersion, storeID.lowercasedString, wrapping.kdfName,
                    wrapping.parameters?.opsLimit, wrapping.parameters?.memoryLimit, wrapping.salt,
                    wrapping.wrappedMaster, boxKey.publicKey.rawRepresentation, wrappedBox,
                    StoreTime.format(StoreTime.now()), databaseFileName, databaseEncryption.rawValue,
                ])
            if let enrollment { try enrollment.insert(db) }
        }
        let keyHeader = try KeyHeader.open(in: directory)
        let header = try readHeader(keyHeader)
        let database = try openDatabase(in: directory, header: header, keys: keys, creating: true)
        let store = EncryptedStore(
            directory: directory, header: header, keyHeader: keyHeader, database: database, keys: keys)
        try store.checkState(keys, minimumWriteCounter: nil, creating: true)
        return store
    }

    /// Opens an existing store, and checks its authenticated state (O(collections): every collection's state row
    /// and the store's write counter authenticate). A store made before the key header has its key material moved
    /// into one first (its database stays plain); a store opened with an older version of this library gets its
    /// state here, from its authenticated records. Opening deletes nothing: an old database file a rekey left
    /// behind when it was interrupted after its commit point stays until `removeStaleDatabaseFiles()` (`store
    /// gc`) or the next `rekey(at:credential:newCredential:kdfParameters:batchSize:progress:)`.
    ///
    /// Nothing in the key header (`keys.sqlite`, a plain file) is trusted before it is checked: the database file it
    /// names must be `store.sqlite` or `store-<8 hex>.sqlite` and, with its encryption, what the master key sealed
    /// (`storeTampered` otherwise); the Argon2id cost is bounded by ``maximumKDFParameters`` before any work
    /// (`storeCorrupted` above it); every value of the wrong type is `storeCorrupted` naming its column.
    ///
    /// - Parameters:
    ///   - directory: the store's directory.
    ///   - credential: a passphrase, raw key or enrolled identity.
    ///   - expectedMinimumWriteCounter: the ``writeCounter`` the app saw last and keeps outside the file (keychain,
    ///     server); a store whose counter is lower is an older copy and is refused. Nil checks nothing.
    /// - Throws: `E3DBError.Code.storeNotFound`; `E3DBError.Code.wrongKey` when the credential does not open
    ///   the master key (checked before the database is opened); `storeTampered` when a state row is missing or
    ///   edited, and when the key header names another database file or encryption than the master key sealed;
    ///   `storeRolledBack` when the write counter is below `expectedMinimumWriteCounter`; `storeCorrupted` (also
    ///   for an encrypted database that does not open under the key the master key derives, a missing database
    ///   file, and a damaged or out-of-bounds key header), `unsupportedStoreVersion`, `databaseError`.
    public static func open(
        at directory: URL, credential: StoreCredential, expectedMinimumWriteCounter: Int? = nil
    ) throws(E3DBError) -> EncryptedStore {
        switch try StoreFileSystem.kind(of: directory.appendingPathComponent(KeyHeader.fileName)) {
        case .regularFile:
            break
        case .missing:
            guard try StoreFileSystem.kind(of: directory.appendingPathComponent(databaseFileName)) == .regularFile
            else {
                throw E3DBError(.storeNotFound, "there is no store in \(directory.path)")
            }
            try KeyHeader.migrate(in: directory, databaseFile: databaseFileName)
        case .directory, .other:
            throw E3DBError(
                .storeCorrupted, "the store's key header \(KeyHeader.fileName) is not a regular file",
                context: .init(part: KeyHeader.fileName))
        }
        let keyHeader = try KeyHeader.open(in: directory)
        let header = try readHeader(keyHeader)
        let keys = try unlockKeys(keyHeader, header, with: credential)
        let database = try openDatabase(in: directory, header: header, keys: keys, creating: false)
        let store = EncryptedStore(
            directory: directory, header: header, keyHeader: keyHeader, database: database, keys: keys)
        try store.checkState(keys, minimumWriteCounter: expectedMinimumWriteCounter)
        return store
    }

    /// `create(at:credential:kdf:databaseEncryption:)` for async callers: the whole creation (Argon2id, the files,
    /// the schema) runs on a thread of its own, so no thread of the cooperative pool waits for it.
    public static func create(
        at directory: URL, credential: StoreCredential, kdf: KDFPreset = .moderate,
        databaseEncryption: DatabaseEncryption = .encrypted
    ) async throws(E3DBError) -> EncryptedStore {
        try await blocking(named: "e3dbkit-store-open", permits: staticBlockingPermits) { _ throws(E3DBError) in
            try create(at: directory, credential: credential, kdf: kdf, databaseEncryption: databaseEncryption)
        }
    }

    /// `create(at:credential:kdfParameters:databaseEncryption:)` for async callers, on a thread of its own as the
    /// async `create(at:credential:kdf:databaseEncryption:)`.
    public static func create(
        at directory: URL, credential: StoreCredential, kdfParameters: Argon2id.Parameters,
        databaseEncryption: DatabaseEncryption = .encrypted
    ) async throws(E3DBError) -> EncryptedStore {
        try await blocking(named: "e3dbkit-store-open", permits: staticBlockingPermits) { _ throws(E3DBError) in
            try create(
                at: directory, credential: credential, kdfParameters: kdfParameters,
                databaseEncryption: databaseEncryption)
        }
    }

    /// `open(at:credential:expectedMinimumWriteCounter:)` for async callers. Opening is CPU work and file I/O that
    /// GRDB has no async form of (Argon2id: 0.07 s to 2 s by preset; opening the files, migrating, checking the
    /// state), so the whole open runs on a thread of its own while the caller's task is suspended: no thread of the
    /// cooperative pool is held, however long the KDF takes.
    public static func open(
        at directory: URL, credential: StoreCredential, expectedMinimumWriteCounter: Int? = nil
    ) async throws(E3DBError) -> EncryptedStore {
        try await blocking(named: "e3dbkit-store-open", permits: staticBlockingPermits) { _ throws(E3DBError) in
            try open(at: directory, credential: credential, expectedMinimumWriteCounter: expectedMinimumWriteCounter)
        }
    }

    /// The database file's name and encryption, as the store's sealed box key binds them.
    var headerBinding: StoreKeys.HeaderBinding {
        .init(databaseFile: URL(fileURLWithPath: databasePath).lastPathComponent, encryption: databaseEncryption)
    }

    /// Removes the database files an interrupted rekey left behind: files named as the store names its database
    /// files (`store.sqlite`, `store-<8 hex>.sqlite`, with their `-wal`, `-shm`, `-journal`) that are neither this
    /// store's database nor an unfinished rekey's copy. `open` never removes anything; this (`store gc`) and `rekey`
    /// do, and only on a store that opened and authenticated. Other files in the directory are left alone.
    /// - Returns: the names removed, sorted.
    /// - Throws: `storeLocked`; `storeCorrupted` for a damaged rekey row in the key header; `databaseError`.
    @discardableResult
    public func removeStaleDatabaseFiles() throws(E3DBError) -> [String] {
        _ = try currentKeys()
        return try KeyHeader.removeStaleDatabaseFiles(
            in: directory, live: headerBinding.databaseFile, keyHeader)
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
        /// The database file's name inside the store directory.
        let databaseFile: String
        let encryption: DatabaseEncryption

        /// The database file and encryption, as the sealed box key binds them.
        var binding: StoreKeys.HeaderBinding { .init(databaseFile: databaseFile, encryption: encryption) }

        /// Checks that the master key sealed this header's database file and encryption (a store made before the
        /// binding has none yet; `checkState` seals it once the database authenticated).
        /// - Throws: `storeTampered` naming `store_meta.database_file`.
        func checkBinding(_ keys: StoreKeys) throws(E3DBError) {
            guard let sealed = keys.binding, sealed != binding else { return }
            throw E3DBError(
                .storeTampered,
                "the key header names \(databaseFile) (\(encryption.rawValue)), but the master key sealed "
                    + "\(sealed.databaseFile) (\(sealed.encryption.rawValue)): the key header was edited or comes "
                    + "from another copy of the store; nothing was opened or removed",
                context: .init(part: "store_meta.database_file", item: "store"))
        }

        /// The same header naming another database file (a rekey's copy).
        func naming(_ file: String) -> Header {
            Header(
                storeID: storeID, parameters: parameters, salt: salt, wrappedMaster: wrappedMaster,
                wrappedBoxKey: wrappedBoxKey, boxPublicKey: boxPublicKey, databaseFile: file, encryption: encryption)
        }
    }

    /// The key header's `store_meta` row, every value read untrusted and checked before it steers any work: the
    /// format, the store id, the salt's length, the database file's name (`store.sqlite` or `store-<8 hex>.sqlite`)
    /// and encryption, and the Argon2id cost (within libsodium's minimums and ``maximumKDFParameters``).
    /// - Throws: `storeCorrupted` naming the column; `unsupportedStoreVersion`.
    static func readHeader(_ keyHeader: DatabaseQueue) throws(E3DBError) -> Header {
        let fetched = try databaseCall("reading the store header") {
            try keyHeader.read { db -> Row? in
                guard try db.tableExists("store_meta") else {
                    throw E3DBError(
                        .storeCorrupted,
                        "the store's key header has no store_meta table (it is empty or not a key "
                            + "header)", context: .init(part: "store_meta"))
                }
                return try Row.fetchOne(db, sql: "SELECT * FROM store_meta WHERE singleton = 1")
            }
        }
        guard let fetched else { throw E3DBError(.storeCorrupted, "the store has no header row") }
        let row = UntrustedRow(store: fetched, table: "store_meta")
        let format = try row.value("format", as: Int.self)
        guard format >= 1 else { throw row.error("format", "is not a format version") }
        guard format <= StoreSchema.formatVersion else {
            throw E3DBError(
                .unsupportedStoreVersion,
                "the store is format \(format); this library reads up to \(StoreSchema.formatVersion)",
                context: .init(version: String(format)))
        }
        guard let storeID = UUID(uuidString: try row.value("store_id", as: String.self)) else {
            throw row.error("store_id", "is not a UUID")
        }
        let kdf = try row.value("kdf", as: String.self)
        let salt = try row.value("kdf_salt", as: Data.self)
        guard salt.count == Argon2id.saltByteCount else {
            throw row.error("kdf_salt", "is \(salt.count) bytes, not \(Argon2id.saltByteCount)")
        }
        let wrapped = try row.value("wrapped_master", as: Data.self)
        let wrappedBox = try row.value("wrapped_box_private", as: Data.self)
        let boxPublic = try row.value("box_public", as: Data.self)
        let databaseFile = try row.value("database_file", as: String.self)
        guard KeyHeader.isDatabaseFileName(databaseFile) else {
            throw row.error("database_file", "is not a name the store gives its database file")
        }
        guard let encryption = DatabaseEncryption(rawValue: try row.value("database_encryption", as: String.self))
        else { throw row.error("database_encryption", "is neither encrypted nor plain") }
        guard kdf == "none" || !wrapped.isEmpty else {
            throw E3DBError(.storeCorrupted, "the store header has no wrapped master key")
        }
        var parameters: Argon2id.Parameters?
        switch kdf {
        case "raw", "none": parameters = nil
        case "argon2id13":
            let candidate = Argon2id.Parameters(
                opsLimit: try row.value("kdf_ops", as: Int.self), memoryLimit: try row.value("kdf_mem", as: Int.self))
            guard StoreKeys.isAllowed(candidate) else {
                throw row.error(
                    "kdf_ops",
                    "or kdf_mem is outside the Argon2id cost this library opens (at most "
                        + "\(maximumKDFParameters.opsLimit) passes over \(maximumKDFParameters.memoryLimit >> 20) MiB)")
            }
            parameters = candidate
        default:
            throw row.error("kdf", "names an unknown KDF")
        }
        return Header(
            storeID: storeID, parameters: parameters, salt: salt, wrappedMaster: kdf == "none" ? Data() : wrapped,
            wrappedBoxKey: wrappedBox, boxPublicKey: boxPublic, databaseFile: databaseFile, encryption: encryption)
    }

    /// The highest Argon2id cost a store opens with (libsodium's `sensitive` preset: 4 passes over 1 GiB), checked
    /// before any work, since the key header is a plain file that someone could edit to make every open hang or
    /// run out of memory. `create(at:credential:kdfParameters:databaseEncryption:)` and
    /// `changeCredential(to:kdf:)` refuse more.
    public static var maximumKDFParameters: Argon2id.Parameters { StoreKeys.maximumKDFParameters }

    /// The store's database, open: the pool, its path, what GRDB opens it by (the path, or E3DBSQLite's URI), the
    /// URI.
    struct OpenDatabase {
        let pool: DatabasePool
        let path: String
        let location: String
        let uri: String?
        /// Whether the store is locked, as every new connection to this database checks it (`requirePageKey`).
        let lock: StoreLock
    }

    /// Opens (or, when `creating`, creates) the database the header names, through E3DBSQLite under the page key
    /// for an encrypted one, and brings its schema up to date.
    /// - Throws: `storeCorrupted` when the file is missing (and not `creating`), or does not open under the key.
    static func openDatabase(in directory: URL, header: Header, keys: StoreKeys, creating: Bool) throws(E3DBError)
        -> OpenDatabase
    {
        let url = directory.appendingPathComponent(header.databaseFile)
        let path = url.path
        switch try StoreFileSystem.kind(of: url) {
        case .regularFile: break
        case .missing:
            guard creating else {
                throw E3DBError(
                    .storeCorrupted, "the store's database file \(header.databaseFile) is missing",
                    context: .init(part: header.databaseFile))
            }
            // Made here, owner-only, so that SQLite's journals (which take the database's mode) are too.
            try StoreFileSystem.createPrivateFile(url)
        case .directory, .other:
            throw E3DBError(
                .storeCorrupted, "the store's database file \(header.databaseFile) is not a regular file",
                context: .init(part: header.databaseFile))
        }
        var uri: String?
        if header.encryption == .encrypted {
            uri = try E3DBSQLite.uri(
                forDatabaseAt: path, key: .rawKey(keys.databaseKey), settings: .v4, owner: .package)
        }
        let location = uri ?? path
        let lock = StoreLock()
        do {
            let pool = try openPool(location: location, lock: lock)
            try databaseCall("migrating the store") {
                try StoreSchema.checkMigrationLog(pool)
                try StoreSchema.migrator.migrate(pool)
            }
            return OpenDatabase(pool: pool, path: path, location: location, uri: uri, lock: lock)
        } catch {
            guard let uri else { throw error }
            E3DBSQLite.forgetKey(inURI: uri)
            // E3DBSQLite's typed reason (a key that does not open the file, a page that does not authenticate).
            guard error.code == .storeCorrupted, let reason = E3DBSQLite.lastFailure(forDatabaseAt: path) else {
                throw error
            }
            throw E3DBError(
                .storeCorrupted,
                "the store's encrypted database does not open under the key its header gives: \(reason.message)",
                context: reason.context)
        }
    }

    /// What GRDB opens the store's database by, for this package's tests and tools that read or edit the file
    /// outside the store: its path when plain, else a new E3DBSQLite URI (a handle to the page key, never the key).
    /// - Throws: `storeLocked`; `invalidKey` from E3DBSQLite.
    package func databaseLocation() throws(E3DBError) -> String {
        guard databaseEncryption == .encrypted else { return databasePath }
        return try E3DBSQLite.uri(
            forDatabaseAt: databasePath, key: .rawKey(databasePageKey()), settings: .v4, owner: .package)
    }

    /// The raw SQLCipher 4 key of the database's pages (for this package's interoperability tests with SQLCipher).
    /// - Throws: `storeLocked`.
    package func databasePageKey() throws(E3DBError) -> SecureBytes { try currentKeys().databaseKey }

    /// The one check of every new connection to the store's database (the pool's writer and readers, the record
    /// readers, an observation's watcher), before it reads anything: the store must be unlocked (`lock`, nil for the
    /// key header's pool, which has no lock), and an encrypted database's page key must be in this process's
    /// E3DBSQLite key registry. It is not while the store is locked, nor after someone forgot it
    /// (`E3DBSQLite.forgetKey` on the store's URI); SQLite would then report "file is not a database", which the store
    /// would take for a damaged file (`storeCorrupted`, "restore it from a backup").
    /// - Throws: `storeLocked` while the store is locked; `keyMissing` naming the page key when it was forgotten.
    static func requirePageKey(_ location: String, lock: StoreLock?) throws(E3DBError) {
        try lock?.check()
        guard E3DBSQLite.isKeyMissing(inURI: location) else { return }
        // `lock()` marks the store locked before it forgets the key: a key missing because of it finds the mark.
        try lock?.check()
        throw E3DBError(
            .keyMissing,
            "the page key of the store's encrypted database is not in this process (it was forgotten through "
                + "E3DBSQLite): no new connection to it opens until the store is unlocked again",
            context: .init(part: "database page key"))
    }

    /// A pool on the database at `location` (a path, or an E3DBSQLite URI: the key never appears in it); `lock` is
    /// the store's (nil for the key header).
    static func openPool(location: String, lock: StoreLock?) throws(E3DBError) -> DatabasePool {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try requirePageKey(location, lock: lock)
            // Keep SQLite's temporary tables and sort files in memory, and zero deleted content.
            try db.execute(sql: "PRAGMA temp_store = MEMORY; PRAGMA secure_delete = ON")
        }
        return try databaseCall("opening the store's database") {
            try DatabasePool(path: location, configuration: configuration)
        }
    }
}

/// A store's one lock state, read by every call (its keys, through `currentKeys`) and by every new connection to its
/// database (`requirePageKey`, the record readers): ``EncryptedStore/lock()`` makes it `locked` and forgets the page
/// key, ``EncryptedStore/unlock(_:)`` gives the key back and makes it `unlocking` (its state check needs connections),
/// then `unlocked` with the keys once the check passed.
///
/// A lock never waits for an unlock: it bumps the epoch, and an unlock makes the store unlocked only if the epoch is
/// the one it saw when it gave the key back (`beginUnlock`, `finishUnlock`), else it fails with `storeLocked`. The
/// page key is forgotten and given back under the same mutex as the phase, so no interleaving leaves the keys in
/// memory while the page key is gone, or the page key registered while the store is locked and no unlock runs.
final class StoreLock: Sendable {
    enum Phase {
        /// No keys in memory, and no new connection opens.
        case locked
        /// New connections open (the store is being opened, or `unlock` checks its state); calls still refuse.
        case unlocking
        /// The keys are in memory.
        case unlocked(EncryptedStore.UnlockedState)
    }

    private struct State {
        var phase: Phase = .unlocking
        /// Bumped by every lock.
        var epoch: UInt64 = 0
    }

    /// What an unlock saw when it began (see `beginUnlock`).
    struct UnlockTicket {
        let epoch: UInt64
        /// Whether the store was locked (then a failed state check locks it again).
        let wasLocked: Bool
    }

    private let state = Mutex(State())

    /// Whether the keys are not in memory (locked, or not unlocked yet).
    var isLocked: Bool {
        state.withLock {
            if case .unlocked = $0.phase { return false }
            return true
        }
    }

    /// Whether new connections are refused.
    var refusesConnections: Bool {
        state.withLock {
            if case .locked = $0.phase { return true }
            return false
        }
    }

    /// Makes the store unlocked with `unlocked` (a store being opened).
    func open(_ unlocked: EncryptedStore.UnlockedState) { state.withLock { $0.phase = .unlocked(unlocked) } }

    /// Marks the store locked, bumps the epoch and runs `forget` (forgetting the page key: quick, no I/O) under the
    /// state's mutex. It never waits for an unlock.
    func lock(forgetting forget: () -> Void) {
        state.withLock { Self.markLocked(&$0, forgetting: forget) }
    }

    /// A lock, inside the state's mutex.
    private static func markLocked(_ state: inout State, forgetting forget: () -> Void) {
        state.epoch &+= 1
        state.phase = .locked
        forget()
    }

    /// The epoch now. An unlock reads it before its key derivation and gives it to ``beginUnlock(since:restoring:)``.
    var epoch: UInt64 { state.withLock { $0.epoch } }

    /// An unlock's first step after its key derivation: unless a lock ran since the unlock read `seen` (then it
    /// throws `storeLocked` and changes nothing), runs `restore` (giving the page key back: quick, no I/O) and, on a
    /// locked store, marks it unlocking, under the state's mutex.
    func beginUnlock(since seen: UInt64, restoring restore: () throws(E3DBError) -> Void) throws(E3DBError)
        -> UnlockTicket
    {
        try state.withLock { state throws(E3DBError) -> UnlockTicket in
            guard state.epoch == seen else {
                throw E3DBError(.storeLocked, "the store was locked while it was being unlocked")
            }
            try restore()
            var wasLocked = false
            if case .locked = state.phase {
                wasLocked = true
                state.phase = .unlocking
            }
            return UnlockTicket(epoch: state.epoch, wasLocked: wasLocked)
        }
    }

    /// A failed unlock's last step: a store it found locked is locked again (the epoch bumped, `forget` run, as by
    /// `lock`), unless a lock ran since `ticket` or another unlock made the store unlocked meanwhile.
    /// - Returns: whether it locked the store.
    func abandonUnlock(_ ticket: UnlockTicket, forgetting forget: () -> Void) -> Bool {
        state.withLock { state -> Bool in
            guard ticket.wasLocked, state.epoch == ticket.epoch, case .unlocking = state.phase else { return false }
            Self.markLocked(&state, forgetting: forget)
            return true
        }
    }

    /// An unlock's last step: makes the store unlocked with `unlocked` unless a lock ran since `ticket`.
    /// - Throws: `storeLocked` when a lock ran since (the store stays locked).
    func finishUnlock(_ ticket: UnlockTicket, _ unlocked: EncryptedStore.UnlockedState) throws(E3DBError) {
        let committed = state.withLock { state -> Bool in
            guard state.epoch == ticket.epoch else { return false }
            state.phase = .unlocked(unlocked)
            return true
        }
        if !committed { throw E3DBError(.storeLocked, "the store was locked while it was being unlocked") }
    }

    /// Runs `body` on the keys' state; nil, without running it, unless unlocked. `body` runs under the state's mutex:
    /// a lock waits for it (it must be quick: no I/O, no key derivation).
    @discardableResult
    func withUnlocked<T: Sendable>(_ body: (inout EncryptedStore.UnlockedState) -> T) -> T? {
        state.withLock { state -> T? in
            guard case .unlocked(var unlocked) = state.phase else { return nil }
            // The state moves out and back, so that `body` changes it in place (no copy of its dictionaries).
            state.phase = .locked
            defer { state.phase = .unlocked(unlocked) }
            return body(&unlocked)
        }
    }

    /// The store's keys.
    /// - Throws: `storeLocked` unless unlocked.
    func keys() throws(E3DBError) -> StoreKeys {
        guard let keys = withUnlocked({ $0.keys }) else { throw E3DBError(.storeLocked, "the store is locked") }
        return keys
    }

    /// What a new connection checks first.
    /// - Throws: `storeLocked` while the store is locked.
    func check() throws(E3DBError) {
        if refusesConnections { throw E3DBError(.storeLocked, "the store is locked") }
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

/// `databaseCall(_:_:)` for GRDB's async database access.
func databaseCall<T>(_ doing: String, _ body: () async throws -> T) async throws(E3DBError) -> T {
    do {
        return try await body()
    } catch {
        throw storeError(error, doing: doing)
    }
}

/// The one mapping of a database failure to an `E3DBError`: a damaged file (`SQLITE_CORRUPT`, `SQLITE_NOTADB`: a
/// malformed page, a truncated file, a header that is not SQLite's, an encrypted file that does not open under its
/// key; `SQLITE_IOERR_DATA`: an encrypted page that does not authenticate) is `storeCorrupted`; a lock another
/// connection holds past the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`) is `storeBusy`; any other SQLite or I/O
/// failure is `databaseError`. `doing` says what the store was doing, for the message.
func storeError(_ error: any Error, doing: String) -> E3DBError {
    switch error {
    case let error as E3DBError:
        return error
    case let error as DatabaseError
    where error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB
        || error.extendedResultCode == .SQLITE_IOERR_DATA:
        return E3DBError(
            .storeCorrupted,
            "\(doing): the store's database file is damaged (SQLite error \(error.resultCode.rawValue): "
                + "\(error.message ?? "")); restore it from a backup")
    case is CancellationError:
        // GRDB's async access, when the caller's task is cancelled (nothing was committed).
        return E3DBError(.cancelled, "\(doing): the task was cancelled")
    case is RowDecodingError:
        // A value of the wrong type in a column read with one of GRDB's typed fetches (its description, which holds
        // the row's values, stays out of the message).
        return E3DBError(
            .storeCorrupted,
            "\(doing): a value in the store's files is of the wrong type (the file was edited or is damaged)")
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
