import E3DBCanonicalJSON
import E3DBDocuments
public import E3DBPrimitives
import Foundation
import GRDB

/// A blind index: equality search on encrypted fields without decrypting them.
///
/// Each record gets a token per index: keyed BLAKE2b-256 of the NFC-normalized values of the index's fields (a
/// canonical JSON array, so compound indexes cannot be confused with single ones), under a key derived from the
/// master key for this collection and index, truncated to ``bits``. Truncation bounds what someone holding the
/// file learns (equal tokens reveal only probably-equal values, and many values share a token), at the cost of
/// false positives, which the store removes after decryption. See docs/store.md for the leakage and the choice of
/// `bits`.
public struct BlindIndex: Sendable, Hashable {
    /// The index's name (unique in its collection).
    public let name: String
    /// The fields it covers, in order (one for a simple index, several for a compound one).
    public let fields: [String]
    /// The token length in bits (1...256).
    public let bits: Int

    public init(name: String, fields: [String], bits: Int) {
        self.name = name
        self.fields = fields
        self.bits = bits
    }

    /// The token of `data` under `key`, or nil when a field of the index is missing from the record.
    func token(_ data: RecordData, key: SecureBytes) throws(E3DBError) -> Data? {
        var values: [JSONValue] = []
        for field in fields {
            guard let value = data[field] else { return nil }
            values.append(.string(BlindIndex.normalized(value)))
        }
        return try BlindIndex.token(of: values, key: key, bits: bits)
    }

    /// The tokens of `data` for each of `indexes` that covers it.
    static func tokens(
        _ data: RecordData, indexes: [(index: BlindIndex, key: SecureBytes)]
    ) throws(E3DBError) -> [(name: String, token: Data)] {
        var tokens: [(name: String, token: Data)] = []
        for (index, key) in indexes {
            if let token = try index.token(data, key: key) { tokens.append((index.name, token)) }
        }
        return tokens
    }

    /// `value` in Unicode normalization form C (ASCII text is its own NFC form).
    static func normalized(_ value: String) -> String {
        value.utf8.allSatisfy { $0 < 0x80 } ? value : value.precomposedStringWithCanonicalMapping
    }

    static func token(of values: [JSONValue], key: SecureBytes, bits: Int) throws(E3DBError) -> Data {
        var hasher = try BLAKE2b(outputByteCount: 32, key: key)
        hasher.update(data: CanonicalJSON.serializedBytes(.array(values)))
        var digest = hasher.finalize()
        let bytes = (bits + 7) / 8
        digest = digest.prefix(bytes)
        let spare = bytes * 8 - bits
        if spare > 0, let last = digest.indices.last { digest[last] &= UInt8(0xFF << spare & 0xFF) }
        return Data(digest)
    }

    /// The per-index key: derived from the master key, the collection and the index name.
    static func key(_ keys: StoreKeys, collection: String, name: String) throws(E3DBError) -> SecureBytes {
        let label = CanonicalJSON.serialize(.array([.string("blind-index"), .string(collection), .string(name)]))
        return try StoreKeys.derive(from: keys.master, label: label)
    }
}

extension EncryptedStore {
    /// Creates a blind index on `fields` of `collection` and fills it from the existing records, in one
    /// transaction.
    /// - Parameters:
    ///   - collection: the collection.
    ///   - fields: one field, or several for a compound index.
    ///   - name: the index's name (default: the fields joined with `+`).
    ///   - bits: the token length, 1...256 (default 32).
    /// - Returns: the index and the number of records it covers.
    /// - Throws: `invalidParameter` for no fields or bits outside 1...256, `storeExists` for an existing name,
    ///   `collectionNotFound`, record errors while filling it.
    @discardableResult
    public func createIndex(collection: String, fields: [String], name: String? = nil, bits: Int = 32)
        throws(E3DBError) -> (index: BlindIndex, records: Int)
    {
        let creation = try indexCreation(collection: collection, fields: fields, name: name, bits: bits)
        _ = try accessKey(for: collection, create: false)
        return (creation.index, try perform(creation.write))
    }

