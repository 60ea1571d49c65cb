import Foundation
import E3DBAPI
import E3DBPrimitives
import HTTPTypes
import Hummingbird
import Logging
import Prometheus
import NIOCore

/// The E3DB API: authentication, authorization and every endpoint of spec api §2, over a ``ServerStorage`` and a
/// ``FileBodyStore``. It stores what clients send (ciphertext, plaintext metadata, encrypted access keys,
/// policies) and has no code that could open any of it.
final class E3DBService: Sendable {
    let storage: any ServerStorage
    let files: any FileBodyStore
    let configuration: ServerConfiguration
    let secret: SecureBytes
    let clock = MonotonicClock()
    let bearerTokens = BearerTokenCache()
    let logger: Logger
    /// The Prometheus registry when `/metrics` is served.
    let metrics: PrometheusCollectorRegistry?
    /// Request body bytes held in memory by all requests (``ServerConfiguration/maxBodyBytesInFlight``).
    let bodyBudget: BodyBudget
    /// Searches running at once (``ServerConfiguration/concurrentSearches``).
    let searches: AsyncLimiter

    init(storage: any ServerStorage, files: any FileBodyStore, configuration: ServerConfiguration, secret: Data,
         logger: Logger, metrics: PrometheusCollectorRegistry? = nil) {
        self.storage = storage
        self.files = files
        self.configuration = configuration
        self.secret = SecureBytes(copying: secret)
        self.logger = logger
        self.metrics = metrics
        bodyBudget = BodyBudget(bytes: configuration.maxBodyBytesInFlight, perClient: 2 * configuration.maxBodySize)
        searches = AsyncLimiter(permits: configuration.concurrentSearches)
    }

    // MARK: Maintenance

    /// Partial uploads not written to for this long are removed (``FileBodyStore/removeAbandonedUploads(idle:)``).
    static let abandonedUploadIdle: TimeInterval = 300

    /// One maintenance pass: expired TSV1 nonces and tokens, pending files past their lifetime with their bodies,
    /// and abandoned partial uploads. Failures are logged; the next pass tries again.
    func maintain() async {
        let now = clock.now()
        // Nonces and tokens a TSV1 window after they expire: another process's clock may run behind this one's.
        let margin = configuration.tsv1Window.multipliedReportingOverflow(by: 1_000_000)
        let lifetime = configuration.pendingFileLifetime.multipliedReportingOverflow(by: 1_000_000)
        do {
            let stale = try await storage.purgeExpired(
                now: now - (margin.overflow ? 0 : margin.partialValue),
                pendingCreatedBefore: lifetime.overflow ? Int64.min : now.subtractingReportingOverflow(lifetime.partialValue).partialValue)
            for id in stale { files.remove(id: id) }
            let abandoned = files.removeAbandonedUploads(idle: Self.abandonedUploadIdle)
            if !stale.isEmpty || abandoned > 0 {
                logger.info("maintenance", metadata: ["expired_pending_files": .stringConvertible(stale.count),
                                                      "abandoned_uploads": .stringConvertible(abandoned)])
            }
        } catch {
            logger.warning("maintenance failed", metadata: ["error": .string("\(error)")])
        }
    }

    /// Runs ``maintain()`` now and then every ``ServerConfiguration/maintenanceInterval`` seconds until cancelled.
    func maintainUntilCancelled() async {
        while !Task.isCancelled {
            await maintain()
            try? await Task.sleep(for: .seconds(configuration.maintenanceInterval))
        }
    }

    // MARK: Entry point

    func respond(to request: Request) async -> Response {
        let started = ContinuousClock.now
        var route = "unknown"
        let response: Response
        let bodyBytes = BodyReservation(bodyBudget)
        defer { bodyBytes.release() }
        do {
            let api = try APIRequest(request, bodyBytes: bodyBytes)
            if request.headers[.expect] != nil {
                throw HTTPFailure(.expectationFailed, "only Expect: 100-continue is supported")
            }
            response = try await dispatch(api, route: &route)
        } catch {
            let (status, message) = refusal(error, route: route)
            response = JSONBody.error(status, message)
        }
        finished(method: request.method, route: route, status: response.status, started: started)
        return response
    }

