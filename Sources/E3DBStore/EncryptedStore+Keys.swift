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

    /// Wipes the store's keys from memory. Every later call fails with `E3DBError.Code.storeLocked` until
    /// `unlock(_:)`, and no new connection to the database opens. The store's handle to its database's page key is
    /// forgotten too, the decrypted records are dropped from the cache (none enters it while locked), and the idle
    /// read connections are closed; a read running meanwhile closes its connection when it ends. What stays in
    /// memory: the pool's writer connection (closing it would close the store, its page cache is released), and the
    /// page keys SQLite's connections derived, which E3DBSQLite shares between connections and keeps for the most
    /// recent databases of the process (docs/store.md, the `lock()` row of the key decisions).
    ///
    /// It never waits: not for an unlock (an unlock running meanwhile fails with `storeLocked`, and the store ends
    /// locked), nor for a read or a write (which ends with what it had).
    public func lock() {
        lockState.lock(forgetting: forgetPageKey)
        releaseUnlockedMemory()
    }

    /// Forgets the store's handle to its page key (under the lock state's mutex: see `StoreLock`).
    private func forgetPageKey() {
        if let databaseURI { E3DBSQLite.forgetKey(inURI: databaseURI) }
    }

    /// What ``lock()`` drops once the store is marked locked: the cached records, the idle connections, the pool's
    /// page caches.
    private func releaseUnlockedMemory() {
        cache.withLock { $0?.removeAll() }
        readers.closeIdle()
        pool.releaseMemoryEventually()
    }

    /// Whether the store's keys are not in memory (after ``lock()``, until `unlock(_:)` returns).
    public var isLocked: Bool { lockState.isLocked }

    /// Opens the master key again after ``lock()``, and checks the state rows as `open(at:credential:expectedMinimumWriteCounter:)` does.
    /// Calls keep failing with `storeLocked` until it returns. The key derivation (Argon2id for a passphrase) runs
    /// before anything changes, under no lock; a ``lock()`` at any time after this call began (during the key
    /// derivation or the state check) wins: this unlock then fails with `storeLocked`.
    /// - Throws: `E3DBError.Code.wrongKey`, `storeTampered` (a locked store stays locked), `storeLocked` when the
    ///   store was locked meanwhile.
    public func unlock(_ credential: StoreCredential) throws(E3DBError) {
        // A lock from here on wins, during the key derivation too.
        let seen = lockState.epoch
        let keys = try EncryptedStore.unlockKeys(keyHeader, EncryptedStore.readHeader(keyHeader), with: credential)
        testHook(.unlockAfterKeyDerivation)
        let ticket = try lockState.beginUnlock(since: seen) { () throws(E3DBError) in
            if let databaseURI { try E3DBSQLite.restoreKey(.rawKey(keys.databaseKey), inURI: databaseURI) }
        }
        testHook(.unlockBeforeStateCheck)
        do throws(E3DBError) {
            // The state check may need a new connection; a locked store stays locked when it fails.
            try checkState(keys, minimumWriteCounter: nil)
        } catch {
            // Locked again, unless another unlock made the store unlocked or a lock ran meanwhile.
            if lockState.abandonUnlock(ticket, forgetting: forgetPageKey) { releaseUnlockedMemory() }
            throw error
        }
        testHook(.unlockBeforeCommit)
        try lockState.finishUnlock(ticket, UnlockedState(keys: keys, accessKeys: [:]))
    }

    /// `unlock(_:)` for async callers: the key derivation and the state check run on a thread of their own, so no
    /// thread of the cooperative pool waits for them.
    public func unlock(_ credential: StoreCredential) async throws(E3DBError) {
        try await blocking(named: "e3dbkit-store-unlock") { [self] _ throws(E3DBError) in try unlock(credential) }
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
    /// `rekey(at:credential:newCredential:kdfParameters:batchSize:progress:)`.
    /// - Parameters:
    ///   - credential: the new passphrase or raw key.
    ///   - kdf: the Argon2id cost for a new passphrase.
    public func changeCredential(to credential: StoreCredential, kdf: KDFPreset = .moderate) throws(E3DBError) {
        try changeCredential(to: credential, kdfParameters: kdf.parameters)
    }

    /// Changes the passphrase or key with explicit Argon2id parameters.
    /// An identity is not a replacement credential: enroll it with `addIdentity(publicKey:clientID:)`.
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

    /// The access key of `collection` at `version` (a record's `key_version`).
    func accessKey(for collection: String, version: Int, item: String) throws(E3DBError) -> AccessKey {
        try run(KeyVersionRead(store: self, collection: collection, version: version, item: item))
    }

    /// `accessKey(for:version:item:)` through GRDB's async access.
    func accessKey(for collection: String, version: Int, item: String) async throws(E3DBError) -> AccessKey {
        try await run(KeyVersionRead(store: self, collection: collection, version: version, item: item))
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

    func keyKeptRotating(_ collection: String) -> E3DBError {
        E3DBError(
            .versionConflict, "the key of collection \(collection) kept rotating while records were written to it",
            context: .init(item: collection))
    }

    /// Inside a write transaction: whether key `version` is still `collection`'s current one (see `UnderCurrentKey`).
    func keyIsCurrent(_ db: Database, collection: String, version: Int) throws -> Bool {
        try currentKeyVersion(db, collection) == version
    }

    /// `collection`'s current key version, nil when there is no such collection.
    func currentKeyVersion(_ db: Database, _ collection: String) throws -> Int? {
        try Int.fetchOne(db, sql: "SELECT key_version FROM collections WHERE name = ?", arguments: [collection])
    }

    func invalidateKeys(_ collection: String) {
        lockState.withUnlocked { _ = $0.accessKeys.removeValue(forKey: collection) }
    }

    /// The keys of `collection` (kept in memory once read), created when `create` is set and there is none.
    func collectionKeys(_ collection: String, create: Bool) throws(E3DBError) -> CollectionKeys {
        try run(CollectionKeysRead(store: self, collection: collection, create: create))
    }

    /// `collectionKeys(_:create:)` through GRDB's async access.
    func collectionKeys(_ collection: String, create: Bool) async throws(E3DBError) -> CollectionKeys {
        try await run(CollectionKeysRead(store: self, collection: collection, create: create))
    }

    /// The keys of `collection` kept in memory, if any.
    /// - Throws: `storeLocked`.
    func keptCollectionKeys(_ collection: String) throws(E3DBError) -> CollectionKeys? {
        guard let kept = lockState.withUnlocked({ $0.accessKeys[collection] }) else {
            throw E3DBError(.storeLocked, "the store is locked")
        }
        return kept
    }

    /// A collection's current key version and its wrapped keys by version, as stored.
    struct StoredCollectionKeys: Sendable {
        let current: Int
        let wrapped: [(version: Int, key: Data)]
    }

    /// A collection's stored keys, nil when there is no such collection.
    func storedCollectionKeys(_ db: Database, _ collection: String) throws -> StoredCollectionKeys? {
        guard let current = try currentKeyVersion(db, collection) else { return nil }
        let rows = try Row.fetchAll(
            db, sql: "SELECT version, wrapped_key FROM collection_keys WHERE collection = ?", arguments: [collection])
        return StoredCollectionKeys(
            current: current,
            wrapped: try rows.map { row in
                let row = UntrustedRow(store: row, table: "collection_keys")
                return (try row.value("version", as: Int.self), try row.value("wrapped_key", as: Data.self))
            })
    }

    /// A new access key for a collection that does not exist, wrapped under the master key.
    /// - Throws: `collectionNotFound` unless `create`.
    func newCollectionKey(_ collection: String, create: Bool, _ keys: StoreKeys) throws(E3DBError) -> Data {
        guard create else { throw collectionNotFound(collection) }
        return StoreKeys.wrap(AccessKey().secretBoxKey, under: keys.master)
    }

    func collectionNotFound(_ collection: String) -> E3DBError {
        E3DBError(.collectionNotFound, "there is no collection \(collection)", context: .init(item: collection))
    }

    /// Creates `collection` with key version 1, unless another writer created it first.
    func insertCollection(_ db: Database, _ collection: String, wrapped: Data, _ keys: StoreKeys) throws {
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
    func keep(_ stored: StoredCollectionKeys, of collection: String, _ keys: StoreKeys) throws(E3DBError)
        -> CollectionKeys
    {
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

/// Reading a collection's keys: the ones kept in memory, else the stored ones (kept from then on); when there are
/// none and `create` is set, the collection is created first, unless another writer created it meanwhile.
struct CollectionKeysRead: StoreProcedure {
    enum Answer: Sendable {
        /// What a read found, or what the collection's creation found after it.
        case stored(EncryptedStore.StoredCollectionKeys?, created: Bool)
    }

    let store: EncryptedStore
    let collection: String
    let create: Bool

    func step(_ answer: Answer?) throws(E3DBError) -> StoreStep<Answer, EncryptedStore.CollectionKeys> {
        switch answer {
        case nil:
            if let kept = try store.keptCollectionKeys(collection) { return .done(kept) }
            return .access(
                .read("reading collection \(collection)") { [store, collection] db in
                    .stored(try store.storedCollectionKeys(db, collection), created: false)
                })
        case .stored(let stored?, _)?:
            return .done(try store.keep(stored, of: collection, store.currentKeys()))
        case .stored(nil, created: false)?:
            let keys = try store.currentKeys()
            let wrapped = try store.newCollectionKey(collection, create: create, keys)
            return .access(
                .write("creating collection \(collection)") { [store, collection] db in
                    try store.insertCollection(db, collection, wrapped: wrapped, keys)
                    // What is stored now: this collection, or the one another writer created first.
                    return .stored(try store.storedCollectionKeys(db, collection), created: true)
                })
        case .stored(nil, created: true)?:
            throw store.collectionNotFound(collection)
        }
    }
}

/// Reading a collection's key at one version: from the keys kept in memory, else (a rotation in another connection
/// may have added it since they were read) from the keys read again.
struct KeyVersionRead: StoreProcedure {
    typealias Answer = CollectionKeysRead.Answer

    let store: EncryptedStore
    let collection: String
    let version: Int
    /// The record whose key it is, for the error.
    let item: String
    private var readAgain = false

    init(store: EncryptedStore, collection: String, version: Int, item: String) {
        self.store = store
        self.collection = collection
        self.version = version
        self.item = item
    }

    mutating func step(_ answer: Answer?) throws(E3DBError) -> StoreStep<Answer, AccessKey> {
        let read = CollectionKeysRead(store: store, collection: collection, create: false)
        switch try read.step(answer) {
        case .access(let access):
            return .access(access)
        case .done(let keys):
            if let key = keys.keys[version] { return .done(key) }
            guard !readAgain else {
                throw E3DBError(
                    .storeCorrupted,
                    "record \(item) is under key version \(version), which collection \(collection) lacks",
                    context: .init(item: item))
            }
            readAgain = true
            store.invalidateKeys(collection)
            return try step(nil)
        }
    }
}

/// A write under a collection's current access key, which may be the one kept in memory since before a rotation (in
/// this or another connection) made another key current and deleted it: each attempt (`attempt`, made for the
/// current key) checks the key in its write transaction (`keyIsCurrent`) before writing; on `keyRotated` the kept keys
/// are forgotten and another attempt is made with the key read anew, at most 8 in all.
/// - Throws: `versionConflict` when the key kept rotating; what the attempts throw.
struct UnderCurrentKey<Attempt: StoreProcedure, Result: Sendable>: StoreProcedure
where Attempt.Output == EncryptedStore.KeyedAttempt<Result> {
    enum Answer: Sendable {
        case keys(CollectionKeysRead.Answer)
        case attempt(Attempt.Answer)
    }

    let store: EncryptedStore
    let collection: String
    let create: Bool
    /// The attempt for a key and its version.
    let attempt: ((key: AccessKey, version: Int)) throws(E3DBError) -> Attempt
    /// The running attempt (nil while the key is read).
    private var current: Attempt?
    private var attempts = 0

    init(
        store: EncryptedStore, collection: String, create: Bool,
        attempt: @escaping ((key: AccessKey, version: Int)) throws(E3DBError) -> Attempt
    ) {
        self.store = store
        self.collection = collection
        self.create = create
        self.attempt = attempt
    }

    mutating func step(_ answer: Answer?) throws(E3DBError) -> StoreStep<Answer, Result> {
        var answer = answer
        while true {
            guard var running = current else {
                var read = CollectionKeysRead(store: store, collection: collection, create: create)
                switch try read.step(answer, unwrap: Self.keysAnswer, wrap: { .keys($0) }) {
                case .access(let access):
                    return .access(access)
                case .done(let keys):
                    current = try attempt(keys.currentKey)
                    answer = nil
                    continue
                }
            }
            let next = try running.step(answer, unwrap: Self.attemptAnswer, wrap: { .attempt($0) })
            current = running
            switch next {
            case .access(let access):
                return .access(access)
            case .done(.written(let result)):
                return .done(result)
            case .done(.keyRotated):
                store.invalidateKeys(collection)
                attempts += 1
                guard attempts < 8 else { throw store.keyKeptRotating(collection) }
                current = nil
                answer = nil
            }
        }
    }

    private static func keysAnswer(_ answer: Answer) -> CollectionKeysRead.Answer? {
        if case .keys(let keys) = answer { return keys }
        return nil
    }

    private static func attemptAnswer(_ answer: Answer) -> Attempt.Answer? {
        if case .attempt(let attempt) = answer { return attempt }
        return nil
    }
}
