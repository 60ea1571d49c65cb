public import Foundation

/// How `e3dbkit-server run` is set up.
public struct ServerConfiguration: Sendable {
    /// Interface to bind (default loopback).
    public var host: String = "127.0.0.1"
    /// TCP port; 0 picks a free one.
    public var port: Int = 8000
    /// The data directory: `server.sqlite` (SQLite backend) and `files/` (file bodies, both backends).
    public var dataDirectory: URL
    /// A PostgreSQL URL selects the PostgreSQL backend (TLS in its `sslmode` and `sslrootcert`, as libpq reads
    /// them: ``StorageBackend/postgres(url:maximumConnections:operationTimeout:statementTimeout:idleInTransactionTimeout:logger:)``).
    public var postgresURL: String?
    /// An S3-compatible bucket for file bodies; nil (the default): `files/` in the data directory.
    public var objectStore: S3Options?
    /// PostgreSQL: connections this process may open at most (default 20). Every process counts: nodes × this,
    /// plus administrative commands, must stay below the server's `max_connections` minus its reserved slots.
    public var postgresPoolSize: Int = 20
    /// PostgreSQL: the `statement_timeout` of every session, seconds (default 25, below the 30 s deadline of a
    /// storage call; 0: none).
    public var postgresStatementTimeout: Int = 25
    /// PostgreSQL: the `idle_in_transaction_session_timeout` of every session, seconds (default 5; 0: none). A
    /// process that stops in the middle of a transaction (frozen, not killed) loses its session after this long,
    /// and with it the locks other processes wait for.
    public var postgresIdleInTransactionTimeout: Int = 5
    /// PostgreSQL: seconds one storage call may take, waiting for a connection included, before it fails with
    /// `.storageUnavailable` (a 503) (default 30). While the database is unreachable a request waits this long.
    public var postgresCallTimeout: Int = 30
    /// The externally reachable base URL for capability (upload/download) URLs; by default built from the
    /// request's `Host` header.
    public var publicURL: String?
    /// Largest JSON request body, bytes (default 16 MiB: records of 8 MiB and more must fit).
    public var maxBodySize: Int = 16 << 20
    /// Largest note body from an anonymous writer (a TSV1 header without a verified `uid`), bytes (default 64 KiB):
    /// anyone can write one.
    public var maxAnonymousNoteSize: Int = 64 << 10
    /// Request body bytes registered clients together may hold in memory at once (default 256 MiB), each at most
    /// twice ``maxBodySize``; unauthenticated requests (registration, tokens, anonymous notes) together a
    /// sixteenth of it. A request whose body would pass its share is refused with 503. File uploads stream to disk
    /// and do not count.
    public var maxBodyBytesInFlight: Int = 256 << 20
    /// Seconds a request body may take to arrive, from the first read of it (default 60; 408 past it).
    public var bodyTimeout: Int = 60
    /// Open connections one client address (an IPv6 /64) may hold (default 256); more are closed as they arrive.
    public var maxConnectionsPerAddress: Int = 256
    /// Largest file body, bytes (default 8 GiB).
    public var maxFileSize: Int64 = 8 << 30
    /// Bearer-token lifetime, seconds.
    public var tokenLifetime: Int = 3600
    /// Accepted TSV1 clock difference either way, seconds.
    public var tsv1Window: Int64 = 300
    /// PostgreSQL: the largest difference between this node's clock and the database's that the server accepts,
    /// seconds (default 30). Above it, `run` refuses to start and a maintenance pass is skipped; above 1 s a
    /// warning is logged. Nodes' clocks must be kept by NTP: every expiry is compared with the node's own clock.
    public var maximumClockSkew: Int64 = 30
    /// A PEM certificate chain and private key: serve HTTPS instead of HTTP (for deployments without a TLS
    /// proxy). Both or neither.
    public var tlsCertificatePath: String?
    /// The PEM private key of ``tlsCertificatePath``.
    public var tlsKeyPath: String?
    /// Serve Prometheus metrics at `GET /metrics` (request counts and durations by route and status, file bytes).
    /// Off by default: the endpoint is unauthenticated, so expose it only where the scraper is.
    public var metricsEnabled: Bool = false
    /// Lifetime of upload and download URLs, seconds.
    public var capabilityLifetime: Int64 = 3600
    /// How long a pending file may wait for its commit, seconds (default a day); then it and any uploaded body are
    /// removed by the maintenance task.
    public var pendingFileLifetime: Int64 = 86_400
    /// How often the maintenance task removes expired nonces, tokens and pending files, seconds.
    public var maintenanceInterval: Int = 60
    /// The work one search may do (v1 and v2), in steps: a step is about 4 bytes of a scanned record's `plain` or of
    /// compared text, or one step of a matcher. Past it the search is refused with 400. The default is about a second
    /// of one core at most (docs/security.md, "Bounded cost").
    public var searchBudget: Int = 50_000_000
    /// Searches that may run at once; others wait. The default is one less than the cores (at least one), so that
    /// searches cannot take every core from the other routes.
    public var concurrentSearches: Int = max(1, ProcessInfo.processInfo.activeProcessorCount - 1)

    /// A configuration with defaults for everything but the data directory.
    public init(dataDirectory: URL) { self.dataDirectory = dataDirectory }
}
