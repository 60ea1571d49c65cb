public import E3DBCanonicalJSON
import E3DBDocuments
public import E3DBPrimitives
public import Foundation
import GRDB

// Records named by a key the app chooses, for key-value use (YapDatabase's `setObject:forKey:inCollection:`): the
// record's id is derived from the store, the collection and the key, so a key names at most one record, a lookup
// by key is a lookup by id, and the id (bound by the record's MAC like any other) cannot be moved to another key.

extension EncryptedStore {
    /// The id of the record named `key` in `collection` of this store: a version 8 UUID from BLAKE2b-128 over the
    /// canonical JSON array `["E3DBStore key v1", store id, collection, key]`.
    ///
    /// The derivation is not keyed: whoever can read the ids in a store file (a store in a plain database file)
    /// and guesses a key can tell whether the store holds a record under it, as they can read `plain` metadata.
    public func recordID(forKey key: String, in collection: String) throws(E3DBError) -> UUID {
        let place: JSONValue = .array(["E3DBStore key v1", .string(storeIDText), .string(collection), .string(key)])
        let digest = try BLAKE2b.hash(data: Data(CanonicalJSON.serialize(place).utf8), outputByteCount: 16)
        return EncryptedStore.uuid([UInt8](digest), version: 8)
    }

    /// Stores the record named `key` in `collection`: a new record (version 1) when there is none, else a new
    /// version of it (its data, type and `plain` replaced), in one transaction either way.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - key: the app's name for the record (not empty).
    ///   - type: the record's type.
    ///   - data: the record's fields, encrypted.
    ///   - plain: the record's `plain` metadata, in clear (queryable).
    ///   - expectedVersion: when given, the version the caller read (0 for "no record yet"); another one is
    ///     `E3DBError.Code.versionConflict`. Without it, the write replaces whatever version is current.
    /// - Returns: the record's id (``recordID(forKey:in:)``) and new version.
    /// - Throws: `invalidParameter` for an empty key, `versionConflict`, the errors of `put(collection:type:data:plain:)`.
    @discardableResult
    public func put(
        collection: String, key: String, type: String, data: RecordData, plain: RecordData = RecordData(),
        expectedVersion: Int? = nil
    ) throws(E3DBError) -> RecordReference {
        let id = try keyedID(key, in: collection)
        // Another writer may create or delete the record between the look and the write: then look again (the
        // update itself reads the current version in its own transaction, so concurrent updates never conflict).
        for _ in 0..<8 {
            let current = try databaseCall("reading record \(id.lowercasedString)") {
                try pool.read { db in try keyedVersion(db, id: id, collection: collection) }
            }
            if try keyedPutInserts(current: current, expectedVersion: expectedVersion, key: key, id: id) {
                if let inserted = try insertRecords(collection: collection, records: [(type, data, plain)], ids: [id]) {
                    return inserted[0]
                }
                continue
            }
            do {
                return try updateRecord(
                    collection: collection, id: id, expectedVersion: expectedVersion, type: type, data: data,
                    plain: plain)
            } catch  where error.code == .recordNotFound {
                continue
            }
        }
        throw keyedRecordKeptChanging(key, id: id)
    }

    /// `put(collection:key:type:data:plain:expectedVersion:)` for async callers.
    @discardableResult
    public func put(
        collection: String, key: String, type: String, data: RecordData, plain: RecordData = RecordData(),
        expectedVersion: Int? = nil
    ) async throws(E3DBError) -> RecordReference {
        let id = try keyedID(key, in: collection)
        for _ in 0..<8 {
            let current = try await databaseCall("reading record \(id.lowercasedString)") {
                try await pool.read { db in try keyedVersion(db, id: id, collection: collection) }
            }
            if try keyedPutInserts(current: current, expectedVersion: expectedVersion, key: key, id: id) {
                if let inserted = try await insertRecords(
                    collection: collection, records: [(type, data, plain)], ids: [id])
                {
                    return inserted[0]
                }
                continue
            }
            do {
                return try await updateRecord(
                    collection: collection, id: id, expectedVersion: expectedVersion, type: type, data: data,
                    plain: plain)
            } catch  where error.code == .recordNotFound {
                continue
            }
        }
        throw keyedRecordKeptChanging(key, id: id)
    }

