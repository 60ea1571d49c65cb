import E3DBPrimitives
import E3DBServer
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing

@Suite("Server storage lifecycle (running once, inside a service group)", .postgresServer)
struct StorageLifecycleTests {
    /// A new backend of `backend` (nil, with a printed message, when PostgreSQL is not installed) and its cleanup.
    static func backend(_ backend: Backend) async throws -> (StorageBackend, @Sendable () -> Void)? {
        switch backend {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("e3dbkit-storage-\(UUID().uuidString.lowercased())")
            return (
                try StorageBackend.sqlite(directory: directory),
                { try? FileManager.default.removeItem(at: directory) }
            )
        case .postgres:
            guard let url = try await PostgresTestServer.newDatabase() else {
                print("SKIPPED: PostgreSQL not installed: the PostgreSQL case does not run")
                return nil
            }
            return (
                try StorageBackend.postgres(
                    url: url, maximumConnections: 4, operationTimeout: .seconds(20), logger: quietLogger(.critical)),
                {}
            )
        }
    }

    @Test(
        "a backend runs once: a second running is an error, before its body, not a crash", arguments: Backend.allCases)
    func runsOnce(_ kind: Backend) async throws {
        guard let (backend, cleanup) = try await Self.backend(kind) else { return }
        defer { cleanup() }
        try await backend.running { try await backend.storage.migrate() }
        let copy = backend
        let bodyRan = Mutex(false)
        let error = await #expect(throws: E3DBError.self) {
            try await copy.running { bodyRan.withLock { $0 = true } }
        }
        #expect(error?.code == .invalidParameter)
        #expect(error?.message.contains("runs once") == true)
        #expect(!bodyRan.withLock { $0 }, "the second body ran")
    }

    @Test("a handler over PostgreSQL outside running is refused at once, before and after the run; SQLite answers")
    func handlerOutsideRunning() async throws {
        let files = FileManager.default.temporaryDirectory
            .appendingPathComponent("e3dbkit-files-\(UUID().uuidString.lowercased())")
        defer { try? FileManager.default.removeItem(at: files) }
        let configuration = ServerConfiguration(dataDirectory: files)
        func handler(_ backend: StorageBackend) async throws {
            _ = try await E3DBRequestHandler(
                configuration: configuration, backend: backend, files: try .local(directory: files))
        }
        if let (backend, cleanup) = try await Self.backend(.postgres) {
            defer { cleanup() }
            // It used to wait for the call timeout (20 s here), then fail as unavailable.
            let before = await #expect(throws: E3DBError.self) { try await handler(backend) }
            #expect(before?.code == .invalidParameter)
            #expect(before?.message.contains("inside StorageBackend.running") == true)
            try await backend.running { try await handler(backend) }
            let after = await #expect(throws: E3DBError.self) { try await handler(backend) }
            #expect(after?.code == .invalidParameter)
        }
        guard let (sqlite, cleanup) = try await Self.backend(.sqlite) else { return }
        defer { cleanup() }
        try await handler(sqlite)
    }

    /// What the query after the shutdown signal gave.
    final class Outcome: Sendable {
        let value = Mutex<Result<Void, any Error>?>(nil)
    }

    /// Runs `storage` and, after the group's graceful shutdown began, uses it once more.
    struct LateQuery: Service {
        let backend: StorageBackend
        let migrated: AsyncStream<Void>.Continuation
        let outcome: Outcome

        func run() async throws {
            try await backend.running {
                try await backend.storage.migrate()
                migrated.finish()
                try? await gracefulShutdown()
                // The shutdown has begun; the body has not returned: the storage still answers.
                do {
                    try await backend.storage.migrate()
                    outcome.value.withLock { $0 = .success(()) }
                } catch {
                    outcome.value.withLock { $0 = .failure(error) }
                }
            }
        }
    }

    @Test(
        "inside a service, a graceful shutdown stops the storage only after the body returned",
        arguments: Backend.allCases)
    func gracefulShutdownLetsTheBodyFinish(_ kind: Backend) async throws {
        guard let (backend, cleanup) = try await Self.backend(kind) else { return }
        defer { cleanup() }
        let (migrated, migrating) = AsyncStream<Void>.makeStream()
        let outcome = Outcome()
        let service = LateQuery(backend: backend, migrated: migrating, outcome: outcome)
        let group = ServiceGroup(services: [service], logger: quietLogger(.critical))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            for await _ in migrated {}
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        switch outcome.value.withLock({ $0 }) {
        case .success?: break
        case .failure(let error)?: Issue.record("the query after the shutdown signal failed: \(error)")
        case nil: Issue.record("the service never queried after the shutdown signal")
        }
    }
}
