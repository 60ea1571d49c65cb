import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import Foundation
import GRDB
import Synchronization

/// Counts and sizes, for `e3dbkit store stats`.
public struct StoreStatistics: Sendable {
    /// Records per collection, by name.
    public let recordsPerCollection: [String: Int]
    /// The database's size in bytes (pages × page size, without the WAL).
    public let databaseBytes: Int
    /// Whether the database file is encrypted or plain.
    public let databaseEncryption: DatabaseEncryption
}

extension EncryptedStore {
    /// Records per collection and the database size.
    /// - Throws: `storeLocked` (an encrypted database's page key is forgotten while the store is locked).
    public func statistics() throws(E3DBError) -> StoreStatistics {
        _ = try currentKeys()
        return try databaseCall("reading statistics") {
            try pool.read { db in
                var counts: [String: Int] = [:]
                for name in try String.fetchAll(db, sql: "SELECT name FROM collections") { counts[name] = 0 }
                for row in try Row.fetchAll(
                    db, sql: "SELECT collection, COUNT(*) AS n FROM records GROUP BY collection")
                {
                    counts[row["collection"]] = row["n"]
                }
                let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
                let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
                return StoreStatistics(
                    recordsPerCollection: counts, databaseBytes: pages * pageSize,
                    databaseEncryption: databaseEncryption)
            }
        }
    }
}
