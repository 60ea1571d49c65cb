import E3DBPrimitives
package import Logging
internal import PostgresNIO

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The shared backend: one PostgreSQL database through postgres-nio's pooled `PostgresClient`, so that several
/// server processes behind a load balancer share every piece of state (tokens, nonces, pending files, the server
/// secret). Same semantics as ``SQLiteStorage``; the differences are in how atomicity is reached across processes:
///
/// - Versioned updates and deletes are one conditional statement (`WHERE record_id = $1 AND version = $2
///   RETURNING …`); only when it touches no row does a second query tell a conflict from a missing record.
/// - Record inserts of concurrent requests are grouped (`GroupCommit`) into one `INSERT … SELECT … FROM unnest(…)`
///   statement, which takes a transaction-scoped advisory lock before drawing indexes, so that record indexes
///   become visible in index order across processes (a v1 search paging by index never skips a record that
///   commits late).
/// - The hot reads (bearer token, client, record, record joined with its read check) are named prepared
///   statements (`PostgresStatements`), one round trip each on a pooled connection; record reads with their read
///   check of concurrent requests are grouped (`GroupCommit`) into one statement over `unnest(ids, readers)`.
///   Every other statement binds its values as parameters (postgres-nio's extended query protocol), never by
///   splicing them into the SQL.
/// - Every call has one deadline, `operationTimeout` (`withDeadline`), waiting for a connection
///   included.
/// - Nonces, access keys, notes' names and registration tokens are single `INSERT … ON CONFLICT` or
///   `UPDATE … RETURNING` statements; note views lock the note's row (`SELECT … FOR UPDATE`).
/// - Migrations are versioned in `schema_migrations`, each in its own transaction under an advisory lock, so that
///   processes starting together migrate once.
///
/// The password of the URL is handed to postgres-nio and never logged or put in an error.
package final class PostgresStorage: ServerStorage {
    let client: PostgresClient
    let logger: Logger
    /// How long one storage call may take (``perform(_:_:)``).
    let operationTimeout: Duration
    /// Record inserts of concurrent requests, one statement per group.
    let recordInserts: GroupCommit<RecordRow, RecordRow>
    /// Record reads (with their read check) of concurrent requests, one statement per group.
    let readableRecords: GroupCommit<(RecordID, ClientID), RecordRow?>

    /// The URL without its password (`postgres://user@host:port/database`), for logs.
    package let redactedURL: String
    /// How connections are made (``checkConnection()`` opens one outside the pool).
    let settings: PostgresConnectionSettings

    /// Creates the pool, which ``run()`` runs. Connections are opened lazily: ``migrate()`` first opens
    /// one connection of its own (``checkConnection()``), so that an unreachable server, a refused TLS handshake or
    /// refused credentials fail at once with an error saying so.
    /// - Parameters:
    ///   - url: `postgres://user:password@host:port/database` (or `postgresql://`); user, password and database are
    ///     percent-decoded; the port defaults to 5432 and the database to the user name. TLS as libpq spells it:
    ///     `sslmode` `disable`; `allow` or `prefer` (the default: TLS when the server offers it, unverified);
    ///     `require` (TLS, unverified, unless `sslrootcert` names a file: then as `verify-ca`); `verify-ca` (the
    ///     certificate chain against `sslrootcert`); `verify-full` (the chain, and the host name or IP address).
    ///     `sslrootcert=FILE` is a PEM file of CA certificates; without it (or with `system`) the system's CAs.
    ///   - maximumConnections: the pool's upper bound of connections (per process).
    ///   - operationTimeout: how long one storage call (waiting for a connection included) may take before it
    ///     throws `E3DBError` `.storageUnavailable`.
    ///   - statementTimeout: the `statement_timeout` of every session (zero: none): PostgreSQL cancels a statement
    ///     that runs longer, so that work abandoned at `operationTimeout` does not pile up on the server.
    ///   - idleInTransactionTimeout: the `idle_in_transaction_session_timeout` of every session (zero: none):
    ///     PostgreSQL ends a session that holds a transaction open and says nothing for this long (a frozen process
    ///     holding a lock).
    ///   - logger: receives postgres-nio's connection events; never the password.
    /// - Throws: `E3DBError` `.invalidStorageConfiguration` naming the problem when the URL is malformed or its
    ///   `sslrootcert` does not load.
    package init(
        url: String, maximumConnections: Int = 20, operationTimeout: Duration = .seconds(30),
        statementTimeout: Duration = .seconds(25), idleInTransactionTimeout: Duration = .seconds(5),
        logger: Logger = Logger(label: "e3dbkit.server.postgres")
    ) throws {
        var settings = try PostgresConnectionSettings(url: url)
        settings.startupParameters = [
            ("statement_timeout", String(max(0, statementTimeout.milliseconds))),
            ("idle_in_transaction_session_timeout", String(max(0, idleInTransactionTimeout.milliseconds))),
        ]
        let configuration = settings.clientConfiguration(maximumConnections: maximumConnections)
        let redacted = settings.redactedURL
        self.settings = settings
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.logger = logger
        self.operationTimeout = operationTimeout
        self.redactedURL = redacted
        recordInserts = GroupCommit { [logger] rows in
            try await Self.perform("inserting \(rows.count) record(s)", timeout: operationTimeout, url: redacted) {
                try await Self.insert(rows, client: client, logger: logger)
            }
        }
        readableRecords = GroupCommit { [logger] reads in
            try await Self.perform("reading \(reads.count) record(s)", timeout: operationTimeout, url: redacted) {
                try await Self.readableRecords(reads, client: client, logger: logger)
            }
        }
    }

    package var answersOnlyWhileRunning: Bool { true }

    /// Runs the connection pool (`PostgresClient.run()`) until cancelled; then its connections are closed.
    package func run() async throws {
        await client.run()
    }

    /// Waits for the grouped inserts and reads in progress (the pool itself stops when `run()` is cancelled).
    package func close() async throws {
        await recordInserts.idle()
        await readableRecords.idle()
    }

    // MARK: Running statements

    /// Runs `body` within ``operationTimeout`` (``withDeadline(_:_:)``), turning postgres-nio's errors into
    /// `E3DBError` storage codes (``storageError(_:what:at:)``) that name the operation and the server's message, never a
    /// bound value or the password. The timeout matters when the server is unreachable: the pool keeps trying to
    /// connect and a lease would otherwise wait for ever.
    @discardableResult
    func perform<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await Self.perform(what, timeout: operationTimeout, url: redactedURL, body)
    }

    /// ``perform(_:_:)`` with the timeout and the redacted URL given.
    static func perform<T: Sendable>(
        _ what: String, timeout: Duration, url: String,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        do {
            return try await withDeadline(timeout, body)
        } catch is DeadlineExceeded {
            throw E3DBError(.storageUnavailable, "PostgreSQL at \(url) did not complete \(what) within \(timeout)")
        } catch {
            throw Self.storageError(error, what: what, at: url)
        }
    }

    /// Runs `body` in one transaction on one pooled connection (rolled back when it throws). Not postgres-nio's
    /// `withTransaction`: a statement sent on a connection the server already closed (a session ended past
    /// `idle_in_transaction_session_timeout` while this process was stopped, say) never completes in postgres-nio
    /// 1.33, so every statement checks first (`PostgresConnection.rows`), and no `ROLLBACK` is sent on a closed
    /// connection: the request fails at once instead of at the call deadline.
    func transaction<T: Sendable>(
        _ what: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await perform(what) { [self] in
            try await client.withConnection { connection in
                try await execute("BEGIN", on: connection)
                let value: T
                do {
                    value = try await body(connection)
                } catch {
                    if !connection.isClosed { _ = try? await execute("ROLLBACK", on: connection) }
                    throw error
                }
                try await execute("COMMIT", on: connection)
                return value
            }
        }
    }

    /// All rows of `query`, mapped.
    func fetch<T>(
        _ query: PostgresQuery, on db: some QueryRunner,
        _ map: (PostgresRow) throws -> T
    ) async throws -> [T] {
        var out: [T] = []
        for try await row in try await db.rows(query, logger: logger) { out.append(try map(row)) }
        return out
    }

    /// The first row of a prepared statement (run to its end), within ``perform(_:_:)``.
    func first<Statement: PostgresPreparedStatement>(_ what: String, _ statement: Statement) async throws
        -> Statement.Row? where Statement.Row: Sendable
    {
        try await perform(what) { [client, logger] in
            var first: Statement.Row?
            for try await row in try await client.execute(statement, logger: logger) where first == nil {
                first = row
            }
            return first
        }
    }

    /// Runs `query` to its end and returns how many rows it returned (use `RETURNING 1` to count changed rows).
    @discardableResult
    func execute(_ query: PostgresQuery, on db: some QueryRunner) async throws -> Int {
        var count = 0
        for try await _ in try await db.rows(query, logger: logger) { count += 1 }
        return count
    }
}

/// What runs a query: the pool (any connection) or one connection inside a transaction.
protocol QueryRunner {
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence
}

extension PostgresClient: QueryRunner {
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await self.query(query, logger: logger)
    }
}

extension PostgresConnection: QueryRunner {
    /// The rows of `query`, or `.storageUnavailable` at once when the server closed this connection (postgres-nio
    /// 1.33 would wait for ever for the answer to a statement sent on it).
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        guard !isClosed else {
            throw E3DBError(.storageUnavailable, "PostgreSQL closed the connection (its session ended)")
        }
        return try await self.query(query, logger: logger)
    }
}
