import E3DBPrimitives
import E3DBServer
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Logging
import Testing

/// The storage backends every test runs against.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }
}

/// Where one test's storage lives: `open()` gives another instance on the same data (as another process would).
struct StorageFixture: Sendable {
    let backend: Backend
    let open: @Sendable () throws -> any ServerStorage
    let cleanup: @Sendable () -> Void

    static func make(_ backend: Backend) async throws -> StorageFixture? {
        switch backend {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("e3dbkit-storage-\(UUID().uuidString.lowercased())")
            return StorageFixture(
                backend: backend, open: { try SQLiteStorage(directory: directory) },
                cleanup: { try? FileManager.default.removeItem(at: directory) })
        case .postgres:
            guard let url = try await PostgresTestServer.newDatabase() else { return nil }
            let logger = quietLogger(.warning)  // the pool's connection events at close are noise here
            return StorageFixture(
                backend: backend,
                open: {
                    // A generous call deadline: these tests check storage semantics, not timeouts, and a starved
                    // 2-core test run must not turn a slow call into a failure.
                    try PostgresStorage(
                        url: url, maximumConnections: 8, operationTimeout: .seconds(600), logger: logger)
                }, cleanup: {})
        }
    }
}

/// Runs `body` with a migrated storage of `backend` (nothing when the backend is not installed), then closes it.
func withStorage(
    _ backend: Backend,
    _ body: (StorageFixture, any ServerStorage) async throws -> Void
) async throws {
    guard let fixture = try await StorageFixture.make(backend) else { return }
    defer { fixture.cleanup() }
    let storage = try fixture.open()
    try await storage.running {
        try await storage.migrate()
        try await body(fixture, storage)
    }
}

/// Runs `body` with the background work of `storages` running (`ServerStorage.running`, one inside the other): each
/// is closed, and its background work over, when this returns.
func running<T>(_ storages: [any ServerStorage], _ body: () async throws -> T) async throws -> T {
    guard let first = storages.first else { return try await body() }
    return try await first.running { try await running(Array(storages.dropFirst()), body) }
}

func quietLogger(_ level: Logger.Level) -> Logger {
    var logger = Logger(label: "e3dbkit.tests.postgres")
    logger.logLevel = level
    return logger
}

private let alice = ClientID("00000000-0000-4000-8000-00000000000a")!
private let bob = ClientID("00000000-0000-4000-8000-00000000000b")!
private let carol = ClientID("00000000-0000-4000-8000-00000000000c")!

/// A new random id of the kind the context needs.
private func uuid<Kind: IdentifierKind>() -> Identifier<Kind> { .random() }

private func hash(_ text: String) -> Data { Data(text.utf8) + Data(repeating: 0, count: 32 - min(32, text.utf8.count)) }

private func recordRow(
    _ id: RecordID = uuid(), writer: ClientID, user: ClientID? = nil, type: String = "t1",
    version: String = "v1"
) -> RecordRow {
    RecordRow(
        recordID: id, writerID: writer, userID: user ?? writer, type: type, plainJSON: #"{"p":"1"}"#,
        dataJSON: #"{"f":"cipher"}"#, recSig: nil, fileMetaJSON: nil, created: 100, lastModified: 100,
        version: version)
}

private func clientRow(_ id: ClientID, apiKeyID: String, token: String = "token") -> ClientRow {
    ClientRow(
        clientID: id, name: "client \(id.text.suffix(1))", publicKey: "pk-\(id)", signingKey: nil, apiKeyID: apiKeyID,
        apiSecretHash: hash("secret \(id)"), registrationTokenHash: hash(token), created: 5)
}

extension ServerStorage {
    /// Writes a policy row as given (a fixture: the permissions through ``ServerStorage/changePolicy``).
    func upsertPolicy(_ p: PolicyRow) async throws {
        try await changePolicy(p.tuple, read: p.canRead, authorize: p.canAuthorize, by: p.authorizedBy)
    }
}

/// Registers a new client (random id and API key id) with the registration token `token`.
private func register(_ storage: any ServerStorage, token: String) async throws -> Bool {
    try await storage.registerClient(
        clientRow(uuid(), apiKeyID: UUID().lowercasedString + UUID().lowercasedString, token: token))
}

