import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
public import Foundation
import GRDB

/// Progress of a master-key rekey.
public struct RekeyProgress: Sendable, Hashable {
    /// Records copied under the new master key so far (with those an interrupted run copied, when resumed).
    public let recordsDone: Int
    /// Records in the store.
    public let recordsTotal: Int
    /// Whether this run resumed the copy of an interrupted one.
    public let resumed: Bool
}

extension EncryptedStore {
    /// Replaces the store's master key with a fresh one, so that the old master key (an old passphrase with an old
    /// copy of the file, an old `store_meta` row, old wrapped collection keys) opens nothing written afterwards.
    ///
    /// The store is copied into a new database file beside it (`store-<random hex>.sqlite`), created as a new
    /// store's database is (encrypted under the new master key's page key when the store's file is encrypted,
    /// plain when it is plain), through the store's own write paths: a new access key for every collection (its
    /// key version one more than the collection's highest), every record decrypted and encrypted again (same id, version,
    /// timestamps, type and `plain`) with its binding MAC and blind-index tokens under keys of the new master key,
    /// every setting sealed again, and every file's access key sealed under the new files key with a new binding
    /// MAC (file bodies are not rewritten: their data keys are sealed in the per-file access keys). Records are
    /// copied in batches of `batchSize`, one transaction each in the copy, which records its progress; the key
    /// header names the copy and keeps its new master key sealed under the old one until the commit point.
    ///
    /// The commit point is one transaction of the key header, once the copy is complete, checkpointed and synced:
    /// it names the copy as the database and replaces the key material (the new master key sealed under
    /// `newCredential` (or `credential`) with a new salt, the store's id and Curve25519 key pair kept with its
    /// private half sealed under the new master key, every enrolled identity's EAK made again for the new master
    /// key). The old database file is removed after it. A crash before it leaves the old store whole (the copy is
    /// never opened as the store); the next `rekey` resumes the copy when the store has not changed since, or
    /// starts it again. A crash after it leaves the new store and the old file, which `open` never removes: the next `rekey`, or
    /// `removeStaleDatabaseFiles()` (`store gc`), does.
    ///
    /// Cost: O(records) (every record is decrypted and encrypted again) and free disk space for one copy of the
    /// database. While it copies, it holds the store's write lock: writers in other connections wait, then fail
    /// with `storeBusy`; readers go on. No other connection (in this or another process) may have the store open
    /// at the commit point: it refuses with `storeBusy` while one has (nothing is changed; run it again once they
    /// are closed), and any connection opened meanwhile would go on with the old file. Close every other
    /// ``EncryptedStore`` of this directory first, and use the store this returns.
    ///
    /// `changeCredential(to:kdf:)` is the O(1) alternative that changes only the passphrase or key.
    /// - Parameters:
    ///   - directory: the store's directory.
    ///   - credential: what opens the store now (a passphrase, a raw key, or an enrolled identity on a store that
    ///     has no passphrase or key).
    ///   - newCredential: a new passphrase or key to seal the new master key under (nil: `credential` again).
    ///   - kdfParameters: the Argon2id cost of a passphrase (nil: the store's current cost, or `moderate`).
    ///   - batchSize: records per transaction in the copy.
    ///   - progress: called after each batch.
    /// - Returns: the store, open on its new database file with the new master key.
    /// - Throws: `wrongKey`; `invalidParameter` for an identity as the credential of a store that has a
    ///   passphrase or key (the new master key could not be sealed under it); `recordTampered`, `fileTampered`,
    ///   `storeCorrupted` for what does not authenticate under the old master key (nothing is swapped);
    ///   `storeBusy`; `cancelled` between batches (resumable); `databaseError`.
    @discardableResult
    public static func rekey(
        at directory: URL, credential: StoreCredential, newCredential: StoreCredential? = nil,
        kdfParameters: Argon2id.Parameters? = nil, batchSize: Int = 500,
        progress: (@Sendable (RekeyProgress) -> Void)? = nil
    ) throws(E3DBError) -> EncryptedStore {
        try rekey(
            at: directory, credential: credential, newCredential: newCredential, kdfParameters: kdfParameters,
            batchSize: batchSize, progress: progress, cancellation: nil)
    }

