import E3DBAPI
import E3DBAsyncHTTPClient
import E3DBCanonicalJSON
import E3DBClient
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import Logging
import NIOCore
import Testing

@testable import E3DBServer

/// What lets several nodes share one database: the deletion outbox of file bodies and its drain, migrations that
/// wait neither for ever nor in front of a table's traffic, administrative commands that do not migrate, and the
/// node's clock against the database's.
@Suite("Several nodes: the deletion outbox, migrations, administrative commands and clocks", .postgresServer)
struct NodeMaintenanceTests {
    private static let writer = ClientID("00000000-0000-4000-8000-00000000000a")!

    private static func fileRecord(_ id: RecordID = .random()) -> RecordRow {
        RecordRow(
            recordID: id, writerID: writer, userID: writer, type: "file", plainJSON: "{}", dataJSON: "{}",
            recSig: nil, fileMetaJSON: #"{"size":1,"checksum":"c","compression":"raw"}"#, created: 1,
            lastModified: 1, version: "v1")
    }

    private static func pendingFile(created: Int64) -> PendingFileRow {
        let id = RecordID.random()
        return PendingFileRow(
            pendingID: id, record: fileRecord(id), checksum: "c", size: 1, uploaded: false, created: created)
    }

    private static func quiet() -> Logger {
        var logger = Logger(label: "e3dbkit.tests.nodes")
        logger.logLevel = .critical
        return logger
    }

    /// A service over `storage` whose bodies live in `files` (the drain and the maintenance pass under test).
    private static func service(_ storage: any ServerStorage, _ files: any FileBodyStore) -> E3DBService {
        E3DBService(
            storage: storage, files: files,
            configuration: ServerConfiguration(dataDirectory: URL(fileURLWithPath: "/")),
            secret: Data(repeating: 1, count: 32), logger: quiet())
    }

    /// A local store in a new directory, with a body stored under `id`.
    private static func localStore(holding ids: [RecordID]) async throws -> (LocalFileBodyStore, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-outbox-\(UUID())")
        let store = try LocalFileBodyStore(directory: directory)
        let body = Data("body".utf8)
        for id in ids {
            let chunks = AsyncThrowingStream<ByteBuffer, any Error> { continuation in
                continuation.yield(ByteBuffer(bytes: body))
                continuation.finish()
            }
            try await store.store(id: id, chunks: chunks, expectedSize: 4, expectedMD5: Hashes.md5(body))
        }
        return (store, directory)
    }

    private static func outboxCount(_ storage: any ServerStorage) async throws -> Int? {
        try await storage.statistics()["file_body_deletions"]
    }

    // MARK: The outbox