    /// The status and message of a request that failed with `error` (logged when it is not the client's fault).
    func refusal(_ error: any Error, route: String) -> (HTTPResponse.Status, String) {
        switch error {
        case let failure as HTTPFailure:
            return (failure.status, failure.message)
        case let error as StorageError where error.kind == .invalidInput:
            logger.notice("storage refused a value", metadata: ["route": .string(route), "error": .string(error.message)])
            return (.badRequest, "a value of the request cannot be stored")
        case let error as StorageError:
            logger.error("storage failure", metadata: ["route": .string(route), "error": .string(error.message)])
            return (.serviceUnavailable, "the storage backend failed; try again")
        case is CancellationError:
            return (.serviceUnavailable, "the request was cancelled")
        case let error as HTTPError where error.status == .contentTooLarge:
            return (.contentTooLarge, "the request body is larger than the server accepts")
        default:
            logger.error("request failed", metadata: ["route": .string(route), "error": .string("\(type(of: error))")])
            return (.badRequest, "the request could not be processed")
        }
    }

    /// Counts and logs (at `info`) one answered request: route template, method, status and duration.
    func finished(method: HTTPRequest.Method, route: String, status: HTTPResponse.Status,
                  started: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - started
        ServerMetrics.record(method: method.rawValue, route: route, status: status.code, elapsed: elapsed)
        logger.info("request", metadata: [
            "method": .string(method.rawValue), "route": .string(route),
            "status": .stringConvertible(status.code),
            "ms": .string(String(format: "%.2f", Double(elapsed.components.attoseconds) / 1e15
                                 + Double(elapsed.components.seconds) * 1000)),
        ])
    }

    private func dispatch(_ r: APIRequest, route: inout String) async throws -> Response {
        let s = r.segments
        let m = r.method
        func match(_ pattern: [String]) -> Bool {
            guard pattern.count == s.count else { return false }
            for (p, v) in zip(pattern, s) where p != "*" && p != v { return false }
            route = "/" + pattern.joined(separator: "/")
            return true
        }
        switch m {
        case .post where match(["v1", "auth", "token"]): return try await token(r)
        case .post where match(["v1", "account", "e3db", "clients", "register"]): return try await register(r)
        case .post where match(["v1", "account", "backup", "*", "*"]): return try await backup(r, token: s[3], clientID: s[4])
        case .get where match(["v1", "storage", "clients", "*"]): return try await clientInfo(r, id: s[3])
        case _ where match(["v1", "storage", "access_keys", "*", "*", "*", "*"]):
            return try await accessKey(r, writer: s[3], user: s[4], reader: s[5], type: s[6])
        case .put where match(["v1", "storage", "policy", "*", "*", "*", "*"]):
            return try await putPolicy(r, user: s[3], writer: s[4], reader: s[5], type: s[6])
        case .delete where match(["v1", "storage", "policy", "*", "*", "*"]):
            return try await deleteAuthorizers(r, user: s[3], writer: s[4], reader: s[5])
        case .get where match(["v1", "storage", "policy", "*"]): return try await listPolicies(r, which: s[3])
        case .post where match(["v1", "storage", "records"]): return try await writeRecord(r)
        case .get where match(["v1", "storage", "records", "*"]): return try await readRecord(r, id: s[3])
        case .put where match(["v1", "storage", "records", "safe", "*", "*"]):
            return try await updateRecord(r, id: s[4], version: s[5])
        case .delete where match(["v1", "storage", "records", "safe", "*", "*"]):
            return try await deleteRecord(r, id: s[4], version: s[5])
        case .delete where match(["v1", "storage", "records", "*"]): return try await deleteRecord(r, id: s[3], version: nil)
        case .post where match(["v1", "storage", "files"]): return try await createPendingFile(r)
        case .patch where match(["v1", "storage", "files", "*"]): return try await commitFile(r, id: s[3])
        case .get where match(["v1", "storage", "files", "*"]): return try await readFile(r, id: s[3])
        case .put where match(["v1", "storage", "blobs", "*"]):
            return try await uploadBody(r, id: s[3])
        case .get where match(["v1", "storage", "blobs", "*"]): return try await downloadBody(r, id: s[3])
        case .post where match(["v1", "storage", "search"]): return try await searchV1(r)
        case .post where match(["v2", "search"]): return try await searchV2(r)
        case .post where match(["v2", "storage", "notes"]): return try await writeNote(r)
        case .get where match(["v2", "storage", "notes"]): return try await readNote(r)
        case .put where match(["v2", "storage", "notes"]): return try await replaceNote(r)
        case .delete where match(["v2", "storage", "notes", "*"]): return try await deleteNote(r, id: s[3])
        case .get where match(["healthz"]): return JSONBody.raw(#"{"status":"ok"}"#)
        case .get where match(["metrics"]) && metrics != nil:
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                            body: .init(byteBuffer: ByteBuffer(bytes: metrics!.emitToBuffer())))
        default:
            route = "unmatched"
            throw HTTPFailure.notFound("no such endpoint: \(m.rawValue) \(s.prefix(3).joined(separator: "/"))")
        }
    }

