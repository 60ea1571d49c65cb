import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import Foundation
import GRDB

/// Progress of a collection key rotation.
public struct RotationProgress: Sendable, Hashable {
    /// The collection.
    public let collection: String
    /// The key version records are moving to.
    public let keyVersion: Int
    /// Records re-encrypted so far (in this call).
    public let recordsDone: Int
    /// Records still under an older key when this call started.
    public let recordsTotal: Int
}

extension EncryptedStore {
    /// Rotates `collection`'s access key: a new key becomes current at once (new writes use it), then every record
    /// under an older key is decrypted and encrypted again under the new one, in batches of `batchSize`, each
    /// batch one transaction. When no record is left under an older key, the older keys are deleted.
    ///
    /// Resumable: after a crash or a cancellation, call it again and it goes on with the same new key (a new key
    /// is made only when no rotation is unfinished). Reads and writes may run meanwhile: every record names the
    /// key version it is under. Blind-index tokens do not depend on the access key and are kept.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - batchSize: records per transaction.
    ///   - progress: called after each batch.
    /// - Returns: the final progress (the new key version and the number of records re-encrypted).
    /// - Throws: `collectionNotFound`, `recordTampered` for a record that does not authenticate (the rotation
    ///   stops there and can be resumed after repair), `cancelled` when the task is cancelled between batches.
    @discardableResult
    public func rotateKey(
        collection: String, batchSize: Int = 256, progress: (@Sendable (RotationProgress) -> Void)? = nil
    ) throws(E3DBError) -> RotationProgress {
        try run(Rotation(store: self, collection: collection, batchSize: batchSize, progress: progress))
    }

    /// `rotateKey(collection:batchSize:progress:)` for async callers: every transaction is awaited; the
    /// re-encryption of a batch runs on the caller's task between them.
    @discardableResult
    public func rotateKey(
        collection: String, batchSize: Int = 256, progress: (@Sendable (RotationProgress) -> Void)? = nil
    ) async throws(E3DBError) -> RotationProgress {
        try await run(Rotation(store: self, collection: collection, batchSize: batchSize, progress: progress))
    }

    /// The steps of a rotation: start it (or go on with an unfinished one), count the records under older keys,
    /// then a batch at a time read them, encrypt them again and write them, and last delete the older keys.
    struct Rotation: StoreProcedure {
        enum Answer: Sendable {
            /// The collection's keys once the rotation started: the current one is the one records move to.
            case started(StoredCollectionKeys)
            case counted(Int)
            case batch([StoredRow])
            case rotated(Int)
            case finished
        }

        let store: EncryptedStore
        let collection: String
        let batchSize: Int
        let progress: (@Sendable (RotationProgress) -> Void)?
        let keys: StoreKeys
        /// The key a rotation that starts makes current, wrapped under the master key.
        let wrapped: Data
        private var target: (key: AccessKey, version: Int)?
        private var total = 0
        private var done = 0

        init(
            store: EncryptedStore, collection: String, batchSize: Int,
            progress: (@Sendable (RotationProgress) -> Void)?
        ) throws(E3DBError) {
            self.store = store
            self.collection = collection
            self.batchSize = batchSize
            self.progress = progress
            keys = try store.currentKeys()
            wrapped = StoreKeys.wrap(AccessKey().secretBoxKey, under: keys.master)
        }

        mutating func step(_ answer: Answer?) throws(E3DBError) -> StoreStep<Answer, RotationProgress> {
            switch answer {
            case nil:
                return .access(
                    .write("starting the rotation of \(collection)") { [store, keys, collection, wrapped] db in
                        .started(try store.startRotation(db, keys, collection: collection, wrapped: wrapped))
                    })
            case .started(let stored)?:
                let target = try store.keep(stored, of: collection, keys).currentKey
                self.target = target
                return .access(
                    .read("counting records to rotate") { [store, collection] db in
                        .counted(try store.recordsUnder(db, olderThan: target.version, in: collection))
                    })
            case .counted(let total)?:
                self.total = total
                return try nextBatch()
            case .batch(let rows)?:
                guard let target else { throw E3DBError(.storeCorrupted, "the rotation has no key") }
                if rows.isEmpty {
                    return .access(
                        .write("finishing the rotation of \(collection)") { [store, keys, collection] db in
                            try store.finishRotation(db, keys, collection: collection, target: target.version)
                            return .finished
                        })
                }
                let updates = try store.rotated(
                    rows, keys, collection: collection, target: target.version, key: target.key)
                return .access(
                    .write("rotating records of \(collection)") { [store, keys, collection] db in
                        try store.writeRotated(db, updates, keys, collection: collection, target: target.version)
                        return .rotated(updates.count)
                    })
            case .rotated(let count)?:
                done += count
                progress?(result)
                return try nextBatch()
            case .finished?:
                store.invalidateKeys(collection)
                return .done(result)
            }
        }

        private var result: RotationProgress {
            RotationProgress(
                collection: collection, keyVersion: target?.version ?? 0, recordsDone: done, recordsTotal: total)
        }

        /// The read of the next batch; `cancelled` when the task is cancelled (between batches).
        private func nextBatch() throws(E3DBError) -> StoreStep<Answer, RotationProgress> {
            if Task.isCancelled {
                throw E3DBError(.cancelled, "the rotation of \(collection) was cancelled; call it again to resume")
            }
            guard let target else { throw E3DBError(.storeCorrupted, "the rotation has no key") }
            return .access(
                .read("reading records to rotate") { [store, collection, batchSize] db in
                    .batch(try store.rotationBatch(db, collection: collection, target: target.version, size: batchSize))
                })
        }
    }

