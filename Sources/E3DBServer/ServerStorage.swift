public import Foundation

/// A registered client as the server keeps it. The API secret is stored only as its SHA-256.
public struct ClientRow: Sendable, Hashable {
    /// Lowercase UUID.
    public var clientID: String
    public var name: String
    /// b64u Curve25519 public key, as registered.
    public var publicKey: String
    /// b64u Ed25519 public key, or `nil`.
    public var signingKey: String?
    /// 64 lowercase hex characters.
    public var apiKeyID: String
    /// SHA-256 of the API secret.
    public var apiSecretHash: Data
    public var enabled: Bool
    public var hasBackup: Bool
    /// SHA-256 of the registration token that registered the client (backup notifications name it).
    public var registrationTokenHash: Data
    /// Microseconds since the epoch.
    public var created: Int64

    public init(clientID: String, name: String, publicKey: String, signingKey: String?, apiKeyID: String,
                apiSecretHash: Data, enabled: Bool = true, hasBackup: Bool = false, registrationTokenHash: Data,
                created: Int64) {
        self.clientID = clientID
        self.name = name
        self.publicKey = publicKey
        self.signingKey = signingKey
        self.apiKeyID = apiKeyID
        self.apiSecretHash = apiSecretHash
        self.enabled = enabled
        self.hasBackup = hasBackup
        self.registrationTokenHash = registrationTokenHash
        self.created = created
    }
}

/// One (writer, user, reader, type) tuple.
public struct AccessTuple: Sendable, Hashable {
    public var writerID: String
    public var userID: String
    public var readerID: String
    public var type: String
    public init(writerID: String, userID: String, readerID: String, type: String) {
        self.writerID = writerID
        self.userID = userID
        self.readerID = readerID
        self.type = type
    }
}

/// An encrypted access key as PUT, with the authorizer's and signer's registered keys captured at PUT time.
public struct AccessKeyRow: Sendable, Hashable {
    public var tuple: AccessTuple
    /// The opaque `eak` string (never validated or opened: the server cannot).
    public var eak: String
    public var authorizerID: String
    public var authorizerPublicKey: String
    public var signerID: String?
    public var signerSigningKey: String?
    public init(tuple: AccessTuple, eak: String, authorizerID: String, authorizerPublicKey: String,
                signerID: String?, signerSigningKey: String?) {
        self.tuple = tuple
        self.eak = eak
        self.authorizerID = authorizerID
        self.authorizerPublicKey = authorizerPublicKey
        self.signerID = signerID
        self.signerSigningKey = signerSigningKey
    }
}

/// The permissions of one tuple.
public struct PolicyRow: Sendable, Hashable {
    public var tuple: AccessTuple
    public var canRead: Bool
    public var canAuthorize: Bool
    /// Who granted `authorizer` (the writer), for the proxies/granted listings.
    public var authorizedBy: String?
    public init(tuple: AccessTuple, canRead: Bool, canAuthorize: Bool, authorizedBy: String?) {
        self.tuple = tuple
        self.canRead = canRead
        self.canAuthorize = canAuthorize
        self.authorizedBy = authorizedBy
    }
}

/// A stored record. `plain`, `data` and `file_meta` are kept as the JSON text the server encoded once.
public struct RecordRow: Sendable, Hashable {
    /// The monotonically increasing index (≥ 1) that v1 search pages on; 0 before insertion.
    public var index: Int64
    public var recordID: String
    public var writerID: String
    public var userID: String
    public var type: String
    /// JSON object of strings.
    public var plainJSON: String
    /// JSON object of strings (the encrypted fields).
    public var dataJSON: String
    public var recSig: String?
    /// JSON of `file_meta` without `file_url`, for file records.
    public var fileMetaJSON: String?
    public var created: Int64
    public var lastModified: Int64
    public var version: String

    public init(index: Int64 = 0, recordID: String, writerID: String, userID: String, type: String,
                plainJSON: String, dataJSON: String, recSig: String?, fileMetaJSON: String?, created: Int64,
                lastModified: Int64, version: String) {
        self.index = index
        self.recordID = recordID
        self.writerID = writerID
        self.userID = userID
        self.type = type
        self.plainJSON = plainJSON
        self.dataJSON = dataJSON
        self.recSig = recSig
        self.fileMetaJSON = fileMetaJSON
        self.created = created
        self.lastModified = lastModified
        self.version = version
    }
}

