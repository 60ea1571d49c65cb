import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import E3DBRows
import E3DBSQLite
import Foundation
import GRDB
import Synchronization

extension EncryptedStore {
    // MARK: Keys

    /// Wipes every key from memory. Every later call fails with `E3DBError.Code.storeLocked` until
    /// ``unlock(_:)``, and no new connection to the database opens. An encrypted database's page key is forgotten
    /// too, the decrypted records are dropped from the cache, and the idle read connections are closed (they hold
    /// the keys SQLite derived and decrypted pages in its cache); a read running meanwhile closes its connection when
    /// it ends. The pool's writer connection stays open (closing it would close the store), its page cache released.
    /// Lock and unlock run one at a time: a lock during an unlock waits for it, and the store ends locked.
    public func lock() {
        lockState.serialised { lockNow() }
    }

    /// ``lock()``'s work, inside a transition.
    private func lockNow() {
        // Marked locked first: a connection opening meanwhile finds the mark before it misses the page key.
        lockState.set(.locked)
        cache.withLock { $0?.removeAll() }
        readers.closeIdle()
        pool.releaseMemoryEventually()
        if let databaseURI { E3DBSQLite.forgetKey(inURI: databaseURI) }
    }

    /// Whether the store's keys are not in memory (after ``lock()``, until ``unlock(_:)`` returns).
    public var isLocked: Bool { lockState.isLocked }

    /// Opens the master key again after ``lock()``, and checks the state rows as `open(at:credential:expectedMinimumWriteCounter:)` does.
    /// Calls keep failing with `storeLocked` until it returns; an unlock during a lock waits for it.
    /// - Throws: `E3DBError.Code.wrongKey`, `storeTampered` (a locked store stays locked).
    public func unlock(_ credential: StoreCredential) throws(E3DBError) {
        try lockState.serialised { () throws(E3DBError) in
            let keys = try EncryptedStore.unlockKeys(keyHeader, EncryptedStore.readHeader(keyHeader), with: credential)
            let wasLocked = lockState.isLocked
            if let databaseURI { try E3DBSQLite.restoreKey(.rawKey(keys.databaseKey), inURI: databaseURI) }
            // The state check may need a new connection; a locked store stays locked when it fails.
            if wasLocked { lockState.set(.unlocking) }
            do throws(E3DBError) {
                try checkState(keys, minimumWriteCounter: nil)
            } catch {
                if wasLocked { lockNow() }
                throw error
            }
            lockState.set(.unlocked(UnlockedState(keys: keys, accessKeys: [:])))
        }
    }