    /// `createIndex(collection:fields:name:bits:)` for async callers.
    @discardableResult
    public func createIndex(collection: String, fields: [String], name: String? = nil, bits: Int = 32)
        async throws(E3DBError) -> (index: BlindIndex, records: Int)
    {
        let creation = try indexCreation(collection: collection, fields: fields, name: name, bits: bits)
        _ = try await collectionKeys(collection, create: false)
        return (creation.index, try await perform(creation.write))
    }

    /// The index `createIndex` creates and its write transaction, which counts the records it fills it from. The
    /// collection's keys must be in memory before the write (its records are decrypted inside it).
    private func indexCreation(collection: String, fields: [String], name: String?, bits: Int)
        throws(E3DBError) -> (index: BlindIndex, write: StoreAccess<Int>)
    {
        // Distinct by code units, as `RecordData` keeps field names: "é" and "e\u{301}" are two fields.
        guard !fields.isEmpty, Set(fields.map(CodeUnitKey.init)).count == fields.count else {
            throw E3DBError(.invalidParameter, "an index needs one or more distinct fields")
        }
        guard (1...256).contains(bits) else {
            throw E3DBError(.invalidParameter, "an index's bits must be 1...256", context: .init(actual: bits))
        }
        let keys = try currentKeys()
        let index = BlindIndex(name: name ?? fields.joined(separator: "+"), fields: fields, bits: bits)
        let indexKey = try BlindIndex.key(keys, collection: collection, name: index.name)
        let fieldsJSON = CanonicalJSON.serialize(.array(fields.map { .string($0) }))
        let write = StoreAccess<Int>.write("creating index \(index.name)") { [self] db -> Int in
            if try Bool.fetchOne(
                db, sql: "SELECT 1 FROM blind_indexes WHERE collection = ? AND name = ?",
                arguments: [collection, index.name]) == true
            {
                throw E3DBError(
                    .storeExists, "index \(index.name) exists in \(collection)", context: .init(item: index.name))
            }
            try db.execute(
                sql: "INSERT INTO blind_indexes (collection, name, fields, bits, created) VALUES (?, ?, ?, ?, ?)",
                arguments: [collection, index.name, fieldsJSON, bits, StoreTime.format(StoreTime.now())])
            var filled = 0
            let rows = try Row.fetchCursor(
                db, sql: "SELECT * FROM records WHERE collection = ? ORDER BY seq", arguments: [collection])
            while let row = try rows.next() {
                let stored = StoredRow(row)
                let record = try decode(stored, collection: collection)
                guard let seq = stored.seq else {
                    throw stored.damage ?? E3DBError(.storeCorrupted, "record \(record.id) has no sequence number")
                }
                try insertTokens(
                    db, indexes: [(index, indexKey)], collection: collection, seq: seq, data: record.data)
                filled += 1
            }
            try commitState(db, keys, nil)
            return filled
        }
        return (index, write)
    }

    /// The blind indexes of `collection`.
    public func indexes(collection: String) throws(E3DBError) -> [BlindIndex] {
        try perform(indexRead(collection))
    }

    /// `indexes(collection:)` for async callers.
    public func indexes(collection: String) async throws(E3DBError) -> [BlindIndex] {
        try await perform(indexRead(collection))
    }

    /// The read of `indexes(collection:)`.
    private func indexRead(_ collection: String) throws(E3DBError) -> StoreAccess<[BlindIndex]> {
        _ = try currentKeys()  // a locked store refuses every call
        return .read("reading indexes") { [self] db in try loadIndexes(db, collection: collection) }
    }

    /// Removes a blind index and its tokens.
    public func dropIndex(collection: String, name: String) throws(E3DBError) {
        try perform(indexDrop(collection: collection, name: name))
    }

    /// `dropIndex(collection:name:)` for async callers.
    public func dropIndex(collection: String, name: String) async throws(E3DBError) {
        try await perform(indexDrop(collection: collection, name: name))
    }

