import Foundation
import GRDB

/// Edits of a plain SQLite file as someone who can write it makes them: any value of any type in any column, once
/// the table's `STRICT`, `NOT NULL` and `CHECK` went through `writable_schema` (security review 3's edited-files
/// check). The store's and the CLI's edited-files tests share them.
package enum SQLiteEdits {
    /// The three kinds of value an edit writes.
    package enum Variant: String, CaseIterable, Sendable {
        /// Text where the column holds a number; a number where it holds text or bytes.
        case wrongType
        case null
        case blob

        /// The SQL literal for a column of `declaredType`.
        package func literal(for declaredType: String) -> String {
            switch self {
            case .wrongType: declaredType.uppercased().contains("INT") ? "'not a number'" : "42"
            case .null: "NULL"
            case .blob: "x'00ff10'"
            }
        }
    }

    /// SQL literals for a column that holds JSON text, which are no JSON object of strings: not JSON, an object
    /// followed by a member of its own (an answer that spliced it would carry a forged `rec_sig`), and bytes with
    /// a NUL after the object.
    package static let invalidJSONTexts = ["'oops'", #"'{"f":"x"},"rec_sig":"forged"'"#, "x'7b7d00'"]

    /// A column of a table that holds rows.
    package struct Column: Sendable, CustomStringConvertible {
        package let table: String
        package let name: String
        package let declaredType: String
        package var description: String { "\(table).\(name)" }
    }

    /// The columns of every table of the SQLite file at `path` that holds at least one row.
    package static func columns(of path: String) throws -> [Column] {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in
            var found: [Column] = []
            let tables = try String.fetchAll(
                db,
                sql: "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            for table in tables where try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \"\(table)\"") ?? 0 > 0 {
                let rows = try Row.fetchAll(
                    db, sql: "SELECT name, type FROM pragma_table_info(?)", arguments: [table])
                for row in rows {
                    found.append(
                        Column(
                            table: table, name: String.fromDatabaseValue(row["name"] as DatabaseValue) ?? "",
                            declaredType: String.fromDatabaseValue(row["type"] as DatabaseValue) ?? ""))
                }
            }
            return found
        }
    }

    /// Takes `STRICT`, `NOT NULL` and `CHECK` out of `table`'s schema text through `writable_schema`, so that any
    /// value of any type can be written into its columns.
    package static func loosen(_ path: String, table: String) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = false
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        try queue.writeWithoutTransaction { db in
            let sql =
                try String.fetchOne(
                    db, sql: "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", arguments: [table])
                ?? ""
            var loosened = sql.replacingOccurrences(of: "STRICT, ", with: "")
                .replacingOccurrences(of: " NOT NULL", with: "")
            if let range = loosened.range(of: ") STRICT", options: .backwards) {
                loosened.replaceSubrange(range, with: ")")
            }
            while let check = loosened.range(of: #"CHECK \([^)]*\)"#, options: .regularExpression) {
                loosened.removeSubrange(check)
            }
            try db.execute(sql: "PRAGMA writable_schema = ON")
            try db.execute(
                sql: "UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?", arguments: [loosened, table])
            try db.execute(sql: "PRAGMA writable_schema = OFF")
        }
    }

    /// Writes `variant` into `column` of the first row of its table (of every row a WITHOUT ROWID table lets
    /// change), after ``loosen(_:table:)``. False when no row could change (the primary key of a WITHOUT ROWID
    /// table refuses NULL).
    package static func edit(_ path: String, _ column: Column, _ variant: Variant) throws -> Bool {
        try edit(path, column, literal: variant.literal(for: column.declaredType))
    }

    /// Writes the SQL literal `value` into `column` as ``edit(_:_:_:)`` writes a variant.
    package static func edit(_ path: String, _ column: Column, literal value: String) throws -> Bool {
        try loosen(path, table: column.table)
        var configuration = Configuration()
        configuration.foreignKeysEnabled = false
        let table = column.table
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        return try queue.writeWithoutTransaction { db in
            let withoutRowID =
                try String.fetchOne(db, sql: "SELECT sql FROM sqlite_schema WHERE name = ?", arguments: [table])?
                .contains("WITHOUT ROWID") ?? false
            let condition = withoutRowID ? "" : #" WHERE rowid = (SELECT MIN(rowid) FROM "\#(table)")"#
            do {
                try db.execute(sql: #"UPDATE OR IGNORE "\#(table)" SET "\#(column.name)" = \#(value)\#(condition)"#)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_MISMATCH {
                return false  // an INTEGER PRIMARY KEY is the rowid: it holds integers only, whatever the schema says
            }
            return db.changesCount > 0
        }
    }

    /// Runs `sql` on the database at `path` (a test ages rows, as time would).
    package static func execute(_ path: String, _ sql: String) throws {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        try queue.write { db in try db.execute(sql: sql) }
    }
}