    /// Changes the passphrase or key: one wrapped key is rewritten, in one transaction, whatever the number of
    /// records (O(1)); a crash leaves either the old or the new credential working. Enrolled identities are not
    /// touched: they wrap the master key, which does not change. On a store created for an identity, this adds a
    /// passphrase or key.
    ///
    /// It does not change the master key, nor anything under it (collection keys, binding MACs, blind-index
    /// tokens, settings, files): the old passphrase or key with an old copy of the file (a backup) still opens the
    /// master key, and with it every record of that copy and every record written later into the current file.
    /// To cut off old credentials and old copies, use
    /// ``rekey(at:credential:newCredential:kdfParameters:batchSize:progress:)``.
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
            throw E3DBError(
                .invalidParameter, "an identity is enrolled with addIdentity, not set with changeCredential")
        }
        let wrapping = try StoreKeys.wrapping(try currentKeys().master, for: credential, kdfParameters: kdfParameters)
        try databaseCall("changing the store key") {
            try keyHeader.write { db in
                try db.execute(
                    sql: """
                        UPDATE store_meta SET kdf = ?, kdf_ops = ?, kdf_mem = ?, kdf_salt = ?, wrapped_master = ?
                        WHERE singleton = 1
                        """,
                    arguments: [
                        wrapping.kdfName, wrapping.parameters?.opsLimit, wrapping.parameters?.memoryLimit,
                        wrapping.salt,
                        wrapping.wrappedMaster,
                    ])
            }
        }
    }

    func currentKeys() throws(E3DBError) -> StoreKeys { try lockState.keys() }

    /// The keys of a collection: the current one (new writes) and, during a rotation, older ones. There is no
    /// value without its current key: a collection whose current key is missing from its rows is `storeCorrupted`.
    struct CollectionKeys {
        /// The key new writes are encrypted under, and its version.
        let currentKey: (key: AccessKey, version: Int)
        /// Every key by version, the current one included.
        let keys: [Int: AccessKey]

        /// - Throws: `storeCorrupted` naming the collection and the version when `keys` lacks version `current`
        ///   (the file was edited or is damaged: a write under any other key would be unreadable).
        init(collection: String, current: Int, keys: [Int: AccessKey]) throws(E3DBError) {
            guard let key = keys[current] else {
                throw E3DBError(
                    .storeCorrupted,
                    "collection \(collection) has no key version \(current), its current one (collection_keys lacks "
                        + "the row: the file was edited or is damaged)",
                    context: .init(part: "collection_keys", expected: current, item: collection))
            }
            currentKey = (key, current)
            self.keys = keys
        }
    }

    /// The current access key of `collection`, created (random, wrapped by the master key) when `create` is set.
    func accessKey(for collection: String, create: Bool) throws(E3DBError) -> (key: AccessKey, version: Int) {
        try collectionKeys(collection, create: create).currentKey
    }

    /// `accessKey(for:create:)` through GRDB's async access.
    func accessKey(for collection: String, create: Bool) async throws(E3DBError) -> (key: AccessKey, version: Int) {
        try await collectionKeys(collection, create: create).currentKey
    }

    /// The access key of `collection` at `version` (a record's `key_version`).
    func accessKey(for collection: String, version: Int, item: String) throws(E3DBError) -> AccessKey {
        if let key = try collectionKeys(collection, create: false).keys[version] { return key }
        // A rotation in another connection may have added a key since it was cached.
        invalidateKeys(collection)
        guard let key = try collectionKeys(collection, create: false).keys[version] else {
            throw missingKeyVersion(collection, version: version, item: item)
        }
        return key
    }

    /// `accessKey(for:version:item:)` through GRDB's async access.
    func accessKey(for collection: String, version: Int, item: String) async throws(E3DBError) -> AccessKey {
        if let key = try await collectionKeys(collection, create: false).keys[version] { return key }
        invalidateKeys(collection)
        guard let key = try await collectionKeys(collection, create: false).keys[version] else {
            throw missingKeyVersion(collection, version: version, item: item)
        }
        return key
    }

    private func missingKeyVersion(_ collection: String, version: Int, item: String) -> E3DBError {
        E3DBError(
            .storeCorrupted, "record \(item) is under key version \(version), which collection \(collection) lacks",
            context: .init(item: item))
    }

    /// The key of blind index `name` of `collection`: derived from the master key once, then kept with the
    /// unlocked keys (wiped on ``lock()``). It depends only on the master key, the collection and the name, none of
    /// which changes while the store is unlocked (a passphrase change rewraps the same master key).
    func blindIndexKey(_ keys: StoreKeys, collection: String, name: String) throws(E3DBError) -> SecureBytes {
        let slot = IndexKeyName(collection: collection, name: name)
        if let key = lockState.withUnlocked({ $0.indexKeys[slot] }) ?? nil { return key }
        let key = try BlindIndex.key(keys, collection: collection, name: name)
        lockState.withUnlocked { $0.indexKeys[slot] = key }
        return key
    }

    /// What one attempt at a write under a collection's current access key did.
    enum KeyedAttempt<T: Sendable>: Sendable {
        case written(T)
        /// The write transaction found another key version current than the attempt's (`keyIsCurrent`): a rotation
        /// made a new key current meanwhile, and may have deleted the attempt's. Nothing was written.
        case keyRotated
    }

    /// The one home of writes that encrypt under `collection`'s current access key, which may be the one kept in
    /// memory since before a rotation (in this or another connection) made another key current and deleted it:
    /// `attempt` gets the current key and, in its write transaction, checks it with `keyIsCurrent` before writing;
    /// on `keyRotated` the kept keys are forgotten and it runs again with the key read anew, at most 8 times.
    /// - Throws: `versionConflict` when the key kept rotating; what `attempt` throws.
    func withCurrentKey<T: Sendable>(
        _ collection: String, create: Bool,
        _ attempt: ((key: AccessKey, version: Int)) throws(E3DBError) -> KeyedAttempt<T>
    ) throws(E3DBError) -> T {
        for _ in 0..<8 {
            if case .written(let result) = try attempt(accessKey(for: collection, create: create)) { return result }
            invalidateKeys(collection)
        }
        throw keyKeptRotating(collection)
    }

    /// `withCurrentKey(_:create:_:)` for an attempt through GRDB's async access.
    func withCurrentKey<T: Sendable>(
        _ collection: String, create: Bool,
        _ attempt: ((key: AccessKey, version: Int)) async throws(E3DBError) -> KeyedAttempt<T>
    ) async throws(E3DBError) -> T {
        for _ in 0..<8 {
            if case .written(let result) = try await attempt(accessKey(for: collection, create: create)) {
                return result
            }
            invalidateKeys(collection)
        }
        throw keyKeptRotating(collection)
    }

    func keyKeptRotating(_ collection: String) -> E3DBError {
        E3DBError(
            .versionConflict, "the key of collection \(collection) kept rotating while records were written to it",
            context: .init(item: collection))
    }

    /// Inside a write transaction: whether key `version` is still `collection`'s current one (see
    /// `withCurrentKey(_:create:_:)`).
    func keyIsCurrent(_ db: Database, collection: String, version: Int) throws -> Bool {
        try Int.fetchOne(db, sql: "SELECT key_version FROM collections WHERE name = ?", arguments: [collection])
            == version
    }

    func invalidateKeys(_ collection: String) {
        lockState.withUnlocked { _ = $0.accessKeys.removeValue(forKey: collection) }
    }

    /// The keys of `collection` (kept in memory once read), created when `create` is set and there is none.
    func collectionKeys(_ collection: String, create: Bool) throws(E3DBError) -> CollectionKeys {
        if let kept = try keptCollectionKeys(collection) { return kept }
        let keys = try currentKeys()
        let stored = try databaseCall("reading collection \(collection)") {
            try pool.read { db in try storedCollectionKeys(db, collection) }
        }
        guard let stored else {
            let wrapped = try newCollectionKey(collection, create: create, keys)
            try databaseCall("creating collection \(collection)") {
                try pool.write { db in try insertCollection(db, collection, wrapped: wrapped, keys) }
            }
            // Another writer may have won the race: read what is stored.
            return try collectionKeys(collection, create: false)
        }
        return try keep(stored, of: collection, keys)
    }

    /// `collectionKeys(_:create:)` through GRDB's async access.
    func collectionKeys(_ collection: String, create: Bool) async throws(E3DBError) -> CollectionKeys {
        if let kept = try keptCollectionKeys(collection) { return kept }
        let keys = try currentKeys()
        let stored = try await databaseCall("reading collection \(collection)") {
            try await pool.read { db in try storedCollectionKeys(db, collection) }
        }
        guard let stored else {
            let wrapped = try newCollectionKey(collection, create: create, keys)
            try await databaseCall("creating collection \(collection)") {
                try await pool.write { db in try insertCollection(db, collection, wrapped: wrapped, keys) }
            }
            return try await collectionKeys(collection, create: false)
        }
        return try keep(stored, of: collection, keys)
    }

    private func keptCollectionKeys(_ collection: String) throws(E3DBError) -> CollectionKeys? {
        guard let kept = lockState.withUnlocked({ $0.accessKeys[collection] }) else {
            throw E3DBError(.storeLocked, "the store is locked")
        }
        return kept
    }

    /// A collection's current key version and its wrapped keys by version, nil when there is no such collection.
    private func storedCollectionKeys(_ db: Database, _ collection: String) throws -> (
        current: Int, wrapped: [(version: Int, key: Data)]
    )? {
        guard
            let current = try Int.fetchOne(
                db, sql: "SELECT key_version FROM collections WHERE name = ?", arguments: [collection])
        else { return nil }
        let rows = try Row.fetchAll(
            db, sql: "SELECT version, wrapped_key FROM collection_keys WHERE collection = ?", arguments: [collection])
        return try (
            current,
            rows.map { row in
                let row = UntrustedRow(store: row, table: "collection_keys")
                return (try row.value("version", as: Int.self), try row.value("wrapped_key", as: Data.self))
            }
        )
    }

    /// A new access key for a collection that does not exist, wrapped under the master key.
    /// - Throws: `collectionNotFound` unless `create`.
    private func newCollectionKey(_ collection: String, create: Bool, _ keys: StoreKeys) throws(E3DBError) -> Data {
        guard create else {
            throw E3DBError(
                .collectionNotFound, "there is no collection \(collection)", context: .init(item: collection))
        }
        return StoreKeys.wrap(AccessKey().secretBoxKey, under: keys.master)
    }

    /// Creates `collection` with key version 1, unless another writer created it first.
    private func insertCollection(_ db: Database, _ collection: String, wrapped: Data, _ keys: StoreKeys) throws {
        try db.execute(
            sql: "INSERT OR IGNORE INTO collections (name, key_version, created) VALUES (?, 1, ?)",
            arguments: [collection, StoreTime.format(StoreTime.now())])
        guard db.changesCount == 1 else { return }
        try db.execute(
            sql: "INSERT INTO collection_keys (collection, version, wrapped_key) VALUES (?, 1, ?)",
            arguments: [collection, wrapped])
        try commitState(
            db, keys,
            CollectionStateChange(collection: collection, authenticator: stateAuthenticator(keys), creating: true))
    }

    /// Unwraps a collection's stored keys and keeps them in memory.
    private func keep(
        _ stored: (current: Int, wrapped: [(version: Int, key: Data)]), of collection: String, _ keys: StoreKeys
    ) throws(E3DBError) -> CollectionKeys {
        var unwrapped: [Int: AccessKey] = [:]
        for (version, wrapped) in stored.wrapped {
            let key = try StoreKeys.unwrap(
                wrapped, under: keys.master,
                failure: E3DBError(
                    .recordTampered, "an access key of collection \(collection) does not authenticate",
                    context: .init(item: collection)))
            unwrapped[version] = AccessKey(key)
        }
        let result = try CollectionKeys(collection: collection, current: stored.current, keys: unwrapped)
        lockState.withUnlocked { $0.accessKeys[collection] = result }
        return result
    }
}