    /// The write transaction of `dropIndex(collection:name:)`.
    private func indexDrop(collection: String, name: String) throws(E3DBError) -> StoreAccess<Void> {
        let keys = try currentKeys()
        return .write("dropping index \(name)") { [self] db in
            try db.execute(
                sql: "DELETE FROM blind_index_entries WHERE collection = ? AND name = ?",
                arguments: [collection, name])
            try db.execute(
                sql: "DELETE FROM blind_indexes WHERE collection = ? AND name = ?", arguments: [collection, name])
            guard db.changesCount == 1 else {
                throw E3DBError(
                    .invalidParameter, "there is no index \(name) in \(collection)", context: .init(item: name))
            }
            try commitState(db, keys, nil)
        }
    }

    func loadIndexes(_ db: Database, collection: String) throws -> [BlindIndex] {
        try Row.fetchAll(
            db.cachedStatement(sql: "SELECT name, fields, bits FROM blind_indexes WHERE collection = ? ORDER BY name"),
            arguments: [collection]
        )
        .map { row in
            // Read through DatabaseValue: a NULL or a value of the wrong type in an edited file is a typed
            // error, not a trap in a non-optional conversion.
            let name = String.fromDatabaseValue(row["name"] as DatabaseValue)
            guard let name, let fieldsText = String.fromDatabaseValue(row["fields"] as DatabaseValue),
                let bits = Int.fromDatabaseValue(row["bits"] as DatabaseValue), (1...256).contains(bits),
                case .array(let items)? = try? CanonicalJSON.parse(Data(fieldsText.utf8))
            else {
                throw E3DBError(.storeCorrupted, "index \(name ?? "?") of collection \(collection) is damaged")
            }
            let fields = items.compactMap { item -> String? in if case .string(let s) = item { s } else { nil } }
            return BlindIndex(name: name, fields: fields, bits: bits)
        }
    }

    /// The indexes of `collection` with their keys: loaded and derived once per write transaction.
    func indexKeys(_ db: Database, keys: StoreKeys, collection: String) throws -> [(
        index: BlindIndex, key: SecureBytes
    )] {
        try loadIndexes(db, collection: collection).map { index in
            (index, try blindIndexKey(keys, collection: collection, name: index.name))
        }
    }

    /// Writes the tokens of one record for `indexes` (inside the caller's transaction).
    func insertTokens(
        _ db: Database, indexes: [(index: BlindIndex, key: SecureBytes)], collection: String, seq: Int64,
        data: RecordData
    ) throws {
        try insertTokens(db, BlindIndex.tokens(data, indexes: indexes), collection: collection, seq: seq)
    }

    /// Writes tokens computed earlier (inside the caller's transaction).
    func insertTokens(_ db: Database, _ tokens: [(name: String, token: Data)], collection: String, seq: Int64) throws {
        for (name, token) in tokens {
            try db.cachedStatement(
                sql: "INSERT INTO blind_index_entries (collection, name, token, record_seq) VALUES (?, ?, ?, ?)"
            ).execute(arguments: [collection, name, token, seq])
        }
    }

    /// SQL restricting a query to the candidates of the blind indexes its matcher looks up.
    func indexRestriction(_ matcher: QueryMatcher) -> (sql: String, arguments: [any DatabaseValueConvertible]) {
        var sql = ""
        var arguments: [any DatabaseValueConvertible] = []
        for lookup in matcher.lookups {
            sql +=
                " AND r.seq IN (SELECT record_seq FROM blind_index_entries WHERE collection = ? AND name = ? AND token = ?)"
            arguments += [matcher.query.collection, lookup.index.name, lookup.token]
        }
        return (sql, arguments)
    }
}

/// A collection and an index name: where a derived blind-index key is kept.
struct IndexKeyName: Hashable {
    let collection: String
    let name: String
}

extension RecordQuery {
    /// Whether a field condition could use a blind index (so the collection's indexes must be read): every
    /// field condition is an equality.
    var usesIndexes: Bool { !fields.isEmpty }
}
