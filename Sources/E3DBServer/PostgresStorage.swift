#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import Logging
internal import PostgresNIO
import E3DBPrimitives

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
///   statements (`PostgresStatements`), one round trip each.
/// - Nonces, access keys, notes' names and registration tokens are single `INSERT … ON CONFLICT` or
///   `UPDATE … RETURNING` statements; note views lock the note's row (`SELECT … FOR UPDATE`).
/// - Migrations are versioned in `schema_migrations`, each in its own transaction under an advisory lock, so that
///   processes starting together migrate once.
///
/// The password of the URL is handed to postgres-nio and never logged or put in an error.
public final class PostgresStorage: ServerStorage {
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let logger: Logger
    private let operationTimeout: Duration
    /// Enforces ``operationTimeout`` on in-flight storage calls.
    private let deadlines: CallDeadlines
    /// Record inserts of concurrent requests, one statement per group.
    private let recordInserts: GroupCommit<RecordRow, RecordRow>
    /// Record reads (with their read checks) of concurrent requests, one statement per group, on a connection of
    /// their own.
    private let recordReads: PostgresReadGroups

    /// The URL without its password (`postgres://user@host:port/database`), for logs.
    public let redactedURL: String

    /// Creates the pool and starts its background task. Connections are opened lazily (the first query, e.g.
    /// ``migrate()``, is the first to fail when the server is unreachable).
    /// - Parameters:
    ///   - url: `postgres://user:password@host:port/database` (or `postgresql://`); user, password and database are
    ///     percent-decoded; the port defaults to 5432 and the database to the user name. `sslmode` may only be
    ///     absent, `disable`, `allow` or `prefer`: connections are not encrypted (use a local network or a tunnel).
    ///   - maximumConnections: the pool's upper bound of connections (per process).
    ///   - operationTimeout: how long one storage call (waiting for a connection included) may take before it
    ///     throws `StorageError(.unavailable)`.
    ///   - logger: receives postgres-nio's connection events; never the password.
    /// - Throws: `StorageError(.unavailable)` naming the problem when the URL is malformed.
    public init(url: String, maximumConnections: Int = 20, operationTimeout: Duration = .seconds(30),
                logger: Logger = Logger(label: "e3dbkit.server.postgres")) throws {
        let (configuration, redacted) = try Self.configuration(url: url, maximumConnections: maximumConnections)
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.logger = logger
        self.operationTimeout = operationTimeout
        self.redactedURL = redacted
        let deadlines = CallDeadlines()
        self.deadlines = deadlines
        recordInserts = GroupCommit { [logger, deadlines] rows in
            try await Self.perform("inserting \(rows.count) record(s)", timeout: operationTimeout, url: redacted,
                                   deadlines: deadlines) {
                try await Self.insert(rows, client: client, logger: logger)
            }
        }
        let connection = PostgresConnection.Configuration(
            host: configuration.host ?? "localhost", port: configuration.port ?? 5432,
            username: configuration.username, password: configuration.password, database: configuration.database,
            tls: .disable)
        recordReads = PostgresReadGroups(configuration: connection, url: redacted, timeout: operationTimeout,
                                         logger: logger)
        // Started immediately where the platform allows, so that `run()` is in progress before the first lease.
        if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
            self.runner = Task.immediate { await client.run() }
        } else {
            self.runner = Task { await client.run() }
        }
    }

    deinit { runner.cancel() }

    /// Waits for the grouped inserts and reads in progress, closes the read connection, stops the pool (open
    /// connections are closed) and waits for its background task to end.
    public func close() async throws {
        // Grouped statements in progress end first (each within operationTimeout): a pipeline write whose client
        // left has no other waiter.
        await recordInserts.idle()
        await recordReads.close()
        deadlines.stop()
        runner.cancel()
        await runner.value
    }

    static func configuration(url: String, maximumConnections: Int) throws
        -> (PostgresClient.Configuration, String) {
        func malformed(_ why: String) -> StorageError {
            StorageError(.unavailable,
                         "the PostgreSQL URL is not usable: \(why) (expected postgres://user:password@host:port/database)")
        }
        guard let parts = URLComponents(string: url) else { throw malformed("it does not parse as a URL") }
        guard let scheme = parts.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            throw malformed("the scheme must be postgres or postgresql")
        }
        guard var host = parts.host, !host.isEmpty else { throw malformed("it has no host") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard let user = parts.user, !user.isEmpty else { throw malformed("it has no user name") }
        let port = parts.port ?? 5432
        guard (1...65535).contains(port) else { throw malformed("the port is out of range") }
        var database = parts.path
        if database.hasPrefix("/") { database.removeFirst() }
        guard !database.contains("/") else { throw malformed("the database name contains '/'") }
        for item in parts.queryItems ?? [] {
            switch (item.name, item.value ?? "") {
            case ("sslmode", "disable"), ("sslmode", "allow"), ("sslmode", "prefer"): continue
            case ("sslmode", let mode):
                throw malformed("sslmode=\(mode) is not supported (connections are not encrypted)")
            case (let name, _): throw malformed("unknown parameter '\(name)'")
            }
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: parts.password,
            database: database.isEmpty ? nil : database, tls: .disable)
        configuration.options.maximumConnections = max(1, maximumConnections)
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let redacted = "postgres://\(user)@\(shownHost):\(port)/\(database.isEmpty ? user : database)"
        return (configuration, redacted)
    }

    // MARK: Running statements

    /// Runs `body` within ``operationTimeout``, turning postgres-nio's errors into `StorageError`s (by
    /// SQLSTATE, ``kind(sqlState:)``; a lost connection or a timeout is `.unavailable`) that name the operation and the server's message, never
    /// a bound value or the password. The timeout matters when the server is unreachable: the pool keeps trying to
    /// connect and a lease would otherwise wait for ever.
    @discardableResult
    private func perform<T: Sendable>(_ what: String,
                                      _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await Self.perform(what, timeout: operationTimeout, url: redactedURL, deadlines: deadlines, body)
    }

    /// ``perform(_:_:)`` with the timeout, the redacted URL and the deadline watchdog given. `body` runs as its own
    /// task, which `deadlines` cancels when `timeout` passes first (a lease waiting for an unreachable server then
    /// ends).
    private static func perform<T: Sendable>(_ what: String, timeout: Duration, url: String, deadlines: CallDeadlines,
                                             _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let work = Task { try await body() }
        let ticket = deadlines.begin(timeout: timeout) { work.cancel() }
        do {
            let value = try await withTaskCancellationHandler { try await work.value } onCancel: { work.cancel() }
            _ = deadlines.end(ticket)
            return value
        } catch {
            if deadlines.end(ticket) {
                throw StorageError(.unavailable, "PostgreSQL at \(url) did not complete \(what) within \(timeout)")
            }
            throw Self.storageError(error, what: what, at: url)
        }
    }

    static func storageError(_ error: any Error, what: String, at url: String) -> StorageError {
        switch error {
        case let e as StorageError:
            return e
        case let e as PostgresTransactionError:
            if let inner = e.closureError ?? e.beginError ?? e.commitError {
                return storageError(inner, what: what, at: url)
            }
            return StorageError(.unavailable, "PostgreSQL transaction for \(what) failed")
        case let e as PSQLError:
            if let state = e.serverInfo?[.sqlState] {
                let message = e.serverInfo?[.message] ?? "no message"
                return StorageError(kind(sqlState: state), "PostgreSQL refused \(what): \(message) (SQLSTATE \(state))")
            }
            return StorageError(.unavailable, "PostgreSQL at \(url) is unavailable for \(what): \(e.code)")
        case PostgresError.server(let message):  // postgres-nio's event-loop API (the grouped reads)
            let state = message.fields[.sqlState] ?? "none"
            return StorageError(kind(sqlState: state),
                                "PostgreSQL refused \(what): \(message.fields[.message] ?? "no message") (SQLSTATE \(state))")
        case PostgresError.connectionClosed:
            return StorageError(.unavailable, "PostgreSQL at \(url) closed the connection while \(what)")
        case is CancellationError:
            return StorageError(.unavailable, "\(what) was cancelled")
        default:
            return StorageError(.unavailable, "PostgreSQL \(what) failed: \(type(of: error))")
        }
    }

    /// What an error with SQLSTATE `state` means for the request: a uniqueness conflict (23505), the client's
    /// value (class 22, data exceptions: U+0000 in text, a value out of range), the server unavailable
    /// (connection exceptions 08, operator intervention 57P, insufficient resources 53, system errors 58), or a
    /// refusal of this operation alone.
    static func kind(sqlState state: String) -> StorageError.Kind {
        if state == "23505" { return .conflict }
        if state.hasPrefix("22") { return .invalidInput }
        if state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53") || state.hasPrefix("58") {
            return .unavailable
        }
        return .failed
    }

    /// Runs `body` in one transaction on one pooled connection (rolled back when it throws).
    private func transaction<T: Sendable>(
        _ what: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await perform(what) { [self] in
            try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        }
    }

    /// All rows of `query`, mapped.
    private func fetch<T>(_ query: PostgresQuery, on db: some QueryRunner,
                          _ map: (PostgresRow) throws -> T) async throws -> [T] {
        var out: [T] = []
        for try await row in try await db.rows(query, logger: logger) { out.append(try map(row)) }
        return out
    }

    /// The first row of a prepared statement (run to its end), within ``perform(_:_:)``.
    private func first<Statement: PostgresPreparedStatement>(_ what: String, _ statement: Statement) async throws
        -> Statement.Row? where Statement.Row: Sendable {
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
    private func execute(_ query: PostgresQuery, on db: some QueryRunner) async throws -> Int {
        var count = 0
        for try await _ in try await db.rows(query, logger: logger) { count += 1 }
        return count
    }

    // MARK: Migrations

    /// Serializes migrations across processes ("E3DBMIGR").
    private static let migrationLock: Int64 = 0x4533_4442_4D49_4752
    /// Serializes record inserts so that indexes commit in order ("E3DBRECS").
    static let recordInsertLock: Int64 = 0x4533_4442_5245_4353

    private struct Migration: Sendable {
        var version: Int64
        var name: String
        var statements: [String]
        /// Whether this migration creates the server secret.
        var createsSecret = false
    }

    private static let migrations: [Migration] = [
        Migration(version: 1, name: "initial schema", statements: [
            "CREATE TABLE server_settings (key text PRIMARY KEY, value bytea NOT NULL)",
            """
            CREATE TABLE registration_tokens (token_hash bytea PRIMARY KEY, uses_left bigint, created bigint NOT NULL)
            """,
            """
            CREATE TABLE clients (
                client_id text PRIMARY KEY, name text NOT NULL, public_key text NOT NULL, signing_key text,
                api_key_id text NOT NULL UNIQUE, api_secret_hash bytea NOT NULL, enabled boolean NOT NULL,
                has_backup boolean NOT NULL, registration_token_hash bytea NOT NULL, created bigint NOT NULL)
            """,
            """
            CREATE TABLE access_tokens (token_hash bytea PRIMARY KEY, client_id text NOT NULL, expires bigint NOT NULL)
            """,
            "CREATE INDEX access_tokens_expires ON access_tokens (expires)",
            "CREATE TABLE tsv1_nonces (nonce text PRIMARY KEY, expires bigint NOT NULL)",
            "CREATE INDEX tsv1_nonces_expires ON tsv1_nonces (expires)",
            """
            CREATE TABLE access_keys (
                writer_id text NOT NULL, user_id text NOT NULL, reader_id text NOT NULL, type text NOT NULL,
                eak text NOT NULL, authorizer_id text NOT NULL, authorizer_public_key text NOT NULL,
                signer_id text, signer_signing_key text,
                PRIMARY KEY (writer_id, user_id, reader_id, type))
            """,
            """
            CREATE TABLE policies (
                seq bigserial NOT NULL, user_id text NOT NULL, writer_id text NOT NULL, reader_id text NOT NULL,
                type text NOT NULL, can_read boolean NOT NULL, can_authorize boolean NOT NULL, authorized_by text,
                PRIMARY KEY (user_id, writer_id, reader_id, type))
            """,
            "CREATE INDEX policies_reader ON policies (reader_id)",
            "CREATE INDEX policies_writer ON policies (writer_id)",
            "CREATE INDEX policies_authorized_by ON policies (authorized_by)",
            """
            CREATE TABLE records (
                idx bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, record_id text NOT NULL UNIQUE,
                writer_id text NOT NULL, user_id text NOT NULL, type text NOT NULL, plain text NOT NULL,
                data text NOT NULL, rec_sig text, file_meta text, created bigint NOT NULL,
                last_modified bigint NOT NULL, version text NOT NULL)
            """,
            "CREATE INDEX records_writer ON records (writer_id, idx)",
            """
            CREATE TABLE pending_files (
                pending_id text PRIMARY KEY, writer_id text NOT NULL, user_id text NOT NULL, type text NOT NULL,
                plain text NOT NULL, data text NOT NULL, rec_sig text, file_meta text, checksum text NOT NULL,
                size bigint NOT NULL, uploaded boolean NOT NULL, created bigint NOT NULL)
            """,
            """
            CREATE TABLE notes (
                note_id text PRIMARY KEY, id_string text UNIQUE, writer_client_id text,
                recipient_signing_key text NOT NULL, writer_signing_key text NOT NULL, max_views bigint,
                views bigint NOT NULL, expires_at bigint, created bigint NOT NULL, body text NOT NULL)
            """,
        ], createsSecret: true),
        Migration(version: 2, name: "upload claims", statements: [
            "ALTER TABLE pending_files ADD COLUMN upload_started bigint",
            "CREATE INDEX pending_files_created ON pending_files (created)",
        ]),
    ]

    /// Applies the migrations this build knows and the database lacks, each in its own transaction that first takes
    /// an advisory lock (processes starting together wait for each other and then skip what is done).
    public func migrate() async throws {
        for migration in Self.migrations {
            let applied = try await transaction("migration \(migration.version)") { [self] db -> Bool in
                try await execute("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", on: db)
                try await execute("""
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version bigint PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)
                    """, on: db)
                let done = try await execute(
                    "SELECT 1 FROM schema_migrations WHERE version = \(migration.version)", on: db)
                guard done == 0 else { return false }
                for statement in migration.statements {
                    try await execute(PostgresQuery(unsafeSQL: statement), on: db)
                }
                if migration.createsSecret {
                    let secret = Data(SecureRandom.bytes(count: 32))
                    try await execute("INSERT INTO server_settings (key, value) VALUES ('secret', \(secret))", on: db)
                }
                let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
                try await execute("""
                    INSERT INTO schema_migrations (version, name, applied_at)
                    VALUES (\(migration.version), \(migration.name), \(now))
                    """, on: db)
                return true
            }
            if applied { logger.info("PostgreSQL migration \(migration.version) (\(migration.name)) applied") }
        }
    }

    public func serverSecret() async throws -> Data {
        try await perform("reading the server secret") { [self] in
            guard let secret = try await fetch("SELECT value FROM server_settings WHERE key = 'secret'", on: client,
                                               { try $0.decode(Data.self) }).first,
                  secret.count == 32 else {
                throw StorageError(.corrupted, "the server secret is missing; run migrate")
            }
            return secret
        }
    }

    // MARK: Registration tokens

    public func createRegistrationToken(hash: Data, uses: Int?, created: Int64) async throws {
        try await perform("creating a registration token") { [self] in
            try await execute("""
                INSERT INTO registration_tokens (token_hash, uses_left, created) VALUES (\(hash), \(uses), \(created))
                """, on: client)
        }
    }

    /// Uses the token and inserts the client in one transaction (a failed insert uses nothing).
    public func registerClient(_ c: ClientRow) async throws -> Bool {
        try await transaction("registering client \(c.clientID)") { [self] db -> Bool in
            guard try await execute("""
                UPDATE registration_tokens SET uses_left = uses_left - 1
                WHERE token_hash = \(c.registrationTokenHash) AND (uses_left IS NULL OR uses_left > 0) RETURNING 1
                """, on: db) == 1 else { return false }
            try await execute("""
                INSERT INTO clients (\(unescaped: Self.clientColumns)) VALUES (\(c.clientID), \(c.name), \(c.publicKey),
                    \(c.signingKey), \(c.apiKeyID), \(c.apiSecretHash), \(c.enabled), \(c.hasBackup),
                    \(c.registrationTokenHash), \(c.created))
                """, on: db)
            return true
        }
    }

    public func registrationTokenExists(hash: Data) async throws -> Bool {
        try await perform("looking up a registration token") { [self] in
            try await execute("SELECT 1 FROM registration_tokens WHERE token_hash = \(hash)", on: client) == 1
        }
    }

    public func backupClientID() async throws -> String? {
        try await perform("reading the backup client") { [self] in
            try await fetch("SELECT value FROM server_settings WHERE key = 'backup_client'", on: client) {
                String(decoding: try $0.decode(Data.self), as: UTF8.self)
            }.first
        }
    }

    public func setBackupClientID(_ id: String) async throws {
        try await perform("setting the backup client") { [self] in
            try await execute("""
                INSERT INTO server_settings (key, value) VALUES ('backup_client', \(Data(id.utf8)))
                ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value
                """, on: client)
        }
    }

    // MARK: Clients

    static let clientColumns = """
        client_id, name, public_key, signing_key, api_key_id, api_secret_hash, enabled, has_backup,
        registration_token_hash, created
        """

    static func client(_ row: PostgresRow) throws -> ClientRow {
        let (id, name, publicKey, signingKey, apiKeyID, secretHash, enabled, hasBackup, tokenHash, created) =
            try row.decode((String, String, String, String?, String, Data, Bool, Bool, Data, Int64).self)
        return ClientRow(clientID: id, name: name, publicKey: publicKey, signingKey: signingKey, apiKeyID: apiKeyID,
                         apiSecretHash: secretHash, enabled: enabled, hasBackup: hasBackup,
                         registrationTokenHash: tokenHash, created: created)
    }

    public func client(id: String) async throws -> ClientRow? {
        try await first("reading client \(id)", PostgresStatements.Client(id: id))
    }

    public func client(apiKeyID: String) async throws -> ClientRow? {
        try await perform("reading a client by API key id") { [self] in
            try await fetch("SELECT \(unescaped: Self.clientColumns) FROM clients WHERE api_key_id = \(apiKeyID)",
                            on: client, Self.client).first
        }
    }

    public func setHasBackup(clientID: String) async throws {
        try await perform("marking client \(clientID) as backed up") { [self] in
            try await execute("UPDATE clients SET has_backup = true WHERE client_id = \(clientID)", on: client)
        }
    }

    public func setClientEnabled(id: String, _ enabled: Bool) async throws -> Bool {
        try await perform("\(enabled ? "enabling" : "disabling") client \(id)") { [self] in
            try await execute("UPDATE clients SET enabled = \(enabled) WHERE client_id = \(id) RETURNING 1", on: client) == 1
        }
    }

    // MARK: Tokens and nonces

    public func insertAccessToken(hash: Data, clientID: String, expires: Int64) async throws {
        try await perform("storing an access token") { [self] in
            try await execute("""
                INSERT INTO access_tokens (token_hash, client_id, expires) VALUES (\(hash), \(clientID), \(expires))
                """, on: client)
        }
    }

    public func accessTokenClient(hash: Data, now: Int64) async throws -> String? {
        try await perform("checking an access token") { [self] in
            try await fetch("SELECT client_id FROM access_tokens WHERE token_hash = \(hash) AND expires > \(now)",
                            on: client) { try $0.decode(String.self) }.first
        }
    }

    /// The client and expiry of an unexpired token, so that `E3DBService`'s bearer-token cache keeps it (for at
    /// most a second after this read: a token deleted in the database, by another process or an operator, is
    /// refused by every process at most that long later).
    public func accessToken(hash: Data, now: Int64) async throws -> (clientID: String, expires: Int64)? {
        try await first("checking an access token", PostgresStatements.AccessToken(hash: hash, now: now))
            .map { (clientID: $0.0, expires: $0.1) }
    }

    /// One statement: inserts the nonce, or takes over an expired one; returns no row (a replay) when the nonce is
    /// present and unexpired.
    public func useNonce(_ nonce: String, expires: Int64, now: Int64) async throws -> Bool {
        try await perform("recording a TSV1 nonce") { [self] in
            try await execute("""
                INSERT INTO tsv1_nonces (nonce, expires) VALUES (\(nonce), \(expires))
                ON CONFLICT (nonce) DO UPDATE SET expires = EXCLUDED.expires WHERE tsv1_nonces.expires < \(now)
                RETURNING 1
                """, on: client) == 1
        }
    }

    // MARK: Access keys

    public func accessKey(_ t: AccessTuple) async throws -> AccessKeyRow? {
        try await perform("reading an access key") { [self] in
            try await fetch("""
                SELECT eak, authorizer_id, authorizer_public_key, signer_id, signer_signing_key FROM access_keys
                WHERE writer_id = \(t.writerID) AND user_id = \(t.userID) AND reader_id = \(t.readerID)
                    AND type = \(t.type)
                """, on: client) { row in
                let (eak, authorizerID, authorizerKey, signerID, signerKey) =
                    try row.decode((String, String, String, String?, String?).self)
                return AccessKeyRow(tuple: t, eak: eak, authorizerID: authorizerID, authorizerPublicKey: authorizerKey,
                                    signerID: signerID, signerSigningKey: signerKey)
            }.first
        }
    }

    public func insertAccessKey(_ r: AccessKeyRow) async throws -> Bool {
        try await perform("inserting an access key") { [self] in
            try await execute("""
                INSERT INTO access_keys (writer_id, user_id, reader_id, type, eak, authorizer_id, authorizer_public_key,
                    signer_id, signer_signing_key)
                VALUES (\(r.tuple.writerID), \(r.tuple.userID), \(r.tuple.readerID), \(r.tuple.type), \(r.eak),
                    \(r.authorizerID), \(r.authorizerPublicKey), \(r.signerID), \(r.signerSigningKey))
                ON CONFLICT DO NOTHING RETURNING 1
                """, on: client) == 1
        }
    }

    public func deleteAccessKey(_ t: AccessTuple) async throws {
        try await perform("deleting an access key") { [self] in
            try await execute("""
                DELETE FROM access_keys WHERE writer_id = \(t.writerID) AND user_id = \(t.userID)
                    AND reader_id = \(t.readerID) AND type = \(t.type)
                """, on: client)
        }
    }

    // MARK: Policies

    private static let policyColumns = "user_id, writer_id, reader_id, type, can_read, can_authorize, authorized_by"

    private static func policy(_ row: PostgresRow) throws -> PolicyRow {
        let (user, writer, reader, type, canRead, canAuthorize, authorizedBy) =
            try row.decode((String, String, String, String, Bool, Bool, String?).self)
        return PolicyRow(tuple: AccessTuple(writerID: writer, userID: user, readerID: reader, type: type),
                         canRead: canRead, canAuthorize: canAuthorize, authorizedBy: authorizedBy)
    }

    public func policy(_ t: AccessTuple) async throws -> PolicyRow? {
        try await perform("reading a policy") { [self] in
            try await fetch("""
                SELECT \(unescaped: Self.policyColumns) FROM policies WHERE user_id = \(t.userID)
                    AND writer_id = \(t.writerID) AND reader_id = \(t.readerID) AND type = \(t.type)
                """, on: client, Self.policy).first
        }
    }

    /// Inserts or replaces the tuple's policy; a replaced policy moves to the end of the listings (as SQLite's
    /// `INSERT OR REPLACE` gives it a new rowid).
    public func changePolicy(_ t: AccessTuple, read: Bool?, authorize: Bool?, by: String?) async throws {
        try await perform("writing a policy") { [self] in
            try await execute("""
                INSERT INTO policies (\(unescaped: Self.policyColumns))
                VALUES (\(t.userID), \(t.writerID), \(t.readerID), \(t.type), coalesce(\(read)::boolean, false),
                    coalesce(\(authorize)::boolean, false), CASE WHEN \(authorize)::boolean THEN \(by)::text END)
                ON CONFLICT (user_id, writer_id, reader_id, type) DO UPDATE SET seq = DEFAULT,
                    can_read = coalesce(\(read)::boolean, policies.can_read),
                    can_authorize = coalesce(\(authorize)::boolean, policies.can_authorize),
                    authorized_by = CASE WHEN \(authorize)::boolean IS NULL THEN policies.authorized_by
                        WHEN \(authorize)::boolean THEN \(by)::text END
                """, on: client)
        }
    }

    public func removeAuthorizations(userID: String, writerID: String, readerID: String) async throws {
        try await perform("removing authorizations") { [self] in
            try await execute("""
                UPDATE policies SET can_authorize = false, authorized_by = NULL
                WHERE user_id = \(userID) AND writer_id = \(writerID) AND reader_id = \(readerID)
                """, on: client)
        }
    }

    public func listPolicies(_ listing: PolicyListing, clientID: String) async throws -> [PolicyRow] {
        let (column, permission) = listing.filter
        let query: PostgresQuery = """
            SELECT \(unescaped: Self.policyColumns) FROM policies
            WHERE \(unescaped: column) = \(clientID) AND \(unescaped: permission) ORDER BY seq
            """
        return try await perform("listing policies") { [self] in try await fetch(query, on: client, Self.policy) }
    }

    // MARK: Records

    static let recordColumns =
        "idx, record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created, last_modified, version"
    /// ``recordColumns`` with an empty `data` (``RecordScope/includeData``).
    static let recordColumnsWithoutData =
        "idx, record_id, writer_id, user_id, type, plain, ''::text, rec_sig, file_meta, created, last_modified, version"

    /// A record row in ``recordColumns``' order, decoded column by column with concrete types (a tuple `decode`
    /// resolves generic metadata at run time, which showed in the profile of record reads).
    static func record(_ row: PostgresRow) throws -> RecordRow {
        var cells = row.makeIterator()
        func next<T: PostgresDecodable>(_: T.Type) throws -> T {
            guard let cell = cells.next() else {
                throw StorageError(.corrupted, "a record row has fewer columns than a record")
            }
            return try cell.decode(T.self)
        }
        return RecordRow(
            index: try next(Int64.self), recordID: try next(String.self), writerID: try next(String.self),
            userID: try next(String.self), type: try next(String.self), plainJSON: try next(String.self),
            dataJSON: try next(String.self), recSig: try next(String?.self), fileMetaJSON: try next(String?.self),
            created: try next(Int64.self), lastModified: try next(Int64.self), version: try next(String.self))
    }

    /// Inserts `r` inside the caller's transaction after taking the record-insert lock, so that the identity value
    /// it draws commits before any later one.
    private func insert(_ r: RecordRow, on db: PostgresConnection) async throws -> RecordRow {
        try await execute("SELECT pg_advisory_xact_lock(\(Self.recordInsertLock))", on: db)
        let index = try await fetch("""
            INSERT INTO records (record_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, created,
                last_modified, version)
            VALUES (\(r.recordID), \(r.writerID), \(r.userID), \(r.type), \(r.plainJSON), \(r.dataJSON), \(r.recSig),
                \(r.fileMetaJSON), \(r.created), \(r.lastModified), \(r.version))
            RETURNING idx
            """, on: db) { try $0.decode(Int64.self) }.first
        guard let index else { throw StorageError(.corrupted, "inserting record \(r.recordID) returned no index") }
        var out = r
        out.index = index
        return out
    }

    /// Inserts `rows` in one statement (``PostgresStatements/InsertRecords``) and returns them with their indexes.
    private static func insert(_ rows: [RecordRow], client: PostgresClient, logger: Logger) async throws
        -> [RecordRow] {
        var indexes: [String: Int64] = [:]
        indexes.reserveCapacity(rows.count)
        for try await (index, id) in try await client.execute(PostgresStatements.InsertRecords(rows: rows),
                                                              logger: logger) {
            indexes[id] = index
        }
        return try rows.map { row in
            guard let index = indexes[row.recordID] else {
                throw StorageError(.corrupted, "inserting record \(row.recordID) returned no index")
            }
            var out = row
            out.index = index
            return out
        }
    }

    /// Inserts the record together with those of concurrent requests (one statement per group); a group that fails
    /// is retried one record at a time, so that a duplicate id fails only its own insert.
    public func insertRecord(_ row: RecordRow) async throws -> RecordRow {
        try await recordInserts.submit(row)
    }

    /// Grouped with the other inserts (`GroupCommit`), on its drain task.
    public func insertRecord(_ row: RecordRow,
                             completion: @escaping @Sendable (Result<RecordRow, any Error>) -> Void) {
        recordInserts.submit(row, completion: completion)
    }

    public func record(id: String) async throws -> RecordRow? {
        try await first("reading record \(id)", PostgresStatements.Record(id: id))
    }

    /// Grouped with the record reads of concurrent requests into one statement joining each record with its read
    /// check (`PostgresStatements.ReadableRecords`), on a connection of its own (`PostgresReadGroups`).
    public func record(id: String, readableBy readerID: String) async throws -> RecordRow? {
        try await recordReads.submit(RecordRead(id: id, readerID: readerID))
    }

    /// As ``record(id:readableBy:)``; `completion` is called on the read connection's event loop.
    public func record(id: String, readableBy readerID: String,
                       completion: @escaping @Sendable (Result<RecordRow?, any Error>) -> Void) {
        recordReads.submit(RecordRead(id: id, readerID: readerID), completion: completion)
    }

    /// Whether a record exists, to tell a version conflict from a missing record after a conditional statement
    /// touched no row.
    private func outcomeWithoutChange(id: String) async throws -> VersionedOutcome {
        try await execute("SELECT 1 FROM records WHERE record_id = \(id)", on: client) == 1 ? .conflict : .notFound
    }

    public func updateRecord(id: String, expectedVersion: String, plainJSON: String?, dataJSON: String,
                             recSig: String?, newVersion: String, now: Int64) async throws -> VersionedOutcome {
        try await perform("updating record \(id)") { [self] in
            let updated = try await fetch("""
                UPDATE records SET plain = COALESCE(\(plainJSON)::text, plain), data = \(dataJSON),
                    rec_sig = \(recSig)::text, version = \(newVersion),
                    last_modified = GREATEST(\(now)::bigint, last_modified + 1)
                WHERE record_id = \(id) AND version = \(expectedVersion)
                RETURNING \(unescaped: Self.recordColumns)
                """, on: client, Self.record).first
            if let updated { return .done(updated) }
            return try await outcomeWithoutChange(id: id)
        }
    }

    public func deleteRecord(id: String, expectedVersion: String?) async throws -> VersionedOutcome {
        try await perform("deleting record \(id)") { [self] in
            let deleted = try await fetch("""
                DELETE FROM records WHERE record_id = \(id)
                    AND (\(expectedVersion)::text IS NULL OR version = \(expectedVersion)::text)
                RETURNING \(unescaped: Self.recordColumns)
                """, on: client, Self.record).first
            if let deleted { return .done(deleted) }
            return try await outcomeWithoutChange(id: id)
        }
    }

    public func records(in scope: RecordScope, afterIndex: Int64, limit: Int) async throws -> [RecordRow] {
        var binds = PostgresBindings()
        binds.append(afterIndex)
        binds.append(scope.caller)
        let columns = scope.includeData ? Self.recordColumns : Self.recordColumnsWithoutData
        var sql = "SELECT \(columns) FROM records r WHERE r.idx > $1 AND "
        if scope.includeShared {
            sql += """
                (r.writer_id = $2 OR EXISTS (SELECT 1 FROM policies p WHERE p.user_id = r.user_id
                 AND p.writer_id = r.writer_id AND p.reader_id = $2 AND p.type = r.type AND p.can_read))
                """
        } else {
            sql += "r.writer_id = $2"
        }
        for (column, values) in [("writer_id", scope.writerIDs), ("user_id", scope.userIDs),
                                 ("record_id", scope.recordIDs), ("type", scope.types)] where !values.isEmpty {
            binds.append(values)
            sql += " AND r.\(column) = ANY($\(binds.count))"
        }
        binds.append(Int64(max(0, limit)))
        sql += " ORDER BY r.idx LIMIT $\(binds.count)"
        let query = PostgresQuery(unsafeSQL: sql, binds: binds)
        return try await perform("searching records") { [self] in try await fetch(query, on: client, Self.record) }
    }

    // MARK: Files

    private static let pendingColumns =
        "pending_id, writer_id, user_id, type, plain, data, rec_sig, file_meta, checksum, size, uploaded, created"

    private static func pending(_ row: PostgresRow) throws -> PendingFileRow {
        let (id, writer, user, type, plain, data, recSig, fileMeta, checksum, size, uploaded, created) =
            try row.decode((String, String, String, String, String, String, String?, String?, String, Int64, Bool,
                            Int64).self)
        return PendingFileRow(
            pendingID: id,
            record: RecordRow(recordID: id, writerID: writer, userID: user, type: type, plainJSON: plain,
                              dataJSON: data, recSig: recSig, fileMetaJSON: fileMeta, created: created,
                              lastModified: created, version: ""),
            checksum: checksum, size: size, uploaded: uploaded, created: created)
    }

    public func insertPendingFile(_ p: PendingFileRow) async throws {
        let r = p.record
        try await perform("inserting pending file \(p.pendingID)") { [self] in
            try await execute("""
                INSERT INTO pending_files (\(unescaped: Self.pendingColumns))
                VALUES (\(p.pendingID), \(r.writerID), \(r.userID), \(r.type), \(r.plainJSON), \(r.dataJSON),
                    \(r.recSig), \(r.fileMetaJSON), \(p.checksum), \(p.size), \(p.uploaded), \(p.created))
                """, on: client)
        }
    }

    public func pendingFile(id: String) async throws -> PendingFileRow? {
        try await perform("reading pending file \(id)") { [self] in
            try await fetch("SELECT \(unescaped: Self.pendingColumns) FROM pending_files WHERE pending_id = \(id)",
                            on: client, Self.pending).first
        }
    }

    public func claimUpload(pendingID: String, now: Int64, staleBefore: Int64) async throws -> Bool {
        try await perform("claiming the upload of pending file \(pendingID)") { [self] in
            try await execute("""
                UPDATE pending_files SET upload_started = \(now)
                WHERE pending_id = \(pendingID) AND NOT uploaded
                    AND (upload_started IS NULL OR upload_started < \(staleBefore))
                RETURNING 1
                """, on: client) == 1
        }
    }

    public func releaseUpload(pendingID: String) async throws {
        try await perform("releasing the upload of pending file \(pendingID)") { [self] in
            try await execute("""
                UPDATE pending_files SET upload_started = NULL WHERE pending_id = \(pendingID) AND NOT uploaded
                """, on: client)
        }
    }

    public func purgeExpired(now: Int64, pendingCreatedBefore: Int64) async throws -> [String] {
        try await perform("removing expired nonces, tokens, notes and pending files") { [self] in
            try await execute("DELETE FROM tsv1_nonces WHERE expires < \(now)", on: client)
            try await execute("DELETE FROM access_tokens WHERE expires < \(now)", on: client)
            try await execute("DELETE FROM notes WHERE expires_at < \(now)", on: client)
            return try await fetch("""
                DELETE FROM pending_files
                WHERE created < \(pendingCreatedBefore)
                    AND (upload_started IS NULL OR upload_started < \(pendingCreatedBefore))
                RETURNING pending_id
                """, on: client) { try $0.decode(String.self) }
        }
    }

    public func markUploaded(pendingID: String) async throws -> Bool {
        try await perform("marking pending file \(pendingID) uploaded") { [self] in
            try await execute("UPDATE pending_files SET uploaded = true WHERE pending_id = \(pendingID) RETURNING 1",
                              on: client) == 1
        }
    }

    /// Deletes the pending row and inserts its record in one transaction; of two concurrent commits, the second
    /// finds no pending row and returns `nil`.
    public func commitPendingFile(id: String, now: Int64, version: String) async throws -> RecordRow? {
        try await transaction("committing pending file \(id)") { [self] db -> RecordRow? in
            guard let pending = try await fetch(
                "DELETE FROM pending_files WHERE pending_id = \(id) RETURNING \(unescaped: Self.pendingColumns)",
                on: db, Self.pending).first else { return nil }
            var record = pending.record
            record.created = now
            record.lastModified = now
            record.version = version
            return try await insert(record, on: db)
        }
    }

    // MARK: Notes

    private static let noteColumns = """
        note_id, id_string, writer_client_id, recipient_signing_key, writer_signing_key, max_views, views, expires_at,
        created, body
        """

    private static func note(_ row: PostgresRow) throws -> NoteRow {
        let (id, name, writer, recipientKey, writerKey, maxViews, views, expiresAt, created, body) =
            try row.decode((String, String?, String?, String, String, Int?, Int, Int64?, Int64, String).self)
        return NoteRow(noteID: id, idString: name, writerClientID: writer, recipientSigningKey: recipientKey,
                       writerSigningKey: writerKey, maxViews: maxViews, views: views, expiresAt: expiresAt,
                       created: created, bodyJSON: body)
    }

    /// `INSERT INTO notes (…) VALUES (…)` for `n`, followed by `suffix`.
    private static func insertNote(_ n: NoteRow, _ suffix: String) -> PostgresQuery {
        """
        INSERT INTO notes (\(unescaped: noteColumns))
        VALUES (\(n.noteID), \(n.idString), \(n.writerClientID), \(n.recipientSigningKey), \(n.writerSigningKey),
            \(n.maxViews), \(n.views), \(n.expiresAt), \(n.created), \(n.bodyJSON))
        \(unescaped: suffix)
        """
    }

    public func insertNote(_ n: NoteRow) async throws -> Bool {
        try await perform("inserting note \(n.noteID)") { [self] in
            try await execute(Self.insertNote(n, "ON CONFLICT (id_string) DO NOTHING RETURNING 1"), on: client) == 1
        }
    }

    public func note(id: String) async throws -> NoteRow? {
        try await perform("reading note \(id)") { [self] in
            try await fetch("SELECT \(unescaped: Self.noteColumns) FROM notes WHERE note_id = \(id)", on: client,
                            Self.note).first
        }
    }

    public func note(name: String) async throws -> NoteRow? {
        try await perform("reading a note by name") { [self] in
            try await fetch("SELECT \(unescaped: Self.noteColumns) FROM notes WHERE id_string = \(name)", on: client,
                            Self.note).first
        }
    }

    public func viewNote(id: String, now: Int64) async throws -> NoteRow? {
        try await transaction("viewing note \(id)") { [self] db -> NoteRow? in
            guard var n = try await fetch(
                "SELECT \(unescaped: Self.noteColumns) FROM notes WHERE note_id = \(id) FOR UPDATE", on: db,
                Self.note).first else { return nil }
            if let expiry = n.expiresAt, expiry <= now {
                try await execute("DELETE FROM notes WHERE note_id = \(id)", on: db)
                return nil
            }
            n.views += 1
            if let m = n.maxViews, m > 0, n.views >= m {
                try await execute("DELETE FROM notes WHERE note_id = \(id)", on: db)
            } else {
                try await execute("UPDATE notes SET views = \(n.views) WHERE note_id = \(id)", on: db)
            }
            return n
        }
    }

    /// One statement for a named note (an upsert on the name, so that two processes replacing the same name
    /// concurrently both succeed and the later one wins); a plain insert for an unnamed one.
    public func replaceNote(_ n: NoteRow) async throws {
        let suffix = n.idString == nil ? "" : """
            ON CONFLICT (id_string) DO UPDATE SET note_id = EXCLUDED.note_id,
                writer_client_id = EXCLUDED.writer_client_id, recipient_signing_key = EXCLUDED.recipient_signing_key,
                writer_signing_key = EXCLUDED.writer_signing_key, max_views = EXCLUDED.max_views,
                views = EXCLUDED.views, expires_at = EXCLUDED.expires_at, created = EXCLUDED.created,
                body = EXCLUDED.body
            """
        try await perform("replacing note \(n.noteID)") { [self] in
            try await execute(Self.insertNote(n, suffix), on: client)
        }
    }

    public func deleteNote(id: String) async throws -> Bool {
        try await perform("deleting note \(id)") { [self] in
            try await execute("DELETE FROM notes WHERE note_id = \(id) RETURNING 1", on: client) == 1
        }
    }

    public func statistics() async throws -> [String: Int] {
        try await perform("counting rows") { [self] in
            var out: [String: Int] = [:]
            for table in ["clients", "registration_tokens", "access_keys", "policies", "records", "pending_files",
                          "notes", "access_tokens", "tsv1_nonces"] {
                out[table] = try await fetch("SELECT COUNT(*) FROM \(unescaped: table)", on: client) {
                    try $0.decode(Int.self)
                }.first ?? 0
            }
            return out
        }
    }
}

extension PolicyListing {
    /// The column that must name the client and the permission that must be set, for this listing. The same
    /// definition serves every backend.
    var filter: (column: String, permission: String) {
        switch self {
        case .outgoing: ("writer_id", "can_read")
        case .incoming: ("reader_id", "can_read")
        case .proxies: ("authorized_by", "can_authorize")
        case .granted: ("reader_id", "can_authorize")
        }
    }
}

/// What runs a query: the pool (any connection) or one connection inside a transaction.
private protocol QueryRunner {
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence
}

extension PostgresClient: QueryRunner {
    fileprivate func rows(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await self.query(query, logger: logger)
    }
}

extension PostgresConnection: QueryRunner {
    fileprivate func rows(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await self.query(query, logger: logger)
    }
}
