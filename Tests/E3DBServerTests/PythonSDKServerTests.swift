import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Testing

/// `e3dbkit-server run` as a real process, with Tozny's Python SDK (e3db 2.3.0) as its client: the SDK's own
/// integration suites, then deny paths, hostile requests, concurrency, a large file with bounded memory and
/// `kill -9` (Tests/E3DBServerTests/python_sdk_driver.py).
@Suite("E3DB server against Tozny's Python SDK", .serialized, .postgresServer)
struct PythonSDKServerTests {
    /// Runs a driver script of this folder (`python_sdk_driver.py` by default) with `e3dbkit` and a work directory.
    static func drive(_ extra: [String], script: String = "python_sdk_driver.py") async throws
        -> (status: Int32, output: String)
    {
        try await PythonDriver.run("Tests/E3DBServerTests/" + script, extra)
    }

    @Test("SQLite backend: the SDK's suites, deny paths, hostile input, 409 races, a 300 MiB file, kill -9")
    func sqliteBackend() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: CLIRunner.binary.path), "build e3dbkit first")
        let result = try await Self.drive(["--large-file-mib", "300"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains(" passed, 0 failed"), "\(result.output)")
        #expect(!result.output.contains("\n0 passed"), "\(result.output)")
    }

    @Test(
        "e3dbkit client and the Python SDK through one server, both directions: credentials, records, sharing, 409, tampering"
    )
    func clientInterop() async throws {
        let result = try await Self.drive([], script: "client_interop.py")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains(" passed, 0 failed"), "\(result.output)")
        #expect(!result.output.contains("\n0 passed"), "\(result.output)")
    }

    @Test("PostgreSQL backend: the same suites and checks, two processes on one database")
    func postgresBackend() async throws {
        guard let url = try await PostgresTestServer.newDatabase() else { return }
        let result = try await Self.drive(["--large-file-mib", "100", "--postgres", url])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains(" passed, 0 failed"), "\(result.output)")
        #expect(!result.output.contains("\n0 passed"), "\(result.output)")
    }

    @Test("e3dbkit client and the Python SDK through one server on PostgreSQL")
    func clientInteropPostgres() async throws {
        guard let url = try await PostgresTestServer.newDatabase() else { return }
        let result = try await Self.drive(["--postgres", url], script: "client_interop.py")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains(" passed, 0 failed"), "\(result.output)")
    }
}
