import E3DBPrimitives
import NIOSSL
internal import PostgresNIO

/// How postgres-nio's errors become storage failures (`E3DBError` storage codes).
extension PostgresStorage {
    /// `error` as a storage failure naming `what` was done (by SQLSTATE, ``code(sqlState:)``; a lost connection or
    /// a cancelled call is `.storageUnavailable`), never a bound value or the password.
    static func storageError(_ error: any Error, what: String, at url: String) -> E3DBError {
        switch error {
        case let e as E3DBError:
            return e
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

/// The first connection: opened before anything else, so that what stops every connection says so at once.
extension PostgresStorage {
    /// How long ``checkConnection()`` waits at most (less when ``operationTimeout`` is shorter).
    static let connectionCheckTimeout: Duration = .seconds(20)

    /// Opens one connection outside the pool, as the pool's are opened (same TLS, same startup parameters), and
    /// closes it. The pool retries a failing connection until the caller's deadline, which would hide why it fails.
    /// - Throws: `E3DBError` `.storageTLSFailed` (TLS required by one side and off on the other, a failed
    ///   handshake or certificate check), `.storageAuthenticationFailed` (credentials or `pg_hba.conf` refused),
    ///   `.storageUnavailable` (unreachable, or no answer within `connectionCheckTimeout`), else another storage
    ///   code; each names the server (never the password) and what failed.
    package func checkConnection() async throws {
        let timeout = min(operationTimeout, Self.connectionCheckTimeout)
        let configuration: PostgresConnection.Configuration
        do {
            configuration = try settings.connectionConfiguration(connectTimeout: timeout)
        } catch {
            throw E3DBError(
                .storageTLSFailed, "cannot set up TLS for PostgreSQL at \(redactedURL): \(error)", cause: error)
        }
        do {
            try await withDeadline(timeout) { [logger] in
                let connection = try await PostgresConnection.connect(
                    configuration: configuration, id: 0, logger: logger)
                try await connection.close()
            }
        } catch is DeadlineExceeded {
            throw E3DBError(
                .storageUnavailable, "PostgreSQL at \(redactedURL) did not accept a connection within \(timeout)")
        } catch {
            throw connectionError(error)
        }
    }

    /// What stopped ``checkConnection()``.
    func connectionError(_ error: any Error) -> E3DBError {
        let at = "PostgreSQL at \(redactedURL)"
        guard let psql = error as? PSQLError else { return tlsOrNetworkError(error) }
        if let state = psql.serverInfo?[.sqlState] {
            let message = psql.serverInfo?[.message] ?? "no message"
            switch state {
            case "28P01":
                return E3DBError(
                    .storageAuthenticationFailed,
                    "\(at) refused the password of user \(settings.user): authentication failed (SQLSTATE 28P01)")
            case "28000" where message.contains("no encryption") && !settings.requiresTLS:
                return E3DBError(
                    .storageTLSFailed,
                    "\(at) requires TLS and refused an unencrypted connection (\(message)); use sslmode=verify-full"
                        + " with sslrootcert=FILE (SQLSTATE 28000)")
            case let state where state.hasPrefix("28"):
                return E3DBError(
                    .storageAuthenticationFailed, "\(at) refused the connection: \(message) (SQLSTATE \(state))")
            default:
                return E3DBError(
                    Self.code(sqlState: state), "\(at) refused the connection: \(message) (SQLSTATE \(state))")
            }
        }
        switch psql.code {
        case .sslUnsupported:
            return E3DBError(
                .storageTLSFailed,
                "\(at) does not accept TLS (ssl is off on the server), and sslmode=\(settings.sslMode.rawValue) requires it"
            )
        case .failedToAddSSLHandler:
            return E3DBError(
                .storageTLSFailed, "\(at): TLS could not be set up (\(psql.underlying.map { "\($0)" } ?? "no reason"))")
        case .unsupportedAuthMechanism, .authMechanismRequiresPassword, .saslError:
            return E3DBError(.storageAuthenticationFailed, "\(at) authentication failed: \(psql.code)")
        default:
            if let underlying = psql.underlying { return tlsOrNetworkError(underlying) }
            return E3DBError(.storageUnavailable, "\(at) closed the connection before it was ready: \(psql.code)")
        }
    }

    /// An error below PostgreSQL's protocol: TLS (NIOSSL) or the network.
    private func tlsOrNetworkError(_ error: any Error) -> E3DBError {
        let at = "PostgreSQL at \(redactedURL)"
        let text = String(describing: error)
        switch error {
        case let tls as NIOSSLExtraError where tls == .failedToValidateHostname:
            return E3DBError(
                .storageTLSFailed,
                "TLS to \(at) failed: certificate verification failed: the certificate does not name \(settings.host)")
        case is NIOSSLError, is NIOSSLExtraError, is BoringSSLError:
            if text.contains("CERTIFICATE_VERIFY_FAILED") {
                return E3DBError(
                    .storageTLSFailed,
                    "TLS to \(at) failed: certificate verification failed: the server's certificate is not signed by "
                        + (settings.rootCertificates == nil ? "a CA the system trusts" : "a CA of sslrootcert"))
            }
            return E3DBError(.storageTLSFailed, "TLS to \(at) failed: \(text)")
        default:
            return E3DBError(.storageUnavailable, "cannot connect to \(at): \(text)")
        }
    }
}
