import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
import E3DBRows
import Foundation
import GRDB
import Synchronization

/// What `EncryptedStore.verify()` found.
public struct StoreVerificationReport: Sendable {
    /// The number of records checked.
    public let recordsChecked: Int
    /// The number of files (and attachments) checked: row, body and checksum.
    public let filesChecked: Int
    /// One error per record (or collection) that did not authenticate, decrypt or could not be read, per query table
    /// that differs from a record (`recordTampered` for `type` and `record_plain`, `indexEntryMismatch` for index
    /// entries), per damaged page SQLite found (`storeCorrupted`, item `database`), and per collection whose records
    /// are not those its authenticated state counts or whose state row is missing or edited (`storeTampered`, item
    /// the collection, or `store` for the write-counter row), each naming what it is about in `context.item`.
    public let problems: [E3DBError]
}

extension EncryptedStore {
    /// Authenticates and decrypts every record of every collection, compares the plaintext query tables (`type`,
    /// `record_plain`, blind-index entries) with each authenticated record, and checks every file of the file tree
    /// (row, body, checksum; then orphan bodies), going on after a failure, so that every damaged record is
    /// reported (by id), every query-table difference (by record or index) and every damaged file (by path).
    /// It recomputes each collection's record count and digest from its authenticated rows and compares them with
    /// the collection's authenticated state: a deleted record row, a deleted row put back and an older version of a
    /// row restored are each reported naming the collection (`storeTampered`).
    /// SQLite's own check of the file (`PRAGMA quick_check`, after E3DBSQLite's `cipher_integrity_check` for an
    /// encrypted file) runs first; each damaged page it finds is a `storeCorrupted` problem, and a record that
    /// cannot be read is reported and passed over.
    public func verify() throws(E3DBError) -> StoreVerificationReport {
        try verify(cancellation: nil)
    }

    /// `verify()`, stopped with `cancelled` once `cancellation` is set (the async form's): before SQLite's check of
    /// the whole file, before each collection and each page of its records, and before each file (and between the
    /// chunks of its body).
    func verify(cancellation: FileCancellation?) throws(E3DBError) -> StoreVerificationReport {
        var checked = 0
        try EncryptedStore.stopIfCancelled(cancellation, "the verification")
        var problems = databaseFileProblems()
        let keys = try currentKeys()
        do {
            problems += try databaseCall("verifying the store's state") {
                try pool.read { db in try stateRowProblems(db, keys).problems }
            }
        } catch {
            problems.append(onDatabase(error))
        }
        var names: [String] = []
        do {
            names = try collections()
        } catch {
            problems.append(error)
        }
        for collection in names {
            try EncryptedStore.stopIfCancelled(cancellation, "the verification")
            do {
                _ = try accessKey(for: collection, create: false)
            } catch {
                problems.append(error)
                continue
            }
            let indexes: [(index: BlindIndex, key: SecureBytes)]
            do {
                indexes = try databaseCall("verifying the indexes of \(collection)") {
                    try pool.read { db in try indexKeys(db, keys: keys, collection: collection) }
                }
            } catch {
                problems.append(error)
                indexes = []
            }
            let seqs: [Int64]
            do {
                seqs = try recordSeqs(collection: collection)
            } catch {
                problems.append(error)
                continue
            }
            var start = seqs.startIndex
            while start < seqs.endIndex {
                try EncryptedStore.stopIfCancelled(cancellation, "the verification")
                let chunk = Array(seqs[start..<min(start + 512, seqs.endIndex)])
                start += chunk.count
                for (seq, row) in readRows(chunk, collection: collection, problems: &problems) {
                    checked += 1
                    do {
                        let record = try decode(row, collection: collection)
                        problems += try queryTableProblems(record, row: row, seq: seq, indexes: indexes)
                    } catch {
                        problems.append(error)
                    }
                }
            }
            problems += orphanProblems(collection: collection)
            problems += collectionStateProblems(collection, keys)
        }
        problems += orphanPlainProblems()
        problems += identityProblems()
        problems += settingProblems()
        var files: (checked: Int, problems: [E3DBError]) = (0, [])
        try EncryptedStore.stopIfCancelled(cancellation, "the verification")
        do {
            let result = try verifyFiles(cancellation: cancellation)
            files = (result.checked, result.problems)
        } catch {
            try EncryptedStore.stopIfCancelled(cancellation, "the verification")
            problems.append(error)
        }
        return StoreVerificationReport(
            recordsChecked: checked, filesChecked: files.checked, problems: problems + files.problems)
    }

