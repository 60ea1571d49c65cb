public import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import E3DBRows
public import Foundation
import GRDB
import Synchronization

extension EncryptedStore {
    // MARK: Records
    //
    // Each operation has a synchronous form and an async one (GRDB's async `read` and `write`, so that an async
    // caller's thread is never held while the database is busy). Both run the same code: what happens inside a
    // transaction is one function taking the `Database`, the crypto around it is shared, and an operation of several
    // accesses is one `StoreProcedure` (StoreProcedure.swift) that both forms run, differing only in `await`.

    /// Encrypts and stores a new record.
    /// - Parameters:
    ///   - collection: the collection (created on first use, with a new access key).
    ///   - type: the record type (plaintext).
    ///   - data: the fields to encrypt.
    ///   - plain: plaintext, queryable metadata.
    /// - Returns: the new record's id and version (1).
    @discardableResult
    public func put(collection: String, type: String, data: RecordData, plain: RecordData = RecordData())
        throws(E3DBError)
        -> RecordReference
    {
        try put(collection: collection, records: [(type, data, plain)])[0]
    }

    /// `put(collection:type:data:plain:)` for async callers.
    @discardableResult
    public func put(collection: String, type: String, data: RecordData, plain: RecordData = RecordData())
        async throws(E3DBError) -> RecordReference
    {
        try await put(collection: collection, records: [(type, data, plain)])[0]
    }

    /// Encrypts and stores several records in one transaction (all or none).
    ///
    /// The records are encrypted, bound to their places and indexed (a large batch on every processor) before the
    /// write transaction opens: the transaction only inserts.
    public func put(collection: String, records: [(type: String, data: RecordData, plain: RecordData)])
        throws(E3DBError)
        -> [RecordReference]
    {
        try insertRecords(collection: collection, records: records, ids: nil) ?? []
    }

    /// `put(collection:records:)` for async callers. The encryption runs on the caller's task (a large batch
    /// also on every processor, as in the synchronous form); the reads and the write transaction are awaited.
    public func put(collection: String, records: [(type: String, data: RecordData, plain: RecordData)])
        async throws(E3DBError) -> [RecordReference]
    {
        try await insertRecords(collection: collection, records: records, ids: nil) ?? []
    }

    /// Inserts new records in one transaction, with fresh ids or `ids` (one per record); nil, and nothing written,
    /// when a record with one of `ids` exists already.
    ///
    /// The crypto runs first, outside any transaction, for the indexes read in a read transaction; the write
    /// transaction reads them again and, when one was created or dropped meanwhile, computes the rows' tokens for
    /// the indexes it sees (the documents and MACs do not depend on them). It also reads the collection's key
    /// version again: when a rotation made another key current meanwhile (and may have deleted the one the records
    /// are under), nothing is written and the insert starts over with the current key (`UnderCurrentKey`).
    func insertRecords(
        collection: String, records: [(type: String, data: RecordData, plain: RecordData)], ids: [UUID]?
    ) throws(E3DBError) -> [RecordReference]? {
        try run(insertion(collection: collection, records: records, ids: ids))
    }

    /// `insertRecords(collection:records:ids:)` through GRDB's async access.
    func insertRecords(
        collection: String, records: [(type: String, data: RecordData, plain: RecordData)], ids: [UUID]?
    ) async throws(E3DBError) -> [RecordReference]? {
        try await run(insertion(collection: collection, records: records, ids: ids))
    }

    /// The procedure of `insertRecords(collection:records:ids:)`.
    func insertion(
        collection: String, records: [(type: String, data: RecordData, plain: RecordData)], ids: [UUID]?
    ) throws(E3DBError) -> UnderCurrentKey<Insertion, [RecordReference]?> {
        let keys = try currentKeys()
        return UnderCurrentKey(store: self, collection: collection, create: true) { access in
            Insertion(store: self, collection: collection, records: records, ids: ids, keys: keys, access: access)
        }
    }

    /// One attempt of an insert under one access key: the indexes read, the records encrypted, the write.
    struct Insertion: StoreProcedure {
        enum Answer: Sendable {
            /// The collection's indexes with their keys, nil when a record with one of the ids exists.
            case indexes([(index: BlindIndex, key: SecureBytes)]?)
            case written(KeyedAttempt<[RecordReference]?>)
        }

        let store: EncryptedStore
        let collection: String
        let records: [(type: String, data: RecordData, plain: RecordData)]
        let ids: [UUID]?
        let keys: StoreKeys
        let access: (key: AccessKey, version: Int)

