import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

/// The one authentication middleware: on the route groups that need a caller, it runs the one authentication
/// routine (``E3DBService/identify(_:schemes:)``) and puts who sent the request into the context.
struct Authentication: RouterMiddleware {
    /// What a group of routes needs to know about the caller.
    enum Requirement {
        /// A registered, enabled client, by Bearer token or TSV1 naming it (every storage endpoint).
        case client
        /// A verified TSV1 header; the client it names when that checks out, else an anonymous writer (notes).
        case tsv1
        /// A registered, enabled client by HTTP Basic with its API key pair (the token endpoint).
        case apiKey
    }

    let service: E3DBService
    let requirement: Requirement

    func handle(
        _ request: Request, context: E3DBRequestContext,
        next: (Request, E3DBRequestContext) async throws -> Response
    ) async throws -> Response {
        var context = context
        let r = APIRequest(request, context)
        switch requirement {
        case .client:
            context.caller = try await service.authenticate(r)
        case .tsv1:
            let identity = try await service.identify(r, schemes: .bearerOrTSV1)
            guard let verified = identity.tsv1 else {
                throw E3DBError(.unauthorized, "this endpoint needs a TSV1 Authorization header")
            }
            context.tsv1 = verified
            if case .client(let client, _) = identity { context.caller = client }
        case .apiKey:
            guard case .client(let client, _) = try await service.identify(r, schemes: .basic) else {
                throw E3DBError(.unauthorized, "the API key pair is not valid")
            }
            context.caller = client
        }
        return try await next(request, context)
    }
}

extension E3DBService {
    /// An `Authorization` header split into its scheme (lowercased: schemes are case-insensitive, RFC 9110 §11.1)
    /// and its credentials (after the spaces that follow the scheme). TSV1 ends its scheme with `;`.
    static func authorizationScheme(_ header: String) -> (scheme: String, credentials: Substring) {
        let trimmed = header.drop { $0 == " " || $0 == "\t" }
        guard let end = trimmed.firstIndex(where: { $0 == " " || $0 == "\t" || $0 == ";" }) else {
            return (trimmed.lowercased(), "")
        }
        let credentials = trimmed[end...].drop { $0 == " " || $0 == "\t" || $0 == ";" }
        return (trimmed[..<end].lowercased(), credentials)
    }

    private static let tsv1Scheme = TSV1.method.lowercased()

    /// Who sent a request, as the one authentication routine (``identify(_:schemes:)``) found it.
    enum Identity {
        /// A registered, enabled client: a Bearer token it was issued, its API key pair (HTTP Basic), or a TSV1
        /// header signed with its registered signing key and naming it in `uid`.
        case client(ClientRow, tsv1: TSV1.VerifiedRequest?)
        /// A valid TSV1 header with an empty `uid` (anonymous notes): only the key that signed it is known.
        case anonymous(TSV1.VerifiedRequest)
        /// A valid TSV1 header whose `uid` does not check out: not an enabled client whose registered signing key
        /// signed it.
        case unverifiedClient(TSV1.VerifiedRequest)

        /// The TSV1 request, when the header was TSV1.
        var tsv1: TSV1.VerifiedRequest? {
            switch self {
            case .client(_, let v): v
            case .anonymous(let v), .unverifiedClient(let v): v
            }
        }
    }

    /// The schemes an endpoint accepts.
    enum Schemes {
        /// `Bearer` and `TSV1-ED25519-BLAKE2B` (every endpoint but the token endpoint).
        case bearerOrTSV1
        /// HTTP `Basic` with a client's API key pair (the token endpoint only).
        case basic
    }

