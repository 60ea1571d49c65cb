public import E3DBPrimitives

// Refusals by the server are `.io`: the request reached it and the remote operation failed (the CLI exits 1 and
// the message keeps the HTTP status); credentials the server rejects are `.verification` (exit 2).
extension E3DBError.Code {
    /// The server refused the credentials (HTTP 401).
    public static let unauthorized = Self("unauthorized", category: .verification)
    /// The server refused the operation for this client (HTTP 403).
    public static let forbidden = Self("forbidden", category: .io)
    /// No such item, or it is not shared with this client (HTTP 404).
    public static let notFound = Self("notFound", category: .io)
    /// The item exists with another version, or the name is taken (HTTP 409).
    public static let conflict = Self("conflict", category: .io)
    /// The server rejected the request as malformed (HTTP 400, 413, 417, other 4xx).
    public static let badRequest = Self("badRequest", category: .io)
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
    /// A known-keys file (``KnownKeys``) is malformed.
    public static let invalidKnownKeys = Self("invalidKnownKeys", category: .malformedInput)
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
        return E3DBError(.invalidResponse, "\(operation): the server answered with a redirect (HTTP \(status)), which "
                         + "the E3DB API never sends; it was not followed", context: .init(part: operation, actual: status))
    }
    let code: E3DBError.Code = switch status {
    case 401: .unauthorized
    case 403: .forbidden
    case 404: .notFound
    case 409: .conflict
    case 500...: .serverError
    default: .badRequest
    }
    let detail = serverMessage.map { ": \($0.prefix(300))" } ?? ""
    return E3DBError(code, "\(operation) failed with HTTP \(status)\(detail)",
                     context: .init(part: operation, actual: status))
}
