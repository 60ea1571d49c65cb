
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

