import E3DBTestSupport
import Foundation
package import Testing

/// Starts the PostgreSQL test server before the suite and stops it (removing its directory) afterwards.
package struct PostgresServerTrait: SuiteTrait, TestScoping {
    /// How postgres.sh starts it: `start`, or `start-tls` (TLS-only, `DIR/ca.crt`).
    package var command = "start"

    package func provideScope(
        for test: Test, testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        guard PostgresTestServer.isInstalled else {
            print("SKIPPED: PostgreSQL not installed: the PostgreSQL cases of \(test.name) will not run")
            try await PostgresTestServer.$current.withValue(.notInstalled) { try await function() }
            return
        }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("e3dbkit-pg-\(UUID().uuidString.lowercased())").path
        do {
            _ = try await PostgresTestServer.run([command, directory])
        } catch {
            _ = try? await PostgresTestServer.run(["stop", directory])
            throw error
        }
        do {
            try await PostgresTestServer.$current.withValue(.running(directory: directory)) { try await function() }
        } catch {
            _ = try? await PostgresTestServer.run(["stop", directory])
            throw error
        }
        _ = try await PostgresTestServer.run(["stop", directory])
    }
}

extension Trait where Self == PostgresServerTrait {
    package static var postgresServer: Self { Self() }
    /// A TLS-only server (`hostssl` lines only), its CA in `DIR/ca.crt`.
    package static var postgresTLSServer: Self { Self(command: "start-tls") }
}
