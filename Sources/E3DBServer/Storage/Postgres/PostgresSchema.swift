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

    private struct Migration: Sendable {
        var version: Int64
        var name: String
        var statements: [String]
        /// Whether this migration creates the server secret.
        var createsSecret = false
    }

    private static let migrations: [Migration] = [
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
    ]

    /// Applies the migrations this build knows and the database lacks, each in its own transaction that first takes
    /// an advisory lock (processes starting together wait for each other and then skip what is done).
    /// First checks that a connection can be made (``checkConnection()``), then that the database has applied no
    /// migration this build does not know: a node of an older version refuses a schema migrated by a newer one.
    /// - Throws: `E3DBError` `.storageSchemaTooNew` naming the unknown versions, or what ``checkConnection()`` and
    ///   the statements throw.
    public func migrate() async throws {
        try await checkConnection()
        let known = Self.migrations.map(\.version)
        let unknown = try await transaction("checking the schema version") { [self] db -> [(Int64, String)] in
            try await execute("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", on: db)
            try await createMigrationsTable(on: db)
            return try await fetch(
                "SELECT version, name FROM schema_migrations WHERE version <> ALL(\(known)) ORDER BY version",
                on: db
            ) { try $0.decode((Int64, String).self) }
        }
        guard unknown.isEmpty else {
            let versions = unknown.map { "\($0.0) (\($0.1))" }.joined(separator: ", ")
            throw E3DBError(
                .storageSchemaTooNew,
                "the database at \(redactedURL) was migrated by a newer version of e3dbkit-server: it has applied "
                    + "migration \(versions), which this version does not know (it knows 1...\(known.max() ?? 0)); "
                    + "run this node's newer version")
        }
        for migration in Self.migrations {
            let applied = try await transaction("migration \(migration.version)") { [self] db -> Bool in
                try await execute("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", on: db)
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

    /// Creates `schema_migrations` when it does not exist (under the migration lock).
    private func createMigrationsTable(on db: PostgresConnection) async throws {
        try await execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version bigint PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)
            """, on: db)
    }
}
