import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

extension E3DBService {
    /// `POST /v1/auth/token`: a Bearer token for a client's API key pair (HTTP Basic).
    func addTokenRoutes(to router: Router<E3DBRequestContext>) {
        router.group().add(middleware: Authentication(service: self, requirement: .apiKey))
            .on(API.Endpoints.token) { try await self.token($0) }
    }

    func token(_ r: APIRequest) async throws -> Response {
        let client = try r.caller()
        // The body is a form whatever its Content-Type (js and Java send odd ones); grant_type may be absent.
        let form = String(decoding: try await body(r, for: .anonymous, limit: 64 << 10), as: UTF8.self)
        for pair in form.split(separator: "&") where pair.hasPrefix("grant_type=") {
            guard pair.dropFirst(11) == "client_credentials" else {
                throw E3DBError(.badRequest, "grant_type must be client_credentials")
            }
        }
        let token = Hex.encode(SecureRandom.bytes(count: 32))
        let now = clock.now()
        let expires = now + Int64(configuration.tokenLifetime) * 1_000_000
        try await storage.insertAccessToken(hash: Self.sha256(token), clientID: client.clientID, expires: expires)
        return try JSONBody.response(
            API.TokenResponse(
                accessToken: token, expiresIn: configuration.tokenLifetime,
                expiresAt: APITimestamp.format(micros: expires)))
    }
}
