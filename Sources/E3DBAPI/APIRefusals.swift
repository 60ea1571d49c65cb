public import E3DBPrimitives

// The refusals of the E3DB API: a server answers each with its HTTP status and an `{"error": "<message>"}` body, and
// a client maps such an answer back to the code. Refusals are `.io` (the request reached the server and the remote
// operation failed); credentials the server rejects are `.verification`.
extension E3DBError.Code {
    /// The request is malformed or breaks a rule of the API (HTTP 400; a client also maps other 4xx here).
    public static let badRequest = Self("badRequest", category: .io)
    /// The credentials are missing or not valid (HTTP 401).
    public static let unauthorized = Self("unauthorized", category: .verification)
    /// The operation is not allowed for this client (HTTP 403).
    public static let forbidden = Self("forbidden", category: .io)
    /// No such item or endpoint, or the item is not shared with this client (HTTP 404).
    public static let notFound = Self("notFound", category: .io)
    /// The endpoint does not take this method (HTTP 405).
    public static let methodNotAllowed = Self("methodNotAllowed", category: .io)
    /// The request body took too long to arrive (HTTP 408).
    public static let requestTimeout = Self("requestTimeout", category: .io)
    /// The item exists with another version, or the name is taken (HTTP 409).
    public static let conflict = Self("conflict", category: .io)
    /// The request body is larger than the endpoint accepts (HTTP 413).
    public static let contentTooLarge = Self("contentTooLarge", category: .io)
    /// An `Expect` header other than `100-continue` (HTTP 417).
    public static let expectationFailed = Self("expectationFailed", category: .io)
    /// The server cannot answer now: its storage failed, or a budget (bodies in memory, waiting searches) is used
    /// up; the client may retry (HTTP 503).
    public static let serviceUnavailable = Self("serviceUnavailable", category: .io)
}

extension API {
    /// The HTTP status a server answers a refusal with: the status of each code above, `nil` for other codes.
    /// - Parameter code: an error code.
    /// - Returns: 400, 401, 403, 404, 405, 408, 409, 413, 417 or 503, or `nil`.
    public static func httpStatus(of code: E3DBError.Code) -> Int? {
        switch code {
        case .badRequest: 400
        case .unauthorized: 401
        case .forbidden: 403
        case .notFound: 404
        case .methodNotAllowed: 405
        case .requestTimeout: 408
        case .conflict: 409
        case .contentTooLarge: 413
        case .expectationFailed: 417
        case .serviceUnavailable: 503
        default: nil
        }
    }
}
