import E3DBCanonicalJSON
import E3DBFiles
public import E3DBDocuments
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
/// before decrypting it; a moved or edited record is ``E3DBError/Code/recordTampered`` naming the record.
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
    private let state: Mutex<UnlockedState?>
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

    private init(directory: URL, storeID: UUID, pool: DatabasePool, keys: StoreKeys) {
        self.directory = directory
        self.storeID = storeID
        self.storeIDText = storeID.lowercasedString
        self.pool = pool
        self.readers = RecordReaders(path: directory.appendingPathComponent(EncryptedStore.databaseFileName).path)
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
    /// - Throws: ``E3DBError/Code/storeExists``, `databaseError`, KDF errors.
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
        return EncryptedStore(directory: directory, storeID: storeID, pool: pool, keys: keys)
    }

    /// Opens an existing store.
    /// - Throws: ``E3DBError/Code/storeNotFound``; ``E3DBError/Code/wrongKey`` when the credential does not open
    ///   the master key (checked before any record is read); `storeCorrupted`, `unsupportedStoreVersion`,
    ///   `databaseError`.
    public static func open(at directory: URL, credential: StoreCredential) throws(E3DBError) -> EncryptedStore {
        let path = directory.appendingPathComponent(databaseFileName).path
        guard FileManager.default.fileExists(atPath: path) else {
            throw E3DBError(.storeNotFound, "there is no store in \(directory.path)")
        }
        let pool = try openPool(path: path)
        try databaseCall("migrating the store") { try StoreSchema.migrator.migrate(pool) }
        let header = try readHeader(pool)
        let keys = try unlockKeys(pool, header, with: credential)
        return EncryptedStore(directory: directory, storeID: header.storeID, pool: pool, keys: keys)
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
                .unsupportedStoreVersion, "the store is format \(format); this library reads up to \(StoreSchema.formatVersion)",
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

    // MARK: Keys

    /// Wipes every key from memory. Every later call fails with ``E3DBError/Code/storeLocked`` until
    /// ``unlock(_:)``.
    public func lock() {
        state.withLock { $0 = nil }
        cache.withLock { $0?.removeAll() }
    }

    /// Whether the store's keys are in memory.
    public var isLocked: Bool { state.withLock { $0 == nil } }

    /// Opens the master key again after ``lock()``.
    /// - Throws: ``E3DBError/Code/wrongKey``.
    public func unlock(_ credential: StoreCredential) throws(E3DBError) {
        let keys = try EncryptedStore.unlockKeys(pool, EncryptedStore.readHeader(pool), with: credential)
        state.withLock { $0 = UnlockedState(keys: keys, accessKeys: [:]) }
    }

    /// Changes the passphrase or key: one wrapped key is rewritten, in one transaction, whatever the number of
    /// records (O(1)); a crash leaves either the old or the new credential working. Enrolled identities are not
    /// touched: they wrap the master key, which does not change. On a store created for an identity, this adds a
    /// passphrase or key.
    /// - Parameters:
    ///   - credential: the new passphrase or raw key.
    ///   - kdf: the Argon2id cost for a new passphrase.
    public func changeCredential(to credential: StoreCredential, kdf: KDFPreset = .moderate) throws(E3DBError) {
        try changeCredential(to: credential, kdfParameters: kdf.parameters)
    }

    /// Changes the passphrase or key with explicit Argon2id parameters.
    /// An identity is not a replacement credential: enroll it with ``addIdentity(publicKey:clientID:)``.
    public func changeCredential(to credential: StoreCredential, kdfParameters: Argon2id.Parameters) throws(E3DBError) {
        if case .identity = credential {
            throw E3DBError(.invalidParameter, "an identity is enrolled with addIdentity, not set with changeCredential")
        }
        let wrapping = try StoreKeys.wrapping(try currentKeys().master, for: credential, kdfParameters: kdfParameters)
        try databaseCall("changing the store key") {
            try pool.write { db in
                try db.execute(
                    sql: """
                        UPDATE store_meta SET kdf = ?, kdf_ops = ?, kdf_mem = ?, kdf_salt = ?, wrapped_master = ?
                        WHERE singleton = 1
                        """,
                    arguments: [
                        wrapping.kdfName, wrapping.parameters?.opsLimit, wrapping.parameters?.memoryLimit, wrapping.salt,
                        wrapping.wrappedMaster,
                    ])
            }
        }
    }

    func currentKeys() throws(E3DBError) -> StoreKeys {
        guard let keys = state.withLock({ $0?.keys }) else {
            throw E3DBError(.storeLocked, "the store is locked")
        }
        return keys
    }

    /// The keys of a collection: the current one (new writes) and, during a rotation, older ones.
    struct CollectionKeys {
        var current: Int
        var keys: [Int: AccessKey]
        var currentKey: (key: AccessKey, version: Int) { (keys[current] ?? AccessKey(), current) }
    }

    /// The current access key of `collection`, created (random, wrapped by the master key) when `create` is set.
    func accessKey(for collection: String, create: Bool) throws(E3DBError) -> (key: AccessKey, version: Int) {
        try collectionKeys(collection, create: create).currentKey
    }

    /// The access key of `collection` at `version` (a record's `key_version`).
    func accessKey(for collection: String, version: Int, item: String) throws(E3DBError) -> AccessKey {
        if let key = try collectionKeys(collection, create: false).keys[version] { return key }
        // A rotation in another connection may have added a key since it was cached.
        invalidateKeys(collection)
        guard let key = try collectionKeys(collection, create: false).keys[version] else {
            throw E3DBError(
                .storeCorrupted, "record \(item) is under key version \(version), which collection \(collection) lacks",
                context: .init(item: item))
        }
        return key
    }

    /// The key of blind index `name` of `collection`: derived from the master key once, then kept with the
    /// unlocked keys (wiped on ``lock()``). It depends only on the master key, the collection and the name, none of
    /// which changes while the store is unlocked (a passphrase change rewraps the same master key).
    func blindIndexKey(_ keys: StoreKeys, collection: String, name: String) throws(E3DBError) -> SecureBytes {
        let slot = IndexKeyName(collection: collection, name: name)
        if let key = state.withLock({ $0?.indexKeys[slot] }) { return key }
        let key = try BlindIndex.key(keys, collection: collection, name: name)
        state.withLock { $0?.indexKeys[slot] = key }
        return key
    }

    func invalidateKeys(_ collection: String) {
        state.withLock { _ = $0?.accessKeys.removeValue(forKey: collection) }
    }

    func collectionKeys(_ collection: String, create: Bool) throws(E3DBError) -> CollectionKeys {
        let cached = try state.withLock { (state: inout UnlockedState?) throws(E3DBError) -> CollectionKeys? in
            guard let state else { throw E3DBError(.storeLocked, "the store is locked") }
            return state.accessKeys[collection]
        }
        if let cached { return cached }
        let keys = try currentKeys()
        let rows = try databaseCall("reading collection \(collection)") {
            try pool.read { db -> (Int?, [Row]) in
                let current = try Int.fetchOne(db, sql: "SELECT key_version FROM collections WHERE name = ?", arguments: [collection])
                let keyRows = try Row.fetchAll(
                    db, sql: "SELECT version, wrapped_key FROM collection_keys WHERE collection = ?", arguments: [collection])
                return (current, keyRows)
            }
        }
        guard let current = rows.0 else {
            guard create else {
                throw E3DBError(.collectionNotFound, "there is no collection \(collection)", context: .init(item: collection))
            }
            let key = AccessKey()
            let wrapped = StoreKeys.wrap(key.secretBoxKey, under: keys.master)
            try databaseCall("creating collection \(collection)") {
                try pool.write { db in
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO collections (name, key_version, created) VALUES (?, 1, ?)",
                        arguments: [collection, StoreTime.format(StoreTime.now())])
                    if db.changesCount == 1 {
                        try db.execute(
                            sql: "INSERT INTO collection_keys (collection, version, wrapped_key) VALUES (?, 1, ?)",
                            arguments: [collection, wrapped])
                    }
                }
            }
            // Another writer may have won the race: read what is stored.
            return try collectionKeys(collection, create: false)
        }
        var result = CollectionKeys(current: current, keys: [:])
        for row in rows.1 {
            guard let version = row["version"] as Int?, let wrapped = row["wrapped_key"] as Data? else {
                throw E3DBError(.storeCorrupted, "collection \(collection) is damaged", context: .init(item: collection))
            }
            let key = try StoreKeys.unwrap(
                wrapped, under: keys.master,
                failure: E3DBError(
                    .recordTampered, "an access key of collection \(collection) does not authenticate",
                    context: .init(item: collection)))
            result.keys[version] = AccessKey(key)
        }
        guard result.keys[current] != nil else {
            throw E3DBError(.storeCorrupted, "collection \(collection) has no current key", context: .init(item: collection))
        }
        state.withLock { $0?.accessKeys[collection] = result }
        return result
    }

    // MARK: Records

    /// Encrypts and stores a new record.
    /// - Parameters:
    ///   - collection: the collection (created on first use, with a new access key).
    ///   - type: the record type (plaintext).
    ///   - data: the fields to encrypt.
    ///   - plain: plaintext, queryable metadata.
    /// - Returns: the new record's id and version (1).
    @discardableResult
    public func put(collection: String, type: String, data: RecordData, plain: RecordData = RecordData()) throws(E3DBError)
        -> RecordReference
    {
        try put(collection: collection, records: [(type, data, plain)])[0]
    }

    /// Encrypts and stores several records in one transaction (all or none).
    ///
    /// A large batch is encrypted, bound to its places and indexed on every processor while the transaction
    /// inserts the records already encrypted.
    public func put(collection: String, records: [(type: String, data: RecordData, plain: RecordData)]) throws(E3DBError)
        -> [RecordReference]
    {
        let keys = try currentKeys()
        let access = try accessKey(for: collection, create: true)
        return try databaseCall("writing to collection \(collection)") {
            try pool.write { db in
                let indexes = try indexKeys(db, keys: keys, collection: collection)
                var references: [RecordReference] = []
                references.reserveCapacity(records.count)
                try encryptNewRecords(records, collection: collection, keys: keys, access: access, indexes: indexes) { row in
                    try insertRecord(db, row, collection: collection, indexes: indexes)
                    references.append(row.reference)
                }
                return references
            }
        }
    }

    /// Reads, authenticates and decrypts one record.
    /// - Throws: ``E3DBError/Code/recordNotFound``, ``E3DBError/Code/recordTampered`` (naming the record), field
    ///   decryption errors.
    public func get(collection: String, id: UUID) throws(E3DBError) -> StoredRecord {
        let idText = id.lowercasedString
        let row = try databaseCall("reading record \(idText)") {
            // One statement, so SQLite's implicit read transaction suffices: no BEGIN/COMMIT around it. The row
            // is read by column index from the cursor, without a copy of GRDB's row.
            try readers.read { db in
                try StoredRow.fetchOne(
                    db.cachedStatement(sql: StoredRow.selectByID),
                    arguments: [idText, collection])
            }
        }
        guard let row else {
            throw E3DBError(
                .recordNotFound, "no record \(idText) in collection \(collection)", context: .init(item: idText))
        }
        return try decode(row, collection: collection, known: (id, idText))
    }

    /// Replaces a record's data and `plain`; its version goes up by one.
    /// - Parameter expectedVersion: the version the caller read; another version is ``E3DBError/Code/versionConflict``.
    @discardableResult
    public func update(
        collection: String, id: UUID, expectedVersion: Int, type: String? = nil, data: RecordData,
        plain: RecordData = RecordData()
    ) throws(E3DBError) -> RecordReference {
        let keys = try currentKeys()
        let access = try accessKey(for: collection, create: false)
        let idText = id.lowercasedString
        let now = StoreTime.format(StoreTime.now())
        let newVersion = expectedVersion + 1
        return try databaseCall("updating record \(idText)") { () throws -> RecordReference in
            try pool.write { db -> RecordReference in
                guard let row = try Row.fetchOne(
                    db, sql: "SELECT seq, type, version, created FROM records WHERE id = ? AND collection = ?",
                    arguments: [idText, collection])
                else {
                    throw E3DBError(
                        .recordNotFound, "no record \(idText) in collection \(collection)", context: .init(item: idText))
                }
                let current: Int = row["version"]
                guard current == expectedVersion else {
                    throw E3DBError(
                        .versionConflict, "record \(idText) is at version \(current), not \(expectedVersion)",
                        context: .init(expected: expectedVersion, actual: current, item: idText))
                }
                let seq: Int64 = row["seq"]
                let created: String = row["created"]
                let recordType = type ?? row["type"]
                let document = EncryptedDocument(
                    meta: ClientMeta(writerID: storeID, userID: storeID, type: recordType, plain: plain),
                    data: encryptFields(data, accessKey: access.key), recordSignature: nil)
                let bytes = document.jsonData()
                let mac = try bindingMAC(
                    keys, collection: collection, id: id, version: newVersion, keyVersion: access.version,
                    created: created, updated: now, document: bytes)
                try db.execute(
                    sql: """
                        UPDATE records SET type = ?, version = ?, key_version = ?, updated = ?, document = ?, mac = ?
                        WHERE seq = ? AND version = ?
                        """,
                    arguments: [recordType, newVersion, access.version, now, bytes, mac, seq, expectedVersion])
                guard db.changesCount == 1 else {
                    throw E3DBError(.versionConflict, "record \(idText) changed meanwhile", context: .init(item: idText))
                }
                try db.execute(sql: "DELETE FROM record_plain WHERE record_seq = ?", arguments: [seq])
                try insertPlain(db, seq: seq, plain: plain)
                try db.execute(sql: "DELETE FROM blind_index_entries WHERE record_seq = ?", arguments: [seq])
                try insertTokens(
                    db, indexes: indexKeys(db, keys: keys, collection: collection), collection: collection, seq: seq,
                    data: data)
                return RecordReference(id: id, version: newVersion)
            }
        }
    }

    /// Deletes a record.
    /// - Parameter expectedVersion: when given, another version is ``E3DBError/Code/versionConflict``.
    public func delete(collection: String, id: UUID, expectedVersion: Int? = nil) throws(E3DBError) {
        let idText = id.lowercasedString
        _ = try currentKeys()
        try databaseCall("deleting record \(idText)") {
            try pool.write { db in
                guard let current = try Int.fetchOne(
                    db, sql: "SELECT version FROM records WHERE id = ? AND collection = ?", arguments: [idText, collection])
                else {
                    throw E3DBError(
                        .recordNotFound, "no record \(idText) in collection \(collection)", context: .init(item: idText))
                }
                if let expectedVersion, current != expectedVersion {
                    throw E3DBError(
                        .versionConflict, "record \(idText) is at version \(current), not \(expectedVersion)",
                        context: .init(expected: expectedVersion, actual: current, item: idText))
                }
                try db.execute(sql: "DELETE FROM records WHERE id = ? AND collection = ?", arguments: [idText, collection])
            }
        }
    }

    /// The records matching `query`, decrypted, read in pages of `pageSize` so memory stays bounded however many
    /// match. Each page is one read transaction; records written meanwhile may or may not appear.
    public func records(matching query: RecordQuery, pageSize: Int = 256) -> StoreRecordSequence {
        StoreRecordSequence(store: self, query: query, pageSize: max(1, pageSize))
    }

    /// All records matching `query` at once (for small results; see ``records(matching:pageSize:)``).
    public func find(_ query: RecordQuery) throws(E3DBError) -> [StoredRecord] {
        var result: [StoredRecord] = []
        var after: Int64?
        while true {
            let page = try fetchPage(query, after: after, count: 512)
            result.append(contentsOf: page.records)
            if let limit = query.limit, result.count >= limit { return Array(result.prefix(limit)) }
            guard let last = page.lastSeq, page.rowCount == 512 else { return result }
            after = last
        }
    }

    /// The number of records in `collection` (all collections when nil).
    public func count(collection: String? = nil) throws(E3DBError) -> Int {
        try databaseCall("counting records") {
            try pool.read { db in
                if let collection {
                    return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM records WHERE collection = ?", arguments: [collection]) ?? 0
                }
                return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM records") ?? 0
            }
        }
    }

    /// The collections' names, sorted.
    public func collections() throws(E3DBError) -> [String] {
        try databaseCall("listing collections") {
            try pool.read { db in try String.fetchAll(db, sql: "SELECT name FROM collections ORDER BY name") }
        }
    }

    struct Page {
        /// The records that matched every condition.
        var records: [StoredRecord]
        /// The last row read, and how many rows were read (before field conditions).
        var lastSeq: Int64?
        var rowCount: Int
    }

    /// The SQL selecting the rows of `query` (after `after`, at most `count`).
    func querySQL(_ query: RecordQuery, after: Int64?, count: Int?) throws(E3DBError) -> (String, StatementArguments) {
        let indexes = query.usesIndexes ? try indexes(collection: query.collection) : []
        return try querySQL(query, after: after, count: count, indexes: indexes)
    }

    /// The SQL selecting the rows of `query`, given the collection's blind indexes (read by the caller).
    func querySQL(
        _ query: RecordQuery, after: Int64?, count: Int?, indexes: [BlindIndex]
    ) throws(E3DBError) -> (String, StatementArguments) {
        var sql = "SELECT \(StoredRow.columns) FROM records r WHERE r.collection = ?"
        var arguments: [(any DatabaseValueConvertible)?] = [query.collection]
        if !query.types.isEmpty {
            sql += " AND r.type IN (" + Array(repeating: "?", count: query.types.count).joined(separator: ",") + ")"
            arguments.append(contentsOf: query.types.map { $0 as (any DatabaseValueConvertible)? })
        }
        for condition in query.plain {
            switch condition {
            case .equals(let key, let value):
                sql += " AND r.seq IN (SELECT record_seq FROM record_plain WHERE key = ? AND value = ?)"
                arguments += [key, value]
            case .hasPrefix(let key, let prefix):
                // A range on the index: prefix <= value < prefix + U+10FFFF (byte order of UTF-8 text).
                sql += " AND r.seq IN (SELECT record_seq FROM record_plain WHERE key = ? AND value >= ? AND value < ?)"
                arguments += [key, prefix, prefix + "\u{10FFFF}"]
            case .between(let key, let lower, let upper):
                sql += " AND r.seq IN (SELECT record_seq FROM record_plain WHERE key = ?"
                arguments.append(key)
                if let lower {
                    sql += " AND value >= ?"
                    arguments.append(lower)
                }
                if let upper {
                    sql += " AND value <= ?"
                    arguments.append(upper)
                }
                sql += ")"
            }
        }
        let restriction = try indexRestriction(query, indexes: indexes)
        if query.types.isEmpty || !restriction.sql.isEmpty {
            // Without `+`, SQLite reads the whole collection through `records_by_key_version` and sorts it by seq for
            // every page (a scan in pages was quadratic), or tests every row against a token list. With it, SQLite
            // walks the rowid (seq) from the page's start, or looks the candidates up by rowid. A query on types
            // keeps the `(collection, type, seq)` index.
            sql = sql.replacingOccurrences(of: "WHERE r.collection = ?", with: "WHERE +r.collection = ?")
        }
        sql += restriction.sql
        arguments.append(contentsOf: restriction.arguments.map { $0 as (any DatabaseValueConvertible)? })
        if let after {
            sql += query.descending ? " AND r.seq < ?" : " AND r.seq > ?"
            arguments.append(after)
        }
        sql += query.descending ? " ORDER BY r.seq DESC" : " ORDER BY r.seq"
        if let count {
            sql += " LIMIT ?"
            arguments.append(count)
        }
        return (sql, StatementArguments(arguments))
    }

    func fetchPage(_ query: RecordQuery, after: Int64?, count: Int) throws(E3DBError) -> Page {
        _ = try currentKeys()  // a locked store refuses every query, also one that matches nothing
        let rows = try databaseCall("querying collection \(query.collection)") {
            // One connection for the index definitions (when field conditions may use them) and the query; the
            // query is one statement, so SQLite's implicit read transaction gives it a consistent snapshot.
            try readers.read { db in
                let indexes = query.usesIndexes ? try loadIndexes(db, collection: query.collection) : []
                let (sql, statementArguments) = try querySQL(query, after: after, count: count, indexes: indexes)
                return try StoredRow.fetchAll(db.cachedStatement(sql: sql), arguments: statementArguments)
            }
        }
        var records: [StoredRecord] = []
        records.reserveCapacity(rows.count)
        for row in rows {
            let record = try decode(row, collection: query.collection)
            if query.fields.allSatisfy({ $0.matches(record.data) }) { records.append(record) }
        }
        return Page(records: records, lastSeq: rows.last?.seq, rowCount: rows.count)
    }

    // MARK: Binding and decoding

    /// Keyed BLAKE2b-256 over the record's place (store, collection, id, version, key version, timestamps) and
    /// its document bytes.
    func bindingMAC(
        _ keys: StoreKeys, collection: String, id: UUID, version: Int, keyVersion: Int, created: String,
        updated: String, document: Data
    ) throws(E3DBError) -> Data {
        try bindingMAC(
            keys, collection: collection, idText: id.lowercasedString, version: version, keyVersion: keyVersion,
            created: created, updated: updated, document: document)
    }

    /// The binding MAC with the record id as its lowercase text.
    func bindingMAC(
        _ keys: StoreKeys, collection: String, idText: String, version: Int, keyVersion: Int, created: String,
        updated: String, document: Data
    ) throws(E3DBError) -> Data {
        let place = BindingPlace.bytes(
            storeID: storeIDText, collection: collection, id: idText, version: version, keyVersion: keyVersion,
            created: created, updated: updated)
        var hasher = try BLAKE2b(outputByteCount: 32, key: keys.recordMACKey)
        unsafe place.withUnsafeBytes { unsafe hasher.update(bufferPointer: $0) }
        hasher.update(data: [0x0A])
        hasher.update(data: document)
        return hasher.finalize()
    }

    func decode(_ row: Row, collection: String) throws(E3DBError) -> StoredRecord {
        try decode(StoredRow(row), collection: collection)
    }

    /// Authenticates a row in its place, then decrypts it. `known` is the id the caller selected the row by (a
    /// point read): a row whose id text is exactly its lowercase form needs no parsing.
    func decode(_ row: StoredRow, collection: String, known: (id: UUID, text: String)? = nil) throws(E3DBError)
        -> StoredRecord
    {
        let keys = try currentKeys()
        let id: UUID
        let item: String
        // The id's canonical (lowercase) text, which the MAC covers.
        let canonicalID: String
        if let known, row.id == known.text {
            id = known.id
            item = known.text
            canonicalID = known.text
        } else if let idText = row.id, let parsed = UUID(hexText: idText) {
            // 8-4-4-4-12 hex: its lowercase form is the canonical text.
            id = parsed
            item = idText.lowercased()
            canonicalID = item
        } else {
            guard let idText = row.id, let parsed = UUID(uuidString: idText) else {
                throw E3DBError(.storeCorrupted, "a record row has no valid id")
            }
            id = parsed
            item = idText.lowercased()
            canonicalID = parsed.lowercasedString
        }
        guard let version = row.version, let keyVersion = row.keyVersion, let created = row.created,
            let updated = row.updated, let bytes = row.document, let mac = row.mac
        else {
            throw E3DBError(.storeCorrupted, "record \(item) is damaged", context: .init(item: item))
        }
        let expected = try bindingMAC(
            keys, collection: collection, idText: canonicalID, version: version, keyVersion: keyVersion, created: created, updated: updated, document: bytes)
        // The MAC covers the canonical id: a copy of a row under the same id in another spelling (upper case) is
        // not this record, even though its MAC verifies.
        guard ConstantTime.equals(expected, mac), row.id == nil || row.id == canonicalID else {
            throw E3DBError(
                .recordTampered, "record \(item) does not authenticate in its place (edited or moved)",
                context: .init(item: item))
        }
        // The MAC authenticates the whole row, so a cached record with this MAC is this row, decrypted earlier.
        if let cached = cache.withLock({ $0?.value(for: mac) }) { return cached }
        let accessKey = try accessKey(for: collection, version: keyVersion, item: item)
        let document: EncryptedDocument
        if let scanned = StoredDocumentScanner.document(bytes) {
            document = scanned
        } else {
            document = try withItem(item) { () throws(E3DBError) in try EncryptedDocument(jsonData: bytes) }
        }
        let plain = try withItem(item) { () throws(E3DBError) in
            try document.decrypt(accessKey: accessKey, verifyingKey: nil, verification: .init(policy: .ignore))
        }
        guard let createdDate = StoreTime.parse(created), let updatedDate = StoreTime.parse(updated) else {
            throw E3DBError(.storeCorrupted, "record \(item) has damaged timestamps", context: .init(item: item))
        }
        let record = StoredRecord(
            id: id, collection: collection, version: version, created: createdDate, updated: updatedDate,
            meta: plain.meta, data: plain.data)
        cache.withLock { $0?.insert(record, for: mac) }
        return record
    }

    /// A new record (version 1) ready to be inserted.
    struct NewRecordRow {
        let reference: RecordReference
        let type: String
        let keyVersion: Int
        /// Its created and updated time.
        let time: String
        let document: Data
        let mac: Data
        let plain: RecordData
        /// The plaintext fields, for the blind-index tokens.
        let data: RecordData
        /// The blind-index tokens (index name, token) for the transaction's indexes, when computed with the record.
        var tokens: [(name: String, token: Data)]? = nil
    }

    /// Inserts a new record row with its `plain` rows and index tokens (inside the caller's transaction).
    func insertRecord(
        _ db: Database, _ row: NewRecordRow, collection: String, indexes: [(index: BlindIndex, key: SecureBytes)]
    ) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO records (id, collection, type, version, key_version, created, updated, document, mac)
                VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)
                """
        ).execute(
            arguments: [
                row.reference.id.lowercasedString, collection, row.type, row.keyVersion, row.time, row.time,
                row.document, row.mac,
            ])
        let seq = db.lastInsertedRowID
        try insertPlain(db, seq: seq, plain: row.plain)
        if let tokens = row.tokens {
            try insertTokens(db, tokens, collection: collection, seq: seq)
        } else {
            try insertTokens(db, indexes: indexes, collection: collection, seq: seq, data: row.data)
        }
    }

    func insertPlain(_ db: Database, seq: Int64, plain: RecordData) throws {
        for (key, value) in plain {
            try db.cachedStatement(sql: "INSERT INTO record_plain (record_seq, key, value) VALUES (?, ?, ?)")
                .execute(arguments: [seq, key, value])
        }
    }
}

/// The columns of a `records` row, read without trusting them (a Sendable copy of a GRDB `Row`).
struct StoredRow: Sendable, Equatable {
    let seq: Int64?
    let id: String?
    let version: Int?
    let keyVersion: Int?
    let created: String?
    let updated: String?
    let document: Data?
    let mac: Data?

    /// Through `DatabaseValue`: a value of the wrong type in an edited file becomes nil (and the row a typed
    /// error in `decode`), where GRDB's typed subscripts would trap.
    init(_ row: Row) {
        seq = Int64.fromDatabaseValue(row["seq"] as DatabaseValue)
        id = String.fromDatabaseValue(row["id"] as DatabaseValue)
        version = Int.fromDatabaseValue(row["version"] as DatabaseValue)
        keyVersion = Int.fromDatabaseValue(row["key_version"] as DatabaseValue)
        created = String.fromDatabaseValue(row["created"] as DatabaseValue)
        updated = String.fromDatabaseValue(row["updated"] as DatabaseValue)
        document = Data.fromDatabaseValue(row["document"] as DatabaseValue)
        mac = Data.fromDatabaseValue(row["mac"] as DatabaseValue)
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

/// Runs a GRDB call, turning its errors into `E3DBError` (`databaseError`; E3DBErrors thrown inside pass through).
func databaseCall<T>(_ doing: String, _ body: () throws -> T) throws(E3DBError) -> T {
    do {
        return try body()
    } catch let error as E3DBError {
        throw error
    } catch let error as DatabaseError {
        throw E3DBError(.databaseError, "\(doing): SQLite error \(error.resultCode.rawValue): \(error.message ?? "")")
    } catch {
        throw E3DBError(.databaseError, "\(doing): \(error)")
    }
}

/// Records of a query, decrypted page by page (bounded memory).
public struct StoreRecordSequence: AsyncSequence, Sendable {
    public typealias Element = StoredRecord
    let store: EncryptedStore
    let query: RecordQuery
    let pageSize: Int

    public struct AsyncIterator: AsyncIteratorProtocol {
        let store: EncryptedStore
        let query: RecordQuery
        let pageSize: Int
        var buffer: [StoredRecord] = []
        var index = 0
        var after: Int64?
        var returned = 0
        var finished = false

        public mutating func next() async throws(E3DBError) -> StoredRecord? {
            try advance()
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(E3DBError) -> StoredRecord? {
            try advance()
        }

        mutating func advance() throws(E3DBError) -> StoredRecord? {
            if let limit = query.limit, returned >= limit { return nil }
            while index == buffer.count {
                if finished { return nil }
                try Task.checkCancellationAsE3DBError()
                let page = try store.fetchPage(query, after: after, count: pageSize)
                buffer = page.records
                index = 0
                after = page.lastSeq
                finished = page.rowCount < pageSize
            }
            defer {
                index += 1
                returned += 1
            }
            return buffer[index]
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(store: store, query: query, pageSize: pageSize)
    }
}

extension Task where Success == Never, Failure == Never {
    static func checkCancellationAsE3DBError() throws(E3DBError) {
        if Task.isCancelled { throw E3DBError(.cancelled, "the scan was cancelled") }
    }
}

/// What ``EncryptedStore/verify()`` found.
public struct StoreVerificationReport: Sendable {
    /// The number of records checked.
    public let recordsChecked: Int
    /// The number of files (and attachments) checked: row, body and checksum.
    public let filesChecked: Int
    /// One error per record (or collection) that did not authenticate or decrypt, each naming it in
    /// `context.item`.
    public let problems: [E3DBError]
}

/// Counts and sizes, for `e3dbkit store stats`.
public struct StoreStatistics: Sendable {
    /// Records per collection, by name.
    public let recordsPerCollection: [String: Int]
    /// The database's size in bytes (pages × page size, without the WAL).
    public let databaseBytes: Int
}

extension EncryptedStore {
    /// Authenticates and decrypts every record of every collection, and every file of the file tree (row, body,
    /// checksum; then orphan bodies), going on after a failure, so that every damaged record is reported (by id)
    /// and every damaged file (by path).
    public func verify() throws(E3DBError) -> StoreVerificationReport {
        var checked = 0
        var problems: [E3DBError] = []
        for collection in try collections() {
            do {
                _ = try accessKey(for: collection, create: false)
            } catch {
                problems.append(error)
                continue
            }
            let keys = try currentKeys()
            let indexes = try databaseCall("verifying the indexes of \(collection)") {
                try pool.read { db in try indexKeys(db, keys: keys, collection: collection) }
            }
            var after: Int64 = 0
            while true {
                let rows = try databaseCall("verifying collection \(collection)") {
                    try pool.read { db in
                        try Row.fetchAll(
                            db, sql: "SELECT * FROM records WHERE collection = ? AND seq > ? ORDER BY seq LIMIT 512",
                            arguments: [collection, after])
                    }
                }
                for row in rows {
                    checked += 1
                    do {
                        let record = try decode(row, collection: collection)
                        if !indexes.isEmpty {
                            try verifyIndexEntries(record, seq: row["seq"], collection: collection, indexes: indexes)
                        }
                    } catch {
                        problems.append(error)
                    }
                }
                guard let last = rows.last else { break }
                after = last["seq"]
            }
            // Entries whose record is gone (or that name an index that does not exist).
            let orphans = try databaseCall("verifying the indexes of \(collection)") {
                try pool.read { db in
                    try String.fetchAll(db, sql: """
                        SELECT DISTINCT e.name FROM blind_index_entries e
                        WHERE e.collection = ? AND (NOT EXISTS (SELECT 1 FROM records r WHERE r.seq = e.record_seq
                            AND r.collection = e.collection)
                          OR NOT EXISTS (SELECT 1 FROM blind_indexes i WHERE i.collection = e.collection AND i.name = e.name))
                        """, arguments: [collection])
                }
            }
            for name in orphans {
                problems.append(E3DBError(.indexEntryMismatch, "index \(name) of \(collection) has entries for no record",
                                          context: .init(item: name)))
            }
        }
        let files = try verifyFiles()
        return StoreVerificationReport(recordsChecked: checked, filesChecked: files.checked, problems: problems + files.problems)
    }

    /// Compares a record's stored blind-index entries with the tokens its decrypted data gives.
    func verifyIndexEntries(_ record: StoredRecord, seq: Int64, collection: String,
                            indexes: [(index: BlindIndex, key: SecureBytes)]) throws(E3DBError) {
        let expected = try BlindIndex.tokens(record.data, indexes: indexes)
        let stored = try databaseCall("verifying the index entries of a record") {
            try pool.read { db in
                try Row.fetchAll(
                    db.cachedStatement(sql: "SELECT name, token FROM blind_index_entries WHERE collection = ? AND record_seq = ?"),
                    arguments: [collection, seq]).map { row -> String in
                        let name: String = row["name"]
                        let token: Data = row["token"]
                        return name + ":" + token.base64EncodedString()
                    }
            }
        }
        let want = expected.map { $0.name + ":" + $0.token.base64EncodedString() }
        guard Set(stored) == Set(want), stored.count == want.count else {
            throw E3DBError(.indexEntryMismatch,
                            "the blind-index entries of record \(record.id.lowercasedString) do not match its data",
                            context: .init(item: record.id.lowercasedString))
        }
    }

    /// Records per collection and the database size.
    public func statistics() throws(E3DBError) -> StoreStatistics {
        try databaseCall("reading statistics") {
            try pool.read { db in
                var counts: [String: Int] = [:]
                for name in try String.fetchAll(db, sql: "SELECT name FROM collections") { counts[name] = 0 }
                for row in try Row.fetchAll(db, sql: "SELECT collection, COUNT(*) AS n FROM records GROUP BY collection") {
                    counts[row["collection"]] = row["n"]
                }
                let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
                let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
                return StoreStatistics(recordsPerCollection: counts, databaseBytes: pages * pageSize)
            }
        }
    }
}
