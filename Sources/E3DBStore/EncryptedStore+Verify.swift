import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import Foundation
import GRDB
import Synchronization

/// What ``EncryptedStore/verify()`` found.
public struct StoreVerificationReport: Sendable {
    /// The number of records checked.
    public let recordsChecked: Int
    /// The number of files (and attachments) checked: row, body and checksum.
    public let filesChecked: Int
    /// One error per record (or collection) that did not authenticate or decrypt, each naming it in
    /// `context.item`.
    public let problems: [E3DBError]
}

extension EncryptedStore {
    /// Authenticates and decrypts every record of every collection, and every file of the file tree (row, body,
    /// checksum; then orphan bodies), going on after a failure, so that every damaged record is reported (by id)
    /// and every damaged file (by path).
    public func verify() throws(E3DBError) -> StoreVerificationReport {
        var checked = 0
        var problems: [E3DBError] = []
        for collection in try collections() {
            do {
                _ = try accessKey(for: collection, create: false)
            } catch {
                problems.append(error)
                continue
            }
            let keys = try currentKeys()
            let indexes = try databaseCall("verifying the indexes of \(collection)") {
                try pool.read { db in try indexKeys(db, keys: keys, collection: collection) }
            }
            var after: Int64 = 0
            while true {
                let rows = try databaseCall("verifying collection \(collection)") {
                    try pool.read { db in
                        try Row.fetchAll(
                            db, sql: "SELECT * FROM records WHERE collection = ? AND seq > ? ORDER BY seq LIMIT 512",
                            arguments: [collection, after])
                    }
                }
                for row in rows {
                    checked += 1
                    do {
                        let record = try decode(row, collection: collection)
                        if !indexes.isEmpty {
                            try verifyIndexEntries(record, seq: row["seq"], collection: collection, indexes: indexes)
                        }
                    } catch {
                        problems.append(error)
                    }
                }
                guard let last = rows.last else { break }
                after = last["seq"]
            }
            // Entries whose record is gone (or that name an index that does not exist).
            let orphans = try databaseCall("verifying the indexes of \(collection)") {
                try pool.read { db in
                    try String.fetchAll(
                        db,
                        sql: """
                            SELECT DISTINCT e.name FROM blind_index_entries e
                            WHERE e.collection = ? AND (NOT EXISTS (SELECT 1 FROM records r WHERE r.seq = e.record_seq
                                AND r.collection = e.collection)
                              OR NOT EXISTS (SELECT 1 FROM blind_indexes i WHERE i.collection = e.collection AND i.name = e.name))
                            """, arguments: [collection])
                }
            }
            for name in orphans {
                problems.append(
                    E3DBError(
                        .indexEntryMismatch, "index \(name) of \(collection) has entries for no record",
                        context: .init(item: name)))
            }
        }
        let files = try verifyFiles()
        return StoreVerificationReport(
            recordsChecked: checked, filesChecked: files.checked, problems: problems + files.problems)
    }

    /// Compares a record's stored blind-index entries with the tokens its decrypted data gives.
    func verifyIndexEntries(
        _ record: StoredRecord, seq: Int64, collection: String,
        indexes: [(index: BlindIndex, key: SecureBytes)]
    ) throws(E3DBError) {
        let expected = try BlindIndex.tokens(record.data, indexes: indexes)
        let stored = try databaseCall("verifying the index entries of a record") {
            try pool.read { db in
                try Row.fetchAll(
                    db.cachedStatement(
                        sql: "SELECT name, token FROM blind_index_entries WHERE collection = ? AND record_seq = ?"),
                    arguments: [collection, seq]
                ).map { row -> String in
                    let name: String = row["name"]
                    let token: Data = row["token"]
                    return name + ":" + token.base64EncodedString()
                }
            }
        }
        let want = expected.map { $0.name + ":" + $0.token.base64EncodedString() }
        guard Set(stored) == Set(want), stored.count == want.count else {
            throw E3DBError(
                .indexEntryMismatch,
                "the blind-index entries of record \(record.id.lowercasedString) do not match its data",
                context: .init(item: record.id.lowercasedString))
        }
    }
}