        func step(_ answer: Answer?) throws(E3DBError) -> StoreStep<Answer, KeyedAttempt<[RecordReference]?>> {
            switch answer {
            case nil:
                return .access(
                    .read("reading the indexes of collection \(collection)") { [store, keys, collection, ids] db in
                        .indexes(try store.insertionIndexes(db, keys, collection: collection, ids: ids))
                    })
            case .indexes(nil)?:
                return .done(.written(nil))
            case .indexes(let indexes?)?:
                let rows = try store.encryptNewRecords(
                    records, collection: collection, keys: keys, access: access, indexes: indexes, ids: ids)
                store.testHook(.beforeInsertTransaction)
                return .access(
                    .write("writing to collection \(collection)") { [store, keys, collection, access, ids] db in
                        .written(
                            try store.insertRows(
                                db, rows, keys, collection: collection, access: access, indexes: indexes, ids: ids))
                    })
            case .written(let outcome)?:
                return .done(outcome)
            }
        }
    }

    /// In the read transaction before an insert: the collection's indexes with their keys, or nil when a record with
    /// one of `ids` exists.
    func insertionIndexes(_ db: Database, _ keys: StoreKeys, collection: String, ids: [UUID]?) throws
        -> [(index: BlindIndex, key: SecureBytes)]?
    {
        try anyRecordPresent(db, ids) ? nil : indexKeys(db, keys: keys, collection: collection)
    }

    /// The write transaction of an insert: `written(nil)` when a record with one of `ids` exists, `keyRotated`
    /// when the rows' key is no longer current.
    func insertRows(
        _ db: Database, _ rows: [NewRecordRow], _ keys: StoreKeys, collection: String,
        access: (key: AccessKey, version: Int), indexes: [(index: BlindIndex, key: SecureBytes)], ids: [UUID]?
    ) throws -> KeyedAttempt<[RecordReference]?> {
        if try anyRecordPresent(db, ids) { return .written(nil) }
        guard try keyIsCurrent(db, collection: collection, version: access.version) else { return .keyRotated }
        let current = try indexKeys(db, keys: keys, collection: collection)
        let sameIndexes = current.map(\.index) == indexes.map(\.index)
        try writingRecords(db, keys, collection: collection) { state in
            for var row in rows {
                if !sameIndexes { row.tokens = nil }  // `insertRecord` computes them for `current`
                try insertRecord(db, row, collection: collection, indexes: current, state: &state)
            }
        }
        return .written(rows.map(\.reference))
    }

    /// Whether a record with one of `ids` exists.
    private func anyRecordPresent(_ db: Database, _ ids: [UUID]?) throws -> Bool {
        for id in ids ?? [] {
            let present = try Bool.fetchOne(
                db, sql: "SELECT 1 FROM records WHERE id = ?", arguments: [id.lowercasedString])
            if present == true { return true }
        }
        return false
    }

    /// Reads, authenticates and decrypts one record.
    /// - Throws: `E3DBError.Code.recordNotFound`, `E3DBError.Code.recordTampered` (naming the record), field
    ///   decryption errors.
    public func get(collection: String, id: UUID) throws(E3DBError) -> StoredRecord {
        let idText = id.lowercasedString
        let row = try databaseCall("reading record \(idText)") {
            try readers.read { db in try recordRow(db, collection: collection, idText: idText) }
        }
        return try decodeFound(row, collection: collection, id: id, idText: idText)
    }

    /// `get(collection:id:)` for async callers: the read is awaited; the record's collection keys are read
    /// through GRDB's async access when they are not in memory yet.
    public func get(collection: String, id: UUID) async throws(E3DBError) -> StoredRecord {
        let idText = id.lowercasedString
        let row = try await databaseCall("reading record \(idText)") {
            try await readers.read { db in try recordRow(db, collection: collection, idText: idText) }
        }
        if row != nil { _ = try await collectionKeys(collection, create: false) }
        return try decodeFound(row, collection: collection, id: id, idText: idText)
    }

    /// One record's row. One statement, so SQLite's implicit read transaction suffices: no BEGIN/COMMIT around it.
    /// The row is read by column index from the cursor, without a copy of GRDB's row.
    private func recordRow(_ db: Database, collection: String, idText: String) throws -> StoredRow? {
        try StoredRow.fetchOne(db.cachedStatement(sql: StoredRow.selectByID), arguments: [idText, collection])
    }

