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
        try run(
            keyedPut(
                collection: collection, key: key, type: type, data: data, plain: plain, expectedVersion: expectedVersion
            ))
    }

    /// `put(collection:key:type:data:plain:expectedVersion:)` for async callers.
    @discardableResult
    public func put(
        collection: String, key: String, type: String, data: RecordData, plain: RecordData = RecordData(),
        expectedVersion: Int? = nil
    ) async throws(E3DBError) -> RecordReference {
        try await run(
            keyedPut(
                collection: collection, key: key, type: type, data: data, plain: plain, expectedVersion: expectedVersion
            ))
    }

    /// The procedure of `put(collection:key:type:data:plain:expectedVersion:)`.
    private func keyedPut(
        collection: String, key: String, type: String, data: RecordData, plain: RecordData, expectedVersion: Int?
    ) throws(E3DBError) -> KeyedPut {
        KeyedPut(
            store: self, collection: collection, key: key, id: try keyedID(key, in: collection), type: type, data: data,
            plain: plain, expectedVersion: expectedVersion)
    }

    /// A keyed put: a look at the record's version, then an insert when there is none, else an update (of whatever
    /// version is current, read again in the update's own transaction, so concurrent updates never conflict). Another
    /// writer may create or delete the record between the look and the write: then it looks again, at most 8 times.
    struct KeyedPut: StoreProcedure {
        enum Answer: Sendable {
            case version(Int?)
            case insertion(UnderCurrentKey<Insertion, [RecordReference]?>.Answer)
            case update(Updating.Answer)
        }

        private enum Phase {
            case look
            case insertion(UnderCurrentKey<Insertion, [RecordReference]?>)
            case update(Updating)
        }

        let store: EncryptedStore
        let collection: String
        let key: String
        let id: UUID
        let type: String
        let data: RecordData
        let plain: RecordData
        let expectedVersion: Int?
        private var phase = Phase.look
        private var looks = 0

        init(
            store: EncryptedStore, collection: String, key: String, id: UUID, type: String, data: RecordData,
            plain: RecordData, expectedVersion: Int?
        ) {
            self.store = store
            self.collection = collection
            self.key = key
            self.id = id
            self.type = type
            self.data = data
            self.plain = plain
            self.expectedVersion = expectedVersion
        }

        mutating func step(_ answer: Answer?) throws(E3DBError) -> StoreStep<Answer, RecordReference> {
            var answer = answer
            while true {
                switch phase {
                case .look:
                    if case .version(let current)? = answer {
                        phase = try write(after: current)
                        answer = nil
                        continue
                    }
                    guard looks < 8 else {
                        throw E3DBError(
                            .versionConflict, "the record with key \(key) kept changing while it was written",
                            context: .init(item: id.lowercasedString))
                    }
                    looks += 1
                    return .access(
                        .read("reading record \(id.lowercasedString)") { [id, collection] db in
                            .version(
                                try Int.fetchOne(
                                    db, sql: "SELECT version FROM records WHERE id = ? AND collection = ?",
                                    arguments: [id.lowercasedString, collection]))
                        })
                case .insertion(var insertion):
                    let next = try insertion.step(answer, unwrap: Self.insertionAnswer, wrap: { .insertion($0) })
                    phase = .insertion(insertion)
                    switch next {
                    case .access(let access): return .access(access)
                    case .done(let inserted):
                        if let reference = inserted?.first { return .done(reference) }
                        // The record was created meanwhile: look again.
                        phase = .look
                        answer = nil
                    }
                case .update(var update):
                    let next = try update.step(answer, unwrap: Self.updateAnswer, wrap: { .update($0) })
                    phase = .update(update)
                    switch next {
                    case .access(let access): return .access(access)
                    case .done(let updated?): return .done(updated)
                    case .done(nil):
                        // The record was deleted meanwhile: look again.
                        phase = .look
                        answer = nil
                    }
                }
            }
        }

        private static func insertionAnswer(_ answer: Answer) -> UnderCurrentKey<Insertion, [RecordReference]?>.Answer?
        {
            if case .insertion(let inner) = answer { return inner }
            return nil
        }

        private static func updateAnswer(_ answer: Answer) -> Updating.Answer? {
            if case .update(let inner) = answer { return inner }
            return nil
        }

        /// What a look that found the record at `current` (nil: none) leads to: an insert or an update.
        /// - Throws: `versionConflict` when `expectedVersion` is given and not `current` (0 for none).
        private func write(after current: Int?) throws(E3DBError) -> Phase {
            if let expectedVersion, expectedVersion != (current ?? 0) {
                throw E3DBError(
                    .versionConflict,
                    "the record with key \(key) is at version \(current ?? 0), not \(expectedVersion)",
                    context: .init(expected: expectedVersion, actual: current ?? 0, item: id.lowercasedString))
            }
            guard current != nil else {
                return .insertion(
                    try store.insertion(collection: collection, records: [(type, data, plain)], ids: [id]))
            }
            return .update(
                try store.updating(
                    RecordUpdate(
                        collection: collection, id: id, expectedVersion: expectedVersion, type: type, data: data,
                        plain: plain)))
        }
    }

    /// The id of the record named `key`: `invalidParameter` for an empty key.
    private func keyedID(_ key: String, in collection: String) throws(E3DBError) -> UUID {
        guard !key.isEmpty else {
            throw E3DBError(.invalidParameter, "a record key cannot be empty", context: .init(item: collection))
        }
        return try recordID(forKey: key, in: collection)
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
