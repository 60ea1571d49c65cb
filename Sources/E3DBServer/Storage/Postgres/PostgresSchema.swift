import E3DBPrimitives
internal import PostgresNIO

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The PostgreSQL schema: versioned migrations in `schema_migrations`, each in its own transaction under an
/// advisory lock.
extension PostgresStorage {
    /// Serializes migrations across processes ("E3DBMIGR").
    private static let migrationLock: Int64 = 0x4533_4442_4D49_4752
    /// Serializes record inserts so that indexes commit in order ("E3DBRECS").
    static let recordInsertLock: Int64 = 0x4533_4442_5245_4353
    /// Lets one maintenance purge run at a time across processes ("E3DBMAIN").
    static let maintenanceLock: Int64 = 0x4533_4442_4D41_494E

    struct Migration: Sendable {
        var version: Int64
        var name: String
        var statements: [String]
        /// Whether this migration creates the server secret.
        var createsSecret = false
    }

    static let migrations: [Migration] = [
        Migration(
            version: 1, name: "initial schema",
            statements: [
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
        Migration(
            version: 2, name: "upload claims",
            statements: [
                "ALTER TABLE pending_files ADD COLUMN upload_started bigint",
                "CREATE INDEX pending_files_created ON pending_files (created)",
            ]),
        Migration(
            version: 3, name: "file body deletion outbox",
            statements: [
                """
                CREATE TABLE file_body_deletions (
                    id text PRIMARY KEY,
                    enqueued bigint NOT NULL DEFAULT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
                    lease_until bigint NOT NULL DEFAULT 0)
                """,
                "CREATE INDEX file_body_deletions_lease ON file_body_deletions (lease_until, enqueued)",
            ]),
    ]

    /// The limits of ``migrate()``: its own deadline (not the storage calls' `operationTimeout`) and how its DDL
    /// waits for table locks.
    struct MigrationLimits: Sendable {
        /// How long one step of ``migrate()`` may take (the wait for another process's migration under the
        /// advisory lock included): ten minutes. It is also the step's `statement_timeout`, in place of the
        /// session's (a long index build must not be cut at 25 s).
        var deadline: Duration = .seconds(600)
        /// The `lock_timeout` of the migration's statements: an `ALTER TABLE` that cannot lock its table within it
        /// gives up (and is retried) rather than queue for the lock, since every query of the table would queue
        /// behind it meanwhile.
        var lockTimeout: Duration = .seconds(3)
        /// Attempts of a migration whose statement met a lock held elsewhere, with ``pause`` between them.
        var attempts = 10
        var pause: Duration = .seconds(2)
    }

    /// Applies the migrations this build knows and the database lacks, each in its own transaction that first takes
    /// an advisory lock (processes starting together wait for each other and then skip what is done).
    /// First checks that a connection can be made (``checkConnection()``), then that the database has applied no
    /// migration this build does not know: a node of an older version refuses a schema migrated by a newer one.
    /// Each step has `MigrationLimits`' deadline (minutes), and its statements a short `lock_timeout` with a bounded
    /// retry, so that a migration never stalls a table's traffic behind its lock request.
    /// - Throws: `E3DBError` `.storageSchemaTooNew` naming the unknown versions, `.storageMigrationBlocked` when a
    ///   table stays locked by another session, or what ``checkConnection()`` and the statements throw.
    package func migrate() async throws {
        try await migrate(Self.migrations, limits: MigrationLimits())
    }

    /// ``migrate()`` with the migrations and limits given (tests add one that meets a lock).
    func migrate(_ migrations: [Migration], limits: MigrationLimits) async throws {
        try await checkConnection()
        let known = migrations.map(\.version)
        let unknown = try await migrationStep("checking the schema version", limits) { [self] db in
            try await createMigrationsTable(on: db)
            return try await fetch(
                "SELECT version, name FROM schema_migrations WHERE version <> ALL(\(known)) ORDER BY version",
                on: db
            ) { try $0.decode((Int64, String).self) }
        }
        guard unknown.isEmpty else { throw schemaTooNew(unknown, known: known) }
        for migration in migrations {
            let applied = try await migrationStep("migration \(migration.version)", limits) { [self] db -> Bool in
                let done = try await execute(
                    "SELECT 1 FROM schema_migrations WHERE version = \(migration.version)", on: db)
                guard done == 0 else { return false }
                try await execute(
                    PostgresQuery(unsafeSQL: "SET LOCAL lock_timeout = \(max(1, limits.lockTimeout.milliseconds))"),
                    on: db)
                for statement in migration.statements {
                    try await execute(PostgresQuery(unsafeSQL: statement), on: db)
                }
                if migration.createsSecret {
                    let secret = Data(SecureRandom.bytes(count: 32))
                    try await execute("INSERT INTO server_settings (key, value) VALUES ('secret', \(secret))", on: db)
                }
                let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
                try await execute(
                    """
                    INSERT INTO schema_migrations (version, name, applied_at)
                    VALUES (\(migration.version), \(migration.name), \(now))
                    """, on: db)
                return true
            }
            if applied { logger.info("PostgreSQL migration \(migration.version) (\(migration.name)) applied") }
        }
    }

    /// One transaction of ``migrate(_:limits:)`` under the limits' deadline: its `statement_timeout` raised to the
    /// deadline, then the migration advisory lock taken, then `body`. A statement that gives up on a table lock
    /// (`lock_timeout`, SQLSTATE 55P03) rolls the transaction back, which is tried again after a pause, at most
    /// `attempts` times in all.
    private func migrationStep<T: Sendable>(
        _ what: String, _ limits: MigrationLimits, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await Self.perform(what, timeout: limits.deadline, url: redactedURL) { [self] in
            var attempt = 1
            while true {
                do {
                    return try await client.withTransaction(logger: logger) { [self] db in
                        try await execute(
                            PostgresQuery(
                                unsafeSQL: "SET LOCAL statement_timeout = \(max(1, limits.deadline.milliseconds))"),
                            on: db)
                        try await execute("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", on: db)
                        return try await body(db)
                    }
                } catch let error as PostgresTransactionError where Self.isLockTimeout(error) {
                    guard attempt < limits.attempts else {
                        throw E3DBError(
                            .storageMigrationBlocked,
                            "\(what) could not lock a table it changes within \(limits.lockTimeout) in \(attempt) "
                                + "attempts: another session holds the table (PostgreSQL lock_timeout); end that "
                                + "session's transaction and run `e3dbkit-server migrate` again")
                    }
                    logger.warning(
                        "a migration met a table lock held by another session; trying again",
                        metadata: ["step": .string(what), "attempt": .stringConvertible(attempt)])
                    attempt += 1
                    try await Task.sleep(for: limits.pause)
                }
            }
        }
    }

    /// Whether a transaction failed because a statement gave up waiting for a lock (`lock_timeout`).
    private static func isLockTimeout(_ error: PostgresTransactionError) -> Bool {
        guard let inner = (error.closureError ?? error.commitError) as? PSQLError else { return false }
        return inner.serverInfo?[.sqlState] == "55P03"
    }

    /// The refusal of a database that has applied the migrations `unknown` (version, name).
    private func schemaTooNew(_ unknown: [(Int64, String)], known: [Int64]) -> E3DBError {
        let versions = unknown.map { "\($0.0) (\($0.1))" }.joined(separator: ", ")
        return E3DBError(
            .storageSchemaTooNew,
            "the database at \(redactedURL) was migrated by a newer version of e3dbkit-server: it has applied "
                + "migration \(versions), which this version does not know (it knows 1...\(known.max() ?? 0)); "
                + "run this node's newer version")
    }

    /// Compares the applied migrations with this build's, reading only (no lock, no table created).
    package func checkSchema() async throws {
        try await checkConnection()
        let applied = try await perform("checking the schema version") { [self] in
            guard
                try await fetch(
                    "SELECT to_regclass('schema_migrations') IS NOT NULL", on: client, { try $0.decode(Bool.self) }
                )
                .first == true
            else { return [(Int64, String)]() }
            return try await fetch("SELECT version, name FROM schema_migrations ORDER BY version", on: client) {
                try $0.decode((Int64, String).self)
            }
        }
        let known = Self.migrations.map(\.version)
        let unknown = applied.filter { !known.contains($0.0) }
        guard unknown.isEmpty else { throw schemaTooNew(unknown, known: known) }
        let missing = Self.migrations.filter { m in !applied.contains { $0.0 == m.version } }
        guard missing.isEmpty else {
            throw Self.schemaTooOld(
                at: redactedURL, missing: missing.map { "\($0.version) (\($0.name))" }.joined(separator: ", "))
        }
    }

    /// `clock_timestamp()` in microseconds.
    package func databaseTime() async throws -> Int64? {
        try await perform("reading the database's clock") { [self] in
            try await fetch(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint", on: client,
                { try $0.decode(Int64.self) }
            ).first
        }
    }

    /// Creates `schema_migrations` when it does not exist (under the migration lock).
    private func createMigrationsTable(on db: PostgresConnection) async throws {
        try await execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version bigint PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)
            """, on: db)
    }
}

extension ServerStorage {
    /// The refusal of an administrative command on a database that lacks the migrations `missing` (a description).
    static func schemaTooOld(at place: String, missing: String) -> E3DBError {
        E3DBError(
            .storageSchemaTooOld,
            "the database at \(place) has not been migrated to this version of e3dbkit-server (it lacks migration "
                + "\(missing)): run `e3dbkit-server migrate` first (administrative commands do not migrate)")
    }
}
