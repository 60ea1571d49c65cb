public import E3DBAPI
import E3DBCanonicalJSON
import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
public import Foundation

extension E3DBClient {
    func putPolicy(writer: UUID, reader: UUID, type: String, _ policy: API.PolicyRequest) async throws {
        let w = writer.lowercasedString
        _ = try await send(
            API.Endpoints.putPolicy, [w, w, reader.lowercasedString, type],
            json: policy, operation: "policy")
    }

    /// Lets `authorizer` share and revoke this client's records of `type` on its behalf: wraps the access key
    /// for it and grants `authorizer`.
    public func addAuthorizer(_ authorizer: UUID, type: String) async throws {
        let info = try await clientInfo(authorizer)
        let ak = try await ownAccessKey(type: type)
        try await putAccessKey(
            ak, writer: clientID, user: clientID, reader: authorizer,
            readerKey: try Box.PublicKey(base64URLEncoded: info.publicKey.curve25519), type: type)
        try await putPolicy(reader: authorizer, type: type, API.PolicyRequest(allow: [["authorizer": .object([:])]]))
    }

    /// Withdraws `authorizer`'s right to share this client's records of `type` (it keeps what it already read).
    public func removeAuthorizer(_ authorizer: UUID, type: String) async throws {
        try await putPolicy(reader: authorizer, type: type, API.PolicyRequest(deny: [["authorizer": .object([:])]]))
    }

    /// Withdraws `authorizer`'s right to share this client's records of every type at once
    /// (`DELETE /v1/storage/policy/{user}/{writer}/{reader}`), as e3db-swift's `remove(authorizerId:)` and Java's
    /// `removeAuthorizer(UUID)` do. Removing an authorizer that holds no grant is not an error.
    public func removeAuthorizer(_ authorizer: UUID) async throws {
        let me = clientID.lowercasedString
        _ = try await send(
            API.Endpoints.removeAuthorizers, [me, me, authorizer.lowercasedString], operation: "authorizer removal")
    }

    /// As an authorizer of `writer`, shares its records of `type` with `reader`: the writer's access key (wrapped
    /// for this client) is wrapped again for the reader, with this client as the EAK's authorizer.
    /// - Throws: `E3DBError` `.notFound` when this client holds no key for the writer's type, `.forbidden` when it
    ///   is not an authorizer.
    public func share(onBehalfOf writer: UUID, type: String, with reader: UUID) async throws {
        let (ak, _) = try await readerAccessKey(writer: writer, user: writer, type: type)
        let info = try await clientInfo(reader)
        try await putAccessKey(
            ak, writer: writer, user: writer, reader: reader,
            readerKey: try Box.PublicKey(base64URLEncoded: info.publicKey.curve25519), type: type)
        try await putPolicy(
            writer: writer, reader: reader, type: type, API.PolicyRequest(allow: [["read": .object([:])]]))
    }

    /// As an authorizer of `writer`, revokes `reader`'s access to its records of `type`.
    public func revoke(onBehalfOf writer: UUID, type: String, from reader: UUID) async throws {
        try await putPolicy(
            writer: writer, reader: reader, type: type, API.PolicyRequest(deny: [["read": .object([:])]]))
        _ = try await send(
            API.Endpoints.deleteAccessKey, tuplePath(writer: writer, user: writer, reader: reader, type: type),
            operation: "access key delete")
    }

    /// Authorizer grants this client made (`GET /v1/storage/policy/proxies`).
    public func authorizers() async throws -> [API.AuthorizerPolicy] {
        try await call(API.Endpoints.proxies, operation: "authorizers")
    }

    /// Authorizer grants made to this client (`GET /v1/storage/policy/granted`).
    public func authorizedBy() async throws -> [API.AuthorizerPolicy] {
        try await call(API.Endpoints.granted, operation: "authorized by")
    }

    // MARK: Search v2

    /// One page of a v2 search.
    public struct SearchPage: Sendable {
        /// The records of this page (decrypted when the request asked for data).
        public var records: [ClientRecord]
        /// The offset of the next page, or nil when none remains.
        public var nextToken: Int64?
        /// All matches.
        public var totalResults: Int
    }

    /// Runs one page of a v2 search (`POST /v2/search`): match and exclude clauses with EXACT, FUZZY, WILDCARD or
    /// REGEXP terms, a creation or modification range, offset paging.
    /// - Parameter request: the search; set `nextToken` from the previous page's.
    /// - Returns: the page.
    public func search(_ request: API.SearchRequest) async throws -> SearchPage {
        let response = try await call(API.Endpoints.search, json: request, operation: "search", idempotent: true)
        var records: [ClientRecord] = []
        for result in response.results {
            if request.includeData == true, let data = result.recordData {
                records.append(try await decrypt(API.Record(meta: result.meta, data: data, recSig: result.recSig)))
            } else {
                records.append(ClientRecord(meta: result.meta, data: RecordData()))
            }
        }
        return SearchPage(
            records: records, nextToken: response.lastIndex == 0 ? nil : response.lastIndex,
            totalResults: response.totalResults)
    }
}
