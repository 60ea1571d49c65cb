import E3DBPrimitives
public import Foundation
public import Logging
import Synchronization

/// Where the server keeps its state: an opened SQLite database or PostgreSQL pool, opaque outside this package.
///
/// Open one with ``sqlite(directory:)``, ``postgres(url:maximumConnections:operationTimeout:statementTimeout:idleInTransactionTimeout:logger:)``
/// or, as `e3dbkit-server` does, from a configuration (``open(_:logger:)``); use it inside ``running(_:)``, which runs
/// its background work and closes it at the end, and hand it to ``E3DBRequestHandler`` there. The storage interface
/// behind it is internal to E3DBKit, so that the backends can change without breaking an application that embeds
/// the server.
public struct StorageBackend: Sendable {
    /// The backend's storage (this package's tests and fuzz harnesses reach it; an application does not).
    package let storage: any ServerStorage

    /// Set by the first ``running(_:)``: a backend runs once (postgres-nio's pool traps on a second `run()`).
    private let phase = RunPhase()

    /// Wraps an opened storage.
    package init(_ storage: any ServerStorage) { self.storage = storage }

    /// The embedded backend: `DIR/server.sqlite` (created if needed), one SQLite database in WAL mode.
    /// - Parameter directory: the data directory (created with mode 0700 if missing).
    /// - Returns: the backend, not yet migrated (``E3DBRequestHandler`` migrates it).
    /// - Throws: a storage failure (`E3DBError`, `isStorageFailure`) when the database cannot be opened.
    public static func sqlite(directory: URL) throws -> StorageBackend {
        StorageBackend(try SQLiteStorage(directory: directory))
    }

    /// The shared backend: one PostgreSQL database through a connection pool, for several server processes behind
    /// a load balancer. Connections are opened lazily; the first migration opens one at once, so that an
    /// unreachable server or refused credentials fail with an error saying so.
    /// - Parameters:
    ///   - url: `postgres://user:password@host:port/database` (or `postgresql://`), TLS in its `sslmode` and
    ///     `sslrootcert` as libpq reads them (docs/server.md). The password is never logged or put in an error.
    ///   - maximumConnections: the pool's upper bound of connections (per process).
    ///   - operationTimeout: how long one storage call, waiting for a connection included, may take before it fails
    ///     with `.storageUnavailable`.
    ///   - statementTimeout: the `statement_timeout` of every session (zero: none).
    ///   - idleInTransactionTimeout: the `idle_in_transaction_session_timeout` of every session (zero: none).
    ///   - logger: receives the pool's connection events; never the password.
    /// - Returns: the backend, not yet migrated.
    /// - Throws: `E3DBError` `.invalidStorageConfiguration` naming the problem when the URL is malformed or its
    ///   `sslrootcert` does not load.
    public static func postgres(
        url: String, maximumConnections: Int = 20, operationTimeout: Duration = .seconds(30),
        statementTimeout: Duration = .seconds(25), idleInTransactionTimeout: Duration = .seconds(5),
        logger: Logger = Logger(label: "e3dbkit.server.postgres")
    ) throws -> StorageBackend {
        StorageBackend(
            try PostgresStorage(
                url: url, maximumConnections: maximumConnections, operationTimeout: operationTimeout,
                statementTimeout: statementTimeout, idleInTransactionTimeout: idleInTransactionTimeout, logger: logger))
    }

    /// The backend `configuration` names, as `e3dbkit-server` opens it: PostgreSQL with the configured pool size and
    /// timeouts when `postgresURL` is set, else SQLite in the data directory.
    /// - Parameters:
    ///   - configuration: the data directory, the optional PostgreSQL URL and its pool settings.
    ///   - logger: where the backend logs.
    /// - Returns: the backend, not yet migrated.
    /// - Throws: a storage failure (`E3DBError`, `isStorageFailure`) when the backend cannot be opened.
    public static func open(_ configuration: ServerConfiguration, logger: Logger) throws -> StorageBackend {
        guard let url = configuration.postgresURL else { return try sqlite(directory: configuration.dataDirectory) }
        return try postgres(
            url: url, maximumConnections: configuration.postgresPoolSize,
            operationTimeout: .seconds(configuration.postgresCallTimeout),
            statementTimeout: .seconds(configuration.postgresStatementTimeout),
            idleInTransactionTimeout: .seconds(configuration.postgresIdleInTransactionTimeout), logger: logger)
    }