    /// Authenticates a request, the same checks for every scheme: a Bearer token must be issued, unexpired, and
    /// its client enabled; an API key pair must be a registered client's, and the client enabled; a TSV1 header
    /// must verify (signature over the request, timestamp window, a nonce of at most 64 bytes not seen before),
    /// and its `uid`, when given, must name an enabled client whose registered signing key is the header's key (a
    /// client registered without one cannot use TSV1 as itself).
    func identify(_ r: APIRequest, schemes: Schemes) async throws -> Identity {
        if schemes == .basic { return .client(try await apiKeyClient(r), tsv1: nil) }
        guard let header = r.header(.authorization) else {
            throw E3DBError(.unauthorized, "this endpoint needs an Authorization header (Bearer or TSV1)")
        }
        let (scheme, credentials) = Self.authorizationScheme(header)
        switch scheme {
        case "bearer":
            let hash = Self.sha256(trimmedWhitespace(credentials))
            let now = clock.now()
            if let cached = bearerTokens.client(hash: hash, now: now) { return .client(cached, tsv1: nil) }
            guard let found = try await storage.accessToken(hash: hash, now: now),
                let client = try await storage.client(id: found.clientID), client.enabled
            else {
                throw E3DBError(.unauthorized, "the bearer token is unknown or expired")
            }
            bearerTokens.insert(hash: hash, client: client, tokenExpires: found.expires, now: now)
            return .client(client, tsv1: nil)
        case Self.tsv1Scheme:
            let verified = try await verifyTSV1(r, header: header)
            guard let uid = verified.clientID else { return .anonymous(verified) }
            // One answer for every way it fails: who is registered, disabled or keyless is nobody's business.
            guard let id = ClientID(uid), let client = try await storage.client(id: id), client.enabled,
                let registered = client.signingKey,
                (try? Base64URL.decode(registered)) == verified.signingKey.rawRepresentation
            else {
                return .unverifiedClient(verified)
            }
            return .client(client, tsv1: verified)
        default:
            throw E3DBError(.unauthorized, "the Authorization scheme is not Bearer or \(TSV1.method)")
        }
    }

    /// The calling client of a storage endpoint: a registered, enabled client (``identify(_:schemes:)``), else 401.
    func authenticate(_ r: APIRequest) async throws -> ClientRow {
        switch try await identify(r, schemes: .bearerOrTSV1) {
        case .client(let client, _): return client
        case .anonymous: throw E3DBError(.unauthorized, "this endpoint needs a registered client (TSV1 uid)")
        case .unverifiedClient:
            throw E3DBError(
                .unauthorized,
                "TSV1: uid does not name an enabled client whose registered signing key signed the header")
        }
    }

    /// The client whose API key pair an HTTP Basic header holds (the token endpoint), else 401.
    private func apiKeyClient(_ r: APIRequest) async throws -> ClientRow {
        guard let header = r.header(.authorization), header.lowercased().hasPrefix("basic "),
            let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else {
            throw E3DBError(.unauthorized, "the token endpoint needs HTTP Basic authentication with the API key pair")
        }
        let keyID = String(text[..<colon])
        let secretText = String(text[text.index(after: colon)...])
        guard let client = try await storage.client(apiKeyID: keyID), client.enabled,
            ConstantTime.equals(Self.sha256(secretText), client.apiSecretHash)
        else {
            throw E3DBError(.unauthorized, "the API key pair is not valid")
        }
        return client
    }

    /// Verifies a TSV1 header: signature over the request, timestamp window and nonce replay (the nonce is kept
    /// as a SHA-256 of the signing key and the nonce until the window has passed). The `uid` is ``identify(_:schemes:)``'s.
    private func verifyTSV1(_ r: APIRequest, header: String) async throws -> TSV1.VerifiedRequest {
        let now = clock.now() / 1_000_000
        let verified: TSV1.VerifiedRequest
        do {
            verified = try TSV1.verify(
                authorization: header, rawPath: r.rawPath, rawQuery: r.rawQuery,
                method: r.method.rawValue, now: now, window: configuration.tsv1Window)
        } catch {
            throw E3DBError(.unauthorized, "TSV1: \(error.message)")
        }
        let expires = (verified.timestamp + configuration.tsv1Window + 1) * 1_000_000
        let nonceHash = Hex.encode(Hashes.sha256(verified.signingKey.rawRepresentation + Data(verified.nonce.utf8)))
        guard try await storage.useNonce(nonceHash, expires: expires, now: now * 1_000_000) else {
            throw E3DBError(.unauthorized, "TSV1: the nonce was already used")
        }
        return verified
    }
}
