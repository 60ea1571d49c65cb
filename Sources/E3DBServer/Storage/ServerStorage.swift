package import Foundation

/// The server's persistent state, behind one protocol with two backends (SQLite through GRDB, PostgreSQL
/// through postgres-nio) that pass the same test suite. Nothing a process needs to share with the other processes
/// of a deployment lives outside it: tokens, nonces, pending files and the server secret are rows.
///
/// Every method is `async` and atomic; a backend's failures are `E3DBError`s with the storage codes
/// (`.storageUnavailable`, `.storageConflict`, … in `StorageErrors.swift`). Ids are typed (``ClientID``,
/// ``RecordID``, ``NoteID``, parsed at the edge) and stored as their lowercase ``Identifier/text``; times are
/// microseconds since the epoch.
package protocol ServerStorage: Sendable {
    /// Runs the versioned migrations (idempotent).
    func migrate() async throws
    /// Checks, without migrating, that the database has exactly the migrations this build knows (the
    /// administrative commands call it instead of ``migrate()``).
    /// - Throws: `E3DBError` `.storageSchemaTooOld` (saying to run `e3dbkit-server migrate`) when migrations are
    ///   missing, `.storageSchemaTooNew` when the database has migrations this build does not know, or a storage
    ///   failure.
    func checkSchema() async throws
    /// The database server's clock (`clock_timestamp()`), microseconds since the epoch; nil when the database is
    /// a file of this process (SQLite: there is no other clock to compare with).
    func databaseTime() async throws -> Int64?
    /// A 32-byte secret for capability URLs, created at the first migration and shared by every process.
    func serverSecret() async throws -> Data
    /// The storage's background work until the calling task is cancelled: PostgreSQL's connection pool
    /// (`PostgresClient.run()`, without which no query is answered), SQLite's WAL checkpoints. Run it once, beside
    /// every use of the storage: ``running(_:)`` does, and the server runs it as a ServiceLifecycle service.
    func run() async throws
    /// Whether no query is answered without ``run()`` (PostgreSQL's pool); SQLite answers without it (its WAL is
    /// then checkpointed by SQLite's own backstop only).
    var answersOnlyWhileRunning: Bool { get }
    /// Waits for the grouped writes in progress and shuts connections down; called while ``run()`` still runs
    /// (``running(_:)`` does), so that those writes can finish.
    func close() async throws

    // Registration tokens (stored as SHA-256 hashes).
    func createRegistrationToken(hash: Data, uses: Int?, created: Int64) async throws
    /// Registers a client: uses one registration of the token `client.registrationTokenHash` names and inserts the
    /// client, in one transaction (a failed insert uses no registration); `false` when the token is unknown or
    /// used up.
    func registerClient(_ client: ClientRow) async throws -> Bool
    /// Whether the token exists (for backup notifications; does not use it).
    func registrationTokenExists(hash: Data) async throws -> Bool
    /// The account's backup client, if one was configured.
    func backupClientID() async throws -> ClientID?
    func setBackupClientID(_ id: ClientID) async throws

    // Clients.
    func client(id: ClientID) async throws -> ClientRow?
    func client(apiKeyID: String) async throws -> ClientRow?
    func setHasBackup(clientID: ClientID) async throws
    /// Enables or disables a client; `false` when there is no such client.
    func setClientEnabled(id: ClientID, _ enabled: Bool) async throws -> Bool

    // Bearer tokens (stored as SHA-256 hashes) and TSV1 nonces.
    func insertAccessToken(hash: Data, clientID: ClientID, expires: Int64) async throws
    /// The client and expiry (microseconds) of an unexpired token, for the in-memory token cache.
    func accessToken(hash: Data, now: Int64) async throws -> (clientID: ClientID, expires: Int64)?
    /// Records a TSV1 nonce (the service passes a hash): `false` when it was already used and has not expired (a
    /// replay).
    func useNonce(_ nonce: String, expires: Int64, now: Int64) async throws -> Bool
    /// Removes expired nonces, access tokens and notes, and the pending files created before `pendingCreatedBefore`
    /// whose upload did not start since then, putting those pending files' ids in the deletion outbox in the same
    /// transaction (their bodies go with the next drain); returns those ids. On PostgreSQL a pass that finds
    /// another process's pass running removes nothing and returns `[]` (one pass at a time for the whole cluster).
    func purgeExpired(now: Int64, pendingCreatedBefore: Int64) async throws -> [RecordID]

    // Access keys.
    func accessKey(_ tuple: AccessTuple) async throws -> AccessKeyRow?
    /// Inserts a key: `false` when the tuple already has one (409).
    func insertAccessKey(_ row: AccessKeyRow) async throws -> Bool
    func deleteAccessKey(_ tuple: AccessTuple) async throws

    // Policies.
    func policy(_ tuple: AccessTuple) async throws -> PolicyRow?
    /// Changes a tuple's permissions in one statement (creating the row, without permissions, when missing):
    /// `read` and `authorize` set `can_read` and `can_authorize` when not `nil` and leave them otherwise; granting
    /// `authorizer` records `by`, revoking it clears it. Concurrent changes of different permissions both hold.
    func changePolicy(_ tuple: AccessTuple, read: Bool?, authorize: Bool?, by: ClientID?) async throws
    /// Removes every `authorizer` permission of `readerID` on (user, writer), all types.
    func removeAuthorizations(userID: ClientID, writerID: ClientID, readerID: ClientID) async throws
    func listPolicies(_ listing: PolicyListing, clientID: ClientID) async throws -> [PolicyRow]

    // Records.
    /// Inserts a record and returns it with its index, its other members (`plainJSON` and `dataJSON` above all)
    /// unchanged: a write's answer splices that text without reading it again (`RecordJSON.render(textRead:)`).
    func insertRecord(_ row: RecordRow) async throws -> RecordRow
    func record(id: RecordID) async throws -> RecordRow?
    /// The record `id` when `readerID` may read it (spec api §4.7: its writer, or a current `read` policy on its
    /// (user, writer, type) naming the reader); `nil` when it is missing or not readable. Both backends answer it with
    /// one statement.
    func record(id: RecordID, readableBy readerID: ClientID) async throws -> RecordRow?
    /// Replaces `plain` (when given), `data` and `rec_sig` if the version matches.
    func updateRecord(
        id: RecordID, expectedVersion: String, plainJSON: String?, dataJSON: String, recSig: String?,
        newVersion: String, now: Int64
    ) async throws -> VersionedOutcome
    /// Deletes a record if the version matches (`nil`: any version); a file record's id goes into the deletion
    /// outbox in the same transaction.
    func deleteRecord(id: RecordID, expectedVersion: String?) async throws -> VersionedOutcome
    /// Records in `scope` with index > `afterIndex`, ascending, at most `limit`.
    func records(in scope: RecordScope, afterIndex: Int64, limit: Int) async throws -> [RecordRow]

    // Files.
    func insertPendingFile(_ row: PendingFileRow) async throws
    func pendingFile(id: RecordID) async throws -> PendingFileRow?
    /// Claims the upload of a pending file that is not uploaded and whose upload did not start after
    /// `staleBefore` (an upload whose process died is taken over then): `false` when another upload holds it.
    func claimUpload(pendingID: RecordID, now: Int64, staleBefore: Int64) async throws -> Bool
    /// Gives up a claim of ``claimUpload(pendingID:now:staleBefore:)`` (the upload failed).
    func releaseUpload(pendingID: RecordID) async throws
    /// Marks a pending file uploaded; `false` when it no longer exists.
    func markUploaded(pendingID: RecordID) async throws -> Bool
    /// Turns an uploaded pending file into a record (record_id = pending id) in one transaction; `nil` when the
    /// pending file is unknown.
    func commitPendingFile(id: RecordID, now: Int64, version: String) async throws -> RecordRow?

    // The deletion outbox: ids of file bodies to remove from the `FileBodyStore`, written in the transaction that
    // deletes their record or pending file, and drained by any process outside any transaction.
    /// Leases at most `limit` ids of the outbox whose lease ended by `now` (`only`: just that id), setting their lease
    /// to `leaseUntil`, so that no other process takes them meanwhile (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so that
    /// concurrent drains never claim the same id); oldest first.
    func claimBodyDeletions(now: Int64, leaseUntil: Int64, limit: Int, only: RecordID?) async throws -> [RecordID]
    /// Removes ids from the outbox (their bodies are gone). An id whose removal failed is left leased: it is claimed
    /// again once its lease ends.
    func finishBodyDeletions(_ ids: [RecordID]) async throws

    // Notes.
    /// Inserts a note: `false` when its non-nil `idString` is taken.
    func insertNote(_ row: NoteRow) async throws -> Bool
    func note(id: NoteID) async throws -> NoteRow?
    func note(name: String) async throws -> NoteRow?
    /// Counts one view of a readable note in one transaction: returns the note with `views` incremented, deleting
    /// it when `maxViews` is reached; `nil` when it is gone or expired.
    func viewNote(id: NoteID, now: Int64) async throws -> NoteRow?
    /// Replaces the note named `row.idString` (or inserts it).
    func replaceNote(_ row: NoteRow) async throws
    /// Deletes a note; `false` when unknown.
    func deleteNote(id: NoteID) async throws -> Bool

    /// Row counts by table, for `e3dbkit-server stats`.
    func statistics() async throws -> [String: Int]
}

extension ServerStorage {
    /// The client of an unexpired token.
    package func accessTokenClient(hash: Data, now: Int64) async throws -> ClientID? {
        try await accessToken(hash: hash, now: now)?.clientID
    }
}