    /// `rekey(at:credential:newCredential:kdfParameters:batchSize:progress:)`, also stopped between batches once
    /// `cancellation` is set (the async form's, which runs this on a thread outside its task).
    static func rekey(
        at directory: URL, credential: StoreCredential, newCredential: StoreCredential?,
        kdfParameters: Argon2id.Parameters?, batchSize: Int, progress: (@Sendable (RekeyProgress) -> Void)?,
        cancellation: FileCancellation?
    ) throws(E3DBError) -> EncryptedStore {
        let sealing = newCredential ?? credential
        let old = try open(at: directory, credential: credential)
        // The store opened and authenticated: an old database an interrupted rekey left goes now.
        try old.removeStaleDatabaseFiles()
        let header = try readHeader(old.keyHeader)
        if case .identity = sealing, !header.wrappedMaster.isEmpty {
            throw E3DBError(
                .invalidParameter,
                "this store opens with a passphrase or key: give it (or a new one) to seal the new master key under")
        }
        let plan = RekeyPlan(
            sealing: sealing, parameters: kdfParameters ?? header.parameters ?? KDFPreset.moderate.parameters,
            batchSize: max(1, batchSize), progress: progress, cancellation: cancellation)
        let copy = try databaseCall("rekeying the store") { () throws -> RekeyCopy in
            try old.pool.writeWithoutTransaction { oldDB -> RekeyCopy in
                var made: RekeyCopy?
                // The write lock, held for the whole copy: no write can land in the old file and be lost.
                try oldDB.inTransaction(.immediate) {
                    made = try old.copyForRekey(oldDB, header: header, plan: plan)
                    return .commit
                }
                guard let made else { throw E3DBError(.databaseError, "the rekey's copy was not made") }
                return made
            }
        }
        try databaseCall("closing the store for the swap") {
            try old.pool.close()
            try copy.store.pool.close()
        }
        try commitRekey(old: old, copy: copy)
        let newHeader = try readHeader(old.keyHeader)
        let database = try openDatabase(in: directory, header: newHeader, keys: copy.keys, creating: false)
        return EncryptedStore(
            directory: directory, header: newHeader, keyHeader: try KeyHeader.open(in: directory), database: database,
            keys: copy.keys)
    }

    /// The commit point of a rekey: one transaction of the key header that names the copy as the database and puts
    /// in the new key material (`RekeyCopy.commit`). First both databases leave WAL mode (each WAL
    /// checkpointed into its file and removed, so that no WAL is left to replay; SQLite refuses this while another
    /// connection has the file open: `storeBusy`, nothing changed), the copy loses its progress table and is
    /// synced. After it, the old database file is removed (a crash before that leaves it for the next `open`).
    static func commitRekey(old: EncryptedStore, copy: RekeyCopy) throws(E3DBError) {
        try leaveWAL(old.databaseURI ?? old.databasePath)
        let target = copy.store
        try leaveWAL(
            target.databaseURI ?? target.databasePath,
            first: "PRAGMA secure_delete = ON; DROP TABLE IF EXISTS rekey_progress")
        do throws(FileIOError) {
            try FileIO.sync(path: target.databasePath)
            try FileIO.syncDirectory(target.directory.path)
        } catch {
            throw E3DBError(.databaseError, "cannot sync the rekeyed database: \(error)")
        }
        try databaseCall("committing the rekey") { try old.keyHeader.write { db in try copy.commit(db) } }
        for suffix in ["", "-wal", "-shm", "-journal"] {
            try? FileManager.default.removeItem(atPath: old.databasePath + suffix)
        }
    }

    /// Checkpoints a database's WAL into it and leaves WAL mode (after running `first`, when given). `location`
    /// is its path or E3DBSQLite URI.
    /// - Throws: `storeBusy` while another connection has it open.
    static func leaveWAL(_ location: String, first: String? = nil) throws(E3DBError) {
        try databaseCall("closing the store's database for the rekey's commit") {
            let queue = try DatabaseQueue(path: location)
            let mode = try queue.writeWithoutTransaction { db -> String? in
                if let first { try db.execute(sql: first) }
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                return try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE")
            }
            try queue.close()
            guard mode?.lowercased() == "delete" else {
                throw E3DBError(.storeBusy, "another connection has the store open; close it and run rekey again")
            }
        }
    }

