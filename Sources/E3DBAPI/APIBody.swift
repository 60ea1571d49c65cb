import E3DBPrimitives
public import Foundation

/// A JSON body of the E3DB API, request or response: the one seam through which the client and the server read
/// and write bodies, and the one public spelling of each body's codec (``decodeBody(_:)`` and ``encodeBody()``).
/// Record bodies and search responses are read by the strict record reader and written by the record writer
/// (``API/Record``, ``API/QueryResponse`` and ``API/SearchResponse`` are not `Codable`); every other body goes
/// through the one JSON grammar and then Foundation's `JSONDecoder`, and the package's wire `JSONEncoder` (compact,
/// `/` not escaped).
public protocol APIBody: Sendable {
    /// Decodes a body.
    /// - Parameter data: JSON text.
    /// - Returns: the body.
    /// - Throws: when `data` is not such a body: `DecodingError` from the default (`JSONDecoder`), `E3DBError`
    ///   `.badRequest` saying what and where from a body with a reader of its own (`API.Record`).
    static func decodeBody(_ data: Data) throws -> Self
    /// Encodes the body as JSON text.
    /// - Returns: JSON text.
    /// - Throws: `EncodingError` when a value cannot be encoded.
    func encodeBody() throws -> Data
}

extension APIBody where Self: Decodable {
    /// Decodes a body with the one JSON grammar, then `JSONDecoder` (`API.decodeChecked(_:from:)`).
    public static func decodeBody(_ data: Data) throws -> Self { try API.decodeChecked(Self.self, from: data) }
}

extension API {
    /// The one reader of JSON that has no reader of its own (every body but records and search responses, a
    /// plain filter from the command line, the known-keys file): the text is read with the one JSON grammar first
    /// (`API.Record.checkJSON`), which refuses a byte order mark, a repeated name and two names equal as Swift
    /// `String`s (which `JSONDecoder` would merge, the last one winning), then decoded by `JSONDecoder`.
    ///
    /// `allowingTwinNames` lets two names equal as Swift `String`s through (`JSONDecoder` keeps one of them), for
    /// the one reader that needs it: the client reading a note's answer, whose fields other SDKs may name so and
    /// which it takes from `EncryptedNote` (names distinct by code units), not from the `API.Note`.
    /// - Throws: `E3DBError` `.badRequest` saying what is wrong and at which byte; `DecodingError` when the text
    ///   is JSON but not a `T`.
    package static func decodeChecked<T: Decodable>(
        _ type: T.Type, from data: Data, allowingTwinNames: Bool = false
    ) throws -> T {
        try API.Record.checkJSON(data, allowingTwinNames: allowingTwinNames)
        return try JSONDecoder().decode(type, from: data)
    }
}

extension APIBody where Self: Encodable {
    /// Encodes the body with the wire `JSONEncoder` (one line, members in declaration order, `/` not escaped).
    public func encodeBody() throws -> Data { try JSONEncoders.wire().encode(self) }
}

extension Array: APIBody where Element: APIBody & Codable {}

extension API.Record: APIBody {
    /// Decodes a record body with the strict record reader.
    /// - Throws: `E3DBError` `.badRequest` saying what is wrong and at which byte (member names, never values).
    public static func decodeBody(_ data: Data) throws -> API.Record { try decodeJSON(data) }
    /// Encodes the record with the hand-written writer (as `JSONEncoder` writes it up to member order and the
    /// escaping of `/`).
    public func encodeBody() -> Data { jsonData() }
}

extension API.ErrorBody: APIBody {
    /// The `error` member of a refusal's body, through ``decodeBody(_:)``; `nil` when the body is not an error
    /// body (empty, or a proxy's HTML page). The one reader of error bodies for the client.
    package static func message(in body: Data) -> String? { (try? decodeBody(body))?.error }
}
extension API.TokenResponse: APIBody {}
extension API.RegistrationRequest: APIBody {}
extension API.RegistrationResponse: APIBody {}
extension API.ClientInfo: APIBody {}
extension API.PutAccessKeyRequest: APIBody {}
extension API.EAKInfo: APIBody {}
extension API.PolicyRequest: APIBody {}
extension API.OutgoingSharing: APIBody {}
extension API.IncomingSharing: APIBody {}
extension API.AuthorizerPolicy: APIBody {}
extension API.PendingFile: APIBody {}
extension API.QueryRequest: APIBody {}
extension API.QueryResponse: APIBody {
    /// Decodes a v1 search response with the strict record reader (each result's `meta` and `record_data` as a
    /// record's, names distinct by code units).
    /// - Throws: `E3DBError` `.badRequest` saying what is wrong and where.
    public static func decodeBody(_ data: Data) throws -> API.QueryResponse {
        let read = try API.SearchResult.readResponse(data)
        guard let lastIndex = read.lastIndex else {
            throw E3DBError(.badRequest, "the response has no member \"last_index\"")
        }
        return API.QueryResponse(results: read.results, lastIndex: lastIndex)
    }
    /// Encodes the response with the record writer: `{"results":[…],"last_index":…}`.
    public func encodeBody() throws -> Data { try API.SearchResult.writeResponse(results, lastIndex: lastIndex) }
}
extension API.SearchRequest: APIBody {}
extension API.SearchResponse: APIBody {
    /// Decodes a v2 search response with the strict record reader, as `API.QueryResponse.decodeBody(_:)` does.
    /// - Throws: `E3DBError` `.badRequest` saying what is wrong and where.
    public static func decodeBody(_ data: Data) throws -> API.SearchResponse {
        let read = try API.SearchResult.readResponse(data)
        guard let lastIndex = read.lastIndex, let total = read.totalResults, let searchID = read.searchID else {
            throw E3DBError(.badRequest, "the response lacks last_index, total_results or search_id")
        }
        guard let totalResults = Int(exactly: total) else {
            throw E3DBError(.badRequest, "total_results does not fit in an Int")
        }
        return API.SearchResponse(
            results: read.results, lastIndex: lastIndex, totalResults: totalResults, searchID: searchID)
    }
    /// Encodes the response with the record writer: `{"results":[…],"last_index":…,"total_results":…,
    /// "search_id":…}`.
    public func encodeBody() throws -> Data {
        try API.SearchResult.writeResponse(results, lastIndex: lastIndex, v2: (totalResults, searchID))
    }
}
extension API.Note: APIBody {}
