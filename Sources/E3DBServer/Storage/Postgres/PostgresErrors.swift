internal import PostgresNIO

/// How postgres-nio's errors become `StorageError`s.
extension PostgresStorage {
    /// `error` as a `StorageError` naming `what` was done (by SQLSTATE, ``kind(sqlState:)``; a lost connection or
    /// a cancelled call is `.unavailable`), never a bound value or the password.
    static func storageError(_ error: any Error, what: String, at url: String) -> StorageError {
        switch error {
        case let e as StorageError:
            return e
        case let e as PostgresTransactionError:
            if let inner = e.closureError ?? e.beginError ?? e.commitError {
                return storageError(inner, what: what, at: url)
            }
            return StorageError(.unavailable, "PostgreSQL transaction for \(what) failed")
        case let e as PSQLError:
            if let state = e.serverInfo?[.sqlState] {
                let message = e.serverInfo?[.message] ?? "no message"
                return StorageError(kind(sqlState: state), "PostgreSQL refused \(what): \(message) (SQLSTATE \(state))")
            }
            return StorageError(.unavailable, "PostgreSQL at \(url) is unavailable for \(what): \(e.code)")
        case is CancellationError:
            return StorageError(.unavailable, "\(what) was cancelled")
        default:
            return StorageError(.unavailable, "PostgreSQL \(what) failed: \(type(of: error))")
        }
    }

    /// What an error with SQLSTATE `state` means for the request: a uniqueness conflict (23505), the client's
    /// value (class 22, data exceptions: U+0000 in text, a value out of range), the server unavailable
    /// (connection exceptions 08, operator intervention 57P, insufficient resources 53, system errors 58), or a
    /// refusal of this operation alone.
    static func kind(sqlState state: String) -> StorageError.Kind {
        if state == "23505" { return .conflict }
        if state.hasPrefix("22") { return .invalidInput }
        if state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53") || state.hasPrefix("58") {
            return .unavailable
        }
        return .failed
    }

}