    /// The record of a point read's row: `recordNotFound` without one.
    private func decodeFound(_ row: StoredRow?, collection: String, id: UUID, idText: String) throws(E3DBError)
        -> StoredRecord
    {
        guard let row else {
            throw E3DBError(
                .recordNotFound, "no record \(idText) in collection \(collection)", context: .init(item: idText))
        }
        return try decode(row, collection: collection, known: (id, idText))
    }

    /// Replaces a record's data and `plain`; its version goes up by one.
    /// - Parameters:
    ///   - collection: the record's collection.
    ///   - id: the record's id.
    ///   - expectedVersion: the version the caller read; another version is `E3DBError.Code.versionConflict`.
    ///   - type: a new record type, or nil to keep it.
    ///   - data: the new fields to encrypt.
    ///   - plain: the new plaintext, queryable metadata.
    @discardableResult
    public func update(
        collection: String, id: UUID, expectedVersion: Int, type: String? = nil, data: RecordData,
        plain: RecordData = RecordData()
    ) throws(E3DBError) -> RecordReference {
        try updateRecord(
            collection: collection, id: id, expectedVersion: expectedVersion, type: type, data: data, plain: plain)
    }

    /// `update(collection:id:expectedVersion:type:data:plain:)` for async callers.
    @discardableResult
    public func update(
        collection: String, id: UUID, expectedVersion: Int, type: String? = nil, data: RecordData,
        plain: RecordData = RecordData()
    ) async throws(E3DBError) -> RecordReference {
        try await updateRecord(
            collection: collection, id: id, expectedVersion: expectedVersion, type: type, data: data, plain: plain)
    }

    /// What an update writes, apart from the key it encrypts under.
    struct RecordUpdate: Sendable {
        let collection: String
        let id: UUID
        let expectedVersion: Int?
        let type: String?
        let data: RecordData
        let plain: RecordData
        let now = StoreTime.format(StoreTime.now())

        var idText: String { id.lowercasedString }

        /// The reference an update gave; `recordNotFound` for none.
        func found(_ reference: RecordReference?) throws(E3DBError) -> RecordReference {
            guard let reference else {
                throw E3DBError(
                    .recordNotFound, "no record \(idText) in collection \(collection)", context: .init(item: idText))
            }
            return reference
        }
    }

    /// `update(collection:id:expectedVersion:type:data:plain:)`; a nil `expectedVersion` updates whatever version
    /// is current (read in the same transaction). The fields are encrypted in the transaction under the collection's
    /// current key, which it checks (`UnderCurrentKey`).
    func updateRecord(
        collection: String, id: UUID, expectedVersion: Int?, type: String?, data: RecordData, plain: RecordData
    ) throws(E3DBError) -> RecordReference {
        let update = RecordUpdate(
            collection: collection, id: id, expectedVersion: expectedVersion, type: type, data: data, plain: plain)
        return try update.found(run(updating(update)))
    }

    /// `updateRecord(collection:id:expectedVersion:type:data:plain:)` through GRDB's async access.
    func updateRecord(
        collection: String, id: UUID, expectedVersion: Int?, type: String?, data: RecordData, plain: RecordData
    ) async throws(E3DBError) -> RecordReference {
        let update = RecordUpdate(
            collection: collection, id: id, expectedVersion: expectedVersion, type: type, data: data, plain: plain)
        return try await update.found(run(updating(update)))
    }

    /// The procedure of an update: its reference, nil when there is no such record.
    typealias Updating = UnderCurrentKey<SingleAccess<KeyedAttempt<RecordReference?>>, RecordReference?>

    /// The procedure of `update`.
    func updating(_ update: RecordUpdate) throws(E3DBError) -> Updating {
        let keys = try currentKeys()
        return UnderCurrentKey(store: self, collection: update.collection, create: false) { access in
            SingleAccess(
                access: .write("updating record \(update.idText)") { [self] db in
                    try updateRow(db, update, keys, access: access)
                })
        }
    }