    /// A record re-encrypted under the rotation's key, for its batch's transaction.
    struct RotatedRecord: Sendable {
        let seq: Int64
        let id: String
        let oldKeyVersion: Int
        let version: Int
        let oldMAC: Data
        let document: Data
        let mac: Data
    }

    /// The rotation's first transaction: the collection's keys, whose current one records move to (a new one, with
    /// `wrapped`, unless a rotation is unfinished).
    /// - Throws: `collectionNotFound`.
    private func startRotation(_ db: Database, _ keys: StoreKeys, collection: String, wrapped: Data) throws
        -> StoredCollectionKeys
    {
        guard let current = try currentKeyVersion(db, collection) else { throw collectionNotFound(collection) }
        if try recordsUnder(db, olderThan: current, in: collection) == 0 {
            try db.execute(
                sql: "INSERT INTO collection_keys (collection, version, wrapped_key) VALUES (?, ?, ?)",
                arguments: [collection, current + 1, wrapped])
            try db.execute(
                sql: "UPDATE collections SET key_version = ? WHERE name = ?", arguments: [current + 1, collection])
            try commitState(db, keys, nil)
        }
        guard let stored = try storedCollectionKeys(db, collection) else { throw collectionNotFound(collection) }
        return stored
    }

    /// The number of `collection`'s records under a key version older than `version`.
    private func recordsUnder(_ db: Database, olderThan version: Int, in collection: String) throws -> Int {
        try Int.fetchOne(
            db, sql: "SELECT COUNT(*) FROM records WHERE collection = ? AND key_version < ?",
            arguments: [collection, version]) ?? 0
    }

    /// The next batch of records still under an older key.
    private func rotationBatch(_ db: Database, collection: String, target: Int, size: Int) throws -> [StoredRow] {
        try Row.fetchAll(
            db, sql: "SELECT * FROM records WHERE collection = ? AND key_version < ? ORDER BY seq LIMIT ?",
            arguments: [collection, target, max(1, size)]
        ).map(StoredRow.init(_:))
    }

    /// A batch authenticated, decrypted and encrypted again under `key` (version `target`), bound in place.
    private func rotated(
        _ rows: [StoredRow], _ keys: StoreKeys, collection: String, target: Int, key: AccessKey
    ) throws(E3DBError) -> [RotatedRecord] {
        var updates: [RotatedRecord] = []
        for stored in rows {
            let record = try decode(stored, collection: collection)
            // `decode` authenticated the row, so its columns are all there and of their types.
            guard let seq = stored.seq, let created = stored.created, let updated = stored.updated,
                let oldKeyVersion = stored.keyVersion, let oldMAC = stored.mac
            else { throw stored.damage ?? E3DBError(.storeCorrupted, "record \(record.id) is damaged") }
            let document = EncryptedDocument(
                meta: record.meta, data: encryptFields(record.data, accessKey: key), recordSignature: nil)
            let bytes = document.jsonData()
            let mac = try bindingMAC(
                keys, collection: collection, id: record.id, version: record.version, keyVersion: target,
                created: created, updated: updated, document: bytes)
            updates.append(
                RotatedRecord(
                    seq: seq, id: record.id.lowercasedString, oldKeyVersion: oldKeyVersion, version: record.version,
                    oldMAC: oldMAC, document: bytes, mac: mac))
        }
        return updates
    }

    /// A batch's transaction. A record that changed meanwhile is skipped (an update writes it under the new key).
    private func writeRotated(
        _ db: Database, _ updates: [RotatedRecord], _ keys: StoreKeys, collection: String, target: Int
    ) throws {
        try writingRecords(db, keys, collection: collection) { state in
            for update in updates {
                try db.execute(
                    sql: """
                        UPDATE records SET key_version = ?, document = ?, mac = ?
                        WHERE seq = ? AND key_version = ? AND version = ?
                        """,
                    arguments: [target, update.document, update.mac, update.seq, update.oldKeyVersion, update.version])
                if db.changesCount == 1 {
                    try state.remove(id: update.id, version: update.version, mac: update.oldMAC)
                    try state.add(id: update.id, version: update.version, mac: update.mac)
                }
            }
        }
    }

    /// The rotation's last transaction: the older keys are deleted when no record is left under them.
    private func finishRotation(_ db: Database, _ keys: StoreKeys, collection: String, target: Int) throws {
        guard try recordsUnder(db, olderThan: target, in: collection) == 0 else { return }
        try db.execute(
            sql: "DELETE FROM collection_keys WHERE collection = ? AND version < ?", arguments: [collection, target])
        try commitState(db, keys, nil)
    }

    /// The current key version of `collection` and the number of records still under older keys.
    public func keyStatus(collection: String) throws(E3DBError) -> (keyVersion: Int, recordsUnderOlderKeys: Int) {
        try perform(keyStatusRead(collection))
    }

    /// `keyStatus(collection:)` for async callers.
    public func keyStatus(collection: String) async throws(E3DBError) -> (keyVersion: Int, recordsUnderOlderKeys: Int) {
        try await perform(keyStatusRead(collection))
    }

    private func keyStatusRead(_ collection: String) throws(E3DBError) -> StoreAccess<
        (keyVersion: Int, recordsUnderOlderKeys: Int)
    > {
        _ = try currentKeys()  // a locked store refuses every call
        return .read("reading the key status of \(collection)") { [self] db in
            guard let current = try currentKeyVersion(db, collection) else { throw collectionNotFound(collection) }
            return (current, try recordsUnder(db, olderThan: current, in: collection))
        }
    }
}
