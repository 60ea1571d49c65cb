package import E3DBPrimitives
import Foundation
package import GRDB

/// A row of an SQLite file that someone else could have written (the store's database and key header, the server's
/// database), read without trusting it: the one way this package reads a column.
///
/// GRDB's typed subscripts (`row["version"] as Int`) trap on a value of another type (`try!` inside GRDB), and an
/// edited file can hold anything in any column once its `STRICT` is gone (`PRAGMA writable_schema`). Every read
/// here goes through `DatabaseValue`, so a value of the wrong type, a NULL where a value belongs or a missing column
/// is an `E3DBError` with `failure` as its code, naming the table and the column (`context.part`, for example
/// `"records.version"`), and never a trap. Values are not printed: a message says what type was found, never what
/// it held.
///
/// ```swift
/// let row = UntrustedRow(fetched, table: "store_meta", failure: .storeCorrupted)
/// let format: Int = try row.value("format")
/// let parameters: Int? = try row.optional("kdf_ops")
/// ```
package struct UntrustedRow {
    /// The row as GRDB read it.
    package let row: Row
    /// The table (or query) the row came from, for messages.
    package let table: String
    /// The code of the error a bad value gives (`storeCorrupted`, `storageCorrupted`, …).
    package let failure: E3DBError.Code
    /// Who owns the file, for messages (`"the store's"`, `"the server database's"`).
    package let owner: String

    /// Wraps a row read from `table`.
    package init(_ row: Row, table: String, failure: E3DBError.Code, owner: String = "the database's") {
        self.row = row
        self.table = table
        self.failure = failure
        self.owner = owner
    }

    /// The non-NULL value of `column`, as `Value`.
    /// - Throws: `failure` when the column is missing, NULL, or holds a value `Value` cannot represent.
    package func value<Value: DatabaseValueConvertible>(_ column: String, as type: Value.Type = Value.self)
        throws(E3DBError) -> Value
    {
        guard let value = try optional(column, as: type) else {
            throw error(column, "is NULL where a value belongs")
        }
        return value
    }

    /// The value of `column` as `Value`, nil when it is NULL.
    /// - Throws: `failure` when the column is missing or holds a value `Value` cannot represent.
    package func optional<Value: DatabaseValueConvertible>(_ column: String, as type: Value.Type = Value.self)
        throws(E3DBError) -> Value?
    {
        guard row.hasColumn(column) else { throw error(column, "is missing") }
        return try decode(row[column] as DatabaseValue, column: column, as: type)
    }

    /// The non-NULL value at column `index` (a statement whose columns the caller chose), named `column` in errors.
    /// - Throws: `failure` when there is no such column, or it is NULL or of a type `Value` cannot represent.
    package func value<Value: DatabaseValueConvertible>(
        at index: Int, _ column: String, as type: Value.Type = Value.self
    ) throws(E3DBError) -> Value {
        guard let value = try optional(at: index, column, as: type) else {
            throw error(column, "is NULL where a value belongs")
        }
        return value
    }

    /// The value at column `index` as `Value`, nil when it is NULL.
    package func optional<Value: DatabaseValueConvertible>(
        at index: Int, _ column: String, as type: Value.Type = Value.self
    ) throws(E3DBError) -> Value? {
        guard index >= 0, index < row.count else { throw error(column, "is missing") }
        return try decode(databaseValue(at: index), column: column, as: type)
    }

    /// For rows kept whole even when damaged (a record or file row that `verify` reports rather than stops at): the
    /// value of `column` (at `index` when given), nil when it is missing, NULL where `required`, or of the wrong
    /// type; the first such error is kept in `damage`.
    package func lenient<Value: DatabaseValueConvertible>(
        _ column: String, at index: Int? = nil, required: Bool, damage: inout E3DBError?
    ) -> Value? {
        do throws(E3DBError) {
            switch (index, required) {
            case (let index?, true): return try value(at: index, column)
            case (let index?, false): return try optional(at: index, column)
            case (nil, true): return try value(column)
            case (nil, false): return try optional(column)
            }
        } catch {
            if damage == nil { damage = error }
            return nil
        }
    }

    /// The raw value of `column` (any storage class), for values that are copied, not interpreted.
    /// - Throws: `failure` when the column is missing.
    package func databaseValue(_ column: String) throws(E3DBError) -> DatabaseValue {
        guard row.hasColumn(column) else { throw error(column, "is missing") }
        // `Row`'s `DatabaseValue` subscript never traps: every stored value is a `DatabaseValue`.
        return row[column] as DatabaseValue
    }

    private func databaseValue(at index: Int) -> DatabaseValue {
        // `Row`'s `DatabaseValue` subscript never traps for an index inside the row (checked by the callers): every
        // stored value is a `DatabaseValue`.
        row[index] as DatabaseValue
    }

    private func decode<Value: DatabaseValueConvertible>(_ value: DatabaseValue, column: String, as type: Value.Type)
        throws(E3DBError) -> Value?
    {
        if value.isNull { return nil }
        guard let decoded = Value.fromDatabaseValue(value) else {
            throw error(column, "holds \(UntrustedRow.describe(value)) where \(UntrustedRow.describe(type)) belongs")
        }
        return decoded
    }

    /// The error for a bad value in `column`.
    package func error(_ column: String, _ problem: String) -> E3DBError {
        E3DBError(
            failure, "\(owner) \(table).\(column) \(problem): the file was edited or is damaged",
            context: .init(part: "\(table).\(column)"))
    }

    /// A value's storage class, never its content.
    static func describe(_ value: DatabaseValue) -> String {
        switch value.storage {
        case .null: "NULL"
        case .int64: "an integer"
        case .double: "a real number"
        case .string: "text"
        case .blob(let data): "a blob of \(data.count) bytes"
        }
    }

    static func describe<Value>(_ type: Value.Type) -> String {
        switch type {
        case is any BinaryInteger.Type: "an integer"
        case is String.Type: "text"
        case is Data.Type: "a blob"
        case is Bool.Type: "a boolean"
        case is Double.Type: "a real number"
        default: "a \(type)"
        }
    }
}