    /// Removes an unfinished rekey's copy and its journals: only a rekey copy's name (`store-<8 hex>.sqlite`), never
    /// the store's live database file, and only regular files.
    func removeRekeyCopy(_ name: String) throws(E3DBError) {
        guard KeyHeader.isRekeyCopyName(name), name != headerBinding.databaseFile else {
            throw E3DBError(
                .storeCorrupted, "the key header's rekey row names \(name), which is not a rekey's copy",
                context: .init(part: "rekey_pending.database_file"))
        }
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let url = directory.appendingPathComponent(name + suffix)
            if try StoreFileSystem.kind(of: url) == .regularFile { try? FileManager.default.removeItem(at: url) }
        }
    }

    /// Copies the store (read in `oldDB`, inside the transaction that holds its write lock) into the rekey's copy,
    /// resuming an interrupted copy of the same store state.
    func copyForRekey(_ oldDB: Database, header: Header, plan: RekeyPlan) throws -> RekeyCopy {
        let oldKeys = try currentKeys()
        let structure = try EncryptedStore.rekeyStructure(oldDB)
        let pending = try keyHeader.read { db in try KeyHeader.pendingRekey(db) }
        var state: RekeyState
        if let pending, let resumed = try resumeRekey(oldDB, pending: pending, structure: structure, keys: oldKeys) {
            state = resumed
        } else {
            if let pending { try removeRekeyCopy(pending.file) }
            state = try startRekey(oldDB, structure: structure, keys: oldKeys)
        }
        let target = state.store
        let newKeys = try target.currentKeys()
        let total = try Int.fetchOne(oldDB, sql: "SELECT COUNT(*) FROM records") ?? 0
        var indexes: [String: [(index: BlindIndex, key: SecureBytes)]] = [:]
        while true {
            if Task.isCancelled || plan.cancellation?.isCancelled == true {
                throw E3DBError(.cancelled, "the rekey was cancelled; call it again to resume")
            }
            let rows = try Row.fetchAll(
                oldDB, sql: "SELECT * FROM records WHERE seq > ? ORDER BY seq LIMIT ?",
                arguments: [state.lastSeq, plan.batchSize])
            if rows.isEmpty { break }
            var copies: [(collection: String, row: NewRecordRow)] = []
            for row in rows {
                let stored = StoredRow(row)
                guard stored.seq != nil,
                    let collection = String.fromDatabaseValue(row["collection"] as DatabaseValue)
                else {
                    throw E3DBError(.storeCorrupted, "a record row has no sequence number or collection")
                }
                copies.append(
                    (collection, try rekeyed(stored, collection: collection, into: target, keys: newKeys)))
                state.add(stored)
            }
            try target.pool.write { db in
                // Runs of one collection's records, each through the state update every record write makes.
                var start = copies.startIndex
                while start < copies.endIndex {
                    let collection = copies[start].collection
                    var end = start
                    while end < copies.endIndex && copies[end].collection == collection { end += 1 }
                    let collectionIndexes =
                        try indexes[collection] ?? target.indexKeys(db, keys: newKeys, collection: collection)
                    indexes[collection] = collectionIndexes
                    try target.writingRecords(db, newKeys, collection: collection) { change in
                        for copy in copies[start..<end] {
                            try target.insertRecord(
                                db, copy.row, collection: collection, indexes: collectionIndexes, state: &change)
                        }
                    }
                    start = end
                }
                state.done += copies.count
                try db.execute(
                    sql: "UPDATE rekey_progress SET last_seq = ?, records = ?, digest = ?",
                    arguments: [state.lastSeq, state.done, state.digest])
            }
            plan.progress?(RekeyProgress(recordsDone: state.done, recordsTotal: total, resumed: state.resumed))
        }
        let wrapping = try StoreKeys.wrapping(newKeys.master, for: plan.sealing, kdfParameters: plan.parameters)
        try target.pool.write { db in try copyRest(oldDB, into: db, target: target) }
        return RekeyCopy(store: target, keys: newKeys, wrapping: wrapping, wrappedBoxKey: state.wrappedBoxKey)
    }

    /// A record authenticated and decrypted under the old master key, encrypted again under the collection's new
    /// access key and bound in the same place (id, version, timestamps) under the new master key.
    func rekeyed(_ stored: StoredRow, collection: String, into target: EncryptedStore, keys: StoreKeys) throws
        -> NewRecordRow
    {
        let record = try decode(stored, collection: collection)
        guard let created = stored.created, let updated = stored.updated else {
            throw E3DBError(.storeCorrupted, "record \(record.id) has no timestamps")
        }
        let access = try target.accessKey(for: collection, create: false)
        let document = EncryptedDocument(
            meta: record.meta, data: target.encryptFields(record.data, accessKey: access.key), recordSignature: nil)
        let bytes = document.jsonData()
        let mac = try target.bindingMAC(
            keys, collection: collection, id: record.id, version: record.version, keyVersion: access.version,
            created: created, updated: updated, document: bytes)
        return NewRecordRow(
            reference: RecordReference(id: record.id, version: record.version), type: record.meta.type,
            keyVersion: access.version, time: created, document: bytes, mac: mac, plain: record.meta.plain,
            data: record.data, updated: updated)
    }

    /// The copy's settings and files under the new master key (in the copy's last transaction).
    func copyRest(_ oldDB: Database, into db: Database, target: EncryptedStore) throws {
        let oldKeys = try currentKeys()
        let newKeys = try target.currentKeys()
        try db.execute(sql: "DELETE FROM settings; DELETE FROM files")
        for row in try Row.fetchAll(oldDB, sql: "SELECT key, sealed, updated FROM settings ORDER BY key") {
            guard let key = String.fromDatabaseValue(row["key"] as DatabaseValue),
                let sealed = Data.fromDatabaseValue(row["sealed"] as DatabaseValue)
            else { throw E3DBError(.storeCorrupted, "a settings row is damaged") }
            let payload = try EncryptedStore.openSetting(sealed, key: key, keys: oldKeys)
            try db.execute(
                sql: "INSERT INTO settings (key, sealed, updated) VALUES (?, ?, ?)",
                arguments: [
                    key, try EncryptedStore.sealSetting(payload, keys: newKeys), row["updated"] as DatabaseValue,
                ])
        }
        let oldFilesKey = try filesKey(oldKeys)
        let newFilesKey = try target.filesKey(newKeys)
        for row in try Row.fetchAll(oldDB, sql: "SELECT * FROM files ORDER BY rowid") {
            var entry = try decodeFile(FileRow(row), keys: oldKeys)
            entry.wrappedKey = StoreKeys.wrap(try entry.accessKey(oldFilesKey).secretBoxKey, under: newFilesKey)
            try target.insertFile(db, entry, keys: newKeys)
        }
    }

    /// Starts a copy: a new master key (sealed under the old one in the key header with the copy's name, written
    /// before the copy's file is made, so that a crash can be resumed), a new database file with the store's
    /// schema, the collections with new access keys and the blind-index definitions.
    func startRekey(_ oldDB: Database, structure: Data, keys: StoreKeys) throws -> RekeyState {
        let master = SecretBox.Key()
        var file: String
        repeat {
            file = "store-" + String(format: "%08x", UInt32.random(in: 0...UInt32.max)) + ".sqlite"
        } while file == URL(fileURLWithPath: databasePath).lastPathComponent
        try keyHeader.write { db in
            try db.execute(sql: KeyHeader.rekeySchema)
            try db.execute(
                sql: "INSERT OR REPLACE INTO rekey_pending (singleton, database_file, sealed_master) VALUES (1, ?, ?)",
                arguments: [file, StoreKeys.wrap(master, under: keys.master)])
        }
        try removeRekeyCopy(file)
        let state = try RekeyState(master: master, oldKeys: keys, owner: self, file: file, resumed: false)
        try state.store.pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE rekey_progress (
                        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                        structure BLOB NOT NULL,
                        last_seq INTEGER NOT NULL,
                        records INTEGER NOT NULL,
                        digest BLOB NOT NULL
                    ) STRICT;
                    """)
            try db.execute(
                sql: "INSERT INTO rekey_progress VALUES (1, ?, 0, 0, ?)", arguments: [structure, state.digest])
            let collections = try Row.fetchAll(oldDB, sql: "SELECT name, created FROM collections ORDER BY name")
            for row in collections {
                let name = row["name"] as DatabaseValue
                let highest =
                    try Int.fetchOne(
                        oldDB, sql: "SELECT MAX(version) FROM collection_keys WHERE collection = ?", arguments: [name])
                    ?? 0
                try db.execute(
                    sql: "INSERT INTO collections (name, key_version, created) VALUES (?, ?, ?)",
                    arguments: [name, highest + 1, row["created"] as DatabaseValue])
                try db.execute(
                    sql: "INSERT INTO collection_keys (collection, version, wrapped_key) VALUES (?, ?, ?)",
                    arguments: [name, highest + 1, StoreKeys.wrap(AccessKey().secretBoxKey, under: master)])
            }
            // The copy's authenticated state: every collection empty so far, and the write counter going on from
            // the old store's, so that a counter an app keeps outside the file stays valid after the rekey.
            let (oldCounter, _) = try storeStateRow(oldDB, stateAuthenticator(keys))
            try state.store.buildState(db, try state.store.currentKeys(), counter: oldCounter)
            let indexes = try Row.fetchAll(
                oldDB,
                sql: "SELECT collection, name, fields, bits, created FROM blind_indexes ORDER BY collection, name")
            for row in indexes {
                try db.execute(
                    sql: "INSERT INTO blind_indexes (collection, name, fields, bits, created) VALUES (?, ?, ?, ?, ?)",
                    arguments: [
                        row["collection"] as DatabaseValue, row["name"] as DatabaseValue,
                        row["fields"] as DatabaseValue,
                        row["bits"] as DatabaseValue, row["created"] as DatabaseValue,
                    ])
            }
        }
        return state
    }

    /// The copy of an interrupted rekey, when it goes on from the store as it is now: the copy the key header names
    /// opens under the new master key sealed there under the old one, and the collections, index definitions and
    /// every record it copied are unchanged. Nil otherwise (the caller starts again).
    func resumeRekey(
        _ oldDB: Database, pending: (file: String, sealedMaster: Data), structure: Data, keys: StoreKeys
    ) throws -> RekeyState? {
        guard FileManager.default.fileExists(atPath: directory.appendingPathComponent(pending.file).path),
            let master = try? StoreKeys.unwrap(
                pending.sealedMaster, under: keys.master, failure: E3DBError(.wrongKey, "not this store's rekey")),
            var state = try? RekeyState(master: master, oldKeys: keys, owner: self, file: pending.file, resumed: true)
        else { return nil }
        var resumed: RekeyState?
        defer { if resumed == nil { try? state.store.pool.close() } }
        guard
            let row = try? state.store.pool.read({ db in
                try db.tableExists("rekey_progress")
                    ? Row.fetchOne(db, sql: "SELECT * FROM rekey_progress WHERE singleton = 1") : nil
            }),
            Data.fromDatabaseValue(row["structure"] as DatabaseValue) == structure,
            let lastSeq = Int64.fromDatabaseValue(row["last_seq"] as DatabaseValue),
            let done = Int.fromDatabaseValue(row["records"] as DatabaseValue),
            let digest = Data.fromDatabaseValue(row["digest"] as DatabaseValue)
        else { return nil }
        let copied = try Row.fetchCursor(
            oldDB, sql: "SELECT * FROM records WHERE seq <= ? ORDER BY seq", arguments: [lastSeq])
        while let record = try copied.next() { state.add(StoredRow(record)) }
        guard state.digest == digest, state.records == done else { return nil }
        state.lastSeq = lastSeq
        state.done = done
        resumed = state
        return state
    }

    /// A digest of what a resumed copy relies on besides the records: the collections and the index definitions.
    static func rekeyStructure(_ db: Database) throws -> Data {
        var items: [JSONValue] = []
        for row in try Row.fetchAll(db, sql: "SELECT name, key_version FROM collections ORDER BY name") {
            items.append(.array(row.databaseValues.map { .string($0.description) }))
        }
        let indexes = try Row.fetchAll(
            db, sql: "SELECT collection, name, fields, bits FROM blind_indexes ORDER BY collection, name")
        for row in indexes { items.append(.array(row.databaseValues.map { .string($0.description) })) }
        return try BLAKE2b.hash(data: CanonicalJSON.serializedBytes(.array(items)))
    }
}

/// What a rekey was asked for.
struct RekeyPlan {
    let sealing: StoreCredential
    let parameters: Argon2id.Parameters
    let batchSize: Int
    let progress: (@Sendable (RekeyProgress) -> Void)?
    /// Set by the async form's cancellation (its thread is outside the task, so `Task.isCancelled` is false there).
    let cancellation: FileCancellation?
}

/// The finished copy: a store over it, under the new master key, and the key material the commit point puts in
/// the key header.
struct RekeyCopy {
    let store: EncryptedStore
    let keys: StoreKeys
    let wrapping: StoreKeys.CredentialWrapping
    let wrappedBoxKey: Data

    /// The commit point's changes to the key header (in its one transaction): the copy named as the database, the
    /// new master key's wrapping and the box private key sealed under it, every enrolled identity's EAK made again
    /// for the new master key, and the unfinished-rekey row gone.
    func commit(_ db: Database) throws {
        try db.execute(
            sql: """
                UPDATE store_meta SET kdf = ?, kdf_ops = ?, kdf_mem = ?, kdf_salt = ?, wrapped_master = ?,
                    wrapped_box_private = ?, database_file = ?
                WHERE singleton = 1
                """,
            arguments: [
                wrapping.kdfName, wrapping.parameters?.opsLimit, wrapping.parameters?.memoryLimit, wrapping.salt,
                wrapping.wrappedMaster, wrappedBoxKey, URL(fileURLWithPath: store.databasePath).lastPathComponent,
            ])
        guard db.changesCount == 1 else { throw E3DBError(.storeCorrupted, "the store has no header row") }
        let identities = try Row.fetchAll(
            db, sql: "SELECT public_key, client_id, created FROM store_identities ORDER BY rowid")
        try db.execute(sql: "DELETE FROM store_identities")
        for row in identities {
            guard let raw = Data.fromDatabaseValue(row["public_key"] as DatabaseValue),
                let publicKey = try? Box.PublicKey(rawRepresentation: raw),
                let enrolled = String.fromDatabaseValue(row["created"] as DatabaseValue).flatMap(StoreTime.parse)
            else { throw E3DBError(.storeCorrupted, "an identity row is damaged") }
            let clientID = String.fromDatabaseValue(row["client_id"] as DatabaseValue).flatMap(UUID.init(uuidString:))
            try IdentityEnrollment(
                publicKey: publicKey, clientID: clientID, keys: keys, storeID: store.storeID, enrolled: enrolled
            ).insert(db)
        }
        try db.execute(sql: "DELETE FROM rekey_pending")
    }
}

/// A copy in progress: the store over it, the last record copied, and a running digest of the old rows copied
/// (sequence number, version and MAC), which a resumed copy checks against the store.
struct RekeyState {
    let store: EncryptedStore
    let wrappedBoxKey: Data
    let resumed: Bool
    var lastSeq: Int64 = 0
    var done = 0
    /// Old rows fed to `hasher`.
    var records = 0
    var hasher: BLAKE2b

    /// A store over the copy `file` (created when missing, through the path that makes a new store's database:
    /// encrypted under `master`'s page key when the store's file is encrypted).
    init(master: SecretBox.Key, oldKeys: StoreKeys, owner: EncryptedStore, file: String, resumed: Bool)
        throws(E3DBError)
    {
        wrappedBoxKey = StoreKeys.wrap(
            oldKeys.boxKey, under: master, binding: .init(databaseFile: file, encryption: owner.databaseEncryption))
        let keys = try StoreKeys(master: master, wrappedBoxKey: wrappedBoxKey)
        let header = try EncryptedStore.readHeader(owner.keyHeader).naming(file)
        let database = try EncryptedStore.openDatabase(
            in: owner.directory, header: header, keys: keys, creating: true)
        store = EncryptedStore(
            directory: owner.directory, header: header, keyHeader: owner.keyHeader, database: database, keys: keys)
        self.resumed = resumed
        hasher = try BLAKE2b(outputByteCount: 32)
    }

    /// Feeds one old row to the digest and moves past it.
    mutating func add(_ row: StoredRow) {
        let seq = row.seq ?? -1
        hasher.update(data: Array("\(seq) \(row.version ?? -1) \(row.mac?.count ?? -1) ".utf8))
        hasher.update(data: row.mac ?? Data())
        lastSeq = max(lastSeq, seq)
        records += 1
    }

    /// The digest of the rows fed so far (the running state goes on).
    var digest: Data { hasher.finalize() }
}
