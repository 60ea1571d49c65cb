import E3DBAsyncHTTPClient
package import E3DBClient
package import E3DBTestSupport
import E3DBURLSession
import Testing

/// The transports the client's suites run through: each test that takes one runs once per case.
package enum ClientTransport: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case asyncHTTPClient, urlSession

    /// A new transport of this kind (a URLSession transport owns a new session).
    package func make() -> any E3DBTransport {
        switch self {
        case .asyncHTTPClient: AsyncHTTPClientTransport()
        case .urlSession: URLSessionTransport()
        }
    }

    package var testDescription: String { rawValue }
}

/// The server's backends; the PostgreSQL cases run on the suite's throwaway server (skipped loudly without one).
package enum ClientTestBackend: String, CaseIterable, Sendable {
    case sqlite, postgres

    package func start() async throws -> ServerProcess? {
        switch self {
        case .sqlite: return try await ServerProcess.start()
        case .postgres:
            guard let url = try await PostgresTestServer.newDatabase() else { return nil }
            return try await ServerProcess.start(postgres: url)
        }
    }
}

extension ServerProcess {
    /// A client registered as `name`, registering and then talking through `transport`.
    package func register(_ name: String, transport: ClientTransport = .asyncHTTPClient) async throws -> E3DBClient {
        let through = transport.make()
        return try E3DBClient(
            identity: try await E3DBClient.register(token: token, name: name, apiURL: url, transport: through),
            transport: through)
    }
}
