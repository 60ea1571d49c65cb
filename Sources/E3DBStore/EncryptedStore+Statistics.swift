import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import E3DBRows
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
        try perform(statisticsRead())
    }

    /// `statistics()` for async callers.
    public func statistics() async throws(E3DBError) -> StoreStatistics {
        try await perform(statisticsRead())
    }

    /// The read of `statistics()`.
    private func statisticsRead() throws(E3DBError) -> StoreAccess<StoreStatistics> {
        _ = try currentKeys()
        return .read("reading statistics") { [databaseEncryption] db in
            var counts: [String: Int] = [:]
            let names: [String] = try UntrustedRow.storeColumn(
                db, "SELECT name FROM collections", table: "collections", column: "name")
            for name in names { counts[name] = 0 }
            for row in try Row.fetchAll(
                db, sql: "SELECT collection, COUNT(*) AS n FROM records GROUP BY collection")
            {
                let row = UntrustedRow(store: row, table: "records")
                counts[try row.value("collection", as: String.self)] = try row.value("n", as: Int.self)
            }
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            return StoreStatistics(
                recordsPerCollection: counts, databaseBytes: pages * pageSize,
                databaseEncryption: databaseEncryption)
        }
    }
}
