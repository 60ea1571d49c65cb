import E3DBPrimitives
import GRDB

extension EncryptedStore {
    /// How often ``observe(_:pollInterval:)`` looks for commits made by other connections and processes, unless
    /// told otherwise.
    public static let defaultObservationInterval: Duration = .milliseconds(250)

    /// The records of `query` now and after every committed change that affects them, decrypted. Each element is
    /// the whole result; results equal to the previous one are skipped.
    ///
    /// Two sources of change, merged: commits made through this `EncryptedStore` instance are seen at once
    /// (GRDB's `ValueObservation` on the tables the query reads); commits made by any other connection, instance
    /// or process are seen within `pollInterval`, through a dedicated read-only SQLite connection that reads
    /// `PRAGMA data_version` (a counter SQLite changes when another connection commits) at that interval. Either
    /// way the query runs again on the latest committed state, in one serial loop, so results come in commit
    /// order and never go back to an older state.
    ///
    /// The sequence ends when the iterating task is cancelled, when the store is released (no reference left but
    /// the observation's), and with `E3DBError.Code.storeLocked` within `pollInterval` of ``lock()``. It ends with
    /// an error when a record does not authenticate.
    ///
    /// Cost: one extra SQLite connection per observation, and one `PRAGMA data_version` (a few microseconds) per
    /// interval while nothing changes. Keep observed queries small (a `limit`, `plain` or type conditions): each
    /// change reads the whole result again, although the record cache spares the decryption of records that did
    /// not change.
    /// - Parameters:
    ///   - query: the records to observe.
    ///   - pollInterval: how often to look for other processes' commits (more than zero).
    public func observe(
        _ query: RecordQuery, pollInterval: Duration = EncryptedStore.defaultObservationInterval
    ) -> AsyncThrowingStream<[StoredRecord], any Error> {
        let statement: (String, StatementArguments)
        let matcher: QueryMatcher
        let watcher: DatabaseQueue
        do {
            _ = try currentKeys()  // a locked store refuses every call
            guard pollInterval > .zero else {
                throw E3DBError(.invalidParameter, "the observation's poll interval must be more than zero")
            }
            let selection = try querySQL(query, after: nil, count: query.fields.isEmpty ? query.limit : nil)
            matcher = selection.matcher
            statement = (selection.sql, selection.arguments)
            watcher = try openWatcher()
        } catch {
            return AsyncThrowingStream { $0.finish(throwing: error) }
        }
        let sameInstance = ValueObservation.tracking { db -> [StoredRow] in
            try Row.fetchAll(db, sql: statement.0, arguments: statement.1).map(StoredRow.init(_:))
        }.removeDuplicates().values(in: pool)
        // Every source only signals "look again"; one loop reads and emits, so results stay in commit order.
        let (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        signal.yield(())
        return AsyncThrowingStream { continuation in
            let reader = Task { [weak self] in
                var last: [StoredRow]?
                do {
                    for await _ in signals {
                        guard let store = self else { break }
                        guard !store.isLocked else { throw E3DBError(.storeLocked, "the store was locked") }
                        let rows = try await store.observedRows(statement, collection: query.collection)
                        if rows == last { continue }
                        last = rows
                        continuation.yield(try store.observedRecords(rows, matcher: matcher))
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            let local = Task {
                do {
                    for try await _ in sameInstance { signal.yield(()) }
                } catch {
                    continuation.finish(throwing: storeError(error, doing: "observing collection \(query.collection)"))
                }
            }
            let poller = Task { [weak self] in
                // Ends the signals (after a last one) when the store is locked or released, or on cancellation.
                defer { signal.finish() }
                do {
                    var version = try await watcher.read { db in try Int.fetchOne(db, sql: "PRAGMA data_version") }
                    while true {
                        try await Task.sleep(for: pollInterval)
                        guard let store = self, !store.isLocked else {
                            signal.yield(())
                            return
                        }
                        let now = try await watcher.read { db in try Int.fetchOne(db, sql: "PRAGMA data_version") }
                        if now != version {
                            version = now
                            signal.yield(())
                        }
                    }
                } catch is CancellationError {
                    return
                } catch {
                    continuation.finish(throwing: storeError(error, doing: "watching the store for changes"))
                }
            }
            continuation.onTermination = { _ in
                reader.cancel()
                local.cancel()
                poller.cancel()
            }
        }
    }

    /// A read-only connection of its own, whose `PRAGMA data_version` changes when any other connection commits.
    func openWatcher() throws(E3DBError) -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { [location = pool.path, lockState] _ in
            try EncryptedStore.requirePageKey(location, lock: lockState)
        }
        return try databaseCall("opening a connection to watch the store") {
            try DatabaseQueue(path: pool.path, configuration: configuration)
        }
    }

    /// The observed query's rows, read through GRDB's async access (the observation runs in tasks).
    func observedRows(_ statement: (String, StatementArguments), collection: String) async throws(E3DBError)
        -> [StoredRow]
    {
        try await databaseCall("observing collection \(collection)") {
            try await pool.read { db in
                try Row.fetchAll(db, sql: statement.0, arguments: statement.1).map(StoredRow.init(_:))
            }
        }
    }

    /// Decrypts the observed rows that are answers of the matcher's query, up to its limit.
    func observedRecords(_ rows: [StoredRow], matcher: QueryMatcher) throws(E3DBError) -> [StoredRecord] {
        var records: [StoredRecord] = []
        for row in rows {
            let record = try decode(row, collection: matcher.query.collection)
            if try matcher.accepts(record) { records.append(record) }
            if let limit = matcher.query.limit, records.count >= limit { break }
        }
        return records
    }
}
