import E3DBAPI
import E3DBPrimitives

/// Who may change the sharing of a writer's records: the one rule for access keys and policies (spec api §4.7,
/// docs/security.md "Sharing"), as a table of the caller's role × the operation × the reader it addresses.
///
/// Everything about one (writer, user = writer, type) is decided here. Each endpoint finds the two roles in storage
/// (``E3DBService/sharingRoles(caller:tuple:)``) and asks ``decide(_:caller:target:)``; no endpoint has a rule of
/// its own. Record reads (the writer, or a `read` policy) are decided by the storage's readable-record statement,
/// and record changes by ``mayChangeRecord(caller:writer:)``.
enum AccessRules {
    /// The caller's relation to the writer's (writer, type).
    enum CallerRole: CaseIterable, Sendable {
        /// The writer itself (caller = writer = user).
        case writer
        /// Holds `authorizer` on (writer, writer, caller, type).
        case authorizer
        /// Anyone else (a reader with `read` included: reading confers nothing here).
        case other
    }

    /// The reader an operation addresses, relative to the writer and the caller.
    enum TargetRole: CaseIterable, Sendable {
        /// The caller itself (checked first: a writer addressing itself is `.caller`).
        case caller
        /// The writer (when the caller is not the writer).
        case writer
        /// Another client holding `authorizer` on the tuple.
        case authorizer
        /// Any other client.
        case reader
    }

    enum Operation: CaseIterable, Sendable {
        /// `GET /v1/storage/access_keys/{w}/{u}/{r}/{t}`.
        case readAccessKey
        /// `PUT` of the same path.
        case putAccessKey
        /// `DELETE` of the same path.
        case deleteAccessKey
        /// `PUT /v1/storage/policy/…` with `read` in `allow` or `deny`.
        case changeRead
        /// `PUT /v1/storage/policy/…` with `authorizer` in `allow` or `deny`.
        case changeAuthorizer
        /// `DELETE /v1/storage/policy/{u}/{w}/{r}` (every type's `authorizer` of the reader).
        case removeAuthorizers
    }

    /// Whether `caller` may perform `operation` addressing `target`:
    ///
    /// | caller | read key | put/delete key, grant/revoke read | grant/revoke authorizer, remove authorizers |
    /// |---|---|---|---|
    /// | writer | own (target = caller) | any reader | any reader |
    /// | authorizer | own | plain readers only (not the writer, itself or another authorizer) | never |
    /// | other | own | never | never |
    static func decide(_ operation: Operation, caller: CallerRole, target: TargetRole) -> Bool {
        switch operation {
        case .readAccessKey:
            return target == .caller
        case .putAccessKey, .deleteAccessKey, .changeRead:
            switch caller {
            case .writer: return true
            case .authorizer: return target == .reader
            case .other: return false
            }
        case .changeAuthorizer, .removeAuthorizers:
            return caller == .writer
        }
    }

    /// The refusal of an operation ``decide(_:caller:target:)`` forbids: what the caller may not do and why.
    static func refusal(_ operation: Operation, caller: CallerRole, target: TargetRole) -> E3DBError {
        let what =
            switch operation {
            case .readAccessKey: "read this access key"
            case .putAccessKey: "store this access key"
            case .deleteAccessKey: "delete this access key"
            case .changeRead: "grant or revoke read here"
            case .changeAuthorizer: "grant or revoke authorizer"
            case .removeAuthorizers: "remove authorizers"
            }
        let why =
            switch (operation, caller, target) {
            case (.readAccessKey, _, _): "a client may only read access keys addressed to it"
            case (.changeAuthorizer, _, _), (.removeAuthorizers, _, _): "only the writer manages its authorizers"
            case (_, .authorizer, .writer): "an authorizer may not address the writer itself"
            case (_, .authorizer, .caller): "an authorizer may not address itself"
            case (_, .authorizer, .authorizer): "an authorizer may not address another authorizer"
            default: "only the writer, or its authorizer for other readers, may do this"
            }
        return E3DBError(.forbidden, "not allowed to \(what): \(why)")
    }

    /// The one rule for record updates and deletes: only the writer.
    static func mayChangeRecord(caller: ClientID, writer: ClientID) -> Bool { caller == writer }
}
