import E3DBClient
import E3DBKit
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import E3DBServer

/// The suite's TLS-only server (`.postgresTLSServer`): new databases, and its directory (`DIR/ca.crt`).
enum PostgresTLSTestServer {
    /// The directory of the running server; `nil` (after saying so loudly) when PostgreSQL is not installed.
    static func directory() -> String? {
        switch PostgresTestServer.current {
        case .running(let directory): return directory
        case .notInstalled:
            print("SKIPPED: PostgreSQL not installed (no /usr/lib/postgresql/*/bin/initdb); run scripts/setup.sh")
            return nil
        case nil:
            Issue.record("the TLS PostgreSQL test server was not started (the suite's trait did not run)")
            return nil
        }
    }

    /// A new empty database's URL without `sslmode` (postgres.sh's), and the server's directory.
    static func newDatabase() async throws -> (url: String, directory: String)? {
        guard let directory = directory(), let url = try await PostgresTestServer.newDatabase() else { return nil }
        return (url, directory)
    }
}

@Suite("PostgreSQL over TLS only: sslmode, fast typed failures, session timeouts", .serialized, .postgresTLSServer)
struct PostgresTLSTests {
    /// Connection failures are logged by the pool; they are what these tests provoke.
    static let quiet: Logger = {
        var logger = Logger(label: "e3dbkit.tests.postgres-tls")
        logger.logLevel = .critical
        return logger
    }()

    /// A check that must fail soon, not at a deadline: the error and how long it took. The storage's deadline is
    /// 300 s and the bound 60 s, so that a failure reported only at the deadline fails the check by minutes while a
    /// loaded 2-core machine (11.8 s seen in the full parallel run beside other builds) still passes.
    static func failure(
        _ url: String, operationTimeout: Duration = .seconds(300)
    ) async throws -> (error: E3DBError?, elapsed: Duration) {
        let storage = try PostgresStorage(url: url, operationTimeout: operationTimeout, logger: quiet)
        let start = ContinuousClock.now
        let error = await #expect(throws: E3DBError.self) { try await storage.running { try await storage.migrate() } }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .seconds(60), "took \(elapsed)")
        if let error { #expect(!error.message.contains(password(of: url)), "the password leaked: \(error.message)") }
        return (error, elapsed)
    }

    static func password(of url: String) -> String { URLComponents(string: url)?.password ?? "\u{0}" }

    @Test("sslmode and sslrootcert are read as libpq reads them; the rest is refused without the password")
    func urlParameters() async throws {
        guard let directory = PostgresTLSTestServer.directory() else { return }
        let ca = "\(directory)/ca.crt"
        for (query, mode) in [
            ("", "prefer"), ("?sslmode=disable", "disable"), ("?sslmode=require", "require"),
            ("?sslmode=require&sslrootcert=\(ca)", "verify-ca"), ("?sslmode=verify-ca&sslrootcert=\(ca)", "verify-ca"),
            ("?sslmode=verify-full&sslrootcert=\(ca)", "verify-full"), ("?sslmode=verify-full", "verify-full"),
        ] {
            let settings = try PostgresConnectionSettings(url: "postgres://e3db:hunter2@127.0.0.1/e3db\(query)")
            #expect(settings.sslMode.rawValue == mode, "\(query)")
            #expect((settings.rootCertificates != nil) == query.contains("sslrootcert"), "\(query)")
        }
        for bad in [
            "?sslmode=verify", "?sslmode=require&sslmode=disable", "?sslmode=verify-full&sslrootcert=",
            "?sslmode=verify-full&sslrootcert=\(directory)/missing.crt", "?sslcert=x.pem",
            "?sslmode=verify-full&sslrootcert=\(directory)/port",
        ] {
            let error = #expect(throws: E3DBError.self) {
                _ = try PostgresConnectionSettings(url: "postgres://e3db:hunter2@127.0.0.1/e3db\(bad)")
            }
            #expect(error?.code == .invalidStorageConfiguration, "\(bad)")
            #expect(error?.message.contains("hunter2") == false)
        }
    }

