import E3DBCanonicalJSON
public import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import E3DBRows
public import Foundation
import GRDB
import Synchronization

extension EncryptedStore {
    // MARK: Records

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

    /// Inserts new records in one transaction, with fresh ids or `ids` (one per record); nil, and nothing written,
    /// when a record with one of `ids` exists already.
    ///
    /// The crypto runs first, outside any transaction, for the indexes read in a read transaction; the write
    /// transaction reads them again and, when one was created or dropped meanwhile, computes the rows' tokens for
    /// the indexes it sees (the documents and MACs do not depend on them). It also reads the collection's key
    /// version again: when a rotation made another key current meanwhile (and may have deleted the one the records
    /// are under), nothing is written and the insert starts over with the current key.
    func insertRecords(
        collection: String, records: [(type: String, data: RecordData, plain: RecordData)], ids: [UUID]?
    ) throws(E3DBError) -> [RecordReference]? {
        try withCurrentKey(collection, create: true) { access throws(E3DBError) in
            try insertRecordsOnce(collection: collection, records: records, ids: ids, access: access)
        }
    }

    /// One attempt of ``insertRecords(collection:records:ids:)`` under `access`: `written(nil)` when a record with
    /// one of `ids` exists.
    private func insertRecordsOnce(
        collection: String, records: [(type: String, data: RecordData, plain: RecordData)], ids: [UUID]?,
        access: (key: AccessKey, version: Int)
    ) throws(E3DBError) -> KeyedAttempt<[RecordReference]?> {
        let keys = try currentKeys()
        let indexes = try databaseCall("reading the indexes of collection \(collection)") {
            try pool.read { db in
                try anyRecordPresent(db, ids) ? nil : indexKeys(db, keys: keys, collection: collection)
            }
        }
        guard let indexes else { return .written(nil) }
        let rows = try encryptNewRecords(
            records, collection: collection, keys: keys, access: access, indexes: indexes, ids: ids)
        beforeInsertTransaction.withLock { $0 }?()
        return try databaseCall("writing to collection \(collection)") {
            try pool.write { db -> KeyedAttempt<[RecordReference]?> in
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
        }
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

    /// ``update(collection:id:expectedVersion:type:data:plain:)``; a nil `expectedVersion` updates whatever version
    /// is current (read in the same transaction). The fields are encrypted under the collection's current key,
    /// checked in the transaction (``withCurrentKey(_:create:_:)``).
    func updateRecord(
        collection: String, id: UUID, expectedVersion: Int?, type: String?, data: RecordData, plain: RecordData
    ) throws(E3DBError) -> RecordReference {
        let keys = try currentKeys()
        let idText = id.lowercasedString
        let now = StoreTime.format(StoreTime.now())
        return try withCurrentKey(collection, create: false) { access throws(E3DBError) in
            try databaseCall("updating record \(idText)") { () throws -> KeyedAttempt<RecordReference> in
                try pool.write { db -> KeyedAttempt<RecordReference> in
                    guard try keyIsCurrent(db, collection: collection, version: access.version) else {
                        return .keyRotated
                    }
                    guard
                        let fetched = try Row.fetchOne(
                            db,
                            sql: "SELECT seq, type, version, created, mac FROM records WHERE id = ? AND collection = ?",
                            arguments: [idText, collection])
                    else {
                        throw E3DBError(
                            .recordNotFound, "no record \(idText) in collection \(collection)",
                            context: .init(item: idText)
                        )
                    }
                    let row = UntrustedRow(store: fetched, table: "records")
                    let current = try row.value("version", as: Int.self)
                    if let expectedVersion, current != expectedVersion {
                        throw E3DBError(
                            .versionConflict, "record \(idText) is at version \(current), not \(expectedVersion)",
                            context: .init(expected: expectedVersion, actual: current, item: idText))
                    }
                    let newVersion = current + 1
                    let seq = try row.value("seq", as: Int64.self)
                    let created = try row.value("created", as: String.self)
                    let recordType = try type ?? row.value("type", as: String.self)
                    let document = EncryptedDocument(
                        meta: ClientMeta(writerID: storeID, userID: storeID, type: recordType, plain: plain),
                        data: encryptFields(data, accessKey: access.key), recordSignature: nil)
                    let bytes = document.jsonData()
                    let mac = try bindingMAC(
                        keys, collection: collection, id: id, version: newVersion, keyVersion: access.version,
                        created: created, updated: now, document: bytes)
                    let oldMAC = try row.optional("mac", as: Data.self) ?? Data()
                    try writingRecords(db, keys, collection: collection) { state in
                        try db.execute(
                            sql: """
                                UPDATE records SET type = ?, version = ?, key_version = ?, updated = ?, document = ?, mac = ?
                                WHERE seq = ? AND version = ?
                                """,
                            arguments: [recordType, newVersion, access.version, now, bytes, mac, seq, current])
                        guard db.changesCount == 1 else {
                            throw E3DBError(
                                .versionConflict, "record \(idText) changed meanwhile", context: .init(item: idText))
                        }
                        try state.remove(id: idText, version: current, mac: oldMAC)
                        try state.add(id: idText, version: newVersion, mac: mac)
                    }
                    try db.execute(sql: "DELETE FROM record_plain WHERE record_seq = ?", arguments: [seq])
                    try insertPlain(db, seq: seq, plain: plain)
                    try db.execute(sql: "DELETE FROM blind_index_entries WHERE record_seq = ?", arguments: [seq])
                    try insertTokens(
                        db, indexes: indexKeys(db, keys: keys, collection: collection), collection: collection,
                        seq: seq,
                        data: data)
                    return .written(RecordReference(id: id, version: newVersion))
                }
            }
        }
    }

    /// Deletes a record.
    /// - Parameters:
    ///   - collection: the record's collection.
    ///   - id: the record's id.
    ///   - expectedVersion: when given, another version is `E3DBError.Code.versionConflict`.
    public func delete(collection: String, id: UUID, expectedVersion: Int? = nil) throws(E3DBError) {
        let idText = id.lowercasedString
        let keys = try currentKeys()
        try databaseCall("deleting record \(idText)") {
            try pool.write { db in
                guard
                    let row = try Row.fetchOne(
                        db, sql: "SELECT version, mac FROM records WHERE id = ? AND collection = ?",
                        arguments: [idText, collection]),
                    let current = Int.fromDatabaseValue(row["version"] as DatabaseValue)
                else {
                    throw E3DBError(
                        .recordNotFound, "no record \(idText) in collection \(collection)", context: .init(item: idText)
                    )
                }
                if let expectedVersion, current != expectedVersion {
                    throw E3DBError(
                        .versionConflict, "record \(idText) is at version \(current), not \(expectedVersion)",
                        context: .init(expected: expectedVersion, actual: current, item: idText))
                }
                try writingRecords(db, keys, collection: collection) { state in
                    try db.execute(
                        sql: "DELETE FROM records WHERE id = ? AND collection = ?", arguments: [idText, collection])
                    try state.remove(
                        id: idText, version: current, mac: Data.fromDatabaseValue(row["mac"] as DatabaseValue) ?? Data()
                    )
                }
            }
        }
    }
}
