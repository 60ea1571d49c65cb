import E3DBTestSupport
import Foundation
import Testing

/// `e3dbkit-server run` as a real process, with Tozny's Python SDK (e3db 2.3.0) as its client: the SDK's own
/// integration suites, then deny paths, hostile requests, concurrency, a large file with bounded memory and
/// `kill -9` (Tests/E3DBServerTests/python_sdk_driver.py).
@Suite("E3DB server against Tozny's Python SDK", .serialized, .postgresServer)
struct PythonSDKServerTests {
    /// `e3dbkit`; the drivers find `e3dbkit-server` beside it.
    static var binary: URL { CLIRunner.binary }

    /// The project's Python environment (scripts/python-env.sh makes it with e3db, pytest and the other peers).
    static func python() throws -> String {
        let root = VectorLocations.projectRoot
        let setup = Process()
        setup.executableURL = root.appendingPathComponent("scripts/python-env.sh")
        let out = Pipe()
        setup.standardOutput = out
        try setup.run()
        let path = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        setup.waitUntilExit()
        guard setup.terminationStatus == 0, FileManager.default.isExecutableFile(atPath: path) else {
            throw DriverFailure(description: "scripts/python-env.sh could not make the Python environment")
        }
        return path
    }

    struct DriverFailure: Error, CustomStringConvertible { let description: String }

    /// Runs a driver script on a thread of its own (a driver runs for up to a minute and must not hold one of
    /// the cooperative threads); returns its output.
    static func drive(_ extra: [String], script: String = "python_sdk_driver.py") async throws
        -> (status: Int32, output: String) {
        try await offCooperativePool { try runDriver(extra, script: script) }
    }

    private static func runDriver(_ extra: [String], script: String) throws -> (status: Int32, output: String) {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-server-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try python())
        p.arguments = [VectorLocations.projectRoot.appendingPathComponent("Tests/E3DBServerTests/" + script).path,
                       binary.path, work.path] + extra
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test("SQLite backend: the SDK's suites, deny paths, hostile input, 409 races, a 300 MiB file, kill -9")
    func sqliteBackend() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary.path), "build e3dbkit first")
        let result = try await Self.drive(["--large-file-mib", "300"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains(" passed, 0 failed"), "\(result.output)")
        #expect(!result.output.contains("\n0 passed"), "\(result.output)")
    }

    @Test("e3dbkit client and the Python SDK through one server, both directions: credentials, records, sharing, 409, tampering")
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
