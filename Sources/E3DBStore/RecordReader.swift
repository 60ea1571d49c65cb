import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBPrimitives
import Foundation
import GRDB
import Synchronization

// The read path's helpers: rows read by column index from a cursor (no row copy, no name lookups), the binding
// MAC's place written straight into bytes, strict UUID and timestamp parsing without Foundation's formatters.

extension StoredRow {
    /// The columns a record read selects, in the order ``init(columns:)`` reads them.
    static let columns = "r.seq, r.id, r.version, r.key_version, r.created, r.updated, r.document, r.mac"
    /// A point read: the row of one id in one collection.
    static let selectByID = "SELECT \(columns) FROM records r WHERE r.id = ? AND r.collection = ?"

    /// Reads a row selected with ``columns``, by index (from a cursor: GRDB reads SQLite's columns directly), through
    /// the untrusted-row reader (``init(_:byIndex:)``).
    init(columns row: Row) { self.init(row, byIndex: true) }

    /// The rows of a statement selecting ``columns``, read through a cursor.
    static func fetchAll(_ statement: Statement, arguments: StatementArguments) throws -> [StoredRow] {
        let cursor = try Row.fetchCursor(statement, arguments: arguments)
        return try withExtendedLifetime(cursor) {
            var rows: [StoredRow] = []
            while let row = try cursor.next() { rows.append(StoredRow(columns: row)) }
            return rows
        }
    }

    /// The first row of a statement selecting ``columns``, if any (the cursor resets the statement when done).
    static func fetchOne(_ statement: Statement, arguments: StatementArguments) throws -> StoredRow? {
        let cursor = try Row.fetchCursor(statement, arguments: arguments)
        return try withExtendedLifetime(cursor) { try cursor.next().map(StoredRow.init(columns:)) }
    }
}

/// The text of a record's place in the binding MAC: the canonical JSON array
/// `["E3DBStore record v1", store, collection, id, version, key version, created, updated]`, written by the one
/// canonical serializer (`CanonicalJSON.serializedBytes`), so it is that serializer's output by construction.
enum BindingPlace {
    static func bytes(
        storeID: String, collection: String, id: String, version: Int, keyVersion: Int, created: String,
        updated: String
    ) -> [UInt8] {
        CanonicalJSON.serializedBytes(
            .array([
                .string("E3DBStore record v1"), .string(storeID), .string(collection), .string(id),
                .number(Double(version)), .number(Double(keyVersion)), .string(created), .string(updated),
            ]))
    }
}

extension StoreTime {
    /// Milliseconds since 1970 of `YYYY-MM-DDTHH:MM:SS.sssZ` (what ``format(_:)`` writes), or nil for any other
    /// shape or an out-of-range field (the caller then falls back to Foundation's parser).
    static func milliseconds(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { u -> Int64? in
            guard u.count == 24, unsafe u[4] == UInt8(ascii: "-"), unsafe u[7] == UInt8(ascii: "-"),
                unsafe u[10] == UInt8(ascii: "T"),
                unsafe u[13] == UInt8(ascii: ":"), unsafe u[16] == UInt8(ascii: ":"), unsafe u[19] == UInt8(ascii: "."),
                unsafe u[23] == UInt8(ascii: "Z")
            else { return nil }
            func number(_ start: Int, _ count: Int) -> Int64? {
                var value: Int64 = 0
                for i in start..<(start + count) {
                    let digit = unsafe u[i] &- UInt8(ascii: "0")
                    guard digit < 10 else { return nil }
                    value = value * 10 + Int64(digit)
                }
                return value
            }
            guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
                let minute = number(14, 2), let second = number(17, 2), let milli = number(20, 3),
                let days = UTCTimestamp.days(year: year, month: Int(month), day: Int(day)), hour < 24, minute < 60,
                second < 60
            else { return nil }
            return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + milli
        }
    }
}