    @Test("verify-full with the CA: the server starts (URL from E3DBKIT_POSTGRES_URL) and serves; sessions use TLS")
    func verifyFullServes() async throws {
        guard let (url, directory) = try await PostgresTLSTestServer.newDatabase() else { return }
        let tlsURL = "\(url)?sslmode=verify-full&sslrootcert=\(directory)/ca.crt"
        let data = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let migrated = try await ChildProcess.run(
            ServerProcess.binary, ["migrate", "--data", data.path], environment: ["E3DBKIT_POSTGRES_URL": tlsURL])
        #expect(migrated.status == 0, "\(migrated.stderr)")

        let server = try await ServerProcess.start(postgres: tlsURL)
        defer { server.stop() }
        let alice = try await server.register("alice")
        let written = try await alice.write(type: "contact", data: ["name": "over TLS"])
        #expect(try await alice.read(try #require(written.id)).data["name"] == "over TLS")

        let storage = try PostgresStorage(url: tlsURL, logger: Self.quiet)
        let ssl = try await storage.running {
            try await storage.perform("reading pg_stat_ssl") {
                try await storage.fetch(
                    "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()", on: storage.client
                ) { try $0.decode((Bool, String).self) }.first
            }
        }
        #expect(ssl?.0 == true)
        #expect(ssl?.1.hasPrefix("TLSv1.") == true)
    }

    @Test("a plaintext URL against the TLS-only server fails in seconds, saying the server requires TLS")
    func plaintextIsRefusedFast() async throws {
        guard let (url, _) = try await PostgresTLSTestServer.newDatabase() else { return }
        let (error, _) = try await Self.failure("\(url)?sslmode=disable")
        #expect(error?.code == .storageTLSFailed)
        #expect(error?.message.contains("requires TLS") == true, "\(error?.message ?? "")")

        // What an operator sees: `e3dbkit-server run` exits 1 at once with that message.
        let data = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        let start = ContinuousClock.now
        let run = try await ChildProcess.run(
            ServerProcess.binary, ["run", "--port", "0", "--data", data.path, "--postgres", "\(url)?sslmode=disable"])
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(run.status == 1)
        #expect(run.stderr.contains("requires TLS"), "\(run.stderr)")
        #expect(!run.stderr.contains("migration"), "\(run.stderr)")
        #expect(!run.stderr.contains(Self.password(of: url)))
    }

