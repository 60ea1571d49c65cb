@testable import E3DBServer
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Testing

/// The PostgreSQL backend's grouped record reads on their own connection: what happens when that connection is
/// terminated, when a group outlives the operation timeout, and after the storage closed.
extension StorageTests {
    private static let readsWriter = "00000000-0000-4000-8000-0000000000d4"
    private static let readConnection = "e3dbkit-record-reads"

    private static func record() -> RecordRow {
        let id = UUID().uuidString.lowercased()
        return RecordRow(recordID: id, writerID: readsWriter, userID: readsWriter, type: "t1",
                         plainJSON: #"{"p":"\#(id)"}"#, dataJSON: #"{"f":"c"}"#, recSig: nil, fileMetaJSON: nil,
                         created: 100, lastModified: 101, version: "v-\(id)")
    }

    private static func logger() -> Logger {
        var logger = Logger(label: "e3dbkit.tests.read-groups")
        logger.logLevel = .critical  // the terminated and closed connections log errors on purpose here
        return logger
    }

    /// A connection of the test's own to the same database, as an operator's `psql` would be.
    private static func admin(_ url: String) async throws -> PostgresConnection {
        let parts = try #require(URLComponents(string: url))
        let configuration = PostgresConnection.Configuration(
            host: try #require(parts.host), port: parts.port ?? 5432, username: try #require(parts.user),
            password: parts.password, database: String(parts.path.dropFirst()), tls: .disable)
        return try await PostgresConnection.connect(configuration: configuration, id: 99, logger: logger())
    }

    /// Backends of the storage's read connection in the test's database (those waiting for a lock only, when
    /// `waitingForLock`; other than `except`, when given).
    private static func readBackends(_ admin: PostgresConnection, waitingForLock: Bool = false, except: Int? = nil)
        async throws -> [Int] {
        var pids: [Int] = []
        for try await (pid) in try await admin.query("""
            SELECT pid FROM pg_stat_activity
            WHERE application_name = \(readConnection) AND datname = current_database()
                AND (NOT \(waitingForLock) OR wait_event_type = 'Lock') AND pid <> \(except ?? 0)
            """, logger: logger()).decode(Int.self) {
            pids.append(pid)
        }
        return pids
    }