/// Reads a stored document in the exact canonical form the store writes,
/// `{"data":{…},"meta":{"plain":{…},"type":…,"user_id":…,"writer_id":…}}` (with `"rec_sig":…` last for an
/// imported signed record), straight into its parts: no JSON tree, no intermediate dictionaries.
///
/// Anything else (whitespace, another member order, an escape or control character in a string, a duplicate
/// key, a non-string value, invalid UTF-8, an id that is not 8-4-4-4-12 hex) gives nil, and the caller uses the
/// general parser, which accepts or refuses it with its usual error. Only bytes that passed the binding MAC are
/// given to it.
///
/// `@safe`: every scanner is made and used up inside the `withUnsafeBytes` closure of its input
/// (``document(_:)``), so `bytes` is valid for the scanner's whole life.
@safe
struct StoredDocumentScanner {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0

    static func document(_ data: Data) -> EncryptedDocument? {
        // Inputs the general parser's limits refuse are left to it (so that it refuses them as before).
        guard data.count <= ParseLimits.default.maxInputBytes else { return nil }
        return unsafe data.withUnsafeBytes { raw in
            var scanner = unsafe StoredDocumentScanner(bytes: raw.bindMemory(to: UInt8.self))
            return scanner.document()
        }
    }

    private init(bytes: UnsafeBufferPointer<UInt8>) { unsafe self.bytes = unsafe bytes }

    private mutating func document() -> EncryptedDocument? {
        guard literal("{\"data\":"), let data = map(), literal(",\"meta\":{\"plain\":"), let plain = map(),
            literal(",\"type\":"), let type = string(), literal(",\"user_id\":"), let user = string(),
            literal(",\"writer_id\":"), let writer = string(), literal("}"),
            let userID = UUID(hexText: user), let writerID = UUID(hexText: writer),
            // The document, data, meta, plain, the members and the three strings of meta, and rec_sig: the values
            // the general parser counts against its limit.
            data.count + plain.count + 8 <= ParseLimits.default.maxValues
        else { return nil }
        var signature: String?
        if literal(",\"rec_sig\":") {
            guard let text = string() else { return nil }
            signature = text
        }
        guard literal("}"), unsafe position == bytes.count else { return nil }
        return EncryptedDocument(
            meta: ClientMeta(writerID: writerID, userID: userID, type: type, plain: plain), data: data,
            recordSignature: signature)
    }

    /// Consumes `text` if the input continues with it.
    private mutating func literal(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard unsafe bytes.count - position >= count else { return false }
        let start = unsafe text.utf8Start
        for k in 0..<count where unsafe bytes[position + k] != start[k] { return false }
        position += count
        return true
    }

    /// A string without escapes or control characters, validated as UTF-8.
    private mutating func string() -> String? {
        guard unsafe position < bytes.count, unsafe bytes[position] == UInt8(ascii: "\"") else { return nil }
        let start = position + 1
        var end = start
        while unsafe end < bytes.count {
            let byte = unsafe bytes[end]
            if byte == UInt8(ascii: "\"") { break }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
            end += 1
        }
        guard unsafe end < bytes.count else { return nil }
        position = end + 1
        return unsafe String(validating: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }

    /// An object of string members (distinct keys), in order.
    private mutating func map() -> RecordData? {
        guard literal("{") else { return nil }
        var members: [(String, String)] = []
        if literal("}") { return RecordData() }
        repeat {
            guard let key = string(), literal(":"), let value = string() else { return nil }
            members.append((key, value))
        } while literal(",")
        guard literal("}") else { return nil }
        return try? RecordData(members)
    }
}

/// Read-only connections for record reads, one per concurrent reader, opened on first use and kept (a few idle,
/// none while the store is locked); async readers hold at most `maximumOpen` at once: one beyond that waits for a
/// permit, suspended (no thread waits, however many tasks read at once), and leaves the queue at once when its task
/// is cancelled. A synchronous reader takes no permit (see `read(_:)`).
///
/// GRDB's `DatabasePool.unsafeRead` runs `PRAGMA schema_version` before every read (a second statement with its own
/// implicit read transaction and file locks); a `DatabaseQueue`'s `unsafeRead` runs only the caller's statements.
/// Statements on a changed schema are prepared again by SQLite itself, and reads select their columns by name, so
/// nothing here depends on GRDB's schema cache. Each read is one statement (or a few, each its own snapshot), as
/// through the pool.
final class RecordReaders: Sendable {
    /// The database's path, or the E3DBSQLite URI of an encrypted one (the pool's own).
    private let location: String
    private let idle = Mutex<[DatabaseQueue]>([])
    /// The store's lock: a read while it is locked is `storeLocked`, even on an idle connection.
    private let lock: StoreLock
    /// Idle connections kept for later reads (more may be open while more threads read).
    static let keptIdle = 4
    /// The most connections open at once (checked out or idle).
    static let maximumOpen = 8
    /// One permit per connection that may be open, for async readers.
    let permits = AsyncPermits<Never>(RecordReaders.maximumOpen)
    /// The connections open now, and the most ever open at once (for tests).
    private let counts = Mutex<(open: Int, peak: Int)>((0, 0))

