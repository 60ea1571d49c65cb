import E3DBPrimitives
internal import PostgresNIO

/// How postgres-nio's errors become storage failures (`E3DBError` storage codes).
extension PostgresStorage {
    /// `error` as a storage failure naming `what` was done (by SQLSTATE, ``code(sqlState:)``; a lost connection or
    /// a cancelled call is `.storageUnavailable`), never a bound value or the password.
    static func storageError(_ error: any Error, what: String, at url: String) -> E3DBError {
        switch error {
        case let e as E3DBError:
            return e
        case let e as PostgresTransactionError:
            if let inner = e.closureError ?? e.beginError ?? e.commitError {
                return storageError(inner, what: what, at: url)
            }
            return E3DBError(.storageUnavailable, "PostgreSQL transaction for \(what) failed")
        case let e as PSQLError:
            if let state = e.serverInfo?[.sqlState] {
                let message = e.serverInfo?[.message] ?? "no message"
                return E3DBError(code(sqlState: state), "PostgreSQL refused \(what): \(message) (SQLSTATE \(state))")
            }
            return E3DBError(.storageUnavailable, "PostgreSQL at \(url) is unavailable for \(what): \(e.code)")
        case is CancellationError:
            return E3DBError(.storageUnavailable, "\(what) was cancelled")
        default:
            return E3DBError(.storageUnavailable, "PostgreSQL \(what) failed: \(type(of: error))")
        }
    }

    /// What an error with SQLSTATE `state` means for the request: a uniqueness conflict (23505), the client's
    /// value (class 22, data exceptions: U+0000 in text, a value out of range), the server unavailable
    /// (connection exceptions 08, operator intervention 57P, insufficient resources 53, system errors 58), or a
    /// refusal of this operation alone.
    static func code(sqlState state: String) -> E3DBError.Code {
        if state == "23505" { return .storageConflict }
        if state.hasPrefix("22") { return .storageRejectedValue }
        if state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53") || state.hasPrefix("58") {
            return .storageUnavailable
        }
        return .storageFailed
    }
}
