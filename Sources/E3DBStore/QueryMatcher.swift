import E3DBCanonicalJSON
import E3DBDocuments
import E3DBPrimitives
import Foundation

/// What a query asks of a record, checked on the record after it is authenticated and decrypted.
///
/// The plaintext query tables (`records.type`, `record_plain`, `blind_index_entries`) only select candidates; they
/// are outside the binding MAC, so someone who can edit the file can make them select any record. Every path that
/// selects records through them (`EncryptedStore/find(_:)`, ``EncryptedStore/records(matching:pageSize:)``,
/// ``EncryptedStore/observe(_:pollInterval:)``) passes each decrypted candidate through ``accepts(_:)``, so an
/// answer always matches its query under the authenticated record.
struct QueryMatcher: Sendable {
    let query: RecordQuery
    /// The blind indexes the query's field conditions look up, each with its key and the token looked up.
    let lookups: [(index: BlindIndex, key: SecureBytes, token: Data)]

    /// Whether `record` (authenticated and decrypted) is an answer of the query: false for a candidate whose
    /// encrypted fields do not match (a blind-index false positive of a truncated token, or a record a scan reads).
    /// - Throws: `recordTampered` naming the record when the query tables selected it although its authenticated
    ///   type or `plain` metadata does not match the query (an edited `type` column or `record_plain` row);
    ///   `indexEntryMismatch` naming it when a blind-index entry selected it although its data does not give the
    ///   token looked up (an edited `blind_index_entries` row).
    func accepts(_ record: StoredRecord) throws(E3DBError) -> Bool {
        let item = record.id.lowercasedString
        if !query.types.isEmpty, !query.types.contains(where: { $0.utf8.elementsEqual(record.meta.type.utf8) }) {
            throw tampered(item, "its type is not one the query asked for (the type column was edited)")
        }
        for condition in query.plain where !condition.matches(record.meta.plain) {
            throw tampered(item, "its plain \(condition.key) does not match the query (record_plain was edited)")
        }
        for lookup in lookups {
            guard let token = try lookup.index.token(record.data, key: lookup.key), token == lookup.token else {
                throw E3DBError(
                    .indexEntryMismatch,
                    "record \(item) was found through index \(lookup.index.name) of \(query.collection), but its "
                        + "data does not give the token looked up (blind_index_entries was edited)",
                    context: .init(item: item))
            }
        }
        return query.fields.allSatisfy { $0.matches(record.data) }
    }

    private func tampered(_ item: String, _ why: String) -> E3DBError {
        E3DBError(
            .recordTampered, "record \(item) was selected by \(query.collection)'s query tables but \(why)",
            context: .init(item: item))
    }
}

extension QueryMatcher {
    /// The matcher of `query`, given its collection's blind indexes: the indexes all of whose fields the query's
    /// equality conditions name are looked up.
    init(_ query: RecordQuery, indexes: [BlindIndex], store: EncryptedStore) throws(E3DBError) {
        self.query = query
        // Field names by code units, as `RecordData` keeps them: `"é"` and `"e\u{301}"` are two fields, so a
        // condition on one never selects through an index on the other. (Values stay Unicode text: the tokens hash
        // their NFC form, and `FieldCondition.matches` compares them as `String`s, by design.)
        var wanted = RecordData()
        for condition in query.fields {
            if case .equals(let field, let value) = condition { wanted[field] = value }
        }
        var lookups: [(index: BlindIndex, key: SecureBytes, token: Data)] = []
        if !wanted.isEmpty, !indexes.isEmpty {
            let keys = try store.currentKeys()
            for index in indexes where index.fields.allSatisfy({ wanted[$0] != nil }) {
                let key = try store.blindIndexKey(keys, collection: query.collection, name: index.name)
                let values = index.fields.map { JSONValue.string(BlindIndex.normalized(wanted[$0] ?? "")) }
                lookups.append((index, key, try BlindIndex.token(of: values, key: key, bits: index.bits)))
            }
        }
        self.lookups = lookups
    }
}

extension PlainCondition {
    /// Whether `plain` satisfies the condition, compared as the SQL query compares (UTF-8 bytes, SQLite's BINARY
    /// collation).
    func matches(_ plain: RecordData) -> Bool {
        guard let value = plain[key] else { return false }
        let bytes = Array(value.utf8)
        switch self {
        case .equals(_, let wanted):
            return bytes == Array(wanted.utf8)
        case .hasPrefix(_, let prefix):
            return !bytes.lexicographicallyPrecedes(prefix.utf8)
                && bytes.lexicographicallyPrecedes((prefix + "\u{10FFFF}").utf8)
        case .between(_, let lower, let upper):
            if let lower, bytes.lexicographicallyPrecedes(lower.utf8) { return false }
            if let upper, Array(upper.utf8).lexicographicallyPrecedes(bytes) { return false }
            return true
        }
    }
}