    init(location: String, lock: StoreLock) {
        self.location = location
        self.lock = lock
    }

    /// The connections open now and the most open at once so far.
    var openConnections: (now: Int, peak: Int) { counts.withLock { ($0.open, $0.peak) } }

    /// A synchronous read takes no permit: its own thread bounds it, and waiting here for a permit that an async
    /// reader holds could block the cooperative thread that reader needs to resume on, and so never get it (a
    /// deadlock, shown by `AsyncStoreTests.syncAndAsyncReadersShareThePermits`). The permits bound async readers,
    /// which hold no thread while they wait.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        let queue = try checkOut()
        defer { checkIn(queue) }
        return try queue.unsafeRead(body)
    }

    /// `read(_:)` through GRDB's async access (the connection's queue runs `body`; the caller's task waits
    /// suspended, for a permit and for the read).
    func read<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        do {
            try await permits.acquire()
        } catch {
            throw E3DBError(.cancelled, "the read was cancelled while it waited for a connection")
        }
        defer { permits.release() }
        // A task cancelled as it got its permit gives it back before opening anything.
        if Task.isCancelled { throw E3DBError(.cancelled, "the read was cancelled") }
        let queue = try checkOut()
        defer { checkIn(queue) }
        return try await queue.unsafeRead(body)
    }

    /// A connection of this reader's own for one read (the caller holds a permit): an idle one, or a new one.
    private func checkOut() throws -> DatabaseQueue {
        try lock.check()
        if let queue = idle.withLock({ $0.popLast() }) { return queue }
        let queue = try open()
        counts.withLock { counts in
            counts.open += 1
            counts.peak = max(counts.peak, counts.open)
        }
        return queue
    }

    private func checkIn(_ queue: DatabaseQueue) {
        // Checked under the idle list's lock, which `closeIdle` takes after the store is marked locked: a connection
        // coming back while the store locks is either closed here or by `closeIdle`.
        let kept = idle.withLock { idle in
            guard idle.count < RecordReaders.keptIdle, !lock.refusesConnections else { return false }
            idle.append(queue)
            return true
        }
        // The connection closes when the last reference to it goes, at the end of this call.
        if !kept { counts.withLock { $0.open -= 1 } }
    }

    /// Closes the idle connections (`lock()`, after the store is marked locked); the ones in use close when their
    /// reads end.
    func closeIdle() {
        let closing = idle.withLock { idle in
            defer { idle.removeAll() }
            return idle
        }
        counts.withLock { $0.open -= closing.count }
        // The connections close when `closing`, their last reference, goes at the end of this call.
    }

    private func open() throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { [location, lock] db in
            try EncryptedStore.requirePageKey(location, lock: lock)
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
        }
        return try DatabaseQueue(path: location, configuration: configuration)
    }
}
