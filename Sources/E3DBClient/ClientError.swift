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