    /// The write transaction of an update: `written(nil)` when there is no such record.
    private func updateRow(
        _ db: Database, _ update: RecordUpdate, _ keys: StoreKeys, access: (key: AccessKey, version: Int)
    ) throws -> KeyedAttempt<RecordReference?> {
        let collection = update.collection
        let idText = update.idText
        guard try keyIsCurrent(db, collection: collection, version: access.version) else { return .keyRotated }
        guard
            let fetched = try Row.fetchOne(
                db, sql: "SELECT seq, type, version, created, mac FROM records WHERE id = ? AND collection = ?",
                arguments: [idText, collection])
        else { return .written(nil) }
        let row = UntrustedRow(store: fetched, table: "records")
        let current = try row.value("version", as: Int.self)
        if let expectedVersion = update.expectedVersion, current != expectedVersion {
            throw E3DBError(
                .versionConflict, "record \(idText) is at version \(current), not \(expectedVersion)",
                context: .init(expected: expectedVersion, actual: current, item: idText))
        }
        let newVersion = current + 1
        let seq = try row.value("seq", as: Int64.self)
        let created = try row.value("created", as: String.self)
        let recordType = try update.type ?? row.value("type", as: String.self)
        let document = EncryptedDocument(
            meta: ClientMeta(writerID: storeID, userID: storeID, type: recordType, plain: update.plain),
            data: encryptFields(update.data, accessKey: access.key), recordSignature: nil)
        let bytes = document.jsonData()
        let mac = try bindingMAC(
            keys, collection: collection, id: update.id, version: newVersion, keyVersion: access.version,
            created: created, updated: update.now, document: bytes)
        let oldMAC = try row.optional("mac", as: Data.self) ?? Data()
        try writingRecords(db, keys, collection: collection) { state in
            try db.execute(
                sql: """
                    UPDATE records SET type = ?, version = ?, key_version = ?, updated = ?, document = ?, mac = ?
                    WHERE seq = ? AND version = ?
                    """,
                arguments: [recordType, newVersion, access.version, update.now, bytes, mac, seq, current])
            guard db.changesCount == 1 else {
                throw E3DBError(.versionConflict, "record \(idText) changed meanwhile", context: .init(item: idText))
            }
            try state.remove(id: idText, version: current, mac: oldMAC)
            try state.add(id: idText, version: newVersion, mac: mac)
        }
        try db.execute(sql: "DELETE FROM record_plain WHERE record_seq = ?", arguments: [seq])
        try insertPlain(db, seq: seq, plain: update.plain)
        try db.execute(sql: "DELETE FROM blind_index_entries WHERE record_seq = ?", arguments: [seq])
        try insertTokens(
            db, indexes: indexKeys(db, keys: keys, collection: collection), collection: collection, seq: seq,
            data: update.data)
        return .written(RecordReference(id: update.id, version: newVersion))
    }

    /// Deletes a record.
    /// - Parameters:
    ///   - collection: the record's collection.
    ///   - id: the record's id.
    ///   - expectedVersion: when given, another version is `E3DBError.Code.versionConflict`.
    public func delete(collection: String, id: UUID, expectedVersion: Int? = nil) throws(E3DBError) {
        try perform(deletion(collection: collection, id: id, expectedVersion: expectedVersion))
    }

    /// `delete(collection:id:expectedVersion:)` for async callers.
    public func delete(collection: String, id: UUID, expectedVersion: Int? = nil) async throws(E3DBError) {
        try await perform(deletion(collection: collection, id: id, expectedVersion: expectedVersion))
    }

    /// The write transaction of `delete(collection:id:expectedVersion:)`.
    private func deletion(collection: String, id: UUID, expectedVersion: Int?) throws(E3DBError) -> StoreAccess<Void> {
        let idText = id.lowercasedString
        let keys = try currentKeys()
        return .write("deleting record \(idText)") { [self] db in
            try deleteRow(db, keys, collection: collection, idText: idText, expectedVersion: expectedVersion)
        }
    }

    /// The write transaction of a delete.
    private func deleteRow(
        _ db: Database, _ keys: StoreKeys, collection: String, idText: String, expectedVersion: Int?
    ) throws {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT version, mac FROM records WHERE id = ? AND collection = ?",
                arguments: [idText, collection]),
            let current = Int.fromDatabaseValue(row["version"] as DatabaseValue)
        else {
            throw E3DBError(
                .recordNotFound, "no record \(idText) in collection \(collection)", context: .init(item: idText))
        }
        if let expectedVersion, current != expectedVersion {
            throw E3DBError(
                .versionConflict, "record \(idText) is at version \(current), not \(expectedVersion)",
                context: .init(expected: expectedVersion, actual: current, item: idText))
        }
        try writingRecords(db, keys, collection: collection) { state in
            try db.execute(sql: "DELETE FROM records WHERE id = ? AND collection = ?", arguments: [idText, collection])
            try state.remove(
                id: idText, version: current, mac: Data.fromDatabaseValue(row["mac"] as DatabaseValue) ?? Data())
        }
    }
}
