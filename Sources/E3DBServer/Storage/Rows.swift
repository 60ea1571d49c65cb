import E3DBPrimitives
package import Foundation

/// A registered client as the server keeps it. The API secret is stored only as its SHA-256.
package struct ClientRow: Sendable, Hashable {
    package var clientID: ClientID
    package var name: String
    /// b64u Curve25519 public key, as registered.
    package var publicKey: String
    /// b64u Ed25519 public key, or `nil`.
    package var signingKey: String?
    /// 64 lowercase hex characters.
    package var apiKeyID: String
    /// SHA-256 of the API secret.
    package var apiSecretHash: Data
    package var enabled: Bool
    package var hasBackup: Bool
    /// SHA-256 of the registration token that registered the client (backup notifications name it).
    package var registrationTokenHash: Data
    /// Microseconds since the epoch.
    package var created: Int64

    package init(
        clientID: ClientID, name: String, publicKey: String, signingKey: String?, apiKeyID: String,
        apiSecretHash: Data, enabled: Bool = true, hasBackup: Bool = false, registrationTokenHash: Data,
        created: Int64
    ) {
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
package struct AccessTuple: Sendable, Hashable {
    package var writerID: ClientID
    package var userID: ClientID
    package var readerID: ClientID
    package var type: String
    package init(writerID: ClientID, userID: ClientID, readerID: ClientID, type: String) {
        self.writerID = writerID
        self.userID = userID
        self.readerID = readerID
        self.type = type
    }
}

/// An encrypted access key as PUT, with the authorizer's and signer's registered keys captured at PUT time.
package struct AccessKeyRow: Sendable, Hashable {
    package var tuple: AccessTuple
    /// The opaque `eak` string (never validated or opened: the server cannot).
    package var eak: String
    package var authorizerID: ClientID
    package var authorizerPublicKey: String
    package var signerID: ClientID?
    package var signerSigningKey: String?
    package init(
        tuple: AccessTuple, eak: String, authorizerID: ClientID, authorizerPublicKey: String,
        signerID: ClientID?, signerSigningKey: String?
    ) {
        self.tuple = tuple
        self.eak = eak
        self.authorizerID = authorizerID
        self.authorizerPublicKey = authorizerPublicKey
        self.signerID = signerID
        self.signerSigningKey = signerSigningKey
    }
}

/// The permissions of one tuple.
package struct PolicyRow: Sendable, Hashable {
    package var tuple: AccessTuple
    package var canRead: Bool
    package var canAuthorize: Bool
    /// Who granted `authorizer` (the writer), for the proxies/granted listings.
    package var authorizedBy: ClientID?
    package init(tuple: AccessTuple, canRead: Bool, canAuthorize: Bool, authorizedBy: ClientID?) {
        self.tuple = tuple
        self.canRead = canRead
        self.canAuthorize = canAuthorize
        self.authorizedBy = authorizedBy
    }
}

/// A stored record. `plain` and `data` are kept as the JSON text the client sent (the server's record reader read
/// it through at write time), `file_meta` as the server wrote it. A row read back comes from a database someone else
/// may have written: nothing here has been checked but the column types, so the text is checked again where it is
/// spliced or read (`RecordJSON`).
package struct RecordRow: Sendable, Hashable {
    /// The monotonically increasing index (≥ 1) that v1 search pages on; 0 before insertion.
    package var index: Int64
    package var recordID: RecordID
    package var writerID: ClientID
    package var userID: ClientID
    package var type: String
    /// The text of a JSON object of strings, as written (unchecked in a row read back).
    package var plainJSON: String
    /// The text of a JSON object of strings, the encrypted fields, as written (unchecked in a row read back).
    package var dataJSON: String
    package var recSig: String?
    /// JSON of `file_meta` without `file_url`, for file records.
    package var fileMetaJSON: String?
    package var created: Int64
    package var lastModified: Int64
    /// A new lowercase UUID at every write, kept as text: the server only compares it with the version a client
    /// names (a version that is not one of its UUIDs is a conflict, 409, as any other stale version), and a pending
    /// file's record has none (`""`) until its commit.
    package var version: String

    package init(
        index: Int64 = 0, recordID: RecordID, writerID: ClientID, userID: ClientID, type: String,
        plainJSON: String, dataJSON: String, recSig: String?, fileMetaJSON: String?, created: Int64,
        lastModified: Int64, version: String
    ) {
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

extension RecordRow {
    /// A new version: a random lowercase UUID (``version``).
    static func newVersion() -> String { UUID().lowercasedString }
}

/// A file record waiting for its body (between `POST /v1/storage/files` and the commit).
package struct PendingFileRow: Sendable, Hashable {
    package var pendingID: RecordID
    /// The record to create at commit (`record_id` = `pendingID`, index and times set then).
    package var record: RecordRow
    /// Base64 (standard, padded) MD5 of the encrypted body, as declared.
    package var checksum: String
    /// Declared encrypted size in bytes.
    package var size: Int64
    /// Whether a body with that size and MD5 has been stored.
    package var uploaded: Bool
    package var created: Int64
    package init(pendingID: RecordID, record: RecordRow, checksum: String, size: Int64, uploaded: Bool, created: Int64)
    {
        self.pendingID = pendingID
        self.record = record
        self.checksum = checksum
        self.size = size
        self.uploaded = uploaded
        self.created = created
    }
}

/// A stored note. `bodyJSON` is the note as returned (server members filled in), without `views`.
package struct NoteRow: Sendable, Hashable {
    package var noteID: NoteID
    /// `nil` for unnamed and anonymous notes.
    package var idString: String?
    package var writerClientID: ClientID?
    package var recipientSigningKey: String
    package var writerSigningKey: String
    /// `nil` or ≤ 0: unlimited.
    package var maxViews: Int?
    package var views: Int
    /// Microseconds; `nil` when the note does not expire.
    package var expiresAt: Int64?
    package var created: Int64
    package var bodyJSON: String
    package init(
        noteID: NoteID, idString: String?, writerClientID: ClientID?, recipientSigningKey: String,
        writerSigningKey: String, maxViews: Int?, views: Int, expiresAt: Int64?, created: Int64,
        bodyJSON: String
    ) {
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
package struct RecordScope: Sendable, Hashable {
    /// The calling client.
    package var caller: ClientID
    /// `false`: only the caller's records; `true`: every record the caller may read (own, or shared by a
    /// `read` policy).
    package var includeShared: Bool
    /// Non-empty: only these writers.
    package var writerIDs: [ClientID]
    package var userIDs: [ClientID]
    package var recordIDs: [RecordID]
    package var types: [String]
    /// `false`: rows come with an empty `dataJSON` (a scan that matches on metadata and `plain` reads no `data`).
    package var includeData: Bool
    package init(
        caller: ClientID, includeShared: Bool, writerIDs: [ClientID] = [], userIDs: [ClientID] = [],
        recordIDs: [RecordID] = [], types: [String] = [], includeData: Bool = true
    ) {
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
package enum VersionedOutcome: Sendable, Hashable {
    /// Done; the row after the update, or the row that was deleted.
    case done(RecordRow)
    /// The record exists with another version.
    case conflict
    /// No such record.
    case notFound
}

/// Which policy listing.
package enum PolicyListing: Sendable, Hashable {
    /// `read` granted on the caller's records (writer = caller).
    case outgoing
    /// `read` granted to the caller.
    case incoming
    /// `authorizer` grants made by the caller.
    case proxies
    /// `authorizer` grants to the caller.
    case granted
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