/// A file record waiting for its body (between `POST /v1/storage/files` and the commit).
public struct PendingFileRow: Sendable, Hashable {
    public var pendingID: String
    /// The record to create at commit (`record_id` = `pendingID`, index and times set then).
    public var record: RecordRow
    /// Base64 (standard, padded) MD5 of the encrypted body, as declared.
    public var checksum: String
    /// Declared encrypted size in bytes.
    public var size: Int64
    /// Whether a body with that size and MD5 has been stored.
    public var uploaded: Bool
    public var created: Int64
    public init(pendingID: String, record: RecordRow, checksum: String, size: Int64, uploaded: Bool, created: Int64) {
        self.pendingID = pendingID
        self.record = record
        self.checksum = checksum
        self.size = size
        self.uploaded = uploaded
        self.created = created
    }
}

/// A stored note. `bodyJSON` is the note as returned (server members filled in), without `views`.
public struct NoteRow: Sendable, Hashable {
    public var noteID: String
    /// `nil` for unnamed and anonymous notes.
    public var idString: String?
    public var writerClientID: String?
    public var recipientSigningKey: String
    public var writerSigningKey: String
    /// `nil` or ≤ 0: unlimited.
    public var maxViews: Int?
    public var views: Int
    /// Microseconds; `nil` when the note does not expire.
    public var expiresAt: Int64?
    public var created: Int64
    public var bodyJSON: String
    public init(noteID: String, idString: String?, writerClientID: String?, recipientSigningKey: String,
                writerSigningKey: String, maxViews: Int?, views: Int, expiresAt: Int64?, created: Int64,
                bodyJSON: String) {
        self.noteID = noteID
        self.idString = idString
        self.writerClientID = writerClientID
        self.recipientSigningKey = recipientSigningKey
        self.writerSigningKey = writerSigningKey
        self.maxViews = maxViews
        self.views = views
        self.expiresAt = expiresAt
        self.created = created
        self.bodyJSON = bodyJSON
    }
}

/// Which records a search may see and how it narrows them in storage (the rest is filtered by the service).
public struct RecordScope: Sendable, Hashable {
    /// The calling client.
    public var caller: String
    /// `false`: only the caller's records; `true`: every record the caller may read (own, or shared by a
    /// `read` policy).
    public var includeShared: Bool
    /// Non-empty: only these writers.
    public var writerIDs: [String]
    public var userIDs: [String]
    public var recordIDs: [String]
    public var types: [String]
    /// `false`: rows come with an empty `dataJSON` (a scan that matches on metadata and `plain` reads no `data`).
    public var includeData: Bool
    public init(caller: String, includeShared: Bool, writerIDs: [String] = [], userIDs: [String] = [],
                recordIDs: [String] = [], types: [String] = [], includeData: Bool = true) {
        self.caller = caller
        self.includeShared = includeShared
        self.writerIDs = writerIDs
        self.userIDs = userIDs
        self.recordIDs = recordIDs
        self.types = types
        self.includeData = includeData
    }
}

/// The outcome of a versioned update or delete.
public enum VersionedOutcome: Sendable, Hashable {
    /// Done; the row after the update, or the row that was deleted.
    case done(RecordRow)
    /// The record exists with another version.
    case conflict
    /// No such record.
    case notFound
}

/// Which policy listing.
public enum PolicyListing: Sendable, Hashable {
    /// `read` granted on the caller's records (writer = caller).
    case outgoing
    /// `read` granted to the caller.
    case incoming
    /// `authorizer` grants made by the caller.
    case proxies
    /// `authorizer` grants to the caller.
    case granted
}

/// Errors of a storage backend, mapped by the service to HTTP statuses.
public struct StorageError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// A uniqueness conflict.
        case conflict
        /// The backend cannot be reached or did not answer in time (a lost connection, a timeout): every
        /// operation would fail the same way now (503; a group of inserts fails as a whole).
        case unavailable
        /// The backend refused a value of the request (PostgreSQL's data exceptions, SQLSTATE class 22): the
        /// client's fault (400), and only its own operation's.
        case invalidInput
        /// The backend refused the operation for another reason (503, logged; in a group, only that item fails).
        case failed
        /// Stored data does not decode.
        case corrupted
    }
    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { message }
}

