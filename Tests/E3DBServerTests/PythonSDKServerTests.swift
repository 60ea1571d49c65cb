import E3DBTestSupport
import Foundation
import Testing

/// `e3dbkit-server run` as a real process, with Tozny's Python SDK (e3db 2.3.0) as its client: the SDK's own
/// integration suites, then deny paths, hostile requests, concurrency, a large file with bounded memory and
/// `kill -9` (Tests/E3DBServerTests/python_sdk_driver.py).
@Suite("E3DB server against Tozny's Python SDK", .serialized, .postgresServer)
struct PythonSDKServerTests {
    /// Runs a driver script (for up to a minute, awaited); returns its standard output and error, merged.
    static func drive(_ extra: [String], script: String = "python_sdk_driver.py") async throws
        -> (status: Int32, output: String)
    {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-server-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let result = try await ChildProcess.run(
            try await ChildProcess.makeProjectPython(),
            [
                VectorLocations.projectRoot.appendingPathComponent("Tests/E3DBServerTests/" + script).path,
                CLIRunner.binary.path, work.path,
            ] + extra,
            mergingStandardError: true)
        return (result.status, result.stdoutText)
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