    // MARK: Bodies and authentication

    /// The request body, at most `limit` bytes (default ``ServerConfiguration/maxBodySize``; 413 past it), each
    /// chunk taken from `owner`'s share of the ``BodyBudget`` as it arrives (503 when none is left), and all of it
    /// within ``ServerConfiguration/bodyTimeout`` of the first read (408 at the chunk that arrives later: with the
    /// connection's idle timeout, a body trickled a byte at a time is dropped after both at most).
    func body(_ r: APIRequest, for owner: BodyOwner, limit: Int? = nil) async throws -> Data {
        let max = limit ?? configuration.maxBodySize
        if let declared = r.header(.contentLength).flatMap(Int.init), declared > max {
            throw HTTPFailure(.contentTooLarge, "the request body is larger than the \(max) bytes this endpoint accepts")
        }
        // Collected chunk by chunk, each taken from the server's budget of body bytes in memory first.
        var collected = Data()
        let deadline = ContinuousClock.now + .seconds(configuration.bodyTimeout)
        for try await chunk in r.request.body {
            guard collected.count + chunk.readableBytes <= max else {
                throw HTTPFailure(.contentTooLarge, "the request body is larger than the \(max) bytes this endpoint accepts")
            }
            guard ContinuousClock.now <= deadline else {
                throw HTTPFailure(.requestTimeout, "the request body took longer than \(configuration.bodyTimeout) s to arrive")
            }
            try r.bodyBytes.take(chunk.readableBytes, for: owner)
            collected.append(contentsOf: chunk.readableBytesView)
        }
        return collected
    }

    static func sha256(_ text: String) -> Data { Hashes.sha256(Data(text.utf8)) }

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

    /// The SHA-256 of the token of a `Bearer` authorization header (the scheme in any case), `nil` for others.
    static func bearerTokenHash(_ header: String) -> Data? {
        let (scheme, credentials) = authorizationScheme(header)
        guard scheme == "bearer" else { return nil }
        return sha256(trimmedWhitespace(credentials))
    }

    /// The client of a Bearer authorization header when its token is in the cache (no storage read).
    func cachedBearerClient(_ header: String) -> ClientRow? {
        guard let hash = Self.bearerTokenHash(header) else { return nil }
        return bearerTokens.client(hash: hash, now: clock.now())
    }

    /// Who sent a request, as the one authentication routine (``identify(_:)``) found it.
    enum Identity {
        /// A registered, enabled client: a Bearer token it was issued, or a TSV1 header signed with its
        /// registered signing key and naming it in `uid`.
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

