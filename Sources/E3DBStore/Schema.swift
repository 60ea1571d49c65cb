import E3DBRows
import GRDB

/// The store's SQLite schema, as versioned GRDB migrations. Names and layout are documented in docs/store.md.
enum StoreSchema {
    /// The store format this library writes and reads.
    static let formatVersion = 1

    /// Checks GRDB's log of applied migrations (`grdb_migrations`) before the migrator trusts it: every entry must be
    /// text, and the store's migrations it holds must be a prefix of their order (GRDB applies them in that order,
    /// so a gap means an edited entry, which would make the migrator run a migration again over its own tables).
    /// Names this library does not know (a later version's migrations) are left to GRDB.
    /// - Throws: `storeCorrupted` naming `grdb_migrations.identifier`.
    static func checkMigrationLog(_ pool: DatabasePool) throws {
        let order = migrator.migrations
        try pool.read { db in
            guard try db.tableExists("grdb_migrations") else { return }
            var applied: Set<String> = []
            var reader: UntrustedRow?
            for row in try Row.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") {
                reader = UntrustedRow(store: row, table: "grdb_migrations")
                applied.insert(try reader?.value("identifier", as: String.self) ?? "")
            }
            let done = order.map(applied.contains)
            if let reader, let gap = done.firstIndex(of: false), done[gap...].contains(true) {
                throw reader.error("identifier", "lacks migration \(order[gap]) though a later one is applied")
            }
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            // One row: the store's id, format, KDF (NULL parameters for a raw-key store), wrapped master key, and the
            // store's Curve25519 key pair (the authorizer of the EAKs it shares), its private half wrapped.
            try db.execute(
                sql: """
                    CREATE TABLE store_meta (
                        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                        format INTEGER NOT NULL,
                        store_id TEXT NOT NULL,
                        kdf TEXT NOT NULL,
                        kdf_ops INTEGER,
                        kdf_mem INTEGER,
                        kdf_salt BLOB NOT NULL,
                        wrapped_master BLOB NOT NULL,
                        box_public BLOB NOT NULL,
                        wrapped_box_private BLOB NOT NULL,
                        created TEXT NOT NULL
                    ) STRICT;
                    CREATE TABLE collections (
                        name TEXT PRIMARY KEY,
                        key_version INTEGER NOT NULL,
                        created TEXT NOT NULL
                    ) STRICT;
                    CREATE TABLE collection_keys (
                        collection TEXT NOT NULL REFERENCES collections(name),
                        version INTEGER NOT NULL,
                        wrapped_key BLOB NOT NULL,
                        PRIMARY KEY (collection, version)
                    ) STRICT;
                    CREATE TABLE records (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        id TEXT NOT NULL UNIQUE,
                        collection TEXT NOT NULL REFERENCES collections(name),
                        type TEXT NOT NULL,
                        version INTEGER NOT NULL,
                        key_version INTEGER NOT NULL,
                        created TEXT NOT NULL,
                        updated TEXT NOT NULL,
                        document BLOB NOT NULL,
                        mac BLOB NOT NULL
                    ) STRICT;
                    CREATE INDEX records_by_collection_type ON records(collection, type, seq);
                    CREATE INDEX records_by_key_version ON records(collection, key_version);
                    CREATE TABLE record_plain (
                        record_seq INTEGER NOT NULL REFERENCES records(seq) ON DELETE CASCADE,
                        key TEXT NOT NULL,
                        value TEXT NOT NULL,
                        PRIMARY KEY (record_seq, key)
                    ) STRICT, WITHOUT ROWID;
                    CREATE INDEX record_plain_by_value ON record_plain(key, value, record_seq);
                    """)
        }
        migrator.registerMigration("v2-blind-indexes") { db in
            // Blind indexes: definitions, and one truncated keyed-BLAKE2b token per record and index.
            try db.execute(
                sql: """
                    CREATE TABLE blind_indexes (
                        collection TEXT NOT NULL REFERENCES collections(name),
                        name TEXT NOT NULL,
                        fields TEXT NOT NULL,
                        bits INTEGER NOT NULL,
                        created TEXT NOT NULL,
                        PRIMARY KEY (collection, name)
                    ) STRICT;
                    CREATE TABLE blind_index_entries (
                        collection TEXT NOT NULL,
                        name TEXT NOT NULL,
                        token BLOB NOT NULL,
                        record_seq INTEGER NOT NULL REFERENCES records(seq) ON DELETE CASCADE
                    ) STRICT;
                    CREATE INDEX blind_index_lookup ON blind_index_entries(collection, name, token);
                    CREATE INDEX blind_index_by_record ON blind_index_entries(record_seq);
                    """)
        }
        migrator.registerMigration("v3-settings") { db in
            // Encrypted settings: each value sealed (with its key name inside) under a key derived from the master.
            try db.execute(
                sql: """
                    CREATE TABLE settings (
                        key TEXT PRIMARY KEY,
                        sealed BLOB NOT NULL,
                        updated TEXT NOT NULL
                    ) STRICT;
                    """)
        }
        migrator.registerMigration("v4-identities") { db in
            // E3DB client identities enrolled to open the store: the master key wrapped for each client's Curve25519
            // public key as an EAKInfo (JSON, API shape) whose authorizer is the store's own key pair.
            try db.execute(
                sql: """
                    CREATE TABLE store_identities (
                        public_key BLOB PRIMARY KEY,
                        client_id TEXT,
                        eak_info TEXT NOT NULL,
                        created TEXT NOT NULL
                    ) STRICT;
                    """)
        }
        migrator.registerMigration("v5-files") { db in
            // The encrypted file tree: one row per file (path in clear, body files/<id>.e3f beside the database),
            // its per-file access key wrapped under a key derived from the master key, bound by a keyed MAC.
            try db.execute(
                sql: """
                    CREATE TABLE files (
                        id TEXT NOT NULL UNIQUE,
                        path TEXT NOT NULL UNIQUE,
                        record_id TEXT,
                        size INTEGER NOT NULL,
                        encrypted_size INTEGER NOT NULL,
                        checksum BLOB NOT NULL,
                        wrapped_key BLOB NOT NULL,
                        created TEXT NOT NULL,
                        updated TEXT NOT NULL,
                        mac BLOB NOT NULL
                    ) STRICT;
                    CREATE INDEX files_by_record ON files(record_id);
                    """)
        }
        migrator.registerMigration("v6-collection-state") { db in
            // The authenticated state (docs/store.md): per collection its record count and the XOR digest of its
            // records' keyed elements, MACed with the write counter of its last change; one row with the store's
            // write counter and the digest of the collection rows' MACs. Filled at the first unlock.
            try db.execute(
                sql: """
                    CREATE TABLE collection_state (
                        collection TEXT PRIMARY KEY,
                        record_count INTEGER NOT NULL,
                        digest BLOB NOT NULL,
                        write_counter INTEGER NOT NULL,
                        mac BLOB NOT NULL
                    ) STRICT;
                    CREATE TABLE store_state (
                        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                        write_counter INTEGER NOT NULL,
                        states_digest BLOB NOT NULL,
                        mac BLOB NOT NULL
                    ) STRICT;
                    """)
        }
        migrator.registerMigration("v7-key-header") { db in
            // The key material lives in the key header (keys.sqlite) beside the database, written before this runs
            // (a store made before it has its rows copied there first): the database no longer holds it.
            try db.execute(sql: "DROP TABLE IF EXISTS store_identities; DROP TABLE IF EXISTS store_meta")
        }
        return migrator
    }
}