    /// The enrolled identities whose enrollment (in the key header) does not read as an EAKInfo with the store as its
    /// authorizer, one `storeCorrupted` problem each naming the identity (its key opens it only with its private
    /// key, which the store does not have; the rest is checked here).
    func identityProblems() -> [E3DBError] {
        let rows: [Row]
        do {
            rows = try databaseCall("verifying the identities") {
                try keyHeader.read { db in
                    try Row.fetchAll(db, sql: "SELECT public_key, eak_info FROM store_identities ORDER BY rowid")
                }
            }
        } catch {
            return [error]
        }
        var problems: [E3DBError] = []
        for fetched in rows {
            let row = UntrustedRow(store: fetched, table: "store_identities")
            do throws(E3DBError) {
                let storePublicKey = try currentKeys().boxKey.publicKey.rawRepresentation
                let publicKey = try row.value("public_key", as: Data.self)
                let item = (try? Box.PublicKey(rawRepresentation: publicKey))?.base64URLEncoded ?? "(damaged key)"
                let text = try row.value("eak_info", as: String.self)
                guard let info = try? EAKInfo(jsonData: Data(text.utf8)),
                    info.authorizerPublicKey.rawRepresentation == storePublicKey, info.authorizerID == storeID
                else {
                    throw E3DBError(
                        .storeCorrupted, "the enrollment of identity \(item) is damaged or names another authorizer",
                        context: .init(part: "store_identities.eak_info", item: item))
                }
            } catch {
                problems.append(error)
            }
        }
        return problems
    }

    /// `PRAGMA quick_check`'s findings, one `storeCorrupted` problem each (none for a sound file), all with item
    /// `database`.
    func databaseFileProblems() -> [E3DBError] {
        // An encrypted file: E3DBSQLite authenticates every page first and names those that fail.
        let checks =
            (databaseEncryption == .encrypted ? ["PRAGMA cipher_integrity_check"] : []) + ["PRAGMA quick_check"]
        var problems: [E3DBError] = []
        for check in checks {
            do {
                let lines = try databaseCall("checking the database file") {
                    try pool.read { db in try String.fetchAll(db, sql: check) }
                }
                problems += lines.filter { $0 != "ok" }.map { line in
                    E3DBError(
                        .storeCorrupted, "the store's database file is damaged: \(line)",
                        context: .init(item: "database"))
                }
            } catch {
                problems.append(onDatabase(error))
            }
        }
        return problems
    }

    /// `error` about the database file as a whole (item `database`), for a file-wide check that could not run.
    func onDatabase(_ error: E3DBError) -> E3DBError {
        var context = error.context
        context.item = "database"
        return E3DBError(error.code, error.message, context: context)
    }

    /// The seqs of `collection`'s records, from the `(collection, type, seq)` index (so they can be listed when a
    /// page of the table is damaged), else from the table.
    func recordSeqs(collection: String) throws(E3DBError) -> [Int64] {
        do {
            return try databaseCall("listing the records of \(collection)") {
                try pool.read { db in
                    try Int64.fetchAll(
                        db,
                        sql:
                            "SELECT seq FROM records INDEXED BY records_by_collection_type WHERE collection = ? ORDER BY seq",
                        arguments: [collection])
                }
            }
        } catch {
            return try databaseCall("listing the records of \(collection)") {
                try pool.read { db in
                    try Int64.fetchAll(
                        db, sql: "SELECT seq FROM records NOT INDEXED WHERE collection = ? ORDER BY seq",
                        arguments: [collection])
                }
            }
        }
    }

