import Foundation

/// The throwaway PostgreSQL server of this test process (`scripts/postgres.sh`), started once around the suite.
package enum PostgresTestServer: Sendable {
    case notInstalled
    case running(directory: String)

    /// Set by the suite trait (`.postgresServer` in E3DBServerTestSupport) around the suite it scopes.
    @TaskLocal package static var current: PostgresTestServer?

    package static var script: String { VectorLocations.projectRoot.appendingPathComponent("scripts/postgres.sh").path }

    package static var isInstalled: Bool {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return versions.contains { FileManager.default.isExecutableFile(atPath: "\(root)/\($0)/bin/initdb") }
    }

    /// Runs `scripts/postgres.sh ARGS` and returns its stdout without the final newline.
    package static func run(_ arguments: [String]) async throws -> String {
        let result = try await ChildProcess.run(URL(fileURLWithPath: "/bin/bash"), [script] + arguments)
        guard result.status == 0 else {
            throw Failure(description: "postgres.sh \(arguments[0]) exited with \(result.status): \(result.stderr)")
        }
        return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A URL of a new, empty database on the running server; `nil` (after saying so loudly) when PostgreSQL is
    /// not installed.
    package static func newDatabase() async throws -> String? {
        switch current {
        case .running(let directory):
            return try await run(["createdb", directory])
        case .notInstalled:
            print("SKIPPED: PostgreSQL not installed (no /usr/lib/postgresql/*/bin/initdb); run scripts/setup.sh")
            return nil
        case nil:
            throw Failure(description: "the PostgreSQL test server was not started (the suite's trait did not run)")
        }
    }

    /// A failed `postgres.sh` command, or a test that asked for a database outside the trait's scope.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }
}