    @Test(
        "a deleted file record's id enters the outbox with the delete; claims lease it; finish removes it",
        arguments: Backend.allCases)
    func deletesEnterTheOutbox(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let file = try await storage.insertRecord(Self.fileRecord())
            var plain = Self.fileRecord()
            plain.fileMetaJSON = nil
            plain = try await storage.insertRecord(plain)
            #expect(try await storage.deleteRecord(id: file.recordID, expectedVersion: "other") == .conflict)
            #expect(try await Self.outboxCount(storage) == 0, "a refused delete enqueues nothing")
            guard case .done = try await storage.deleteRecord(id: file.recordID, expectedVersion: "v1"),
                case .done = try await storage.deleteRecord(id: plain.recordID, expectedVersion: nil)
            else {
                Issue.record("the deletes did not happen")
                return
            }
            #expect(try await Self.outboxCount(storage) == 1, "only the file record's body is to remove")
            #expect(
                try await storage.claimBodyDeletions(now: 10, leaseUntil: 100, limit: 10, only: nil) == [file.recordID])
            #expect(
                try await storage.claimBodyDeletions(now: 50, leaseUntil: 150, limit: 10, only: nil) == [],
                "leased until 100")
            #expect(
                try await storage.claimBodyDeletions(now: 100, leaseUntil: 200, limit: 10, only: .random()) == [])
            #expect(
                try await storage.claimBodyDeletions(now: 100, leaseUntil: 200, limit: 10, only: file.recordID)
                    == [file.recordID], "a lease that ended is claimed again")
            try await storage.finishBodyDeletions([file.recordID])
            #expect(try await Self.outboxCount(storage) == 0)
            #expect(try await storage.claimBodyDeletions(now: 1_000, leaseUntil: 2_000, limit: 10, only: nil) == [])
        }
    }

    @Test(
        "an expired pending file's body goes through the outbox; a drain removes it and empties the outbox",
        arguments: Backend.allCases)
    func expiredPendingFilesAndTheDrain(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let old = Self.pendingFile(created: 100)
            let young = Self.pendingFile(created: 5_000)
            for p in [old, young] { try await storage.insertPendingFile(p) }
            let (store, directory) = try await Self.localStore(holding: [old.pendingID, young.pendingID])
            defer { try? FileManager.default.removeItem(at: directory) }
            #expect(try await storage.purgeExpired(now: 2_000, pendingCreatedBefore: 1_000) == [old.pendingID])
            #expect(try await Self.outboxCount(storage) == 1)
            #expect(try store.size(id: old.pendingID) == 4, "the purge itself removes no body")

            let service = Self.service(storage, store)
            #expect(try await service.drainBodyDeletions() == 1)
            #expect(throws: E3DBError.self) { try store.size(id: old.pendingID) }
            #expect(try store.size(id: young.pendingID) == 4)
            #expect(try await Self.outboxCount(storage) == 0)
        }
    }

    @Test(
        "a drain whose store is unreachable keeps the row, leased; a later drain removes the body",
        arguments: Backend.allCases)
    func aFailedRemovalStaysForALaterDrain(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let file = try await storage.insertRecord(Self.fileRecord())
            _ = try await storage.deleteRecord(id: file.recordID, expectedVersion: nil)
            // An S3 store on a port where nothing listens (connections refused).
            let unreachable = S3FileBodyStore(
                options: try S3Options(
                    endpoint: "http://127.0.0.1:1", bucket: "e3db",
                    credentials: S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "secret")))
            let started = ContinuousClock.now
            #expect(try await Self.service(storage, unreachable).drainBodyDeletions() == 0)
            let elapsed = ContinuousClock.now - started
            // A bound, not the deadline itself (ObjectStoreTests times the 503): the claim and the finish run on a
            // storage that a fully loaded CI machine slows (13.7 s once against 8 s).
            #expect(elapsed < .seconds(20), "an unreachable store answers within a bounded time (\(elapsed))")
            #expect(try await Self.outboxCount(storage) == 1, "the failed removal stays in the outbox")

            let (store, directory) = try await Self.localStore(holding: [file.recordID])
            defer { try? FileManager.default.removeItem(at: directory) }
            let reachable = Self.service(storage, store)
            #expect(try await reachable.drainBodyDeletions() == 0, "leased: the lease is the backoff")
            let afterLease = APITimestamp.nowMicros() + E3DBService.bodyDeletionLease + 1_000_000
            #expect(try await reachable.drainBodyDeletions(now: afterLease) == 1)
            #expect(throws: E3DBError.self) { try store.size(id: file.recordID) }
            #expect(try await Self.outboxCount(storage) == 0)
        }
    }

    @Test("concurrent drains (four processes' storages) never claim the same row", arguments: Backend.allCases)
    func concurrentClaimsAreDisjoint(_ backend: Backend) async throws {
        try await withStorage(backend) { fixture, storage in
            for _ in 0..<200 { try await storage.insertPendingFile(Self.pendingFile(created: 1)) }
            let purged = try await storage.purgeExpired(now: 0, pendingCreatedBefore: 2)
            #expect(purged.count == 200)
            let others = try (0..<3).map { _ in try fixture.open() }
            // Closed, their pools stopped, before the test ends, whatever happens: a pool left running after the
            // suite's PostgreSQL stops keeps connecting to its port, which a later test's server may have taken.
            let claims = try await running(others) { try await Self.claimAll([storage] + others) }
            let all = claims.flatMap { $0 }
            #expect(all.count == 200, "every row claimed once: \(all.count) claims")
            #expect(Set(all) == Set(purged))
        }
    }

    /// Each storage claims batches of 7 at once with the others until the outbox has no unleased row left.
    private static func claimAll(_ instances: [any ServerStorage]) async throws -> [[RecordID]] {
        try await withThrowingTaskGroup(of: [RecordID].self) { group in
            for instance in instances {
                group.addTask {
                    var mine: [RecordID] = []
                    while true {
                        let batch = try await instance.claimBodyDeletions(
                            now: 10, leaseUntil: 1_000, limit: 7, only: nil)
                        if batch.isEmpty { return mine }
                        mine += batch
                    }
                }
            }
            return try await group.reduce(into: [[RecordID]]()) { $0.append($1) }
        }
    }

    // MARK: Nonces and clocks

    @Test(
        "TSV1 nonces are kept the window, the largest accepted skew and an hour past their expiry",
        arguments: Backend.allCases)
    func noncesOutliveTheAcceptedSkew(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let configuration = ServerConfiguration(dataDirectory: URL(fileURLWithPath: "/"))
            let retention = E3DBService.expiryRetention(configuration)
            #expect(retention == (configuration.tsv1Window + configuration.maximumClockSkew + 3600) * 1_000_000)
            let expires: Int64 = 1_000_000_000_000
            #expect(try await storage.useNonce("n", expires: expires, now: expires - 1))
            // A pass at (node time) `expires + retention - 1` keeps it: a replay is still refused.
            _ = try await storage.purgeExpired(now: expires + retention - 1 - retention, pendingCreatedBefore: 0)
            #expect(try await storage.statistics()["tsv1_nonces"] == 1)
            #expect(try await !storage.useNonce("n", expires: expires, now: expires - 1))
            _ = try await storage.purgeExpired(now: expires + retention + 1 - retention, pendingCreatedBefore: 0)
            #expect(try await storage.statistics()["tsv1_nonces"] == 0)
        }
    }

    @Test("the node's clock against PostgreSQL's clock_timestamp(): refused above the maximum, fine below")
    func clockCheck() async throws {
        try await withStorage(.postgres) { _, storage in
            let logger = Self.quiet()
            func reading(_ shift: Int64) async throws -> ClockCheck {
                try #require(try await ClockCheck.read(storage, now: { APITimestamp.nowMicros() + shift }))
            }
            // One machine: the offset is within the reading's own uncertainty, half its round trip (the node's
            // reading is the midpoint; on a loaded machine the answer can wait seconds for a thread), plus 1 s.
            let readStart = APITimestamp.nowMicros()
            let even = try await reading(0)
            let roundTrip = APITimestamp.nowMicros() - readStart
            #expect(
                abs(even.offset) < 1_000_000 + roundTrip / 2,
                "one machine: \(even.offset) µs, \(roundTrip) µs round trip")
            try even.verify(maximumSkew: 30, logger: logger)
            try await reading(2_000_000).verify(maximumSkew: 30, logger: logger)  // a warning only
            for shift: Int64 in [45_000_000, -45_000_000] {
                let skewed = try await reading(shift)
                do {
                    try skewed.verify(maximumSkew: 30, logger: logger)
                    Issue.record("a skew of \(shift) µs was accepted")
                } catch let error as E3DBError {
                    #expect(error.code == .clockSkew)
                    #expect(error.message.contains(shift > 0 ? "s ahead" : "s behind"), "\(error.message)")
                    #expect(error.message.contains("this node's clock reads 20"), "\(error.message)")
                    #expect(error.message.contains("the database's (clock_timestamp()) 20"), "\(error.message)")
                    #expect(error.message.contains("more than the 30 s"), "\(error.message)")
                }
            }

            // A maintenance pass on a skewed node is skipped: the expired pending file stays.
            let old = Self.pendingFile(created: 1)
            try await storage.insertPendingFile(old)
            let (store, directory) = try await Self.localStore(holding: [])
            defer { try? FileManager.default.removeItem(at: directory) }
            let service = Self.service(storage, store)
            await service.maintain(nodeClock: { APITimestamp.nowMicros() + 45_000_000 })
            #expect(try await storage.pendingFile(id: old.pendingID) != nil, "a skewed node skips the pass")
            await service.maintain()
            #expect(try await storage.pendingFile(id: old.pendingID) == nil)
            #expect(try await Self.outboxCount(storage) == 0, "purged and drained in one pass")
        }
        try await withStorage(.sqlite) { _, storage in
            let reading = try await ClockCheck.read(storage, now: { APITimestamp.nowMicros() })
            #expect(reading == nil, "no other clock")
        }
    }

    // MARK: Migrations and administrative commands

    /// `psql` of the PostgreSQL installation running `sql` on `url`'s database (the password in `PGPASSWORD`, not
    /// in argv); its output, unaligned, without the final newline.
    private static func psql(_ url: String, _ sql: String) async throws -> String {
        let root = "/usr/lib/postgresql"
        let version = try #require(
            try FileManager.default.contentsOfDirectory(atPath: root).sorted().last {
                FileManager.default.isExecutableFile(atPath: "\(root)/\($0)/bin/psql")
            })
        let parts = try #require(URLComponents(string: url))
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "\(root)/\(version)/bin/psql"),
            [
                "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", parts.host ?? "", "-p", String(parts.port ?? 5432),
                "-U", parts.user ?? "", "-d", String(parts.path.dropFirst()), "-c", sql,
            ], environment: ["PGPASSWORD": parts.password ?? ""])
        guard result.status == 0 else {
            throw E3DBError(.storageFailed, "psql failed: \(result.stderr)")
        }
        return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// How many other sessions hold a lock on `records` (psql's output).
    private static func recordsLockHolders(_ url: String) async throws -> String {
        try await psql(
            url,
            """
            SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
            WHERE c.relname = 'records' AND l.granted AND l.pid <> pg_backend_pid()
            """)
    }

    /// Holds `LOCK TABLE records` in another session (psql) for `seconds`, once the lock is granted.
    private static func holdRecordsLock(_ url: String, seconds: Int) async throws -> Task<String, any Error> {
        let holder = Task {
            try await psql(url, "BEGIN; LOCK TABLE records IN ACCESS SHARE MODE; SELECT pg_sleep(\(seconds)); COMMIT;")
        }
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            if try await recordsLockHolders(url) == "1" { return holder }
            try await Task.sleep(for: .milliseconds(50))
        }
        holder.cancel()
        throw E3DBError(.storageUnavailable, "the other session did not lock records within 15 s")
    }

    @Test(
        "a migration that meets a table lock of another session retries under lock_timeout: fails typed, or completes")
    func migrationsMeetingALock() async throws {
        guard let url = try await PostgresTestServer.newDatabase() else { return }
        let storage = try PostgresStorage(
            url: url, maximumConnections: 4, operationTimeout: .seconds(60), logger: Self.quiet())
        try await storage.running {
            try await storage.migrate()
            let withColumn =
                PostgresStorage.migrations + [
                    .init(
                        version: 1_001, name: "test column",
                        statements: ["ALTER TABLE records ADD COLUMN test_column text"])
                ]
            var limits = PostgresStorage.MigrationLimits()
            limits.lockTimeout = .milliseconds(300)
            limits.pause = .milliseconds(200)
            limits.attempts = 2

            // The lock held throughout: two attempts, then a typed failure while it is still held.
            let holder = try await Self.holdRecordsLock(url, seconds: 60)
            let started = ContinuousClock.now
            do {
                try await storage.migrate(withColumn, limits: limits)
                Issue.record("the migration passed a table lock held elsewhere")
            } catch let error as E3DBError {
                #expect(error.code == .storageMigrationBlocked, "\(error)")
                #expect(error.message.contains("migration 1001 could not lock a table"), "\(error.message)")
                #expect(error.message.contains("in 2 attempts"), "\(error.message)")
            }
            #expect(ContinuousClock.now - started < .seconds(30))
            #expect(try await Self.recordsLockHolders(url) == "1", "it gave up while the other session held the lock")
            _ = try await Self.psql(
                url,
                """
                SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                WHERE c.relname = 'records' AND l.granted AND l.pid <> pg_backend_pid()
                """)
            _ = try? await holder.value  // psql reports its session's end

            // The lock held for two seconds: retried until it goes, then applied.
            limits.attempts = 40
            let shortHolder = try await Self.holdRecordsLock(url, seconds: 2)
            let waited = ContinuousClock.now
            try await storage.migrate(withColumn, limits: limits)
            #expect(ContinuousClock.now - waited >= .milliseconds(300), "it met the lock at least once")
            _ = try await shortHolder.value
            #expect(try await Self.psql(url, "SELECT count(*) FROM schema_migrations WHERE version = 1001") == "1")
            // This build does not know migration 1001: its administrative commands refuse the schema.
            do {
                try await storage.checkSchema()
                Issue.record("a schema with an unknown migration was accepted")
            } catch let error as E3DBError {
                #expect(error.code == .storageSchemaTooNew)
                #expect(error.message.contains("1001 (test column)"), "\(error.message)")
            }
        }
    }

    @Test(
        "administrative commands do not migrate: on an unmigrated database they refuse, saying to run migrate",
        arguments: Backend.allCases)
    func administrativeCommandsDoNotMigrate(_ backend: Backend) async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-admin-\(UUID())")
        defer { try? FileManager.default.removeItem(at: data) }
        var environment: [String: String] = [:]
        if backend == .postgres {
            guard let url = try await PostgresTestServer.newDatabase() else { return }
            environment["E3DBKIT_POSTGRES_URL"] = url
        }
        let storage = ["--data", data.path]
        let client = UUID().uuidString.lowercased()
        for command in [
            ["token", "create"], ["stats"], ["client", "disable", "--client-id", client],
            ["backup-client", "--client-id", client],
        ] {
            let refused = try await ChildProcess.run(ServerProcess.binary, command + storage, environment: environment)
            #expect(refused.status != 0, "\(command)")
            #expect(refused.stderr.contains("run `e3dbkit-server migrate` first"), "\(command): \(refused.stderr)")
        }
        // Still unmigrated: nothing was applied.
        let opened: any ServerStorage =
            try environment["E3DBKIT_POSTGRES_URL"].map {
                try PostgresStorage(url: $0, operationTimeout: .seconds(60), logger: Self.quiet())
            } ?? SQLiteStorage(directory: data)
        do {
            try await opened.running { try await opened.checkSchema() }
            Issue.record("the administrative commands migrated")
        } catch {
            let error = try #require(error as? E3DBError)
            #expect(error.code == .storageSchemaTooOld, "\(error)")
            #expect(error.message.contains(backend == .postgres ? "1 (initial schema)" : "v1, v2"), "\(error.message)")
        }

        let migrated = try await ChildProcess.run(ServerProcess.binary, ["migrate"] + storage, environment: environment)
        #expect(migrated.status == 0, "\(migrated.stderr)")
        let token = try await ChildProcess.run(
            ServerProcess.binary, ["token", "create"] + storage, environment: environment)
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines).count == 64)
        let stats = try await ChildProcess.run(ServerProcess.binary, ["stats"] + storage, environment: environment)
        #expect(stats.status == 0, "\(stats.stderr)")
        #expect(stats.stdoutText.contains("file_body_deletions"), "\(stats.stdoutText)")
    }

    // MARK: A server process

    @Test("a server drains a deleted body at once, and an expired uncommitted body at its next maintenance pass")
    func serverDrainsTheOutbox() async throws {
        let first = try await ServerProcess.start()
        defer { first.stop(removingData: false) }  // nothing when it already ended
        let data = first.data
        defer { try? FileManager.default.removeItem(at: data) }
        let alice = try await first.register("alice")
        let scratch = try Scratch()
        let input = try scratch.file("in", count: 64 << 10)
        let record = try await alice.writeFile(type: "blob", path: input)
        let id = try #require(record.id).uuidString.lowercased()
        let bodies = data.appendingPathComponent("files")
        #expect(FileManager.default.fileExists(atPath: bodies.appendingPathComponent(id).path))
        try await alice.delete(try #require(record.id), version: try #require(record.meta.version))
        #expect(
            !FileManager.default.fileExists(atPath: bodies.appendingPathComponent(id).path),
            "the node that handled the delete drained its body at once")

        // A body uploaded and never committed (the commit is dropped on the way).
        let uncommitted = try E3DBClient(identity: alice.identity, transport: UncommittedTransport())
        await #expect(throws: (any Error).self) { _ = try await uncommitted.writeFile(type: "blob", path: input) }
        let stored = try FileManager.default.contentsOfDirectory(atPath: bodies.path).filter { $0 != "tmp" }
        #expect(stored.count == 1, "\(stored)")
        await first.stopped(removingData: false)

        // Its pending file aged past its lifetime (as a day would): the pass at start purges it and drains its body.
        try SQLiteEdits.execute(
            data.appendingPathComponent("server.sqlite").path,
            "UPDATE pending_files SET created = 1, upload_started = 1")
        let second = try await ServerProcess.start(data: data)
        defer { second.stop(removingData: false) }
        let deadline = ContinuousClock.now + .seconds(10)
        var left = stored
        while !left.isEmpty, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            left = try FileManager.default.contentsOfDirectory(atPath: bodies.path).filter { $0 != "tmp" }
        }
        #expect(left.isEmpty, "the expired pending file's body went through the outbox: \(left)")
        let stats = try await ServerProcess.command(["stats", "--data", data.path])
        #expect(stats.contains(#""file_body_deletions":0"#), "\(stats)")
        #expect(stats.contains(#""pending_files":0"#), "\(stats)")
        await second.stopped(removingData: false)
    }
}

/// A transport that drops a file's commit (`PATCH …/v1/storage/files/ID`) and passes everything else: the body is
/// uploaded and its pending file stays uncommitted.
private struct UncommittedTransport: E3DBTransport {
    let inner: any E3DBTransport = AsyncHTTPClientTransport()

    func send(_ request: HTTPRequest, body: Data?, timeout: Duration, maxResponseSize: Int) async throws
        -> (Data, HTTPResponse)
    {
        if request.method == .patch, request.path?.contains("/v1/storage/files/") == true {
            throw E3DBError(.serviceUnavailable, "the commit was dropped by the test")
        }
        return try await inner.send(request, body: body, timeout: timeout, maxResponseSize: maxResponseSize)
    }

    func upload(_ request: HTTPRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.upload(request, bodyPath: bodyPath, size: size, timeout: timeout)
    }

    func download(_ request: HTTPRequest, timeout: Duration, receive: (Data) async throws -> Void) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.download(request, timeout: timeout, receive: receive)
    }
}
