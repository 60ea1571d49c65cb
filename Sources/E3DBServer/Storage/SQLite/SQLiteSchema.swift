import E3DBPrimitives
import Foundation
internal import GRDB

/// The SQLite schema: versioned migrations (GRDB's `DatabaseMigrator`) run under a lock of the data directory.
extension SQLiteStorage {
    private static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE server_settings (key TEXT PRIMARY KEY, value BLOB NOT NULL);
                    CREATE TABLE registration_tokens (token_hash BLOB PRIMARY KEY, uses_left INTEGER, created INTEGER NOT NULL);
                    CREATE TABLE clients (
                        client_id TEXT PRIMARY KEY, name TEXT NOT NULL, public_key TEXT NOT NULL, signing_key TEXT,
                        api_key_id TEXT NOT NULL UNIQUE, api_secret_hash BLOB NOT NULL, enabled INTEGER NOT NULL,
                        has_backup INTEGER NOT NULL, registration_token_hash BLOB NOT NULL, created INTEGER NOT NULL);
                    CREATE TABLE access_tokens (token_hash BLOB PRIMARY KEY, client_id TEXT NOT NULL, expires INTEGER NOT NULL);
                    CREATE TABLE tsv1_nonces (nonce TEXT PRIMARY KEY, expires INTEGER NOT NULL);
                    CREATE TABLE access_keys (
                        writer_id TEXT NOT NULL, user_id TEXT NOT NULL, reader_id TEXT NOT NULL, type TEXT NOT NULL,
                        eak TEXT NOT NULL, authorizer_id TEXT NOT NULL, authorizer_public_key TEXT NOT NULL,
                        signer_id TEXT, signer_signing_key TEXT,
                        PRIMARY KEY (writer_id, user_id, reader_id, type));
                    CREATE TABLE policies (
                        user_id TEXT NOT NULL, writer_id TEXT NOT NULL, reader_id TEXT NOT NULL, type TEXT NOT NULL,
                        can_read INTEGER NOT NULL, can_authorize INTEGER NOT NULL, authorized_by TEXT,
                        PRIMARY KEY (user_id, writer_id, reader_id, type));
                    CREATE INDEX policies_reader ON policies (reader_id);
                    CREATE INDEX policies_writer ON policies (writer_id);
                    CREATE TABLE records (
                        idx INTEGER PRIMARY KEY AUTOINCREMENT, record_id TEXT NOT NULL UNIQUE, writer_id TEXT NOT NULL,
                        user_id TEXT NOT NULL, type TEXT NOT NULL, plain TEXT NOT NULL, data TEXT NOT NULL, rec_sig TEXT,
                        file_meta TEXT, created INTEGER NOT NULL, last_modified INTEGER NOT NULL, version TEXT NOT NULL);
                    CREATE INDEX records_writer ON records (writer_id, idx);
                    CREATE TABLE pending_files (
                        pending_id TEXT PRIMARY KEY, writer_id TEXT NOT NULL, user_id TEXT NOT NULL, type TEXT NOT NULL,
                        plain TEXT NOT NULL, data TEXT NOT NULL, rec_sig TEXT, file_meta TEXT, checksum TEXT NOT NULL,
                        size INTEGER NOT NULL, uploaded INTEGER NOT NULL, created INTEGER NOT NULL);
                    CREATE TABLE notes (
                        note_id TEXT PRIMARY KEY, id_string TEXT UNIQUE, writer_client_id TEXT,
                        recipient_signing_key TEXT NOT NULL, writer_signing_key TEXT NOT NULL, max_views INTEGER,
                        views INTEGER NOT NULL, expires_at INTEGER, created INTEGER NOT NULL, body TEXT NOT NULL);
                    """)
            try db.execute(
                sql: "INSERT INTO server_settings (key, value) VALUES ('secret', ?)",
                arguments: [Data(SecureRandom.bytes(count: 32))])
        }
        m.registerMigration("v2 upload claims and expiry indexes") { db in
            try db.execute(
                sql: """
                    ALTER TABLE pending_files ADD COLUMN upload_started INTEGER;
                    CREATE INDEX pending_files_created ON pending_files (created);
                    CREATE INDEX tsv1_nonces_expires ON tsv1_nonces (expires);
                    CREATE INDEX access_tokens_expires ON access_tokens (expires);
                    """)
        }
        m.registerMigration("v3 file body deletion outbox") { db in
            try db.execute(
                sql: """
                    CREATE TABLE file_body_deletions (
                        id TEXT PRIMARY KEY,
                        enqueued INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)),
                        lease_until INTEGER NOT NULL DEFAULT 0);
                    CREATE INDEX file_body_deletions_lease ON file_body_deletions (lease_until, enqueued);
                    """)
        }
        return m
    }

    /// Compares the applied migrations with this build's, reading only.
    package func checkSchema() async throws {
        let migrator = Self.migrator
        let applied = try await read { db in try migrator.appliedIdentifiers(db) }
        let unknown = applied.subtracting(migrator.migrations)
        guard unknown.isEmpty else {
            throw E3DBError(
                .storageSchemaTooNew,
                "the SQLite database in the data directory was migrated by a newer version of e3dbkit-server: it "
                    + "has applied migration \(unknown.sorted().joined(separator: ", ")), which this version does "
                    + "not know; run the newer version")
        }
        let missing = migrator.migrations.filter { !applied.contains($0) }
        guard missing.isEmpty else {
            throw Self.schemaTooOld(at: "the data directory", missing: missing.joined(separator: ", "))
        }
    }

    /// Nil: the database is a file of this process, on this machine's clock.
    package func databaseTime() async throws -> Int64? { nil }

    /// Applies the migrations that have not run, on GRDB's writer queue, holding the data directory's migration
    /// lock (other processes migrating the same directory wait; migrations take milliseconds). The lock is polled
    /// rather than waited for, so that no cooperative thread blocks.
    package func migrate() async throws {
        // Safety: the path is lent to `open` as a NUL-terminated copy for the call only; the descriptor is closed by
        // the `defer` below.
        let lock = unsafe open(migrationLockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else {
            throw E3DBError(
                .storageUnavailable, "cannot open the migration lock in the data directory (errno \(errno))")
        }
        defer { closeDescriptor(lock) }  // closing releases the lock
        while flock(lock, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw E3DBError(
                    .storageUnavailable, "cannot take the migration lock in the data directory (errno \(errno))")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let pool = self.pool
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                Self.migrator.asyncMigrate(pool) { result in continuation.resume(with: result.map { _ in () }) }
            }
        } catch {
            throw E3DBError(.storageUnavailable, "migrating the SQLite database failed: \(error)", cause: error)
        }
    }
}

/// `close(2)` (inside ``SQLiteStorage`` the name is its own `close()`).
private func closeDescriptor(_ fd: Int32) { _ = close(fd) }
