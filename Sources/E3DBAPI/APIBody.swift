public import Foundation

/// A JSON body of the E3DB API, request or response: the one seam through which the client and the server read
/// and write bodies, and the one public spelling of each body's codec (``decodeBody(_:)`` and ``encodeBody()``).
/// Bodies go through Foundation's `JSONDecoder` and `JSONEncoder`, except ``API/Record``, whose `decodeBody` and
/// `encodeBody` are the strict record reader and a hand-written writer.
public protocol APIBody: Codable, Sendable {
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

extension APIBody {
    /// Decodes a body with `JSONDecoder`.
    public static func decodeBody(_ data: Data) throws -> Self { try JSONDecoder().decode(Self.self, from: data) }
    /// Encodes the body with `JSONEncoder`.
    public func encodeBody() throws -> Data { try JSONEncoder().encode(self) }
}

extension Array: APIBody where Element: APIBody {}

extension API.Record: APIBody {
    /// Decodes a record body with the strict record reader.
    /// - Throws: `E3DBError` `.badRequest` saying what is wrong and at which byte (member names, never values).
    public static func decodeBody(_ data: Data) throws -> API.Record { try decodeJSON(data) }
    /// Encodes the record with the hand-written writer (as `JSONEncoder` writes it up to member order and the
    /// escaping of `/`).
    public func encodeBody() -> Data { jsonData() }
}

extension API.ErrorBody: APIBody {}
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
extension API.QueryResponse: APIBody {}
extension API.SearchRequest: APIBody {}
extension API.SearchResponse: APIBody {}
extension API.Note: APIBody {}
