import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

extension E3DBService {
    /// Registration and backup (`/v1/account`, with a registration token) and client lookup
    /// (`GET /v1/storage/clients/{id}`, for registered clients).
    func addClientRoutes(to router: Router<E3DBRequestContext>) {
        router.on(API.Endpoints.register) { try await self.register($0) }
            .on(API.Endpoints.backup) {
                try await self.backup($0, token: $0.parameter("token"), clientID: $0.parameter("client"))
            }
        router.group().add(middleware: Authentication(service: self, requirement: .client))
            .on(API.Endpoints.client) { try await self.clientInfo($0, id: $0.parameter("id")) }
    }

    static func validKey(_ b64u: String) -> Bool { (try? Base64URL.decode(b64u))?.count == 32 }

    func register(_ r: APIRequest) async throws -> Response {
        // Bounded before the token is checked: anyone can send a registration.
        let req = try JSONBody.decode(
            API.RegistrationRequest.self, from: try await body(r, for: .anonymous, limit: 64 << 10),
            what: "registration")
        guard Self.validKey(req.client.publicKey.curve25519) else {
            throw E3DBError(.badRequest, "client.public_key.curve25519 must be a base64url 32-byte key")
        }
        if let sk = req.client.signingKey, !Self.validKey(sk.ed25519) {
            throw E3DBError(.badRequest, "client.signing_key.ed25519 must be a base64url 32-byte key")
        }
        let apiSecret = Hex.encode(SecureRandom.bytes(count: 32))
        let row = ClientRow(
            clientID: .random(), name: req.client.name, publicKey: req.client.publicKey.curve25519,
            signingKey: req.client.signingKey?.ed25519, apiKeyID: Hex.encode(SecureRandom.bytes(count: 32)),
            apiSecretHash: Self.sha256(apiSecret), registrationTokenHash: Self.sha256(req.token), created: clock.now())
        // One transaction: a registration that fails uses no registration.
        guard try await storage.registerClient(row) else {
            throw E3DBError(.unauthorized, "the registration token is unknown or used up")
        }
        let backup = try await storage.backupClientID()?.text ?? ""
        return try JSONBody.response(
            API.RegistrationResponse(
                clientID: row.clientID.text, apiKeyID: row.apiKeyID, apiSecret: apiSecret, name: row.name,
                publicKey: req.client.publicKey, signingKey: req.client.signingKey),
            status: .created, headers: [.xBackupClient: backup])
    }

    func backup(_ r: APIRequest, token: String, clientID: String) async throws -> Response {
        guard let id = ClientID(clientID), let client = try await storage.client(id: id) else {
            throw E3DBError(.notFound, "no such client")
        }
        if r.header(.authorization) != nil {  // the one authentication routine, after the client was found
            let caller = try await authenticate(r)
            guard caller.clientID == id else { throw E3DBError(.forbidden, "a client may only mark its own backup") }
        } else {
            // js posts this with no authentication: accept it when the token is the one that registered the client.
            guard client.registrationTokenHash == Self.sha256(token) else {
                throw E3DBError(.forbidden, "the registration token did not register this client")
            }
        }
        try await storage.setHasBackup(clientID: id)
        return JSONBody.raw("{}", status: .created)
    }

    func clientInfo(_ r: APIRequest, id: String) async throws -> Response {
        _ = try r.caller()
        // Python's test expects 404 for a malformed id as well as an unknown one.
        guard let id = ClientID(id), let c = try await storage.client(id: id) else {
            throw E3DBError(.notFound, "no such client")
        }
        return try JSONBody.response(
            API.ClientInfo(
                clientID: c.clientID.text, publicKey: .init(curve25519: c.publicKey),
                signingKey: c.signingKey.map { .init(ed25519: $0) }))
    }
}
