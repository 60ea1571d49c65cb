import E3DBServer
import Foundation
import Logging
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

    /// Backends of the storage's read connection.
    private static func readBackends(_ admin: PostgresConnection) async throws -> Int {
        var count = 0
        for try await (n) in try await admin.query(
            "SELECT count(*)::int FROM pg_stat_activity WHERE application_name = \(readConnection)",
            logger: logger()).decode(Int.self) {
            count = n
        }
        return count
    }

    /// Runs `body` with a migrated PostgreSQL storage, its URL and the records it holds.
    private static func withReadStorage(timeout: Duration, records: Int,
                                        _ body: (PostgresStorage, String, [RecordRow]) async throws -> Void)
        async throws {
        guard let url = try PostgresTestServer.newDatabase() else { return }
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

    @Test
    func groupedReadsReadAgainAfterTheirConnectionIsTerminated() async throws {
        try await Self.withReadStorage(timeout: .seconds(600), records: 8) { storage, url, rows in
            #expect(try await storage.record(id: rows[0].recordID, readableBy: Self.readsWriter) == rows[0])
            let admin = try await Self.admin(url)
            defer { Task { try? await admin.close() } }
            #expect(try await Self.readBackends(admin) == 1, "the reads have a connection of their own")
            try await admin.query("""
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE application_name = \(Self.readConnection)
                """, logger: Self.logger())
            // Whether a group meets the terminated connection (and is read once more) or finds it closed (and opens
            // a new one), every read gets its own record.
            try await withThrowingTaskGroup(of: (Int, RecordRow?).self) { group in
                for i in 0..<64 {
                    group.addTask {
                        let row = rows[i % rows.count]
                        return (i, try await storage.record(id: row.recordID, readableBy: Self.readsWriter))
                    }
                }
                for try await (i, found) in group { #expect(found == rows[i % rows.count], "read \(i)") }
            }
            #expect(try await Self.readBackends(admin) == 1, "one new connection replaced the terminated one")
        }
    }

    @Test
    func aGroupedReadThatOutlivesTheTimeoutFailsAndTheNextOneReconnects() async throws {
        try await Self.withReadStorage(timeout: .seconds(1), records: 1) { storage, url, rows in
            let row = rows[0]
            #expect(try await storage.record(id: row.recordID, readableBy: Self.readsWriter) == row)
            let admin = try await Self.admin(url)
            defer { Task { try? await admin.close() } }
            try await admin.query("BEGIN", logger: Self.logger())
            try await admin.query("LOCK TABLE records IN ACCESS EXCLUSIVE MODE", logger: Self.logger())
            let started = ContinuousClock.now
            do {
                _ = try await storage.record(id: row.recordID, readableBy: Self.readsWriter)
                Issue.record("a read behind an exclusive lock answered")
            } catch let error as StorageError {
                #expect(error.kind == .unavailable)
                #expect(error.message.contains("did not complete reading 1 record(s) within"), "\(error.message)")
                #expect(!error.message.contains(try #require(URLComponents(string: url)?.password)),
                        "no password in the error")
            }
            let waited = ContinuousClock.now - started
            #expect(waited >= .seconds(1) && waited < .seconds(30), "failed after the timeout: \(waited)")
            try await admin.query("ROLLBACK", logger: Self.logger())
            #expect(try await storage.record(id: row.recordID, readableBy: Self.readsWriter) == row,
                    "the next read opens a new connection")
        }
    }

    @Test
    func groupedReadsAfterCloseAreRefused() async throws {
        guard let url = try PostgresTestServer.newDatabase() else { return }
        let storage = try PostgresStorage(url: url, operationTimeout: .seconds(600), logger: Self.logger())
        try await storage.migrate()
        let row = try await storage.insertRecord(Self.record())
        #expect(try await storage.record(id: row.recordID, readableBy: Self.readsWriter) == row)
        try await storage.close()
        do {
            _ = try await storage.record(id: row.recordID, readableBy: Self.readsWriter)
            Issue.record("a read after close answered")
        } catch let error as StorageError {
            #expect(error.kind == .unavailable)
            #expect(error.message.contains("closed"), "\(error.message)")
        }
    }
}