    /// Runs `body` with the backend's background work beside it (PostgreSQL: its connection pool, without which no
    /// query is answered; SQLite: WAL checkpoints), then waits for the writes in progress, closes the backend and
    /// stops that work. Use the backend only inside `body`, and call this once per backend.
    /// - Parameter body: the work that uses the backend (for a server: until it stops serving).
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws, else a storage failure (`E3DBError`, `isStorageFailure`) from closing;
    ///   `E3DBError` `.invalidParameter`, before `body` runs, when this backend (or a copy of it) ran already.
    public func running<T>(_ body: () async throws -> T) async throws -> T {
        guard phase.start() else {
            throw E3DBError(
                .invalidParameter, "this storage backend was run already: a backend runs once (open another one)")
        }
        defer { phase.end() }
        return try await storage.running(body)
    }

    /// Refuses a backend that cannot answer now: PostgreSQL outside ``running(_:)``, whose queries would each wait
    /// for the call timeout (30 s by default) and fail. SQLite answers outside it too.
    func checkAnswering() throws(E3DBError) {
        guard storage.answersOnlyWhileRunning, !phase.isRunning else { return }
        throw E3DBError(
            .invalidParameter,
            "this storage backend is not running: use it (and the handler) inside StorageBackend.running { }")
    }
}

/// Where a ``StorageBackend`` and its copies are in their one run: not yet, running, ended.
private final class RunPhase: Sendable {
    private let value = Atomic<UInt8>(0)

    /// Marks the run started; false when it had started already.
    func start() -> Bool { value.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged }

    /// Marks the run ended.
    func end() { value.store(2, ordering: .releasing) }

    /// Inside the run.
    var isRunning: Bool { value.load(ordering: .acquiring) == 1 }
}

/// Where encrypted file bodies live: a directory this server serves them from, or an S3-compatible bucket the
/// clients reach through presigned URLs. Opaque outside this package, as ``StorageBackend`` is.
public struct FileBodyBackend: Sendable {
    /// The store behind it.
    package let store: any FileBodyStore

    /// Wraps a store.
    package init(_ store: any FileBodyStore) { self.store = store }

    /// Bodies in `DIR/<record id>` (temporary uploads in `DIR/tmp/`), passing through this server's capability URLs.
    /// `e3dbkit-server` uses `files/` in its data directory.
    /// - Parameter directory: the directory (created with mode 0700 if missing).
    /// - Throws: when the directory cannot be created.
    public static func local(directory: URL) throws -> FileBodyBackend {
        FileBodyBackend(try LocalFileBodyStore(directory: directory))
    }

    /// Bodies in an S3-compatible bucket (path-style); the clients PUT and GET them through presigned URLs, and
    /// one body is at most 5 GiB.
    /// - Parameter options: the endpoints, bucket, region, key prefix and credentials.
    public static func objectStore(_ options: S3Options) -> FileBodyBackend {
        FileBodyBackend(S3FileBodyStore(options: options))
    }

    /// The store `configuration` names, as `e3dbkit-server` opens it: its bucket when `objectStore` is set, else
    /// `files/` in the data directory.
    /// - Parameter configuration: the data directory and the optional object store.
    /// - Throws: when the local directory cannot be created.
    public static func open(_ configuration: ServerConfiguration) throws -> FileBodyBackend {
        guard let options = configuration.objectStore else {
            return try local(directory: configuration.dataDirectory.appendingPathComponent("files"))
        }
        return objectStore(options)
    }
}
