public import E3DBPrimitives

// The failures of a storage backend (`ServerStorage`). They are not refusals of the API: `E3DBService.refusal` turns
// `.storageRejectedValue` into 400 and every other one into 503 (logged), so that no backend detail reaches a client.
extension E3DBError.Code {
    /// A uniqueness conflict (an id or a name is taken).
    public static let storageConflict = Self("storageConflict", category: .io)
    /// The backend cannot be reached or did not answer in time (a lost connection, a busy database, a deadline):
    /// every operation would fail the same way now, so a group of inserts fails as a whole.
    public static let storageUnavailable = Self("storageUnavailable", category: .io)
    /// The backend refused a value of the request (PostgreSQL's data exceptions, SQLSTATE class 22): the client's
    /// fault, and only its own operation's.
    public static let storageRejectedValue = Self("storageRejectedValue", category: .malformedInput)
    /// The backend refused the operation for another reason (in a group, only that item fails).
    public static let storageFailed = Self("storageFailed", category: .io)
    /// Stored data does not decode.
    public static let storageCorrupted = Self("storageCorrupted", category: .io)
    /// The storage configuration is not usable (a malformed PostgreSQL URL).
    public static let invalidStorageConfiguration = Self("invalidStorageConfiguration", category: .invalidArgument)
    /// TLS to the database failed: the server requires it and the URL disables it, the server does not offer it and
    /// the URL requires it, or the handshake failed (the certificate did not verify).
    public static let storageTLSFailed = Self("storageTLSFailed", category: .io)
    /// The database refused the credentials or the connection (a wrong password, no `pg_hba.conf` entry).
    public static let storageAuthenticationFailed = Self("storageAuthenticationFailed", category: .io)
    /// The database's schema is newer than this build knows (it was migrated by a newer version).
    public static let storageSchemaTooNew = Self("storageSchemaTooNew", category: .io)
    /// The database's schema is older than this build's (an administrative command does not migrate: the operator
    /// runs `e3dbkit-server migrate`).
    public static let storageSchemaTooOld = Self("storageSchemaTooOld", category: .io)
    /// A migration could not take the lock of a table it changes within its lock timeout, on every attempt:
    /// another session holds the table.
    public static let storageMigrationBlocked = Self("storageMigrationBlocked", category: .io)

    /// Whether this is one of the storage codes above.
    public var isStorageFailure: Bool {
        [
            .storageConflict, .storageUnavailable, .storageRejectedValue, .storageFailed, .storageCorrupted,
            .invalidStorageConfiguration, .storageTLSFailed, .storageAuthenticationFailed, .storageSchemaTooNew,
            .storageSchemaTooOld, .storageMigrationBlocked,
        ].contains(self)
    }
}