/// The server's persistent state, behind one protocol with two backends (SQLite through GRDB, PostgreSQL
/// through postgres-nio) that pass the same test suite. Nothing a process needs to share with the other processes
/// of a deployment lives outside it: tokens, nonces, pending files and the server secret are rows.
///
/// Every method is atomic. Ids are lowercase UUID strings; times are microseconds since the epoch.
public protocol ServerStorage: Sendable {
    /// Runs the versioned migrations (idempotent).
    func migrate() async throws
    /// A 32-byte secret for capability URLs, created at the first migration and shared by every process.
    func serverSecret() async throws -> Data
    /// Shuts connections down.
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
    func backupClientID() async throws -> String?
    func setBackupClientID(_ id: String) async throws

    // Clients.
    func client(id: String) async throws -> ClientRow?
    func client(apiKeyID: String) async throws -> ClientRow?
    func setHasBackup(clientID: String) async throws
    /// Enables or disables a client; `false` when there is no such client.
    func setClientEnabled(id: String, _ enabled: Bool) async throws -> Bool

    // Bearer tokens (stored as SHA-256 hashes) and TSV1 nonces.
    func insertAccessToken(hash: Data, clientID: String, expires: Int64) async throws
    /// The client of an unexpired token.
    func accessTokenClient(hash: Data, now: Int64) async throws -> String?
    /// The client and expiry (microseconds) of an unexpired token, for the in-memory token cache. The default
    /// (from `accessTokenClient`) reports the token as expiring `now`, which the cache never keeps.
    func accessToken(hash: Data, now: Int64) async throws -> (clientID: String, expires: Int64)?
    /// Records a TSV1 nonce (the service passes a hash): `false` when it was already used and has not expired (a
    /// replay).
    func useNonce(_ nonce: String, expires: Int64, now: Int64) async throws -> Bool
    /// Removes expired nonces, access tokens and notes, and the pending files created before `pendingCreatedBefore`
    /// whose upload did not start since then; returns those pending files' ids (their bodies are the caller's to
    /// remove).
    func purgeExpired(now: Int64, pendingCreatedBefore: Int64) async throws -> [String]

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
    func changePolicy(_ tuple: AccessTuple, read: Bool?, authorize: Bool?, by: String?) async throws
    /// Removes every `authorizer` permission of `readerID` on (user, writer), all types.
    func removeAuthorizations(userID: String, writerID: String, readerID: String) async throws
    func listPolicies(_ listing: PolicyListing, clientID: String) async throws -> [PolicyRow]

    // Records.
    /// Inserts a record and returns it with its index.
    func insertRecord(_ row: RecordRow) async throws -> RecordRow
    /// Inserts a record as ``insertRecord(_:)`` does and calls `completion` once, when it committed or failed, from
    /// whichever thread wrote it: for callers that cannot suspend (the server's pipeline write path).
    func insertRecord(_ row: RecordRow, completion: @escaping @Sendable (Result<RecordRow, any Error>) -> Void)
    func record(id: String) async throws -> RecordRow?
    /// The record `id` when `readerID` may read it (spec api §4.7: its writer, or a current `read` policy on its
    /// (user, writer, type) naming the reader); `nil` when it is missing or not readable. A backend answers it with
    /// one statement where it can; the default reads the record, then the policy when the reader is not the writer.
    func record(id: String, readableBy readerID: String) async throws -> RecordRow?
    /// Reads as ``record(id:readableBy:)`` does and calls `completion` once with the outcome, from whichever
    /// thread read it: for callers that cannot suspend (the server's pipeline read path).
    func record(id: String, readableBy readerID: String,
                completion: @escaping @Sendable (Result<RecordRow?, any Error>) -> Void)
    /// Replaces `plain` (when given), `data` and `rec_sig` if the version matches.
    func updateRecord(id: String, expectedVersion: String, plainJSON: String?, dataJSON: String, recSig: String?,
                      newVersion: String, now: Int64) async throws -> VersionedOutcome
    /// Deletes a record if the version matches (`nil`: any version).
    func deleteRecord(id: String, expectedVersion: String?) async throws -> VersionedOutcome
    /// Records in `scope` with index > `afterIndex`, ascending, at most `limit`.
    func records(in scope: RecordScope, afterIndex: Int64, limit: Int) async throws -> [RecordRow]