private func noteRow(_ id: NoteID = uuid(), name: String? = nil, maxViews: Int? = nil, expiresAt: Int64? = nil)
    -> NoteRow
{
    NoteRow(
        noteID: id, idString: name, writerClientID: alice, recipientSigningKey: "rk", writerSigningKey: "wk",
        maxViews: maxViews, views: 0, expiresAt: expiresAt, created: 10, bodyJSON: #"{"note_id":"\#(id)"}"#)
}

private func policyRow(
    writer: ClientID, user: ClientID? = nil, reader: ClientID, type: String = "t1", read: Bool = true,
    authorize: Bool = false, by: ClientID? = nil
) -> PolicyRow {
    PolicyRow(
        tuple: AccessTuple(writerID: writer, userID: user ?? writer, readerID: reader, type: type),
        canRead: read, canAuthorize: authorize, authorizedBy: by)
}

@Suite("Server storage (SQLite and PostgreSQL)", .postgresServer)
struct StorageTests {
    @Test func postgresURLsAreCheckedAndNeverShowThePassword() async throws {
        let storage = try PostgresStorage(
            url: "postgresql://e3db:p%40ss%2Fw0rd@db.example:6543/e3db_prod?sslmode=disable")
        #expect(storage.redactedURL == "postgres://e3db@db.example:6543/e3db_prod")
        try await storage.close()
        let defaults = try PostgresStorage(url: "postgres://e3db:pw@[::1]")
        #expect(defaults.redactedURL == "postgres://e3db@[::1]:5432/e3db")
        try await defaults.close()
        for bad in [
            "mysql://e3db:hunter2@host/db", "postgres://host/db", "postgres://e3db:hunter2@/db",
            "postgres://e3db:hunter2@host/db?sslmode=verify", "postgres://e3db:hunter2@host/db?x=1",
            "postgres://e3db:hunter2@host:70000/db", "postgres://e3db:hunter2@host/db/more", "not a url",
        ] {
            do {
                _ = try PostgresStorage(url: bad)
                Issue.record("accepted \(bad)")
            } catch let error as E3DBError {
                #expect(error.code == .invalidStorageConfiguration)
                #expect(!error.message.contains("hunter2"), "the password leaked: \(error.message)")
            }
        }
    }

    @Test func anUnreachablePostgresServerIsAnErrorWithoutThePassword() async throws {
        // Port 1 of the loopback interface: nothing listens there.
        let quiet = quietLogger(.critical)  // the pool logs every failed connection attempt
        let storage = try PostgresStorage(
            url: "postgres://e3db:hunter2@127.0.0.1:1/e3db",
            operationTimeout: .seconds(2), logger: quiet)
        let error = await #expect(throws: E3DBError.self) { try await storage.running { try await storage.migrate() } }
        #expect(error?.code == .storageUnavailable)
        #expect(error?.message.contains("hunter2") == false)
        #expect(error?.message.contains("127.0.0.1:1") == true)
    }

    @Test(arguments: Backend.allCases)
    func migrationsAreIdempotentAndKeepTheSecret(_ backend: Backend) async throws {
        try await withStorage(backend) { fixture, storage in
            let secret = try await storage.serverSecret()
            #expect(secret.count == 32)
            try await storage.migrate()
            #expect(try await storage.serverSecret() == secret)
            let stats = try await storage.statistics()
            #expect(stats.count == 10)
            #expect(stats.values.allSatisfy { $0 == 0 })
            // A second instance (another process) migrating the same database changes nothing.
            let other = try fixture.open()
            try await other.running {
                try await other.migrate()
                #expect(try await other.serverSecret() == secret)
            }
        }
    }

    @Test(arguments: Backend.allCases)
    func processesStartingTogetherMigrateOnce(_ backend: Backend) async throws {
        guard let fixture = try await StorageFixture.make(backend) else { return }
        defer { fixture.cleanup() }
        let instances = try (0..<4).map { _ in try fixture.open() }
        try await running(instances) {
            let secrets = try await withThrowingTaskGroup(of: Data.self) { group in
                for storage in instances {
                    group.addTask {
                        try await storage.migrate()
                        return try await storage.serverSecret()
                    }
                }
                return try await group.reduce(into: Set<Data>()) { $0.insert($1) }
            }
            #expect(secrets.count == 1, "one secret, created by the one migration that ran")
            #expect(try await instances[0].statistics().values.allSatisfy { $0 == 0 })
        }
    }

    @Test(arguments: Backend.allCases)
    func registrationTokensAndBackupClient(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            try await storage.createRegistrationToken(hash: hash("two"), uses: 2, created: 1)
            try await storage.createRegistrationToken(hash: hash("unlimited"), uses: nil, created: 1)
            try await storage.createRegistrationToken(hash: hash("none"), uses: 0, created: 1)
            #expect(try await register(storage, token: "two"))
            #expect(try await register(storage, token: "two"))
            #expect(try await !register(storage, token: "two"))
            for _ in 0..<5 { #expect(try await register(storage, token: "unlimited")) }
            #expect(try await !register(storage, token: "none"))
            #expect(try await !register(storage, token: "unknown"))
            #expect(try await storage.statistics()["clients"] == 7)
            #expect(try await storage.registrationTokenExists(hash: hash("two")))
            #expect(try await !storage.registrationTokenExists(hash: hash("unknown")))
            await #expect(throws: (any Error).self) {
                try await storage.createRegistrationToken(hash: hash("two"), uses: 1, created: 2)
            }

            #expect(try await storage.backupClientID() == nil)
            try await storage.setBackupClientID(alice)
            #expect(try await storage.backupClientID() == alice)
            try await storage.setBackupClientID(bob)
            #expect(try await storage.backupClientID() == bob)
        }
    }

    @Test(arguments: Backend.allCases)
    func clients(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            try await storage.createRegistrationToken(hash: hash("token"), uses: 3, created: 0)
            var a = clientRow(alice, apiKeyID: String(repeating: "a", count: 64))
            a.signingKey = "sk-a"
            #expect(try await storage.registerClient(a))
            #expect(try await storage.registerClient(clientRow(bob, apiKeyID: String(repeating: "b", count: 64))))
            #expect(try await storage.client(id: alice) == a)
            #expect(try await storage.client(apiKeyID: String(repeating: "a", count: 64)) == a)
            #expect(try await storage.client(id: carol) == nil)
            #expect(try await storage.client(apiKeyID: String(repeating: "c", count: 64)) == nil)
            try await storage.setHasBackup(clientID: alice)
            #expect(try await storage.client(id: alice)?.hasBackup == true)
            #expect(try await storage.client(id: bob)?.hasBackup == false)
            #expect(try await storage.setClientEnabled(id: bob, false))
            #expect(try await storage.client(id: bob)?.enabled == false)
            #expect(try await storage.client(id: alice)?.enabled == true)
            #expect(try await storage.setClientEnabled(id: bob, true))
            #expect(try await storage.client(id: bob)?.enabled == true)
            #expect(try await !storage.setClientEnabled(id: carol, false), "no such client")
            // The same id, or the same API key id, is refused, and such a failed registration uses nothing of the
            // token (one transaction): its third and last use still registers carol.
            await #expect(throws: (any Error).self) {
                try await storage.registerClient(clientRow(alice, apiKeyID: String(repeating: "d", count: 64)))
            }
            await #expect(throws: (any Error).self) {
                try await storage.registerClient(clientRow(carol, apiKeyID: String(repeating: "b", count: 64)))
            }
            #expect(try await storage.registerClient(clientRow(carol, apiKeyID: String(repeating: "c", count: 64))))
            // Policy changes touch only the permission they name: concurrent grants of read and authorizer both
            // hold (a whole-row write lost one of them).
            let tuple = AccessTuple(writerID: alice, userID: alice, readerID: bob, type: "t9")
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await storage.changePolicy(tuple, read: true, authorize: nil, by: alice) }
                group.addTask { try await storage.changePolicy(tuple, read: nil, authorize: true, by: alice) }
                try await group.waitForAll()
            }
            #expect(
                try await storage.policy(tuple)
                    == PolicyRow(
                        tuple: tuple, canRead: true, canAuthorize: true,
                        authorizedBy: alice))
            try await storage.changePolicy(tuple, read: nil, authorize: false, by: bob)
            #expect(
                try await storage.policy(tuple)
                    == PolicyRow(
                        tuple: tuple, canRead: true, canAuthorize: false,
                        authorizedBy: nil))
            #expect(try await !register(storage, token: "token"), "three uses")
        }
    }

    @Test(arguments: Backend.allCases)
    func accessTokensExpire(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            try await storage.insertAccessToken(hash: hash("tok"), clientID: alice, expires: 1_000)
            #expect(try await storage.accessTokenClient(hash: hash("tok"), now: 999) == alice)
            #expect(try await storage.accessTokenClient(hash: hash("tok"), now: 1_000) == nil)
            #expect(try await storage.accessTokenClient(hash: hash("other"), now: 0) == nil)
        }
    }

    @Test(arguments: Backend.allCases)
    func noncesRefuseReplaysUntilTheyExpire(_ backend: Backend) async throws {
        try await withStorage(backend) { (_, storage) async throws in
            #expect(try await storage.useNonce("n1", expires: 1_000, now: 500))
            #expect(try await !storage.useNonce("n1", expires: 1_500, now: 600))
            #expect(try await !storage.useNonce("n1", expires: 2_000, now: 1_000))
            #expect(try await storage.useNonce("n2", expires: 1_000, now: 600))
            // Expired: usable again, and then protected until its new expiry.
            #expect(try await storage.useNonce("n1", expires: 3_000, now: 1_001))
            #expect(try await !storage.useNonce("n1", expires: 3_000, now: 2_999))
            // n2 expired at 1_000: the maintenance pass removes it, and only it.
            #expect(try await storage.statistics()["tsv1_nonces"] == 2)
            #expect(try await storage.purgeExpired(now: 1_001, pendingCreatedBefore: 0).isEmpty)
            #expect(try await storage.statistics()["tsv1_nonces"] == 1)
            #expect(try await !storage.useNonce("n1", expires: 3_000, now: 1_002), "the unexpired nonce was kept")
        }
    }

    @Test(arguments: Backend.allCases)
    func accessKeysRefuseDuplicates(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let tuple = AccessTuple(writerID: alice, userID: alice, readerID: bob, type: "t1")
            let row = AccessKeyRow(
                tuple: tuple, eak: "eak-1", authorizerID: alice, authorizerPublicKey: "pk-a",
                signerID: alice, signerSigningKey: "sk-a")
            #expect(try await storage.accessKey(tuple) == nil)
            #expect(try await storage.insertAccessKey(row))
            var second = row
            second.eak = "eak-2"
            second.signerID = nil
            second.signerSigningKey = nil
            #expect(try await !storage.insertAccessKey(second), "a second key for the tuple is a 409")
            #expect(try await storage.accessKey(tuple) == row)
            let other = AccessTuple(writerID: alice, userID: alice, readerID: bob, type: "t2")
            #expect(try await storage.accessKey(other) == nil)
            try await storage.deleteAccessKey(tuple)
            #expect(try await storage.accessKey(tuple) == nil)
            #expect(try await storage.insertAccessKey(second))
            #expect(try await storage.accessKey(tuple) == second)
        }
    }

    @Test(arguments: Backend.allCases)
    func policiesAndTheFourListings(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let aliceReadsBob = policyRow(writer: bob, reader: alice)
            let carolReadsBob = policyRow(writer: bob, reader: carol, type: "t2")
            let aliceAuthorizesForBob = policyRow(
                writer: bob, reader: alice, type: "t3", read: false, authorize: true,
                by: bob)
            let bobReadsAlice = policyRow(writer: alice, reader: bob)
            for p in [aliceReadsBob, carolReadsBob, aliceAuthorizesForBob, bobReadsAlice] {
                try await storage.upsertPolicy(p)
            }
            #expect(try await storage.policy(aliceReadsBob.tuple) == aliceReadsBob)
            #expect(
                try await storage.policy(AccessTuple(writerID: bob, userID: bob, readerID: alice, type: "x")) == nil)

            #expect(try await storage.listPolicies(.outgoing, clientID: bob) == [aliceReadsBob, carolReadsBob])
            #expect(try await storage.listPolicies(.incoming, clientID: alice) == [aliceReadsBob])
            #expect(try await storage.listPolicies(.proxies, clientID: bob) == [aliceAuthorizesForBob])
            #expect(try await storage.listPolicies(.granted, clientID: alice) == [aliceAuthorizesForBob])
            #expect(try await storage.listPolicies(.granted, clientID: carol) == [])

            // An upsert replaces the tuple's permissions (and moves it to the end of the listings).
            var revoked = aliceReadsBob
            revoked.canRead = false
            try await storage.upsertPolicy(revoked)
            #expect(try await storage.policy(aliceReadsBob.tuple) == revoked)
            #expect(try await storage.listPolicies(.incoming, clientID: alice) == [])
            try await storage.upsertPolicy(aliceReadsBob)
            #expect(try await storage.listPolicies(.outgoing, clientID: bob) == [carolReadsBob, aliceReadsBob])

            try await storage.removeAuthorizations(userID: bob, writerID: bob, readerID: alice)
            #expect(try await storage.listPolicies(.proxies, clientID: bob) == [])
            let after = try await storage.policy(aliceAuthorizesForBob.tuple)
            #expect(after?.canAuthorize == false)
            #expect(after?.authorizedBy == nil)
            #expect(try await storage.policy(aliceReadsBob.tuple) == aliceReadsBob, "read permissions stay")
        }
    }

    @Test(arguments: Backend.allCases)
    func recordInsertUpdateDelete(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let first = try await storage.insertRecord(recordRow(writer: alice))
            let second = try await storage.insertRecord(recordRow(writer: alice))
            #expect(first.index >= 1)
            #expect(second.index > first.index)
            #expect(try await storage.record(id: first.recordID) == first)
            #expect(try await storage.record(id: uuid()) == nil)
            await #expect(throws: (any Error).self) {
                _ = try await storage.insertRecord(recordRow(first.recordID, writer: bob))
            }

            let missing: RecordID = uuid()
            #expect(
                try await storage.updateRecord(
                    id: missing, expectedVersion: "v1", plainJSON: nil, dataJSON: "{}",
                    recSig: nil, newVersion: "v2", now: 200) == .notFound)
            #expect(
                try await storage.updateRecord(
                    id: first.recordID, expectedVersion: "v0", plainJSON: nil,
                    dataJSON: "{}", recSig: nil, newVersion: "v2", now: 200) == .conflict)
            guard
                case .done(let updated) = try await storage.updateRecord(
                    id: first.recordID, expectedVersion: "v1", plainJSON: nil, dataJSON: #"{"f":"new"}"#, recSig: "sig",
                    newVersion: "v2", now: 50)
            else {
                Issue.record("the update with the right version failed")
                return
            }
            #expect(updated.version == "v2")
            #expect(updated.plainJSON == first.plainJSON, "a nil plain keeps the stored one")
            #expect(updated.dataJSON == #"{"f":"new"}"#)
            #expect(updated.recSig == "sig")
            #expect(updated.lastModified == 101, "last_modified moves forward even when the clock is behind")
            #expect(updated.index == first.index)
            #expect(try await storage.record(id: first.recordID) == updated)
            guard
                case .done(let replaced) = try await storage.updateRecord(
                    id: first.recordID, expectedVersion: "v2", plainJSON: #"{"p":"2"}"#, dataJSON: "{}", recSig: nil,
                    newVersion: "v3", now: 500)
            else {
                Issue.record("the second update failed")
                return
            }
            #expect(replaced.plainJSON == #"{"p":"2"}"#)
            #expect(replaced.recSig == nil)
            #expect(replaced.lastModified == 500)

            #expect(try await storage.deleteRecord(id: first.recordID, expectedVersion: "v2") == .conflict)
            #expect(try await storage.deleteRecord(id: first.recordID, expectedVersion: "v3") == .done(replaced))
            #expect(try await storage.record(id: first.recordID) == nil)
            #expect(try await storage.deleteRecord(id: first.recordID, expectedVersion: nil) == .notFound)
            #expect(try await storage.deleteRecord(id: second.recordID, expectedVersion: nil) == .done(second))
            let third = try await storage.insertRecord(recordRow(writer: alice))
            #expect(third.index > second.index, "indexes are never reused")
        }
    }

    @Test(arguments: Backend.allCases)
    func recordScopes(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            var a: [RecordRow] = []
            for _ in 0..<3 { a.append(try await storage.insertRecord(recordRow(writer: alice))) }
            let b1 = try await storage.insertRecord(recordRow(writer: bob, type: "t1"))
            let b2 = try await storage.insertRecord(recordRow(writer: bob, type: "t2"))
            let b1ForCarol = try await storage.insertRecord(recordRow(writer: bob, user: carol, type: "t1"))
            let c1 = try await storage.insertRecord(recordRow(writer: carol, type: "t1"))
            try await storage.upsertPolicy(policyRow(writer: bob, reader: alice, type: "t1"))
            try await storage.upsertPolicy(
                policyRow(
                    writer: carol, reader: alice, type: "t1", read: false,
                    authorize: true, by: carol))
            try await storage.upsertPolicy(policyRow(writer: bob, reader: carol, type: "t2"))

            func ids(_ scope: RecordScope, after: Int64 = 0, limit: Int = 100) async throws -> [RecordID] {
                try await storage.records(in: scope, afterIndex: after, limit: limit).map(\.recordID)
            }
            #expect(try await ids(RecordScope(caller: alice, includeShared: false)) == a.map(\.recordID))
            #expect(
                try await ids(RecordScope(caller: alice, includeShared: true))
                    == a.map(\.recordID) + [b1.recordID], "own records and those shared by a read policy")
            #expect(
                try await ids(RecordScope(caller: carol, includeShared: true))
                    == [b2.recordID, c1.recordID])
            #expect(try await ids(RecordScope(caller: alice, includeShared: true, writerIDs: [bob])) == [b1.recordID])
            #expect(
                try await ids(RecordScope(caller: alice, includeShared: true, writerIDs: [bob, carol]))
                    == [b1.recordID])
            #expect(
                try await ids(RecordScope(caller: bob, includeShared: false, userIDs: [carol]))
                    == [b1ForCarol.recordID])
            #expect(try await ids(RecordScope(caller: bob, includeShared: false, types: ["t2"])) == [b2.recordID])
            #expect(
                try await ids(
                    RecordScope(
                        caller: alice, includeShared: true,
                        recordIDs: [a[1].recordID, b1.recordID, b2.recordID]))
                    == [a[1].recordID, b1.recordID])
            #expect(try await ids(RecordScope(caller: alice, includeShared: false, types: ["none"])) == [])

            // Pagination by index.
            let all = try await storage.records(
                in: RecordScope(caller: alice, includeShared: true), afterIndex: 0,
                limit: 100)
            let page1 = try await storage.records(
                in: RecordScope(caller: alice, includeShared: true), afterIndex: 0,
                limit: 2)
            #expect(page1 == Array(all.prefix(2)))
            let last = try #require(page1.last)
            let page2 = try await storage.records(
                in: RecordScope(caller: alice, includeShared: true),
                afterIndex: last.index, limit: 2)
            #expect(page2 == Array(all.dropFirst(2).prefix(2)))
            #expect(try await ids(RecordScope(caller: alice, includeShared: true), after: b1.index) == [])
        }
    }

    @Test(
        "upload claims: one of concurrent claims wins, stale claims are taken over; expired pending files go",
        arguments: Backend.allCases)
    func uploadClaimsAndExpiredPendingFiles(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            func pending(created: Int64) -> PendingFileRow {
                PendingFileRow(
                    pendingID: uuid(), record: recordRow(writer: alice), checksum: "c", size: 1,
                    uploaded: false, created: created)
            }
            let old = pending(created: 100)
            let oldInUpload = pending(created: 200)
            let young = pending(created: 5_000)
            for p in [old, oldInUpload, young] { try await storage.insertPendingFile(p) }
            let wins = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await storage.claimUpload(pendingID: young.pendingID, now: 5_100, staleBefore: 1_000)
                            ? 1 : 0
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(wins == 1)
            #expect(try await !storage.claimUpload(pendingID: young.pendingID, now: 5_200, staleBefore: 5_100))
            #expect(
                try await storage.claimUpload(pendingID: young.pendingID, now: 5_300, staleBefore: 5_101),
                "a claim older than staleBefore is taken over")
            try await storage.releaseUpload(pendingID: young.pendingID)
            #expect(try await storage.claimUpload(pendingID: young.pendingID, now: 5_400, staleBefore: 0))
            #expect(try await storage.markUploaded(pendingID: young.pendingID))
            try await storage.releaseUpload(pendingID: young.pendingID)
            #expect(
                try await !storage.claimUpload(pendingID: young.pendingID, now: 5_500, staleBefore: 10_000),
                "an uploaded file is never claimed again")
            #expect(try await storage.claimUpload(pendingID: oldInUpload.pendingID, now: 1_500, staleBefore: 0))

            try await storage.insertAccessToken(hash: hash("old"), clientID: alice, expires: 1_000)
            try await storage.insertAccessToken(hash: hash("new"), clientID: alice, expires: 9_000)
            let expired = noteRow(expiresAt: 1_500)
            let lasting = noteRow(expiresAt: 3_000)
            let forever = noteRow()
            for note in [expired, lasting, forever] { #expect(try await storage.insertNote(note)) }
            #expect(try await storage.purgeExpired(now: 2_000, pendingCreatedBefore: 1_000) == [old.pendingID])
            #expect(try await storage.pendingFile(id: old.pendingID) == nil)
            #expect(try await storage.pendingFile(id: oldInUpload.pendingID) != nil, "its upload started since")
            #expect(try await storage.pendingFile(id: young.pendingID)?.uploaded == true)
            #expect(try await storage.statistics()["access_tokens"] == 1)
            #expect(try await storage.accessTokenClient(hash: hash("new"), now: 2_000) == alice)
            #expect(try await storage.note(id: expired.noteID) == nil, "an expired note is removed")
            #expect(try await storage.note(id: lasting.noteID) != nil)
            #expect(try await storage.note(id: forever.noteID) != nil)
        }
    }

    @Test(arguments: Backend.allCases)
    func pendingFilesCommitIntoRecords(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let before = try await storage.insertRecord(recordRow(writer: alice))
            let id: RecordID = uuid()
            var meta = recordRow(id, writer: alice, type: "file")
            meta.fileMetaJSON = #"{"size":10,"checksum":"abc","compression":"raw"}"#
            meta.recSig = "sig"
            meta.created = 7
            meta.lastModified = 7
            meta.version = ""
            let pending = PendingFileRow(
                pendingID: id, record: meta, checksum: "abc==", size: 10, uploaded: false,
                created: 7)
            try await storage.insertPendingFile(pending)
            #expect(try await storage.pendingFile(id: id) == pending)
            #expect(try await storage.pendingFile(id: uuid()) == nil)
            #expect(try await storage.markUploaded(pendingID: id))
            #expect(try await !storage.markUploaded(pendingID: uuid()), "no such pending file")
            #expect(try await storage.pendingFile(id: id)?.uploaded == true)

            let committed = try #require(try await storage.commitPendingFile(id: id, now: 900, version: "fv1"))
            #expect(committed.recordID == id)
            #expect(committed.index > before.index)
            #expect(committed.created == 900)
            #expect(committed.lastModified == 900)
            #expect(committed.version == "fv1")
            #expect(committed.fileMetaJSON == meta.fileMetaJSON)
            #expect(committed.recSig == "sig")
            #expect(try await storage.record(id: id) == committed)
            #expect(try await storage.pendingFile(id: id) == nil)
            #expect(try await storage.commitPendingFile(id: id, now: 901, version: "fv2") == nil)
            #expect(try await storage.commitPendingFile(id: uuid(), now: 901, version: "fv2") == nil)
        }
    }

    @Test(arguments: Backend.allCases)
    func notes(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let named = noteRow(name: "greeting")
            #expect(try await storage.insertNote(named))
            #expect(try await !storage.insertNote(noteRow(name: "greeting")), "names are unique")
            let unnamed1 = noteRow()
            #expect(try await storage.insertNote(unnamed1))
            #expect(try await storage.insertNote(noteRow()), "unnamed notes never collide")
            #expect(try await storage.note(id: named.noteID) == named)
            #expect(try await storage.note(name: "greeting") == named)
            #expect(try await storage.note(name: "other") == nil)
            #expect(try await storage.note(id: uuid()) == nil)

            // Views: unlimited, then limited (deleted at the last view), then expired.
            #expect(try await storage.viewNote(id: unnamed1.noteID, now: 20)?.views == 1)
            #expect(try await storage.viewNote(id: unnamed1.noteID, now: 20)?.views == 2)
            #expect(try await storage.note(id: unnamed1.noteID)?.views == 2)
            let limited = noteRow(maxViews: 2)
            #expect(try await storage.insertNote(limited))
            #expect(try await storage.viewNote(id: limited.noteID, now: 20)?.views == 1)
            #expect(try await storage.viewNote(id: limited.noteID, now: 20)?.views == 2)
            #expect(try await storage.note(id: limited.noteID) == nil)
            #expect(try await storage.viewNote(id: limited.noteID, now: 20) == nil)
            let expiring = noteRow(expiresAt: 100)
            #expect(try await storage.insertNote(expiring))
            #expect(try await storage.viewNote(id: expiring.noteID, now: 99)?.views == 1)
            #expect(try await storage.viewNote(id: expiring.noteID, now: 100) == nil)
            #expect(try await storage.note(id: expiring.noteID) == nil, "an expired note is deleted when viewed")
            let zeroMeansUnlimited = noteRow(maxViews: 0)
            #expect(try await storage.insertNote(zeroMeansUnlimited))
            for views in 1...3 {
                #expect(try await storage.viewNote(id: zeroMeansUnlimited.noteID, now: 0)?.views == views)
            }

            // Replace by name, then delete.
            let replacement = noteRow(name: "greeting", maxViews: 5)
            try await storage.replaceNote(replacement)
            #expect(try await storage.note(name: "greeting") == replacement)
            #expect(try await storage.note(id: named.noteID) == nil)
            let fresh = noteRow(name: "fresh")
            try await storage.replaceNote(fresh)
            #expect(try await storage.note(name: "fresh") == fresh)
            #expect(try await storage.deleteNote(id: replacement.noteID))
            #expect(try await !storage.deleteNote(id: replacement.noteID))
            #expect(try await storage.note(name: "greeting") == nil)
            #expect(try await storage.insertNote(noteRow(name: "greeting")), "a deleted note's name is free again")
        }
    }

    @Test(arguments: Backend.allCases)
    func statisticsCountRows(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            try await storage.createRegistrationToken(hash: hash("token"), uses: nil, created: 0)
            #expect(try await storage.registerClient(clientRow(alice, apiKeyID: String(repeating: "a", count: 64))))
            _ = try await storage.insertAccessKey(
                AccessKeyRow(
                    tuple: AccessTuple(writerID: alice, userID: alice, readerID: alice, type: "t"), eak: "e",
                    authorizerID: alice, authorizerPublicKey: "pk", signerID: nil, signerSigningKey: nil))
            try await storage.upsertPolicy(policyRow(writer: alice, reader: bob))
            try await storage.upsertPolicy(policyRow(writer: alice, reader: carol))
            for _ in 0..<3 { _ = try await storage.insertRecord(recordRow(writer: alice)) }
            try await storage.insertPendingFile(
                PendingFileRow(
                    pendingID: uuid(), record: recordRow(writer: alice),
                    checksum: "c", size: 1, uploaded: false, created: 0))
            _ = try await storage.insertNote(noteRow())
            try await storage.insertAccessToken(hash: hash("a"), clientID: alice, expires: 10)
            _ = try await storage.useNonce("n", expires: 10, now: 0)
            _ = try await storage.useNonce("m", expires: 10, now: 0)
            #expect(
                try await storage.statistics() == [
                    "clients": 1, "registration_tokens": 1, "access_keys": 1, "policies": 2, "records": 3,
                    "pending_files": 1, "notes": 1, "access_tokens": 1, "tsv1_nonces": 2, "file_body_deletions": 0,
                ])
        }
    }

    @Test(arguments: Backend.allCases)
    func concurrentUpdatesOfOneVersionHaveOneWinner(_ backend: Backend) async throws {
        try await withStorage(backend) { _, storage in
            let record = try await storage.insertRecord(recordRow(writer: alice))
            let outcomes = try await withThrowingTaskGroup(of: VersionedOutcome.self) { group in
                for i in 0..<8 {
                    group.addTask {
                        try await storage.updateRecord(
                            id: record.recordID, expectedVersion: "v1", plainJSON: nil,
                            dataJSON: #"{"writer":"\#(i)"}"#, recSig: nil,
                            newVersion: "v2-\(i)", now: 200)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let winners = outcomes.compactMap { if case .done(let r) = $0 { r } else { nil } }
            #expect(winners.count == 1)
            #expect(outcomes.filter { $0 == .conflict }.count == 7)
            #expect(try await storage.record(id: record.recordID) == winners.first)
        }
    }

    @Test(arguments: Backend.allCases)
    func twoInstancesShareTokensNoncesAndLimits(_ backend: Backend) async throws {
        try await withStorage(backend) { fixture, first in
            let second = try fixture.open()
            try await second.running {
                try await second.migrate()
                #expect(try await second.serverSecret() == first.serverSecret())

                try await first.insertAccessToken(hash: hash("shared"), clientID: alice, expires: 1_000)
                #expect(try await second.accessTokenClient(hash: hash("shared"), now: 10) == alice)
                #expect(try await first.useNonce("shared-nonce", expires: 1_000, now: 10))
                #expect(
                    try await !second.useNonce("shared-nonce", expires: 1_000, now: 20), "a replay on another process")

                // Both processes race for the same nonce, the same three registrations and the same three note views.
                try await first.createRegistrationToken(hash: hash("three"), uses: 3, created: 0)
                let note = noteRow(maxViews: 3)
                #expect(try await second.insertNote(note))
                let instances = [first, second]
                let (nonces, tokens, views) = try await withThrowingTaskGroup(of: (Int, Int, Int).self) { group in
                    for i in 0..<8 {
                        let storage = instances[i % 2]
                        group.addTask {
                            let nonce = try await storage.useNonce("raced", expires: 1_000, now: 10) ? 1 : 0
                            let token = try await register(storage, token: "three") ? 1 : 0
                            let view = try await storage.viewNote(id: note.noteID, now: 10) == nil ? 0 : 1
                            return (nonce, token, view)
                        }
                    }
                    return try await group.reduce(into: (0, 0, 0)) { $0 = ($0.0 + $1.0, $0.1 + $1.1, $0.2 + $1.2) }
                }
                #expect(nonces == 1)
                #expect(tokens == 3)
                #expect(views == 3)
                #expect(try await first.note(id: note.noteID) == nil)
            }
        }
    }
}
