import E3DBAPI
public import E3DBPrimitives

// The server's refusals (`.unauthorized`, `.forbidden`, `.notFound`, `.conflict`, `.badRequest`, …) are E3DBAPI's
// (the wire contract): `.io`, the request reached the server and the remote operation failed (the CLI exits 1 and
// the message keeps the HTTP status); credentials the server rejects are `.verification` (exit 2).
extension E3DBError.Code {
    /// The server failed (HTTP 5xx) after the retries.
    public static let serverError = Self("serverError", category: .io)
    /// The server could not be reached, or the exchange timed out, after the retries.
    public static let transportFailed = Self("transportFailed", category: .io)
    /// The operation was cancelled (Swift concurrency cancellation).
    public static let requestCancelled = Self("requestCancelled", category: .cancelled)
    /// The server's response is not what the API promises.
    public static let invalidResponse = Self("invalidResponse", category: .malformedInput)
    /// The server gives a client other public keys than those pinned for it (``KnownKeys``); `context.item` is the
    /// client id, `context.field` the key (`public_key` or `signing_key`).
    public static let keyChanged = Self("keyChanged", category: .verification)
    /// A known-keys file (``KnownKeys``) is malformed, or larger than ``KnownKeys/maxFileBytes``.
    public static let invalidKnownKeys = Self("invalidKnownKeys", category: .malformedInput)
    /// A known-keys file, its directory or its lock file could be written by someone else: another owner, group or
    /// other write permission, a symbolic link in place of the lock, something other than a regular file
    /// (``KnownKeys``); `context.item` is the path.
    public static let untrustedKnownKeys = Self("untrustedKnownKeys", category: .verification)
    /// A file body's URL is not on an origin the client may fetch from or upload to
    /// (``E3DBClient/E3DBClient/fileOrigins``).
    public static let foreignFileURL = Self("foreignFileURL", category: .verification)
}

// TLS failures are told apart because each needs a different fix: a CA to trust (--ca-file), a certificate with
// the right name, a renewed certificate, a pin to update. None of them is retried. The transports map their TLS
// libraries' failures to these.
extension E3DBError.Code {
    /// The server's certificate does not chain to a trusted CA (the system's, or the ones given to the transport:
    /// `ClientTLSOptions` of `E3DBAsyncHTTPClient`).
    public static let untrustedCertificate = Self("untrustedCertificate", category: .verification)
    /// The server's certificate has expired or is not valid yet.
    public static let certificateExpired = Self("certificateExpired", category: .verification)
    /// The server's certificate is not valid for the host name or address in the URL.
    public static let hostnameMismatch = Self("hostnameMismatch", category: .verification)
    /// The server's public key is none of the pinned ones (`PublicKeyPin` of `E3DBAsyncHTTPClient`).
    public static let pinMismatch = Self("pinMismatch", category: .verification)
    /// The TLS handshake failed for another reason (the connection closed during it, the server does not speak
    /// TLS, no common protocol version or cipher).
    public static let tlsHandshakeFailed = Self("tlsHandshakeFailed", category: .io)
}

/// The codes of a transport's own failures, which the client names the operation in: a failed exchange
/// (`.transportFailed`, the TLS codes), a request the transport cannot send (`.invalidParameter`), a response over
/// the limit (`.invalidResponse`).
private let exchangeFailures: Set<E3DBError.Code> = [
    .transportFailed, .untrustedCertificate, .certificateExpired, .hostnameMismatch, .pinMismatch,
    .tlsHandshakeFailed, .invalidParameter, .invalidResponse,
]

/// A transport's failure as the client reports it: `.requestCancelled` for cancellation; for the transport's own
/// failures (`.transportFailed`, a TLS code, `.invalidParameter`, `.invalidResponse`), the transport's error with the
/// operation in front of its message (and as `context.part` when the transport named none); any other `E3DBError`
/// (a download receiver's, `.fileIOFailed`) as it is; an error of another type (a transport outside E3DBKit) as
/// `.transportFailed` with its type's name only, since it may carry anything.
/// - Parameters:
///   - error: what the transport threw.
///   - operation: the client operation (`token`, `record read`, `file upload`, …).
func transportError(_ error: any Error, operation: String) -> E3DBError {
    guard let error = error as? E3DBError else {
        if error is CancellationError || Task.isCancelled { return cancelledError(operation) }
        return E3DBError(
            .transportFailed, "\(operation): the exchange failed (\(type(of: error)))", context: .init(part: operation))
    }
    if error.code == .requestCancelled { return cancelledError(operation) }
    guard exchangeFailures.contains(error.code) else { return error }
    var context = error.context
    if context.part == nil { context.part = operation }
    return E3DBError(error.code, "\(operation): \(error.message)", context: context, cause: error.cause)
}

/// The client's cancellation error for `operation` (`token`, `file upload`, …): `.requestCancelled`.
func cancelledError(_ operation: String) -> E3DBError {
    E3DBError(.requestCancelled, "\(operation) was cancelled", context: .init(part: operation))
}

/// Maps an HTTP status to an error that keeps the status (`context.actual`), the operation (`context.part`) and the
/// server's `{"error": …}` message (never a secret: the server's messages hold none, and the client never echoes
/// a request). A redirect (3xx) is `.invalidResponse`: the E3DB API never redirects, and the transport does not
/// follow one.
func httpError(status: Int, operation: String, serverMessage: String?) -> E3DBError {
    if (300..<400).contains(status) {
        return E3DBError(
            .invalidResponse,
            "\(operation): the server answered with a redirect (HTTP \(status)), which "
                + "the E3DB API never sends; it was not followed", context: .init(part: operation, actual: status))
    }
    let code: E3DBError.Code =
        switch status {
        case 401: .unauthorized
        case 403: .forbidden
        case 404: .notFound
        case 409: .conflict
        case 500...: .serverError
        default: .badRequest
        }
    let detail = serverMessage.map { ": \($0.prefix(300))" } ?? ""
    return E3DBError(
        code, "\(operation) failed with HTTP \(status)\(detail)",
        context: .init(part: operation, actual: status))
}