    // Files.
    func insertPendingFile(_ row: PendingFileRow) async throws
    func pendingFile(id: String) async throws -> PendingFileRow?
    /// Claims the upload of a pending file that is not uploaded and whose upload did not start after
    /// `staleBefore` (an upload whose process died is taken over then): `false` when another upload holds it.
    func claimUpload(pendingID: String, now: Int64, staleBefore: Int64) async throws -> Bool
    /// Gives up a claim of ``claimUpload(pendingID:now:staleBefore:)`` (the upload failed).
    func releaseUpload(pendingID: String) async throws
    /// Marks a pending file uploaded; `false` when it no longer exists.
    func markUploaded(pendingID: String) async throws -> Bool
    /// Turns an uploaded pending file into a record (record_id = pending id) in one transaction; `nil` when the
    /// pending file is unknown.
    func commitPendingFile(id: String, now: Int64, version: String) async throws -> RecordRow?

    // Notes.
    /// Inserts a note: `false` when its non-nil `idString` is taken.
    func insertNote(_ row: NoteRow) async throws -> Bool
    func note(id: String) async throws -> NoteRow?
    func note(name: String) async throws -> NoteRow?
    /// Counts one view of a readable note in one transaction: returns the note with `views` incremented, deleting
    /// it when `maxViews` is reached; `nil` when it is gone or expired.
    func viewNote(id: String, now: Int64) async throws -> NoteRow?
    /// Replaces the note named `row.idString` (or inserts it).
    func replaceNote(_ row: NoteRow) async throws
    /// Deletes a note; `false` when unknown.
    func deleteNote(id: String) async throws -> Bool

    /// Row counts by table, for `e3dbkit server stats`.
    func statistics() async throws -> [String: Int]
}

/// A backend that reads a record together with its read check on the calling thread, without suspending (SQLite:
/// one indexed statement). The server's record-read fast path (`RecordFastPath`) serves
/// `GET /v1/storage/records/{id}` through it on the connection's event loop.
protocol NonSuspendingRecordReads: Sendable {
    /// The record `id` when `readerID` wrote it or holds a `read` policy on it.
    func readableRecordNow(id: String, readerID: String) throws -> RecordRow?
}

extension SQLiteStorage: NonSuspendingRecordReads {}

/// A record read by its id and its reader's id, one item of a group of reads.
struct RecordRead: Sendable {
    var id: String
    var readerID: String
}

extension ServerStorage {
    /// Through a task that awaits ``insertRecord(_:)``.
    public func insertRecord(_ row: RecordRow,
                             completion: @escaping @Sendable (Result<RecordRow, any Error>) -> Void) {
        Task {
            do { completion(.success(try await insertRecord(row))) } catch { completion(.failure(error)) }
        }
    }

    /// Through a task that awaits ``record(id:readableBy:)``.
    public func record(id: String, readableBy readerID: String,
                       completion: @escaping @Sendable (Result<RecordRow?, any Error>) -> Void) {
        Task {
            do { completion(.success(try await record(id: id, readableBy: readerID))) } catch {
                completion(.failure(error))
            }
        }
    }

    /// The record when `readerID` wrote it or holds a `read` policy on it: a record read, then a policy read.
    public func record(id: String, readableBy readerID: String) async throws -> RecordRow? {
        guard let row = try await record(id: id) else { return nil }
        if row.writerID == readerID { return row }
        let policy = try await policy(AccessTuple(writerID: row.writerID, userID: row.userID, readerID: readerID,
                                                  type: row.type))
        return policy?.canRead == true ? row : nil
    }

    /// The client of an unexpired token, with `now` as its expiry (not cacheable).
    public func accessToken(hash: Data, now: Int64) async throws -> (clientID: String, expires: Int64)? {
        try await accessTokenClient(hash: hash, now: now).map { ($0, now) }
    }
}