    /// The id of the record named `key`: `invalidParameter` for an empty key.
    private func keyedID(_ key: String, in collection: String) throws(E3DBError) -> UUID {
        guard !key.isEmpty else {
            throw E3DBError(.invalidParameter, "a record key cannot be empty", context: .init(item: collection))
        }
        return try recordID(forKey: key, in: collection)
    }

    /// The current version of the keyed record `id`, nil when there is none.
    private func keyedVersion(_ db: Database, id: UUID, collection: String) throws -> Int? {
        try Int.fetchOne(
            db, sql: "SELECT version FROM records WHERE id = ? AND collection = ?",
            arguments: [id.lowercasedString, collection])
    }

    /// Whether a keyed put of the record at `current` (nil: none) inserts (or else updates).
    /// - Throws: `versionConflict` when `expectedVersion` is given and not `current` (0 for none).
    private func keyedPutInserts(current: Int?, expectedVersion: Int?, key: String, id: UUID) throws(E3DBError)
        -> Bool
    {
        if let expectedVersion, expectedVersion != (current ?? 0) {
            throw E3DBError(
                .versionConflict,
                "the record with key \(key) is at version \(current ?? 0), not \(expectedVersion)",
                context: .init(expected: expectedVersion, actual: current ?? 0, item: id.lowercasedString))
        }
        return current == nil
    }

    private func keyedRecordKeptChanging(_ key: String, id: UUID) -> E3DBError {
        E3DBError(
            .versionConflict, "the record with key \(key) kept changing while it was written",
            context: .init(item: id.lowercasedString))
    }

    /// Reads, authenticates and decrypts the record named `key` in `collection`.
    /// - Throws: `recordNotFound` when there is none, and the errors of `get(collection:id:)`.
    public func get(collection: String, key: String) throws(E3DBError) -> StoredRecord {
        let id = try recordID(forKey: key, in: collection)
        do {
            return try get(collection: collection, id: id)
        } catch {
            throw keyedError(error, key: key, collection: collection)
        }
    }

    /// `get(collection:key:)` for async callers.
    public func get(collection: String, key: String) async throws(E3DBError) -> StoredRecord {
        let id = try recordID(forKey: key, in: collection)
        do {
            return try await get(collection: collection, id: id)
        } catch {
            throw keyedError(error, key: key, collection: collection)
        }
    }

    /// Deletes the record named `key` in `collection`.
    /// - Throws: `recordNotFound` when there is none, `versionConflict` when `expectedVersion` is not current.
    public func delete(collection: String, key: String, expectedVersion: Int? = nil) throws(E3DBError) {
        let id = try recordID(forKey: key, in: collection)
        do {
            try delete(collection: collection, id: id, expectedVersion: expectedVersion)
        } catch {
            throw keyedError(error, key: key, collection: collection)
        }
    }

    /// `delete(collection:key:expectedVersion:)` for async callers.
    public func delete(collection: String, key: String, expectedVersion: Int? = nil) async throws(E3DBError) {
        let id = try recordID(forKey: key, in: collection)
        do {
            try await delete(collection: collection, id: id, expectedVersion: expectedVersion)
        } catch {
            throw keyedError(error, key: key, collection: collection)
        }
    }

    /// An error about the record named `key`: `recordNotFound` says the key; others pass through.
    private func keyedError(_ error: E3DBError, key: String, collection: String) -> E3DBError {
        guard error.code == .recordNotFound else { return error }
        return E3DBError(
            .recordNotFound, "no record with key \(key) in collection \(collection)", context: error.context)
    }
}
