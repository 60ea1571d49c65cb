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
        let keys = try currentKeys()
        _ = try collectionKeys(collection, create: false)
        // Start a rotation unless one is unfinished.
        let newKey = AccessKey()
        let wrapped = StoreKeys.wrap(newKey.secretBoxKey, under: keys.master)
        let target = try databaseCall("starting the rotation of \(collection)") { () throws -> Int in
            try pool.write { db -> Int in
                let current =
                    try Int.fetchOne(
                        db, sql: "SELECT key_version FROM collections WHERE name = ?", arguments: [collection]) ?? 1
                let stale =
                    try Int.fetchOne(
                        db, sql: "SELECT COUNT(*) FROM records WHERE collection = ? AND key_version < ?",
                        arguments: [collection, current]) ?? 0
                if stale > 0 { return current }
                try db.execute(
                    sql: "INSERT INTO collection_keys (collection, version, wrapped_key) VALUES (?, ?, ?)",
                    arguments: [collection, current + 1, wrapped])
                try db.execute(
                    sql: "UPDATE collections SET key_version = ? WHERE name = ?", arguments: [current + 1, collection])
                try commitState(db, keys, nil)
                return current + 1
            }
        }
        invalidateKeys(collection)
        let total = try databaseCall("counting records to rotate") {
            try pool.read { db in
                try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM records WHERE collection = ? AND key_version < ?",
                    arguments: [collection, target]) ?? 0
            }
        }
        let current = try accessKey(for: collection, version: target, item: collection)
        var done = 0
        while true {
            if Task.isCancelled {
                throw E3DBError(.cancelled, "the rotation of \(collection) was cancelled; call it again to resume")
            }
            let rows = try databaseCall("reading records to rotate") {
                try pool.read { db in
                    try Row.fetchAll(
                        db, sql: "SELECT * FROM records WHERE collection = ? AND key_version < ? ORDER BY seq LIMIT ?",
                        arguments: [collection, target, max(1, batchSize)])
                }
            }
            if rows.isEmpty { break }
            var updates:
                [(seq: Int64, id: String, oldKeyVersion: Int, version: Int, oldMAC: Data, document: Data, mac: Data)] =
                    []
            for row in rows {
                let stored = StoredRow(row)
                let record = try decode(stored, collection: collection)
                // `decode` authenticated the row, so its columns are all there and of their types.
                guard let seq = stored.seq, let created = stored.created, let updated = stored.updated,
                    let oldKeyVersion = stored.keyVersion, let oldMAC = stored.mac
                else { throw stored.damage ?? E3DBError(.storeCorrupted, "record \(record.id) is damaged") }
                let document = EncryptedDocument(
                    meta: record.meta, data: encryptFields(record.data, accessKey: current), recordSignature: nil)
                let bytes = document.jsonData()
                let mac = try bindingMAC(
                    keys, collection: collection, id: record.id, version: record.version, keyVersion: target,
                    created: created, updated: updated, document: bytes)
                updates.append((seq, record.id.lowercasedString, oldKeyVersion, record.version, oldMAC, bytes, mac))
            }
            try databaseCall("rotating records of \(collection)") {
                try pool.write { db in
                    try writingRecords(db, keys, collection: collection) { state in
                        for update in updates {
                            // Skipped when the record changed meanwhile (an update writes it under the new key).
                            try db.execute(
                                sql: """
                                    UPDATE records SET key_version = ?, document = ?, mac = ?
                                    WHERE seq = ? AND key_version = ? AND version = ?
                                    """,
                                arguments: [
                                    target, update.document, update.mac, update.seq, update.oldKeyVersion,
                                    update.version,
                                ])
                            if db.changesCount == 1 {
                                try state.remove(id: update.id, version: update.version, mac: update.oldMAC)
                                try state.add(id: update.id, version: update.version, mac: update.mac)
                            }
                        }
                    }
                }
            }
            done += updates.count
            progress?(
                RotationProgress(collection: collection, keyVersion: target, recordsDone: done, recordsTotal: total))
        }
        try databaseCall("finishing the rotation of \(collection)") {
            try pool.write { db in
                let stale =
                    try Int.fetchOne(
                        db, sql: "SELECT COUNT(*) FROM records WHERE collection = ? AND key_version < ?",
                        arguments: [collection, target]) ?? 0
                if stale == 0 {
                    try db.execute(
                        sql: "DELETE FROM collection_keys WHERE collection = ? AND version < ?",
                        arguments: [collection, target])
                    try commitState(db, keys, nil)
                }
            }
        }
        invalidateKeys(collection)
        return RotationProgress(collection: collection, keyVersion: target, recordsDone: done, recordsTotal: total)
    }

    /// The current key version of `collection` and the number of records still under older keys.
    public func keyStatus(collection: String) throws(E3DBError) -> (keyVersion: Int, recordsUnderOlderKeys: Int) {
        try databaseCall("reading the key status of \(collection)") {
            try pool.read { db in
                guard
                    let current = try Int.fetchOne(
                        db, sql: "SELECT key_version FROM collections WHERE name = ?", arguments: [collection])
                else {
                    throw E3DBError(
                        .collectionNotFound, "there is no collection \(collection)", context: .init(item: collection))
                }
                let stale =
                    try Int.fetchOne(
                        db, sql: "SELECT COUNT(*) FROM records WHERE collection = ? AND key_version < ?",
                        arguments: [collection, current]) ?? 0
                return (current, stale)
            }
        }
    }
}
