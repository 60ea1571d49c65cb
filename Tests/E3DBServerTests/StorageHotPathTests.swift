import E3DBCanonicalJSON
import E3DBClient
import E3DBDocuments
import E3DBPrimitives
import E3DBServer
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Logging
import PostgresNIO
import Testing

/// The storage calls of the request hot paths, on both backends: the token lookup the bearer-token cache keeps,
/// the record read joined with its read check, and grouped record inserts.
extension StorageTests {
    private static let writer = ClientID("00000000-0000-4000-8000-0000000000a1")!
    private static let reader = ClientID("00000000-0000-4000-8000-0000000000b2")!
    private static let stranger = ClientID("00000000-0000-4000-8000-0000000000c3")!

    private static func row(
        _ id: RecordID = .random(), type: String = "t1", recSig: String? = nil,
        fileMeta: String? = nil
    ) -> RecordRow {
        RecordRow(
            recordID: id, writerID: writer, userID: writer, type: type, plainJSON: #"{"p":"\#(id)"}"#,
            dataJSON: #"{"f":"c"}"#, recSig: recSig, fileMetaJSON: fileMeta, created: 100, lastModified: 101,
            version: "v-\(id)")
    }

    @Test(arguments: Backend.allCases)
    func accessTokenReportsItsClientAndExpiry(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let hash = Data(repeating: 7, count: 32)
            try await storage.insertAccessToken(hash: hash, clientID: Self.writer, expires: 5_000)
            let found = try await storage.accessToken(hash: hash, now: 4_999)
            #expect(found?.clientID == Self.writer)
            #expect(found?.expires == 5_000, "the expiry is reported, so that the token cache may keep the token")
            #expect(try await storage.accessToken(hash: hash, now: 5_000) == nil, "expired")
            #expect(try await storage.accessToken(hash: Data(repeating: 8, count: 32), now: 0) == nil, "unknown")
        }
    }

    @Test(arguments: Backend.allCases)
    func recordReadableByChecksWriterAndReadPolicy(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let record = try await storage.insertRecord(Self.row(recSig: "sig"))
            let other = try await storage.insertRecord(Self.row(type: "t2"))
            try await storage.upsertPolicy(
                PolicyRow(
                    tuple: AccessTuple(writerID: Self.writer, userID: Self.writer, readerID: Self.reader, type: "t1"),
                    canRead: true, canAuthorize: false, authorizedBy: nil))
            try await storage.upsertPolicy(
                PolicyRow(
                    tuple: AccessTuple(writerID: Self.writer, userID: Self.writer, readerID: Self.stranger, type: "t1"),
                    canRead: false, canAuthorize: true, authorizedBy: Self.writer))
            #expect(try await storage.record(id: record.recordID, readableBy: Self.writer) == record)
            #expect(try await storage.record(id: record.recordID, readableBy: Self.reader) == record)
            #expect(
                try await storage.record(id: other.recordID, readableBy: Self.reader) == nil,
                "a read policy covers its own type only")
            #expect(
                try await storage.record(id: record.recordID, readableBy: Self.stranger) == nil,
                "an authorizer policy does not grant reading")
            #expect(try await storage.record(id: .random(), readableBy: Self.writer) == nil)
            try await storage.upsertPolicy(
                PolicyRow(
                    tuple: AccessTuple(writerID: Self.writer, userID: Self.writer, readerID: Self.reader, type: "t1"),
                    canRead: false, canAuthorize: false, authorizedBy: nil))
            #expect(try await storage.record(id: record.recordID, readableBy: Self.reader) == nil, "revoked")
        }
    }

    @Test(arguments: Backend.allCases)
    func concurrentReadsEachGetTheirOwnAnswer(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let shared = try await storage.insertRecord(Self.row(recSig: "sig"))
            let unshared = try await storage.insertRecord(Self.row(type: "t2", fileMeta: #"{"size":3}"#))
            try await storage.upsertPolicy(
                PolicyRow(
                    tuple: AccessTuple(writerID: Self.writer, userID: Self.writer, readerID: Self.reader, type: "t1"),
                    canRead: true, canAuthorize: false, authorizedBy: nil))
            let missing = RecordID.random()
            // (record id, reader, expected): the writer, a read policy, another type, a stranger, a missing record.
            let cases: [(RecordID, ClientID, RecordRow?)] = [
                (shared.recordID, Self.writer, shared), (shared.recordID, Self.reader, shared),
                (unshared.recordID, Self.writer, unshared), (unshared.recordID, Self.reader, nil),
                (shared.recordID, Self.stranger, nil), (missing, Self.writer, nil),
            ]
            // Many at once, on the pool's connections (the same record several times at once, readers mixed).
            let outcomes = try await withThrowingTaskGroup(of: (Int, RecordRow?).self) { group in
                for i in 0..<240 {
                    let (id, reader, _) = cases[i % cases.count]
                    group.addTask { (i, try await storage.record(id: id, readableBy: reader)) }
                }
                return try await group.reduce(into: [Int: RecordRow?]()) { $0[$1.0] = $1.1 }
            }
            #expect(outcomes.count == 240)
            for (i, outcome) in outcomes {
                let (id, reader, expected) = cases[i % cases.count]
                #expect(outcome == expected, "read \(i): \(id) by \(reader)")
            }
        }
    }

    @Test(arguments: Backend.allCases)
    func concurrentInsertsLandOnceEachAndADuplicateFailsAlone(_ backend: Backend) async throws {
        try await withStorage(backend) { fixture, storage in
            let second = try fixture.open()
            try await second.running {
                try await second.migrate()
                let rows = (0..<150).map { i in
                    Self.row(recSig: i % 3 == 0 ? nil : "sig-\(i)", fileMeta: i % 5 == 0 ? #"{"size":\#(i)}"# : nil)
                }
                var duplicate = Self.row(rows[0].recordID)
                duplicate.version = "duplicate"
                let instances = [storage, second]
                let outcomes = await withTaskGroup(of: (Int, RecordRow?).self) { group in
                    for (i, row) in (rows + [duplicate]).enumerated() {
                        let target = instances[i % 2]
                        group.addTask { (i, try? await target.insertRecord(row)) }
                    }
                    return await group.reduce(into: [Int: RecordRow?]()) { $0[$1.0] = $1.1 }
                }
                let stored = outcomes.compactMap { $0.value }
                #expect(stored.count == rows.count, "every distinct record lands and the duplicate id fails")
                #expect(Set(stored.map(\.index)).count == rows.count)
                #expect(stored.allSatisfy { $0.index > 0 })
                for (i, row) in rows.enumerated() {
                    let read = try await storage.record(id: row.recordID)
                    if let inserted = outcomes[i] ?? nil {
                        #expect(read == inserted, "what the insert returned is what is stored")
                    } else {
                        #expect(read?.version == "duplicate", "the one that lost the id is the duplicate")
                    }
                }
                #expect(try await storage.statistics()["records"] == rows.count)
            }
        }
    }

    @Test(
        "PostgreSQL: a call that waits behind a lock fails at its deadline, without the password, and the next one works",
        .timeLimit(.minutes(5)))
    func aPostgresCallPastItsDeadlineFails() async throws {
        guard let url = try await PostgresTestServer.newDatabase() else { return }
        var logger = Logger(label: "e3dbkit.tests.deadline")
        logger.logLevel = .critical
        // The schema is made by a storage with a generous deadline (tests run in parallel on 2 cores); the one
        // under test has 2 s for every call.
        let migrating = try PostgresStorage(
            url: url, maximumConnections: 1, operationTimeout: .seconds(120),
            logger: logger)
        try await migrating.running { try await migrating.migrate() }
        let storage = try PostgresStorage(
            url: url, maximumConnections: 4, operationTimeout: .seconds(2),
            logger: logger)
        let parts = try #require(URLComponents(string: url))
        let locker = try await PostgresConnection.connect(
            configuration: .init(
                host: try #require(parts.host), port: parts.port ?? 5432,
                username: try #require(parts.user), password: parts.password,
                database: String(parts.path.dropFirst()), tls: .disable),
            id: 1, logger: logger)
        do {
            try await storage.running {
                try await storage.migrate()
                let row = try await storage.insertRecord(Self.row())
                try await locker.query("BEGIN", logger: logger)
                try await locker.query("LOCK TABLE records IN ACCESS EXCLUSIVE MODE", logger: logger)
                let started = ContinuousClock.now
                do {
                    _ = try await storage.record(id: row.recordID, readableBy: Self.writer)
                    Issue.record("a read behind an exclusive lock answered")
                } catch let error as E3DBError {
                    #expect(error.code == .storageUnavailable)
                    #expect(error.message.contains("within"), "\(error.message)")
                    #expect(!error.message.contains(try #require(parts.password)), "no password in the error")
                }
                let waited = ContinuousClock.now - started
                // The lock is held until the ROLLBACK below, so any answer before it is the deadline's; the upper
                // bound only has to hold on a loaded 2-core machine.
                #expect(waited >= .seconds(2) && waited < .seconds(90), "failed after \(waited)")
                try await locker.query("ROLLBACK", logger: logger)
                #expect(try await storage.record(id: row.recordID, readableBy: Self.writer) == row)
            }
        } catch {
            try? await locker.close()
            throw error
        }
        try await locker.close()
    }

    @Test("SIGTERM: the server stops, then closes its storage (SQLite: the WAL checkpointed away) and exits 0")
    func shutdownClosesTheStorageAfterTheServer() async throws {
        let server = try await ServerProcess.start()
        defer { try? FileManager.default.removeItem(at: server.data) }
        let alice = try await server.register("alice")
        _ = try await alice.write(type: "contact", data: ["name": "before the shutdown"])
        let wal = server.data.appendingPathComponent("server.sqlite-wal").path
        #expect(FileManager.default.fileExists(atPath: wal), "the running server's WAL")
        server.process.signal(SIGTERM)
        let status = try await server.process.exit()
        #expect(status == 0 && !server.process.uncaughtSignal, "exit status \(status)")
        // SQLite removes the WAL when the last connection closes: the pool's (closed by `close()`) and the
        // checkpointer's (closed when the storage's background work ends).
        #expect(!FileManager.default.fileExists(atPath: wal), "a connection of the storage was left open")
    }

    @Test("SQLite: the WAL is checkpointed into the database file in the background")
    func sqliteCheckpointsInTheBackground() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("e3dbkit-checkpoint-\(UUID().uuidString.lowercased())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try SQLiteStorage(directory: directory)
        try await storage.running {
            try await storage.migrate()
            let file = directory.appendingPathComponent("server.sqlite").path
            func size() throws -> Int {
                (try FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.intValue ?? 0
            }
            // Let a first background checkpoint take the migrations, then write about 1 MiB of records at once.
            try await Task.sleep(for: .seconds(2))  // two ticks of the background checkpoints
            let before = try size()
            let body = String(repeating: "c", count: 4_000)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<256 {
                    group.addTask {
                        var row = Self.row()
                        row.dataJSON = #"{"f":"\#(body)"}"#
                        _ = try await storage.insertRecord(row)
                    }
                }
                try await group.waitForAll()
            }
            let deadline = ContinuousClock.now + .seconds(30)
            while try size() < before + 1_000_000, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try size() >= before + 1_000_000, "the records reached the database file from the WAL")
            #expect(try await storage.statistics()["records"] == 256)
        }
    }
}