    /// Authenticates a request, the same checks for every scheme: a Bearer token must be issued, unexpired, and
    /// its client enabled; a TSV1 header must verify (signature over the request, timestamp window, a nonce of at
    /// most 64 bytes not seen before), and its `uid`, when given, must name an enabled client whose registered
    /// signing key is the header's key (a client registered without one cannot use TSV1 as itself).
    func identify(_ r: APIRequest) async throws -> Identity {
        guard let header = r.header(.authorization) else {
            throw HTTPFailure.unauthorized("this endpoint needs an Authorization header (Bearer or TSV1)")
        }
        let (scheme, _) = Self.authorizationScheme(header)
        switch scheme {
        case "bearer":
            guard let hash = Self.bearerTokenHash(header) else {
                throw HTTPFailure.unauthorized("the bearer token is unknown or expired")
            }
            let now = clock.now()
            if let cached = bearerTokens.client(hash: hash, now: now) { return .client(cached, tsv1: nil) }
            guard let found = try await storage.accessToken(hash: hash, now: now),
                  let client = try await storage.client(id: found.clientID), client.enabled else {
                throw HTTPFailure.unauthorized("the bearer token is unknown or expired")
            }
            bearerTokens.insert(hash: hash, client: client, tokenExpires: found.expires, now: now)
            return .client(client, tsv1: nil)
        case Self.tsv1Scheme:
            let verified = try await verifyTSV1(r, header: header)
            guard let uid = verified.clientID else { return .anonymous(verified) }
            // One answer for every way it fails: who is registered, disabled or keyless is nobody's business.
            guard let id = canonicalUUID(uid), let client = try await storage.client(id: id), client.enabled,
                  let registered = client.signingKey,
                  (try? Base64URL.decode(registered)) == verified.signingKey.rawRepresentation else {
                return .unverifiedClient(verified)
            }
            return .client(client, tsv1: verified)
        default:
            throw HTTPFailure.unauthorized("the Authorization scheme is not Bearer or \(TSV1.method)")
        }
    }

    /// The calling client of a storage endpoint: a registered, enabled client (``identify(_:)``), else 401.
    func authenticate(_ r: APIRequest) async throws -> ClientRow {
        switch try await identify(r) {
        case .client(let client, _): return client
        case .anonymous: throw HTTPFailure.unauthorized("this endpoint needs a registered client (TSV1 uid)")
        case .unverifiedClient:
            throw HTTPFailure.unauthorized("TSV1: uid does not name an enabled client whose registered signing key signed the header")
        }
    }

    /// The caller of a note endpoint: a TSV1 header (notes are addressed by signing keys), with the client it
    /// names when ``identify(_:)`` verified it; a `uid` that does not check out is treated as anonymous.
    func noteCaller(_ r: APIRequest) async throws -> (verified: TSV1.VerifiedRequest, client: ClientRow?) {
        let identity = try await identify(r)
        guard let verified = identity.tsv1 else {
            throw HTTPFailure.unauthorized("this endpoint needs a TSV1 Authorization header")
        }
        if case .client(let client, _) = identity { return (verified, client) }
        return (verified, nil)
    }

    /// Verifies a TSV1 header: signature over the request, timestamp window and nonce replay (the nonce is kept
    /// as a SHA-256 of the signing key and the nonce until the window has passed). The `uid` is ``identify(_:)``'s.
    private func verifyTSV1(_ r: APIRequest, header: String) async throws -> TSV1.VerifiedRequest {
        let now = clock.now() / 1_000_000
        let verified: TSV1.VerifiedRequest
        do {
            verified = try TSV1.verify(authorization: header, rawPath: r.rawPath, rawQuery: r.rawQuery,
                                       method: r.method.rawValue, now: now, window: configuration.tsv1Window)
        } catch {
            throw HTTPFailure.unauthorized("TSV1: \(error.message)")
        }
        let expires = (verified.timestamp + configuration.tsv1Window + 1) * 1_000_000
        let nonceHash = hex(Hashes.sha256(verified.signingKey.rawRepresentation + Data(verified.nonce.utf8)))
        guard try await storage.useNonce(nonceHash, expires: expires, now: now * 1_000_000) else {
            throw HTTPFailure.unauthorized("TSV1: the nonce was already used")
        }
        return verified
    }

