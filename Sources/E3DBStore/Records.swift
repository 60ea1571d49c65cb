public import E3DBCanonicalJSON
public import E3DBDocuments
import E3DBPrimitives
public import Foundation

/// A record read back from the store, decrypted and authenticated in its place.
public struct StoredRecord: Sendable, Hashable {
    /// The record's id (lowercase UUID text in E3DB's JSON).
    public let id: UUID
    /// The collection it belongs to.
    public let collection: String
    /// Its version: 1 when written, one more on every update.
    public let version: Int
    /// When it was first written and last changed (stored in plaintext, bound to the record).
    public let created: Date
    public let updated: Date
    /// E3DB's client meta: writer (the store's id), type and `plain` (stored in plaintext, queryable).
    public let meta: ClientMeta
    /// The decrypted fields.
    public let data: RecordData

    /// `{"data":…,"meta":…}` as `e3dbkit store get` prints it: E3DB's meta members plus `record_id`, `version`,
    /// `created` and `last_modified` (as the E3DB API returns them).
    public var jsonValue: JSONValue {
        var meta = self.meta.signableJSON.objectValue ?? JSONObject()
        meta["record_id"] = .string(id.lowercasedString)
        meta["version"] = .string(String(version))
        meta["created"] = .string(StoreTime.format(created))
        meta["last_modified"] = .string(StoreTime.format(updated))
        return .object(["meta": .object(meta), "data": data.signableJSON])
    }
}

/// Where a write left a record: its id and new version.
public struct RecordReference: Sendable, Hashable, Codable {
    public let id: UUID
    public let version: Int

    public init(id: UUID, version: Int) {
        self.id = id
        self.version = version
    }

    /// `{"id":…,"version":…}`.
    public var jsonValue: JSONValue {
        .object(["id": .string(id.lowercasedString), "version": .number(Double(version))])
    }
}

/// A condition on a record's plaintext `plain` metadata (keys and values are compared as UTF-8 text).
public enum PlainCondition: Sendable, Hashable {
    /// `plain[key] == value`.
    case equals(String, String)
    /// `plain[key]` starts with the prefix.
    case hasPrefix(String, String)
    /// `lower <= plain[key] <= upper` in UTF-8 byte order (either bound may be open).
    case between(String, lower: String?, upper: String?)

    var key: String {
        switch self {
        case .equals(let key, _), .hasPrefix(let key, _), .between(let key, _, _): key
        }
    }
}

/// A condition on a decrypted field, checked after decryption (the store reads the candidates the other
/// conditions select and keeps those whose field matches).
public enum FieldCondition: Sendable, Hashable {
    /// `data[field] == value`: the field named by code units, as `RecordData` keeps names (`"é"` and `"e\u{301}"`
    /// are two fields), its value compared as Unicode text (Swift `String` equality: canonically equivalent values
    /// are equal, by design, as the blind index tokens hash their NFC form).
    case equals(String, String)

    func matches(_ data: RecordData) -> Bool {
        switch self {
        case .equals(let field, let value): data[field] == value
        }
    }
}

/// Which records to read: one collection, optionally restricted by type and `plain` conditions, in write order.
public struct RecordQuery: Sendable, Hashable {
    /// The collection to read.
    public var collection: String
    /// Record types to include (any when empty).
    public var types: [String]
    /// Conditions on `plain`, all of which must hold.
    public var plain: [PlainCondition]
    /// Conditions on encrypted fields, all of which must hold (checked after decryption).
    public var fields: [FieldCondition]
    /// The largest number of records to return (all when nil).
    public var limit: Int?
    /// Newest first instead of oldest first.
    public var descending: Bool

    public init(
        collection: String, types: [String] = [], plain: [PlainCondition] = [], fields: [FieldCondition] = [],
        limit: Int? = nil, descending: Bool = false
    ) {
        self.collection = collection
        self.types = types
        self.plain = plain
        self.fields = fields
        self.limit = limit
        self.descending = descending
    }
}

/// Timestamps as the E3DB API writes them: RFC 3339 UTC with milliseconds.
enum StoreTime {
    /// `YYYY-MM-DDTHH:MM:SS.sssZ`, written by the package's one timestamp writer (`UTCTimestamp`), byte for byte
    /// what Foundation's `ISO8601FormatStyle` (with fractional seconds, in UTC) wrote before it, whose arithmetic
    /// this keeps: the instant counted from 2001 (as a `Date` holds it), the fraction of its second cut, not
    /// rounded, to nanoseconds and then to milliseconds. (So an instant a `Double` cannot hold exactly, such as
    /// `StoreTime.now()`'s whole milliseconds, may be written one millisecond early, as it always was; the text, not
    /// the `Date`, is what the store keeps and binds.)
    static func format(_ date: Date) -> String {
        let reference = date.timeIntervalSinceReferenceDate
        let whole = reference.rounded(.down)
        let nanoseconds = min(Int((reference - whole) * 1_000_000_000), 999_999_999)
        return UTCTimestamp.format(
            seconds: Int64(whole) + 978_307_200, fraction: nanoseconds / 1_000_000, fractionDigits: 3)
    }

    static func parse(_ text: String) -> Date? {
        // The store's own form, digit by digit, to the Date Foundation's parser gives (counted from 2001, as a
        // Date stores it); Foundation for anything else.
        if let count = milliseconds(text) {
            return Date(timeIntervalSinceReferenceDate: Double(count - 978_307_200_000) / 1000)
        }
        // Foundation's parser moves a date that does not exist into the next month (2026-02-31 is 3 March): the
        // date must pass the one date check first.
        let date = Array(text.utf8.prefix(10))
        func number(_ range: Range<Int>) -> Int? {
            date[range].allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
                ? Int(String(decoding: date[range], as: UTF8.self)) : nil
        }
        guard date.count == 10, date[4] == UInt8(ascii: "-"), date[7] == UInt8(ascii: "-"), let year = number(0..<4),
            let month = number(5..<7), let day = number(8..<10),
            UTCTimestamp.days(year: Int64(year), month: month, day: day) != nil
        else { return nil }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)
    }

    /// Now, rounded to the millisecond (what the text form keeps).
    static func now() -> Date {
        Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded() / 1000)
    }
}
