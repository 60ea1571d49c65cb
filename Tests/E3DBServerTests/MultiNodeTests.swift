import E3DBAPI
import E3DBAsyncHTTPClient
import E3DBCanonicalJSON
import E3DBClient
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Testing

/// The suite's one SeaweedFS (`.sharedSeaweedFS`), for the tests that do not stop it.
enum SharedSeaweedFS {
    static let bucket = "nodes"

    @TaskLocal static var current: SeaweedFS?
}

/// Starts one SeaweedFS with the bucket `SharedSeaweedFS.bucket` around the suite and stops it afterwards; without
/// `weed` the tests see nil (and SeaweedFS.start printed SKIPPED).
struct SharedSeaweedFSTrait: SuiteTrait, TestScoping {
    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let store = try await SeaweedFS.start(bucket: SharedSeaweedFS.bucket)
        do {
            try await SharedSeaweedFS.$current.withValue(store) { try await function() }
        } catch {
            await store?.stop()
            throw error
        }
        await store?.stop()
    }
}

extension Trait where Self == SharedSeaweedFSTrait {
    static var sharedSeaweedFS: Self { Self() }
}

/// Two or three `e3dbkit-server run` processes, each with its own data directory, on one TLS-only PostgreSQL
/// (`sslmode=verify-full`) and one SeaweedFS bucket, driven by Tozny's Python SDK, `e3dbkit client` and plain HTTP
/// (Tests/E3DBServerTests/multi_node_driver.py, one scenario per test). The tests run in parallel: each has a
/// database of its own; the ones that stop SeaweedFS or PostgreSQL stop one of their own. Each prints what it
/// measured.
@Suite(
    "N nodes on one TLS-only PostgreSQL and one bucket: SDKs across nodes, SIGKILL, SIGSTOP, outages",
    .postgresTLSServer, .sharedSeaweedFS)
struct MultiNodeTests {
    /// The driver's arguments for `scenario` (and `store`'s bucket), and the environment with the PostgreSQL URL and
    /// the bucket's keys (never argv).
    static func driver(
        _ scenario: String, postgres: String, store: SeaweedFS?, bucket: String, extra: [String] = []
    ) async throws -> (python: URL, arguments: [String], environment: [String: String], work: URL) {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-nodes-\(UUID().uuidString)")
        var arguments = [
            VectorLocations.projectRoot.appendingPathComponent("Tests/E3DBServerTests/multi_node_driver.py").path,
            CLIRunner.binary.path, work.path, "--scenario", scenario,
        ]
        var environment = ["E3DBKIT_POSTGRES_URL": postgres]
        if let store {
            arguments += ["--s3-endpoint", store.endpoint, "--s3-bucket", bucket]
            environment["AWS_ACCESS_KEY_ID"] = store.accessKey
            environment["AWS_SECRET_ACCESS_KEY"] = store.secretKey
        }
        return (try await ChildProcess.makeProjectPython(), arguments + extra, environment, work)
    }

    /// Runs a scenario to its end, prints its report and checks that everything in it passed.
    static func run(
        _ scenario: String, postgres: String, store: SeaweedFS?, bucket: String = SharedSeaweedFS.bucket,
        extra: [String] = []
    ) async throws {
        let d = try await driver(scenario, postgres: postgres, store: store, bucket: bucket, extra: extra)
        defer { try? FileManager.default.removeItem(at: d.work) }
        let result = try await ChildProcess.run(
            d.python, d.arguments, environment: d.environment, mergingStandardError: true)
        check(scenario, status: result.status, output: result.stdoutText)
    }

    static func check(_ scenario: String, status: Int32, output: String) {
        print("multi-node \(scenario):\n\(output)")
        #expect(status == 0, "\(output)")
        #expect(output.contains(" passed, 0 failed"), "\(output)")
        #expect(!output.contains("\n0 passed"), "\(output)")
    }

    /// A new database's URL over TLS with the suite server's CA, or nil when PostgreSQL is not installed.
    static func database() async throws -> String? {
        guard let (url, directory) = try await PostgresTLSTestServer.newDatabase() else { return nil }
        return "\(url)?sslmode=verify-full&sslrootcert=\(directory)/ca.crt"
    }

    @Test("Tozny's SDK suites on a node on the bucket; records and files across nodes by the SDK and e3dbkit client")
    func interchange() async throws {
        guard let postgres = try await Self.database(), let store = SharedSeaweedFS.current else { return }
        try await Self.run("interchange", postgres: postgres, store: store)
    }

