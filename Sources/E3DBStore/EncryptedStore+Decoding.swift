import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
import E3DBPrimitives
import E3DBRows
import Foundation
import GRDB
import Synchronization

extension EncryptedStore {
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

    /// Whether `mac` is the binding MAC of a row with these columns (compared in constant time).
    func bindingMACMatches(
        _ keys: StoreKeys, _ mac: Data, collection: String, idText: String, version: Int, keyVersion: Int,
        created: String, updated: String, document: Data
    ) throws(E3DBError) -> Bool {
        let expected = try bindingMAC(
            keys, collection: collection, idText: idText, version: version, keyVersion: keyVersion, created: created,
            updated: updated, document: document)
        return ConstantTime.equals(expected, mac)
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
                throw row.damage ?? E3DBError(.storeCorrupted, "a record row has no valid id")
            }
            id = parsed
            item = idText.lowercased()
            canonicalID = parsed.lowercasedString
        }
        guard let version = row.version, let keyVersion = row.keyVersion, let created = row.created,
            let updated = row.updated, let bytes = row.document, let mac = row.mac
        else {
            var context = row.damage?.context ?? .init()
            context.item = item
            throw E3DBError(
                .storeCorrupted, "record \(item) is damaged: \(row.damage?.message ?? "a column is missing")",
                context: context)
        }
        // The MAC covers the canonical id: a copy of a row under the same id in another spelling (upper case) is
        // not this record, even though its MAC verifies.
        guard
            try bindingMACMatches(
                keys, mac, collection: collection, idText: canonicalID, version: version, keyVersion: keyVersion,
                created: created, updated: updated, document: bytes), row.id == nil || row.id == canonicalID
        else {
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
        testHook(.beforeCacheInsert)
        // Under the lock state's mutex: a lock that ran since this read got its key has emptied the cache, and a
        // locked store keeps nothing in it (the order lock state, then cache, is the only one that nests).
        lockState.withUnlocked { _ in cache.withLock { $0?.insert(record, for: mac) } }
        return record
    }

    /// A new record (version 1) ready to be inserted.
    struct NewRecordRow: Sendable {
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
        /// Its updated time when it differs from `time` (a record copied by a rekey, at any version).
        var updated: String? = nil
    }

    /// Inserts a new record row with its `plain` rows and index tokens (inside the caller's transaction), and adds
    /// it to `state`, the collection's state change of the transaction (see `writingRecords`).
    func insertRecord(
        _ db: Database, _ row: NewRecordRow, collection: String, indexes: [(index: BlindIndex, key: SecureBytes)],
        state: inout CollectionStateChange
    ) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO records (id, collection, type, version, key_version, created, updated, document, mac)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(
            arguments: [
                row.reference.id.lowercasedString, collection, row.type, row.reference.version, row.keyVersion,
                row.time, row.updated ?? row.time,
                row.document, row.mac,
            ])
        let seq = db.lastInsertedRowID
        try state.add(id: row.reference.id.lowercasedString, version: row.reference.version, mac: row.mac)
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
///
/// Every column goes through ``UntrustedRow``: a value of the wrong type or a NULL in an edited file becomes nil here
/// and ``damage`` names the first such column, so that `decode` refuses the row with a typed error naming it (and
/// `verify` counts it as not authenticating), where GRDB's typed subscripts would trap.
struct StoredRow: Sendable, Equatable {
    let seq: Int64?
    let id: String?
    let version: Int?
    let keyVersion: Int?
    let created: String?
    let updated: String?
    let document: Data?
    let mac: Data?
    /// The first column that is NULL or of the wrong type (`storeCorrupted` naming `records.<column>`), if any.
    let damage: E3DBError?

    /// Reads the columns by name.
    init(_ row: Row) { self.init(row, byIndex: false) }

    /// Reads the columns by name, or (`byIndex`) by their position in ``columns``.
    init(_ row: Row, byIndex: Bool) {
        let reader = UntrustedRow(store: row, table: "records")
        var damage: E3DBError?
        func read<Value: DatabaseValueConvertible>(_ index: Int, _ column: String) -> Value? {
            reader.lenient(column, at: byIndex ? index : nil, required: true, damage: &damage)
        }
        seq = read(0, "seq")
        id = read(1, "id")
        version = read(2, "version")
        keyVersion = read(3, "key_version")
        created = read(4, "created")
        updated = read(5, "updated")
        document = read(6, "document")
        mac = read(7, "mac")
        self.damage = damage
    }
}