    /// Waits (at most 30 s) until `condition` holds.
    private static func eventually(_ what: String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try await !condition() {
            guard ContinuousClock.now < deadline else { throw StorageError(.unavailable, "never: \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The `StorageError` of reading `row` as its writer; records `answered` as an issue when the read succeeds.
    private static func refusedRead(_ storage: PostgresStorage, _ row: RecordRow, _ answered: Comment) async throws
        -> StorageError? {
        do {
            _ = try await storage.record(id: row.recordID, readableBy: readsWriter)
            Issue.record(answered)
            return nil
        } catch let error as StorageError {
            return error
        }
    }

    /// Takes an exclusive lock on `records` in a transaction of `admin`'s, so that reads wait for it.
    private static func lockRecords(_ admin: PostgresConnection) async throws {
        try await admin.query("BEGIN", logger: logger())
        try await admin.query("LOCK TABLE records IN ACCESS EXCLUSIVE MODE", logger: logger())
    }

    /// Runs `body` with a migrated PostgreSQL storage, its URL and the records it holds.
    private static func withReadStorage(timeout: Duration, records: Int,
                                        _ body: (PostgresStorage, String, [RecordRow]) async throws -> Void)
        async throws {
        guard let url = try await PostgresTestServer.newDatabase() else { return }
        let storage = try PostgresStorage(url: url, maximumConnections: 4, operationTimeout: timeout,
                                          logger: logger())
        do {
            try await storage.migrate()
            var rows: [RecordRow] = []
            for _ in 0..<records { rows.append(try await storage.insertRecord(record())) }
            try await body(storage, url, rows)
        } catch {
            try? await storage.close()
            throw error
        }
        try await storage.close()
    }

    @Test(.timeLimit(.minutes(2)))
    func aGroupWhoseConnectionIsTerminatedIsReadOnceMoreOnANewOne() async throws {
        try await Self.withReadStorage(timeout: .seconds(600), records: 8) { storage, url, rows in
            #expect(try await storage.record(id: rows[0].recordID, readableBy: Self.readsWriter) == rows[0])
            let admin = try await Self.admin(url), locker = try await Self.admin(url)
            defer { Task { try? await admin.close(); try? await locker.close() } }
            let first = try await Self.readBackends(admin)
            #expect(first.count == 1, "the reads have a connection of their own")
            try await Self.lockRecords(locker)
            let reads = Task {
                try await withThrowingTaskGroup(of: (Int, RecordRow?).self) { group in
                    for i in 0..<32 {
                        group.addTask {
                            let row = rows[i % rows.count]
                            return (i, try await storage.record(id: row.recordID, readableBy: Self.readsWriter))
                        }
                    }
                    var found: [Int: RecordRow?] = [:]
                    for try await (i, row) in group { found[i] = row }
                    return found
                }
            }
            try await Self.eventually("the read connection waits for the lock") {
                try await Self.readBackends(admin, waitingForLock: true) == first
            }
            try await admin.query("""
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE application_name = \(Self.readConnection) AND datname = current_database()
                """, logger: Self.logger())
            // The group in flight failed fast on a terminated connection: it is read once more on a new one, which
            // waits for the lock in turn.
            try await Self.eventually("a new read connection waits for the lock") {
                try await Self.readBackends(admin, waitingForLock: true, except: first.first).count == 1
            }
            try await locker.query("ROLLBACK", logger: Self.logger())
            let found = try await reads.value
            #expect(found.count == 32)
            for (i, row) in found { #expect(row == rows[i % rows.count], "read \(i)") }
            try await Self.eventually("one new connection replaced the terminated one") {
                let now = try await Self.readBackends(admin)
                return now.count == 1 && now != first
            }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aGroupThatOutlivesTheTimeoutFailsEvenWhileItsConnectionIsPrepared() async throws {
        // 2 s: the storage's every call has this timeout, migration and inserts included, on a busy 2-core runner.
        try await Self.withReadStorage(timeout: .seconds(2), records: 1) { storage, url, rows in
            let row = rows[0]
            let locker = try await Self.admin(url)
            defer { Task { try? await locker.close() } }
            // No read has run yet: the first group opens a connection and prepares its statement, which waits for
            // the lock; so does the next group's new connection after the first timed out.
            try await Self.lockRecords(locker)
            for attempt in 0..<2 {
                let started = ContinuousClock.now
                if let error = try await Self.refusedRead(storage, row, "a read behind an exclusive lock answered") {
                    #expect(error.kind == .unavailable)
                    #expect(error.message.contains("did not complete reading 1 record(s) within"), "\(error.message)")
                    #expect(!error.message.contains(try #require(URLComponents(string: url)?.password)),
                            "no password in the error")
                }
                let waited = ContinuousClock.now - started
                #expect(waited >= .seconds(2) && waited < .seconds(30), "attempt \(attempt) failed after \(waited)")
            }
            try await locker.query("ROLLBACK", logger: Self.logger())
            #expect(try await storage.record(id: row.recordID, readableBy: Self.readsWriter) == row,
                    "the next read opens a new connection")
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func groupedReadsAfterCloseAreRefused() async throws {
        guard let url = try await PostgresTestServer.newDatabase() else { return }
        let storage = try PostgresStorage(url: url, operationTimeout: .seconds(600), logger: Self.logger())
        try await storage.migrate()
        let row = try await storage.insertRecord(Self.record())
        #expect(try await storage.record(id: row.recordID, readableBy: Self.readsWriter) == row)
        try await storage.close()
        if let error = try await Self.refusedRead(storage, row, "a read after close answered") {
            #expect(error.kind == .unavailable)
            #expect(error.message.contains("closed"), "\(error.message)")
        }
    }
}