    /// The rows of `seqs`, read together, or one by one when that fails (a damaged page): a row that cannot be
    /// read is a problem naming the record, and the others are still returned.
    func readRows(_ seqs: [Int64], collection: String, problems: inout [E3DBError]) -> [(Int64, Row)] {
        guard let first = seqs.first, let last = seqs.last else { return [] }
        let doing = "verifying collection \(collection)"
        if let rows = try? databaseCall(
            doing,
            {
                try pool.read { db in
                    try Row.fetchAll(
                        db, sql: "SELECT * FROM records WHERE collection = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                        arguments: [collection, first, last])
                }
            })
        {
            return rows.compactMap { row in Int64.fromDatabaseValue(row["seq"] as DatabaseValue).map { ($0, row) } }
        }
        var rows: [(Int64, Row)] = []
        for seq in seqs {
            do {
                let row = try databaseCall(doing) {
                    try pool.read { db in
                        try Row.fetchOne(db, sql: "SELECT * FROM records WHERE seq = ?", arguments: [seq])
                    }
                }
                if let row { rows.append((seq, row)) }
            } catch {
                let item = recordID(seq: seq) ?? "seq \(seq)"
                var context = error.context
                context.item = item
                problems.append(
                    E3DBError(error.code, "record \(item) cannot be read: \(error.message)", context: context))
            }
        }
        return rows
    }

    /// The id of the record at `seq`, read from the id index only (for a record whose table page is damaged).
    func recordID(seq: Int64) -> String? {
        try? databaseCall("reading a record id") {
            try pool.read { db in
                try String.fetchOne(
                    db, sql: "SELECT id FROM records INDEXED BY sqlite_autoindex_records_1 WHERE seq = ?",
                    arguments: [seq])
            }
        }
    }

    /// The differences between a record's plaintext query rows (its `type` column, its `record_plain` rows, its
    /// blind-index entries) and what its authenticated meta and decrypted data give: one problem per table that
    /// differs, naming the record and the missing, extra or different entries.
    func queryTableProblems(
        _ record: StoredRecord, row: Row, seq: Int64, indexes: [(index: BlindIndex, key: SecureBytes)]
    ) throws(E3DBError) -> [E3DBError] {
        let item = record.id.lowercasedString
        var problems: [E3DBError] = []
        let type = String.fromDatabaseValue(row["type"] as DatabaseValue)
        if type != record.meta.type {
            problems.append(
                E3DBError(
                    .recordTampered,
                    "record \(item): its type column (\(type ?? "none")) differs from its authenticated type "
                        + "(\(record.meta.type))", context: .init(item: item)))
        }
        let (plain, entries) = try databaseCall("verifying the query rows of record \(item)") {
            try pool.read { db in
                let plain = try Row.fetchAll(
                    db.cachedStatement(sql: "SELECT key, value FROM record_plain WHERE record_seq = ?"),
                    arguments: [seq]
                ).map { row in
                    (
                        String.fromDatabaseValue(row["key"] as DatabaseValue) ?? "",
                        String.fromDatabaseValue(row["value"] as DatabaseValue) ?? ""
                    )
                }
                let entries = try Row.fetchAll(
                    db.cachedStatement(
                        sql: "SELECT name, token FROM blind_index_entries WHERE collection = ? AND record_seq = ?"),
                    arguments: [record.collection, seq]
                ).map { row in
                    (
                        String.fromDatabaseValue(row["name"] as DatabaseValue) ?? "",
                        Data.fromDatabaseValue(row["token"] as DatabaseValue)?.base64EncodedString() ?? ""
                    )
                }
                return (plain, entries)
            }
        }
        let wantPlain = record.meta.plain.map { ($0.key, $0.value) }
        if let difference = entryDifference(stored: plain, expected: wantPlain) {
            problems.append(
                E3DBError(
                    .recordTampered,
                    "record \(item): its record_plain rows differ from its authenticated plain "
                        + "(\(difference))", context: .init(item: item)))
        }
        let wantEntries = try BlindIndex.tokens(record.data, indexes: indexes).map {
            ($0.name, $0.token.base64EncodedString())
        }
        if let difference = entryDifference(stored: entries, expected: wantEntries) {
            problems.append(
                E3DBError(
                    .indexEntryMismatch,
                    "the blind-index entries of record \(item) do not match its data "
                        + "(\(difference))", context: .init(item: item)))
        }
        return problems
    }

    /// The keys (plain keys, index names) that are missing, extra or different between stored and expected
    /// entries, or nil when they are the same.
    func entryDifference(stored: [(String, String)], expected: [(String, String)]) -> String? {
        let have = Dictionary(stored.map { ($0.0, [$0.1]) }, uniquingKeysWith: +)
        let want = Dictionary(expected.map { ($0.0, [$0.1]) }, uniquingKeysWith: +)
        guard have != want else { return nil }
        var parts: [String] = []
        let missing = want.keys.filter { have[$0] == nil }.sorted()
        let extra = have.keys.filter { want[$0] == nil }.sorted()
        let different = want.keys.filter { have[$0] != nil && have[$0] != want[$0] }.sorted()
        if !missing.isEmpty { parts.append("missing: " + missing.joined(separator: ", ")) }
        if !extra.isEmpty { parts.append("extra: " + extra.joined(separator: ", ")) }
        if !different.isEmpty { parts.append("different: " + different.joined(separator: ", ")) }
        return parts.joined(separator: "; ")
    }

    /// Blind-index entries of `collection` whose record is gone or in another collection (or whose index does not
    /// exist), one problem per index.
    func orphanProblems(collection: String) -> [E3DBError] {
        var problems: [E3DBError] = []
        do {
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
        } catch {
            problems.append(error)
        }
        return problems
    }

    /// `record_plain` rows whose record is gone (they belong to no collection), one problem per record seq.
    func orphanPlainProblems() -> [E3DBError] {
        do {
            let seqs = try databaseCall("verifying the plain rows") {
                try pool.read { db in
                    try Int64.fetchAll(
                        db,
                        sql: """
                            SELECT DISTINCT p.record_seq FROM record_plain p
                            WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.seq = p.record_seq)
                            """)
                }
            }
            return seqs.map { seq in
                E3DBError(
                    .recordTampered, "record_plain has rows for no record (seq \(seq))",
                    context: .init(item: "seq \(seq)"))
            }
        } catch {
            return [onDatabase(error)]
        }
    }
}