    // MARK: Token, registration, backup, lookup

    private func token(_ r: APIRequest) async throws -> Response {
        guard let header = r.header(.authorization), header.lowercased().hasPrefix("basic "),
              let decoded = Data(base64Encoded: String(header.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
              let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":") else {
            throw HTTPFailure.unauthorized("the token endpoint needs HTTP Basic authentication with the API key pair")
        }
        let keyID = String(text[..<colon])
        let secretText = String(text[text.index(after: colon)...])
        // The body is a form whatever its Content-Type (js and Java send odd ones); grant_type may be absent.
        let form = String(decoding: try await body(r, for: .anonymous, limit: 64 << 10), as: UTF8.self)
        for pair in form.split(separator: "&") where pair.hasPrefix("grant_type=") {
            guard pair.dropFirst(11) == "client_credentials" else {
                throw HTTPFailure.badRequest("grant_type must be client_credentials")
            }
        }
        guard let client = try await storage.client(apiKeyID: keyID), client.enabled,
              ConstantTime.equals(Self.sha256(secretText), client.apiSecretHash) else {
            throw HTTPFailure.unauthorized("the API key pair is not valid")
        }
        let token = hex(SecureRandom.bytes(count: 32))
        let now = clock.now()
        let expires = now + Int64(configuration.tokenLifetime) * 1_000_000
        try await storage.insertAccessToken(hash: Self.sha256(token), clientID: client.clientID, expires: expires)
        return try JSONBody.response(API.TokenResponse(
            accessToken: token, expiresIn: configuration.tokenLifetime, expiresAt: APITimestamp.format(micros: expires)))
    }

    static func validKey(_ b64u: String) -> Bool { (try? Base64URL.decode(b64u))?.count == 32 }

    private func register(_ r: APIRequest) async throws -> Response {
        // Bounded before the token is checked: anyone can send a registration.
        let req = try JSONBody.decode(API.RegistrationRequest.self, from: try await body(r, for: .anonymous, limit: 64 << 10),
                                      what: "registration")
        guard Self.validKey(req.client.publicKey.curve25519) else {
            throw HTTPFailure.badRequest("client.public_key.curve25519 must be a base64url 32-byte key")
        }
        if let sk = req.client.signingKey, !Self.validKey(sk.ed25519) {
            throw HTTPFailure.badRequest("client.signing_key.ed25519 must be a base64url 32-byte key")
        }
        let apiSecret = hex(SecureRandom.bytes(count: 32))
        let row = ClientRow(
            clientID: newUUID(), name: req.client.name, publicKey: req.client.publicKey.curve25519,
            signingKey: req.client.signingKey?.ed25519, apiKeyID: hex(SecureRandom.bytes(count: 32)),
            apiSecretHash: Self.sha256(apiSecret), registrationTokenHash: Self.sha256(req.token), created: clock.now())
        // One transaction: a registration that fails uses no registration.
        guard try await storage.registerClient(row) else {
            throw HTTPFailure.unauthorized("the registration token is unknown or used up")
        }
        let backup = try await storage.backupClientID() ?? ""
        return try JSONBody.response(
            API.RegistrationResponse(
                clientID: row.clientID, apiKeyID: row.apiKeyID, apiSecret: apiSecret, name: row.name,
                publicKey: req.client.publicKey, signingKey: req.client.signingKey),
            status: .created, headers: [HTTPField.Name("X-Backup-Client")!: backup])
    }

    private func backup(_ r: APIRequest, token: String, clientID: String) async throws -> Response {
        guard let id = canonicalUUID(clientID), let client = try await storage.client(id: id) else {
            throw HTTPFailure.notFound("no such client")
        }
        if r.header(.authorization) != nil {
            let caller = try await authenticate(r)
            guard caller.clientID == id else { throw HTTPFailure.forbidden("a client may only mark its own backup") }
        } else {
            // js posts this with no authentication: accept it when the token is the one that registered the client.
            guard client.registrationTokenHash == Self.sha256(token) else {
                throw HTTPFailure.forbidden("the registration token did not register this client")
            }
        }
        try await storage.setHasBackup(clientID: id)
        return JSONBody.raw("{}", status: .created)
    }

    private func clientInfo(_ r: APIRequest, id: String) async throws -> Response {
        _ = try await authenticate(r)
        // Python's test expects 404 for a malformed id as well as an unknown one.
        guard let id = canonicalUUID(id), let c = try await storage.client(id: id) else {
            throw HTTPFailure.notFound("no such client")
        }
        return try JSONBody.response(API.ClientInfo(
            clientID: c.clientID, publicKey: .init(curve25519: c.publicKey),
            signingKey: c.signingKey.map { .init(ed25519: $0) }))
    }

    // MARK: Access keys and policies

    private func tuple(writer: String, user: String, reader: String, type: String) throws -> AccessTuple {
        guard let w = canonicalUUID(writer), let u = canonicalUUID(user), let rd = canonicalUUID(reader) else {
            throw HTTPFailure.badRequest("writer, user and reader must be UUIDs")
        }
        guard !type.isEmpty else { throw HTTPFailure.badRequest("the record type must not be empty") }
        return AccessTuple(writerID: w, userID: u, readerID: rd, type: type)
    }

    /// The caller's and the addressed reader's roles on the writer's (writer, type) of `t` (``AccessRules``):
    /// a storage read of the caller's policy unless it is the writer, and of the reader's when it is neither.
    func sharingRoles(caller: String, tuple t: AccessTuple) async throws
        -> (caller: AccessRules.CallerRole, target: AccessRules.TargetRole) {
        func isAuthorizer(_ id: String) async throws -> Bool {
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
    private func authorize(_ operation: AccessRules.Operation, caller: String, tuple t: AccessTuple) async throws {
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

    private func accessKey(_ r: APIRequest, writer: String, user: String, reader: String, type: String) async throws
        -> Response {
        let caller = try await authenticate(r)
        let t = try tuple(writer: writer, user: user, reader: reader, type: type)
        switch r.method {
        case .get:
            try await authorize(.readAccessKey, caller: caller.clientID, tuple: t)
            guard let row = try await storage.accessKey(t) else { throw HTTPFailure.notFound("no access key") }
            return try JSONBody.response(eakInfo(row))
        case .put:
            try await authorize(.putAccessKey, caller: caller.clientID, tuple: t)
            let req = try JSONBody.decode(API.PutAccessKeyRequest.self, from: try await body(r, for: .client(caller.clientID)),
                                          what: "access key")
            guard !req.eak.isEmpty, req.eak.utf8.count <= 4096 else {
                throw HTTPFailure.badRequest("eak must be a non-empty string of at most 4096 bytes")
            }
            let row = AccessKeyRow(
                tuple: t, eak: req.eak, authorizerID: caller.clientID, authorizerPublicKey: caller.publicKey,
                signerID: caller.signingKey == nil ? nil : caller.clientID, signerSigningKey: caller.signingKey)
            guard try await storage.insertAccessKey(row) else {
                throw HTTPFailure.conflict("an access key for this writer, user, reader and type already exists")
            }
            return JSONBody.raw("{}", status: .created)
        case .delete:
            try await authorize(.deleteAccessKey, caller: caller.clientID, tuple: t)
            try await storage.deleteAccessKey(t)
            return Response(status: .noContent)
        default:
            throw HTTPFailure.init(.methodNotAllowed, "access keys take GET, PUT and DELETE")
        }
    }

    func eakInfo(_ row: AccessKeyRow) -> API.EAKInfo {
        API.EAKInfo(eak: row.eak, authorizerID: row.authorizerID,
                    authorizerPublicKey: .init(curve25519: row.authorizerPublicKey), signerID: row.signerID,
                    signerSigningKey: row.signerSigningKey.map { .init(ed25519: $0) })
    }

    private func putPolicy(_ r: APIRequest, user: String, writer: String, reader: String, type: String) async throws
        -> Response {
        let caller = try await authenticate(r)
        let t = try tuple(writer: writer, user: user, reader: reader, type: type)
        guard t.userID == t.writerID else { throw HTTPFailure.badRequest("user and writer must be the same client") }
        let req = try JSONBody.decode(API.PolicyRequest.self, from: try await body(r, for: .client(caller.clientID)),
                                      what: "policy")
        func verbs(_ list: [[String: AnyJSON]]?) throws -> Set<String> {
            var out = Set<String>()
            for element in list ?? [] {
                for key in element.keys {
                    guard key == "read" || key == "authorizer" else {
                        throw HTTPFailure.badRequest("unknown policy verb \(key.prefix(40)); expected read or authorizer")
                    }
                    out.insert(key)
                }
            }
            return out
        }
        let allow = try verbs(req.allow)
        let deny = try verbs(req.deny)
        guard !allow.isEmpty || !deny.isEmpty else {
            throw HTTPFailure.badRequest("a policy needs allow or deny with at least one verb")
        }
        let verbs = allow.union(deny)
        if verbs.contains("authorizer") { try await authorize(.changeAuthorizer, caller: caller.clientID, tuple: t) }
        if verbs.contains("read") { try await authorize(.changeRead, caller: caller.clientID, tuple: t) }
        // Deny wins over allow for a verb named in both. One statement: a concurrent change of the other verb stays.
        func change(_ verb: String) -> Bool? { deny.contains(verb) ? false : (allow.contains(verb) ? true : nil) }
        try await storage.changePolicy(t, read: change("read"), authorize: change("authorizer"), by: caller.clientID)
        return JSONBody.raw("{}", status: .created)
    }

    private func deleteAuthorizers(_ r: APIRequest, user: String, writer: String, reader: String) async throws
        -> Response {
        let caller = try await authenticate(r)
        let t = try tuple(writer: writer, user: user, reader: reader, type: "-")
        try await authorize(.removeAuthorizers, caller: caller.clientID, tuple: t)
        try await storage.removeAuthorizations(userID: t.userID, writerID: t.writerID, readerID: t.readerID)
        return JSONBody.raw("{}", status: .ok)
    }

    private func listPolicies(_ r: APIRequest, which: String) async throws -> Response {
        let caller = try await authenticate(r)
        let listing: PolicyListing
        switch which {
        case "outgoing": listing = .outgoing
        case "incoming": listing = .incoming
        case "proxies": listing = .proxies
        case "granted": listing = .granted
        default: throw HTTPFailure.notFound("no such policy listing")
        }
        let rows = try await storage.listPolicies(listing, clientID: caller.clientID)
        var names: [String: String] = [:]
        func name(_ id: String) async throws -> String {
            if let n = names[id] { return n }
            let n = try await storage.client(id: id)?.name ?? ""
            names[id] = n
            return n
        }
        switch listing {
        case .outgoing:
            var out: [API.OutgoingSharing] = []
            for p in rows {
                out.append(.init(readerID: p.tuple.readerID, readerName: try await name(p.tuple.readerID),
                                 recordType: p.tuple.type))
            }
            return try JSONBody.response(out)
        case .incoming:
            var out: [API.IncomingSharing] = []
            for p in rows {
                out.append(.init(writerID: p.tuple.writerID, writerName: try await name(p.tuple.writerID),
                                 recordType: p.tuple.type))
            }
            return try JSONBody.response(out)
        case .proxies, .granted:
            return try JSONBody.response(rows.map {
                API.AuthorizerPolicy(authorizerID: $0.tuple.readerID, writerID: $0.tuple.writerID,
                                     userID: $0.tuple.userID, recordType: $0.tuple.type,
                                     authorizedBy: $0.authorizedBy ?? $0.tuple.writerID)
            })
        }
    }
}
