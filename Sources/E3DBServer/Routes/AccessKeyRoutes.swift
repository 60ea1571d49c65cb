import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

extension E3DBService {
    /// `GET`, `PUT` and `DELETE /v1/storage/access_keys/{writer}/{user}/{reader}/{type}`, for registered clients.
    func addAccessKeyRoutes(to router: Router<E3DBRequestContext>) {
        let group = router.group().add(middleware: Authentication(service: self, requirement: .client))
        let handler: @Sendable (APIRequest) async throws -> Response = {
            try await self.accessKey(
                $0, writer: $0.parameter("writer"), user: $0.parameter("user"),
                reader: $0.parameter("reader"), type: $0.parameter("type"))
        }
        group.on(API.Endpoints.readAccessKey, handler).on(API.Endpoints.putAccessKey, handler)
            .on(API.Endpoints.deleteAccessKey, handler)
        // Other methods on the path: 405, as the API answered before its routes were typed.
        let path = RouterPath(API.Endpoints.readAccessKey.template)
        for method in [HTTPRequest.Method.post, .patch] { group.on(path, method, handler) }
    }

    func tuple(writer: String, user: String, reader: String, type: String) throws -> AccessTuple {
        guard let w = ClientID(writer), let u = ClientID(user), let rd = ClientID(reader) else {
            throw E3DBError(.badRequest, "writer, user and reader must be UUIDs")
        }
        guard !type.isEmpty else { throw E3DBError(.badRequest, "the record type must not be empty") }
        return AccessTuple(writerID: w, userID: u, readerID: rd, type: type)
    }

    /// The caller's and the addressed reader's roles on the writer's (writer, type) of `t` (``AccessRules``):
    /// a storage read of the caller's policy unless it is the writer, and of the reader's when it is neither.
    func sharingRoles(caller: ClientID, tuple t: AccessTuple) async throws
        -> (caller: AccessRules.CallerRole, target: AccessRules.TargetRole)
    {
        func isAuthorizer(_ id: ClientID) async throws -> Bool {
            try await storage.policy(AccessTuple(writerID: t.writerID, userID: t.userID, readerID: id, type: t.type))?
                .canAuthorize == true
        }
        let callerRole: AccessRules.CallerRole
        if caller == t.writerID && caller == t.userID {
            callerRole = .writer
        } else {
            callerRole = try await isAuthorizer(caller) ? .authorizer : .other
        }
        let target: AccessRules.TargetRole
        if t.readerID == caller {
            target = .caller
        } else if t.readerID == t.writerID {
            target = .writer
        } else if callerRole == .authorizer, try await isAuthorizer(t.readerID) {
            target = .authorizer
        } else {
            target = .reader  // for the writer and for others the difference decides nothing: not read
        }
        return (callerRole, target)
    }

    /// Refuses `operation` by `caller` on `t` unless ``AccessRules`` allows it.
    func authorize(_ operation: AccessRules.Operation, caller: ClientID, tuple t: AccessTuple) async throws {
        if operation == .readAccessKey {  // needs no storage read: only the reader itself
            let target: AccessRules.TargetRole = t.readerID == caller ? .caller : .reader
            guard AccessRules.decide(operation, caller: .other, target: target) else {
                throw AccessRules.refusal(operation, caller: .other, target: target)
            }
            return
        }
        let (role, target) = try await sharingRoles(caller: caller, tuple: t)
        guard AccessRules.decide(operation, caller: role, target: target) else {
            throw AccessRules.refusal(operation, caller: role, target: target)
        }
    }

    func accessKey(_ r: APIRequest, writer: String, user: String, reader: String, type: String) async throws
        -> Response
    {
        let caller = try r.caller()
        let t = try tuple(writer: writer, user: user, reader: reader, type: type)
        switch r.method {
        case .get:
            try await authorize(.readAccessKey, caller: caller.clientID, tuple: t)
            guard let row = try await storage.accessKey(t) else { throw E3DBError(.notFound, "no access key") }
            return try JSONBody.response(eakInfo(row))
        case .put:
            try await authorize(.putAccessKey, caller: caller.clientID, tuple: t)
            let req = try JSONBody.decode(
                API.PutAccessKeyRequest.self, from: try await body(r, for: .client(caller.clientID)),
                what: "access key")
            guard !req.eak.isEmpty, req.eak.utf8.count <= 4096 else {
                throw E3DBError(.badRequest, "eak must be a non-empty string of at most 4096 bytes")
            }
            let row = AccessKeyRow(
                tuple: t, eak: req.eak, authorizerID: caller.clientID, authorizerPublicKey: caller.publicKey,
                signerID: caller.signingKey == nil ? nil : caller.clientID, signerSigningKey: caller.signingKey)
            guard try await storage.insertAccessKey(row) else {
                throw E3DBError(.conflict, "an access key for this writer, user, reader and type already exists")
            }
            return JSONBody.raw("{}", status: .created)
        case .delete:
            try await authorize(.deleteAccessKey, caller: caller.clientID, tuple: t)
            try await storage.deleteAccessKey(t)
            return Response(status: .noContent)
        default:
            throw E3DBError(.methodNotAllowed, "access keys take GET, PUT and DELETE")
        }
    }

    func eakInfo(_ row: AccessKeyRow) -> API.EAKInfo {
        API.EAKInfo(
            eak: row.eak, authorizerID: row.authorizerID.text,
            authorizerPublicKey: .init(curve25519: row.authorizerPublicKey), signerID: row.signerID?.text,
            signerSigningKey: row.signerSigningKey.map { .init(ed25519: $0) })
    }
}