    @Test("verify-full or verify-ca with another CA fails in seconds, naming certificate verification")
    func wrongCAIsRefusedFast() async throws {
        guard let (url, _) = try await PostgresTLSTestServer.newDatabase() else { return }
        let other = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: other) }
        let made = try await ChildProcess.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days",
                "1", "-subj", "/CN=another CA", "-keyout", other.appendingPathComponent("ca.key").path, "-out",
                other.appendingPathComponent("ca.crt").path,
            ])
        try #require(made.status == 0, "openssl: \(made.stderr)")
        for mode in ["verify-full", "verify-ca"] {
            let (error, _) = try await Self.failure(
                "\(url)?sslmode=\(mode)&sslrootcert=\(other.appendingPathComponent("ca.crt").path)")
            #expect(error?.code == .storageTLSFailed, "\(mode)")
            #expect(error?.message.contains("certificate verification failed") == true, "\(error?.message ?? "")")
        }
    }

    @Test("a wrong password fails in seconds, naming authentication")
    func wrongPasswordIsRefusedFast() async throws {
        guard let (url, directory) = try await PostgresTLSTestServer.newDatabase() else { return }
        let password = Self.password(of: url)
        let wrong = url.replacingOccurrences(of: ":\(password)@", with: ":not-the-password@")
        try #require(wrong != url)
        let (error, _) = try await Self.failure("\(wrong)?sslmode=verify-full&sslrootcert=\(directory)/ca.crt")
        #expect(error?.code == .storageAuthenticationFailed)
        #expect(error?.message.contains("authentication failed") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("not-the-password") == false)
    }

    @Test("every session has the configured statement_timeout and idle_in_transaction_session_timeout")
    func sessionTimeouts() async throws {
        guard let (url, directory) = try await PostgresTLSTestServer.newDatabase() else { return }
        let tlsURL = "\(url)?sslmode=verify-full&sslrootcert=\(directory)/ca.crt"
        func settings(_ storage: PostgresStorage) async throws -> [String] {
            try await storage.perform("reading settings") {
                try await storage.fetch(
                    """
                    SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')
                    """, on: storage.client
                ) { try $0.decode((String, String).self) }.map { [$0.0, $0.1] }.first ?? []
            }
        }
        let defaults = try PostgresStorage(url: tlsURL, logger: Self.quiet)
        #expect(try await defaults.running { try await settings(defaults) } == ["25s", "5s"])

        let short = try PostgresStorage(
            url: tlsURL, statementTimeout: .seconds(1), idleInTransactionTimeout: .seconds(1), logger: Self.quiet)
        try await short.running { () async throws in
            #expect(try await settings(short) == ["1s", "1s"])
            // A statement past statement_timeout is cancelled by the server (SQLSTATE 57014).
            let slow = await #expect(throws: E3DBError.self) {
                try await short.perform("sleeping") { try await short.execute("SELECT pg_sleep(3)", on: short.client) }
            }
            #expect(slow?.message.contains("57014") == true, "\(slow?.message ?? "")")
        }

        // A transaction left idle while it holds the record-insert lock (a frozen process) loses its session after
        // 1 s, and the lock with it: another session takes the lock long before the frozen one would wake up.
        let frozen = try PostgresStorage(
            url: tlsURL, operationTimeout: .seconds(8), idleInTransactionTimeout: .seconds(1), logger: Self.quiet)
        let other = try PostgresStorage(url: tlsURL, operationTimeout: .seconds(5), logger: Self.quiet)
        try await running([frozen, other]) {
            let locked = AsyncStream<Void>.makeStream()
            let holder = Task {
                try await frozen.transaction("an idle transaction") { connection in
                    try await frozen.execute(
                        "SELECT pg_advisory_xact_lock(\(PostgresStorage.recordInsertLock))", on: connection)
                    locked.continuation.yield()
                    try await Task.sleep(for: .seconds(6))
                    return try await frozen.execute("SELECT 1", on: connection)
                }
            }
            for await _ in locked.stream { break }
            let start = ContinuousClock.now
            _ = try await other.transaction("taking the record-insert lock") { connection in
                try await other.execute(
                    "SELECT pg_advisory_xact_lock(\(PostgresStorage.recordInsertLock))", on: connection)
            }
            let waited = ContinuousClock.now - start
            #expect(waited < .seconds(4), "the lock was held for \(waited)")
            #expect(waited > .milliseconds(500), "the lock was not held at all (\(waited))")
            let ended = await #expect(throws: E3DBError.self) { try await holder.value }
            #expect(ended?.code == .storageUnavailable, "\(ended?.message ?? "")")
        }
    }

    @Test("a transaction whose session PostgreSQL ended fails at its next statement, not at the call deadline")
    func endedSessionFailsAtOnce() async throws {
        guard let (url, directory) = try await PostgresTLSTestServer.newDatabase() else { return }
        let storage = try PostgresStorage(
            url: "\(url)?sslmode=verify-full&sslrootcert=\(directory)/ca.crt", operationTimeout: .seconds(20),
            idleInTransactionTimeout: .seconds(1), logger: Self.quiet)
        try await storage.running { () async throws in
            // Idle in its transaction past the timeout (as a process stopped with SIGSTOP is): the server ends the
            // session. postgres-nio would wait for ever for the answer to the next statement; the deadline ended it.
            let start = ContinuousClock.now
            let ended = await #expect(throws: E3DBError.self) {
                try await storage.transaction("an idle transaction") { connection in
                    try await storage.execute("SELECT 1", on: connection)
                    try await Task.sleep(for: .seconds(3))
                    return try await storage.execute("SELECT 2", on: connection)
                }
            }
            let elapsed = ContinuousClock.now - start
            #expect(ended?.code == .storageUnavailable)
            #expect(elapsed < .seconds(8), "the transaction failed after \(elapsed), at the call deadline")
            // The pool goes on with another connection.
            #expect(
                try await storage.perform("after") { try await storage.execute("SELECT 3", on: storage.client) } == 1)
        }
    }

    @Test("a database migrated by a newer version is refused before anything runs, naming the version")
    func newerSchemaIsRefused() async throws {
        guard let (url, directory) = try await PostgresTLSTestServer.newDatabase() else { return }
        let tlsURL = "\(url)?sslmode=verify-full&sslrootcert=\(directory)/ca.crt"
        let storage = try PostgresStorage(url: tlsURL, logger: Self.quiet)
        try await storage.running {
            try await storage.migrate()
            try await storage.perform("recording a future migration") {
                try await storage.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)",
                    on: storage.client)
            }
            let error = await #expect(throws: E3DBError.self) { try await storage.migrate() }
            #expect(error?.code == .storageSchemaTooNew)
            #expect(error?.message.contains("999 (future)") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("newer version") == true)
        }

        let data = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: data) }
        // What an operator sees (`migrate`, as `run` and every command, checks first; `migrate` exits either way).
        let migrated = try await ChildProcess.run(
            ServerProcess.binary, ["migrate", "--data", data.path, "--postgres", tlsURL])
        #expect(migrated.status == 1)
        #expect(migrated.stderr.contains("migrated by a newer version"), "\(migrated.stderr)")
    }
}