    @Test("E3DBClient (fileOrigins): a file written through node 1 is read, shared and deleted through node 2")
    func libraryAcrossNodes() async throws {
        guard let postgres = try await Self.database(), let store = SharedSeaweedFS.current else { return }
        let keys = ["AWS_ACCESS_KEY_ID": store.accessKey, "AWS_SECRET_ACCESS_KEY": store.secretKey]
        let flags = ["--s3-endpoint", store.endpoint, "--s3-bucket", SharedSeaweedFS.bucket, "--s3-prefix", "library"]
        let n1 = try await ServerProcess.start(postgres: postgres, extraArguments: flags, environment: keys)
        defer { n1.stop() }
        let n2 = try await ServerProcess.start(postgres: postgres, extraArguments: flags, environment: keys)
        defer { n2.stop() }
        let transport = AsyncHTTPClientTransport()
        let origins: Set<String> = [store.endpoint]
        let alice = try await E3DBClient.register(token: n1.token, name: "alice", apiURL: n1.url, transport: transport)
        let alice1 = try E3DBClient(identity: alice, transport: transport, fileOrigins: origins)
        let alice2 = try E3DBClient(identity: alice, apiURL: n2.url, transport: transport, fileOrigins: origins)
        let bob = try await E3DBClient.register(token: n2.token, name: "bob", apiURL: n2.url, transport: transport)
        let bob1 = try E3DBClient(identity: bob, apiURL: n1.url, transport: transport, fileOrigins: origins)

        let scratch = try Scratch()
        let input = try scratch.file("in", count: 1 << 20)
        let record = try await alice1.writeFile(type: "nodes-file", path: input)
        let id = try #require(record.id)
        let key = "/\(SharedSeaweedFS.bucket)/library/\(id.uuidString.lowercased())"
        #expect(try await store.signed("HEAD", path: key) == 200)
        _ = try await alice2.readFile(id, to: scratch.path("alice2"), verifyChecksum: true)
        #expect(FileManager.default.contentsEqual(atPath: input, andPath: scratch.path("alice2")))
        try await alice2.share(type: "nodes-file", with: bob1.clientID)
        _ = try await bob1.readFile(id, to: scratch.path("bob1"), verifyChecksum: true)
        #expect(FileManager.default.contentsEqual(atPath: input, andPath: scratch.path("bob1")))
        try await alice2.delete(id, version: try #require(record.meta.version))
        #expect(try await store.signed("HEAD", path: key) == 404)
        for node in [n1, n2] {
            let files = node.data.appendingPathComponent("files")
            let left = FileManager.default.enumerator(atPath: files.path)?.allObjects.compactMap { $0 as? String } ?? []
            #expect(
                left.allSatisfy { name in
                    var directory: ObjCBool = false
                    return FileManager.default.fileExists(
                        atPath: files.appendingPathComponent(name).path, isDirectory: &directory) && directory.boolValue
                }, "bodies in \(files.path): \(left)")
        }
    }

    @Test("SIGKILL before and during commits, an orphan expiring, SIGSTOP inside a transaction, SIGCONT")
    func faults() async throws {
        guard let postgres = try await Self.database(), let store = SharedSeaweedFS.current else { return }
        try await Self.run("faults", postgres: postgres, store: store)
    }

    @Test("three nodes started at once on an empty database over TLS come up, migrate once and serve")
    func startTogether() async throws {
        guard let postgres = try await Self.database() else { return }
        try await Self.run("together", postgres: postgres, store: nil)
    }

    @Test("SeaweedFS stopped: a commit is 503 in bounded time; restarted: the same commit succeeds, nothing lost")
    func storeOutage() async throws {
        guard let postgres = try await Self.database() else { return }
        guard var store = try await SeaweedFS.start(bucket: "outage") else { return }
        let d = try await Self.driver("store-outage", postgres: postgres, store: store, bucket: "outage")
        defer { try? FileManager.default.removeItem(at: d.work) }
        let driver = try RunningProcess(
            d.python, d.arguments, reading: .standardOutput, other: FileHandle.standardError,
            environment: d.environment, keepingInputOpen: true)
        do {
            var output = try await driver.readOutput { String(decoding: $0, as: UTF8.self).contains("STOP-STORE") }
            if String(decoding: output, as: UTF8.self).contains("STOP-STORE") {
                await store.killed()
                try await driver.writeInput(Data("stopped\n".utf8))
                output = try await driver.readOutput { String(decoding: $0, as: UTF8.self).contains("START-STORE") }
            }
            if String(decoding: output, as: UTF8.self).contains("START-STORE") {
                let start = ContinuousClock.now
                store = try await store.restarted(bucket: "outage")
                let took = (ContinuousClock.now - start).components
                let seconds = Double(took.seconds) + Double(took.attoseconds) / 1e18
                try await driver.writeInput(Data(String(format: "%.2f\n", seconds).utf8))
            }
            driver.closeInput()
            output = try await driver.readOutput()
            let status = try await driver.exit()
            Self.check("store-outage", status: status, output: String(decoding: output, as: UTF8.self))
        } catch {
            driver.signal(SIGKILL)
            _ = try? await driver.exit()
            await store.stop()
            throw error
        }
        await store.stop()
    }

    @Test("PostgreSQL (one of this test's own) stopped and started under writes through two nodes: 503, then writes")
    func postgresRestart() async throws {
        guard PostgresTLSTestServer.directory() != nil else { return }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("e3dbkit-pg-\(UUID().uuidString.lowercased())").path
        do {
            let url = try await PostgresTestServer.run(["start-tls", directory])
            try await Self.run(
                "postgres-restart", postgres: "\(url)?sslmode=verify-full&sslrootcert=\(directory)/ca.crt",
                store: nil, extra: ["--postgres-dir", directory])
        } catch {
            _ = try? await PostgresTestServer.run(["stop", directory])
            throw error
        }
        _ = try await PostgresTestServer.run(["stop", directory])
    }
}
