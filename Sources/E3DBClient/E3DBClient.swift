public import E3DBAPI
public import E3DBCanonicalJSON
public import E3DBDocuments
public import E3DBKeys
public import E3DBPrimitives
public import Foundation
import HTTPTypes
import Synchronization

/// A record as the client returns it: metadata from the server and the decrypted, verified data.
public struct ClientRecord: Sendable, Hashable {
    /// Server metadata (`record_id`, `writer_id`, `user_id`, `type`, `plain`, `created`, `last_modified`,
    /// `version`, and `file_meta` for files).
    public var meta: API.Meta
    /// The plaintext fields.
    public var data: RecordData
    /// What was verified of `rec_sig`.
    public var signatureStatus: RecordSignatureStatus?

    public init(meta: API.Meta, data: RecordData, signatureStatus: RecordSignatureStatus? = nil) {
        self.meta = meta
        self.data = data
        self.signatureStatus = signatureStatus
    }

    /// The record id.
    public var id: UUID? { meta.recordID.flatMap(UUID.init(uuidString:)) }
}

/// An E3DB client: register, write and read records, query, share and revoke, over the E3DB HTTP API.
///
/// ```swift
/// import E3DBAsyncHTTPClient  // or E3DBURLSession, or a transport of your own
///
/// let transport = AsyncHTTPClientTransport()
/// let identity = try await E3DBClient.register(token: token, name: "me", apiURL: url, transport: transport)
/// let client = try E3DBClient(identity: identity, transport: transport)
/// let record = try await client.write(type: "contact", data: ["name": "Jon"])
/// let again = try await client.read(record.id!)
/// try await client.share(type: "contact", with: friendID)
/// ```
///
/// Records are encrypted field by field under an access key per (writer, user, type), wrapped for each reader
/// (E3DBDocuments, E3DBKeys); they carry `rec_sig` when the identity has a signing key. Reads check `rec_sig`
/// against the writer's own registered signing key and by default require it (``verification``): a server that
/// removes `rec_sig` to change `plain` or mix fields is caught. Other clients' public keys are pinned on first use
/// (``knownKeys``), and a read checks that the server answered with the record asked for.
public final class E3DBClient: Sendable {
    /// The client's identity: keys, client id, API credentials.
    public let identity: ClientIdentity
    /// The API base URL (no trailing slash).
    public let apiURL: String
    /// How `rec_sig` is checked on reads (default: required, against the writer's registered signing key).
    public let verification: RecordVerification
    /// The public keys seen per client id, pinned on first use.
    public let knownKeys: KnownKeys
    /// Origins (`scheme://host:port`) besides the API's own that file bodies may be downloaded from and uploaded
    /// to (a CDN, say). Empty by default: a `file_url` on another origin is refused.
    public let fileOrigins: Set<String>
    /// Time one exchange may take.
    public let timeout: Duration
    let transport: any E3DBTransport
    /// The client id.
    public let clientID: UUID
    let accessKeys = AccessKeyCache()
    /// Other clients' public keys, looked up once per client and checked against ``knownKeys``.
    let clientInfos = Mutex<[UUID: API.ClientInfo]>([:])
    /// The bearer token: none yet, one with its expiry, or the one fetch every caller awaits (single-flight).
    private let token = Mutex<BearerToken>(.none)

    enum BearerToken {
        case none
        case valid(value: String, expires: Date)
        case fetching(Task<String, any Error>)
    }

    /// A client for a registered identity.
    /// - Parameters:
    ///   - identity: needs a client id and API credentials (`api_key_id`, `api_secret`).
    ///   - apiURL: overrides the identity's `api_url`.
    ///   - transport: how requests reach the server: `AsyncHTTPClientTransport` (the `E3DBAsyncHTTPClient`
    ///     product), `URLSessionTransport` (`E3DBURLSession`) or your own.
    ///   - verification: how reads check `rec_sig` (default: required; `.verifyIfPresent` also accepts
    ///     unsigned records, as the Python and Go SDKs write them, and then cannot tell a record whose `rec_sig`
    ///     the server removed).
    ///   - knownKeys: where other clients' public keys are pinned (default: in memory, for this object's life).
    ///   - fileOrigins: origins besides the API's that file bodies may come from or go to (default none).
    ///   - timeout: per exchange (default 30 s).
    /// - Throws: `E3DBError` `.missingKey` when the identity has no client id or API credentials,
    ///   `.invalidParameter` for an origin that is not `scheme://host[:port]`.
    public init(
        identity: ClientIdentity, apiURL: String? = nil, transport: any E3DBTransport,
        verification: RecordVerification = RecordVerification(policy: .required),
        knownKeys: KnownKeys = KnownKeys(), fileOrigins: Set<String> = [],
        timeout: Duration = .seconds(30)
    ) throws(E3DBError) {
        guard let id = identity.clientID, identity.apiKeyID != nil, identity.apiSecret != nil else {
            throw E3DBError(
                .missingKey, "the identity needs client_id, api_key_id and api_secret to talk to a server",
                context: .init(field: "client_id"))
        }
        self.identity = identity
        self.clientID = id
        let url = apiURL ?? identity.apiURL ?? ClientIdentity.defaultAPIURL
        self.apiURL = url.hasSuffix("/") ? String(url.dropLast()) : url
        self.transport = transport
        self.verification = verification
        self.knownKeys = knownKeys
        var origins: Set<String> = []
        for text in fileOrigins {
            guard let origin = Self.origin(of: text) else {
                throw E3DBError(
                    .invalidParameter, "the file origin \(text.prefix(200)) is not scheme://host[:port]",
                    context: .init(field: "fileOrigins"))
            }
            origins.insert(origin)
        }
        self.fileOrigins = origins
        self.timeout = timeout
    }

    /// `scheme://host:port` of a URL (scheme and host lower-cased, the scheme's default port filled in), or nil
    /// when it has no scheme or host.
    static func origin(of text: String) -> String? {
        guard let c = URLComponents(string: text), let scheme = c.scheme?.lowercased(), let host = c.host?.lowercased(),
            !host.isEmpty
        else { return nil }
        guard let port = c.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : nil) else { return nil }
        return "\(scheme)://\(host):\(port)"
    }

    /// Refuses a file body URL that is not on the API's origin or one of ``fileOrigins``.
    func checkFileURL(_ url: String, operation: String) throws(E3DBError) {
        let origin = Self.origin(of: url)
        guard let origin, origin == Self.origin(of: apiURL) || fileOrigins.contains(origin) else {
            throw E3DBError(
                .foreignFileURL,
                "\(operation): the server's file_url is on \(origin ?? "no origin"), not "
                    + "the API's origin (allow other origins with fileOrigins)",
                context: .init(field: "file_url", part: operation))
        }
    }

    // MARK: Registration

    /// Registers a new client with a registration token, generating Curve25519 and Ed25519 key pairs.
    /// - Parameters:
    ///   - token: the registration token.
    ///   - name: the client's name.
    ///   - apiURL: the server.
    ///   - backup: also back the credentials up to the account's backup client, as the other SDKs do.
    ///   - transport: how requests reach the server (see ``init(identity:apiURL:transport:verification:knownKeys:fileOrigins:timeout:)``).
    /// - Returns: the identity with its client id, API credentials and `api_url` (write it with `configJSON()`).
    /// - Throws: `E3DBError` from the server (`.unauthorized` for a bad token) or the transport.
    public static func register(
        token: String, name: String, apiURL: String, backup: Bool = false,
        transport: any E3DBTransport
    ) async throws -> ClientIdentity {
        let keys = ClientIdentity.generate()
        let body = API.RegistrationRequest(
            token: token,
            client: .init(
                name: name, publicKey: .init(curve25519: keys.publicKey.base64URLEncoded),
                signingKey: keys.publicSigningKey.map { .init(ed25519: $0.base64URLEncoded) }))
        let base = apiURL.hasSuffix("/") ? String(apiURL.dropLast()) : apiURL
        let registration = try Self.request(
            API.Endpoints.register.method, base + API.Endpoints.register.template,
            [(.contentType, "application/json")], operation: "register")
        let (answer, response) = try await Self.exchange(
            transport, registration, body: try body.encodeBody(), operation: "register", idempotent: false,
            timeout: .seconds(30))
        let details = try Self.decode(API.Endpoints.register, answer, operation: "register")
        guard let id = UUID(uuidString: details.clientID) else {
            throw E3DBError(.invalidResponse, "the registration response's client_id is not a UUID")
        }
        let identity = ClientIdentity(
            clientID: id, boxKey: keys.boxKey, signingKey: keys.signingKey, apiKeyID: details.apiKeyID,
            apiSecret: SecureBytes(copying: Data(details.apiSecret.utf8)), apiURL: base)
        if backup {
            let client = try E3DBClient(identity: identity, transport: transport)
            try await client.backup(
                registrationToken: token, backupClients: response.headerFields[values: .xBackupClient])
        }
        return identity
    }

    /// Writes the credentials as a `tozny.key_backup` record shared with the backup client (spec api §3.2).
    /// - Parameter backupClients: the values of the registration answer's `X-Backup-Client` fields: exactly one,
    ///   a client id, else `.invalidResponse` before anything is written.
    func backup(registrationToken: String, backupClients: [String]) async throws {
        guard backupClients.count == 1, let backupID = UUID(uuidString: backupClients[0]) else {
            throw E3DBError(
                .invalidResponse,
                "the server names \(backupClients.count == 1 ? "no client id" : "\(backupClients.count) values") as "
                    + "the backup client (X-Backup-Client needs exactly one client id)",
                context: .init(field: "X-Backup-Client", actual: backupClients.count))
        }
        // Each value as a JSON string, with the API's one string escaper (the record writer's).
        func quoted(_ s: String) -> String {
            var w = JSONTextWriter()
            w.string(s)
            return String(decoding: w.bytes, as: UTF8.self)
        }
        var fields: [(String, String)] = [
            ("version", quoted("2")), ("client_id", quoted(clientID.lowercasedString)),
            ("api_key_id", quoted(identity.apiKeyID ?? "")), ("client_email", quoted("")),
            ("public_key", quoted(identity.publicKey.base64URLEncoded)), ("api_url", quoted(apiURL)),
        ]
        fields.append(
            (
                "api_secret",
                quoted(
                    identity.apiSecret.map { s in
                        unsafe s.withUnsafeBytes { unsafe String(decoding: $0, as: UTF8.self) }
                    } ?? "")
            ))
        unsafe fields.append(
            ("private_key", quoted(identity.boxKey.withUnsafeBytes { unsafe Base64URL.encode(Array($0)) })))
        if let sk = identity.signingKey {
            fields.append(("public_signing_key", quoted(sk.publicKey.base64URLEncoded)))
            unsafe fields.append(
                ("private_signing_key", quoted(sk.withUnsafeBytes { unsafe Base64URL.encode(Array($0)) })))
        }
        _ = try await write(
            type: "tozny.key_backup", data: try RecordData(fields),
            plain: ["client": clientID.lowercasedString])
        try await share(type: "tozny.key_backup", with: backupID)
        _ = try await send(
            API.Endpoints.backup, [registrationToken, clientID.lowercasedString],
            operation: "backup", idempotent: false)
    }

    /// Looks up a client's public keys, once per client for the life of this object, and checks them against
    /// ``knownKeys`` (pinned on first sight; this client's own keys must be its identity's).
    /// - Parameter id: the client id.
    /// - Returns: its `client_id`, `public_key` and `signing_key`.
    /// - Throws: `E3DBError` `.notFound` for an unknown client, `.keyChanged` for keys other than the pinned ones,
    ///   `.invalidResponse` for an answer about another client or keys that do not parse.
    public func clientInfo(_ id: UUID) async throws -> API.ClientInfo {
        if let cached = clientInfos.withLock({ $0[id] }) { return cached }
        let info = try await call(API.Endpoints.client, [id.lowercasedString], operation: "client lookup")
        let client = id.lowercasedString
        guard UUID(uuidString: info.clientID) == id else {
            throw E3DBError(
                .invalidResponse, "the server answered a lookup of client \(client) with another client",
                context: .init(field: "client_id", item: client))
        }
        do {
            _ = try Box.PublicKey(base64URLEncoded: info.publicKey.curve25519)
            if let signing = info.signingKey { _ = try Ed25519.PublicKey(base64URLEncoded: signing.ed25519) }
        } catch {
            throw E3DBError(
                .invalidResponse, "the server's keys for client \(client) do not parse: \(error.message)",
                context: .init(field: "public_key", item: client))
        }
        let keys = KnownKeys.Keys(publicKey: info.publicKey.curve25519, signingKey: info.signingKey?.ed25519)
        if id == clientID {
            let own = KnownKeys.Keys(
                publicKey: identity.publicKey.base64URLEncoded,
                signingKey: identity.publicSigningKey?.base64URLEncoded)
            if keys != own { throw KnownKeys.changed(id, from: own, to: keys) }
        } else {
            try await knownKeys.check(keys, for: id)
        }
        clientInfos.withLock { $0[id] = info }
        return info
    }

    /// The Ed25519 key `writer` registered (this client's own from its identity), or nil when it registered none.
    func signingKey(of writer: UUID) async throws -> Ed25519.PublicKey? {
        if writer == clientID { return identity.publicSigningKey }
        guard let signing = try await clientInfo(writer).signingKey else { return nil }
        return try Ed25519.PublicKey(base64URLEncoded: signing.ed25519)
    }

    // MARK: HTTP

    enum Auth { case bearer, none }

    /// Sends a request to the API with a bearer token (fetched and refreshed here), mapping failures to
    /// `E3DBError`.
    func send<Body, Answer>(
        _ endpoint: API.Endpoint<Body, Answer>, _ parameters: [String] = [],
        query: [(String, String)] = [], json: Body? = nil, operation: String,
        idempotent: Bool? = nil, auth: Auth = .bearer, expect: Set<Int>? = nil
    )
        async throws -> (Data, HTTPResponse)
    {
        try await send(
            endpoint.method, endpoint.path(parameters), query: query, body: try json?.encodeBody(),
            operation: operation, idempotent: idempotent, auth: auth, expect: expect)
    }

    /// Sends a request to `endpoint` and decodes the answer as the endpoint's response body.
    func call<Body, Answer>(
        _ endpoint: API.Endpoint<Body, Answer>, _ parameters: [String] = [], json: Body? = nil, operation: String,
        idempotent: Bool? = nil
    ) async throws -> Answer {
        let (body, _) = try await send(endpoint, parameters, json: json, operation: operation, idempotent: idempotent)
        return try Self.decode(endpoint, body, operation: operation)
    }

    /// Sends `body` (JSON) to `method` and `segments` (each percent-encoded here), as ``send(_:_:query:json:operation:idempotent:auth:expect:)``
    /// does for an endpoint of the API.
    func send(
        _ method: String, _ segments: [String], query: [(String, String)] = [], body: Data?,
        operation: String, idempotent: Bool? = nil, auth: Auth = .bearer, expect: Set<Int>? = nil
    )
        async throws -> (Data, HTTPResponse)
    {
        var url = apiURL + "/" + segments.map(Self.escapeSegment).joined(separator: "/")
        if !query.isEmpty {
            url += "?" + query.map { Self.escapeQuery($0.0) + "=" + Self.escapeQuery($0.1) }.joined(separator: "&")
        }
        let fields: [(HTTPField.Name, String)] = body != nil ? [(.contentType, "application/json")] : []
        // The request with `token` as its bearer token, if any.
        func request(bearer token: String?) throws(E3DBError) -> HTTPRequest {
            var all = fields
            if let token { all.append((.authorization, "Bearer " + token)) }
            return try Self.request(method, url, all, operation: operation)
        }
        let bearer = auth == .bearer ? try await bearerToken() : nil
        let retry = idempotent ?? (method == "GET" || method == "PUT" || method == "DELETE")
        // A 401 comes back here (not as an error) when a bearer token was sent, for the one retry below.
        let (answer, response) = try await Self.exchange(
            transport, try request(bearer: bearer), body: body, operation: operation, idempotent: retry,
            timeout: timeout, expect: bearer == nil ? expect : (expect ?? []).union([401]))
        guard response.status.code == 401, let bearer else { return (answer, response) }
        // The token may have been revoked or expired early: fetch a new one once (one fetch for all the requests
        // that were refused the same token), and send the same request with it.
        let renewed = try request(bearer: try await bearerToken(replacing: bearer))
        return try await Self.exchange(
            transport, renewed, body: body, operation: operation, idempotent: retry, timeout: timeout, expect: expect)
    }

    /// The request `method url` with `fields`, the one place the client makes a request: `.invalidParameter`, with
    /// `operation` in front of its message, for one that can never be sent (a method that is not an HTTP token, a
    /// URL that is not absolute `http` or `https` with a host, a header value HTTP cannot carry), before anything is
    /// sent; a URL the server supplied (`serverField`) that cannot be sent is the server's fault, `.invalidResponse`
    /// naming that field.
    /// - Parameters:
    ///   - method: the API's method (`GET`, `POST`, …).
    ///   - url: the absolute URL, kept byte for byte (`HTTPRequest.init(method:checkedURL:headerFields:)`).
    ///   - fields: the header fields, in order.
    ///   - operation: the client operation, for the message.
    ///   - serverField: the field of the server's answer that `url` came from (`file_url`), or nil for the caller's.
    static func request(
        _ method: String, _ url: String, _ fields: [(HTTPField.Name, String)], operation: String,
        serverField: String? = nil
    ) throws(E3DBError) -> HTTPRequest {
        do {
            guard let verb = HTTPRequest.Method(method) else {
                throw E3DBError(.invalidParameter, "the request's method is not an HTTP token")
            }
            var headerFields = HTTPFields()
            for (name, value) in fields { headerFields.append(try HTTPField(name: name, checkedValue: value)) }
            do { return try HTTPRequest(method: verb, checkedURL: url, headerFields: headerFields) } catch {
                guard let serverField else { throw error }
                throw E3DBError(
                    .invalidResponse,
                    "the server's \(serverField) cannot be requested (it is not an absolute http or https URL with a "
                        + "host and no user info, in printable ASCII)", context: .init(field: serverField))
            }
        } catch {
            throw transportError(error, operation: operation)
        }
    }

    /// One exchange with retries (idempotent requests: connection errors and 5xx, 3 attempts, backoff), and the
    /// status check.
    static func exchange(
        _ transport: any E3DBTransport, _ request: HTTPRequest, body: Data?, operation: String,
        idempotent: Bool, timeout: Duration, expect: Set<Int>? = nil
    ) async throws -> (Data, HTTPResponse) {
        var attempt = 0
        while true {
            attempt += 1
            let answer: Data
            let response: HTTPResponse
            do {
                (answer, response) = try await transport.send(
                    request, body: body, timeout: timeout, maxResponseSize: 64 << 20)
            } catch {
                // A failed exchange (`.transportFailed`) is retried; cancellation, TLS failures and the transport's
                // other refusals are final.
                let failure = transportError(error, operation: operation)
                if failure.code == .transportFailed, idempotent, attempt < 3 {
                    try await backOff(attempt, operation: operation)
                    continue
                }
                throw failure
            }
            let status = response.status.code
            if status >= 500, idempotent, attempt < 3 {
                try await backOff(attempt, operation: operation)
                continue
            }
            if let expect, expect.contains(status) { return (answer, response) }
            guard (200..<300).contains(status) else {
                let message = API.ErrorBody.message(in: answer)
                throw httpError(status: status, operation: operation, serverMessage: message)
            }
            return (answer, response)
        }
    }

    /// Waits before retry `attempt + 1` (200 ms, then 400 ms); cancellation ends the wait as `.requestCancelled`.
    private static func backOff(_ attempt: Int, operation: String) async throws(E3DBError) {
        do { try await Task.sleep(for: .milliseconds(100 << attempt)) } catch {
            throw E3DBError(.requestCancelled, "\(operation) was cancelled", context: .init(part: operation))
        }
    }

    /// Decodes a response body as `endpoint`'s response type, through the API's body seam (``APIBody``).
    static func decode<Body, Answer>(
        _ endpoint: API.Endpoint<Body, Answer>, _ body: Data, operation: String
    ) throws -> Answer {
        try decode(body, operation: operation, Answer.decodeBody)
    }

    /// Decodes a response body with `read`; any failure is `invalidResponse` (with the grammar's reason, which
    /// names members and bytes, never values).
    static func decode<Answer>(_ body: Data, operation: String, _ read: (Data) throws -> Answer) throws -> Answer {
        do {
            return try read(body)
        } catch {
            let reason = (error as? E3DBError).map { ": \($0.message)" } ?? ""
            throw E3DBError(
                .invalidResponse, "\(operation): the server's response is not the expected JSON\(reason)",
                context: .init(part: operation))
        }
    }

    /// Decodes a note endpoint's answer. A note's fields may have names equal as Unicode text (other SDKs keep
    /// them apart): the `API.Note` keeps one of them, and the fields a caller gets come from `EncryptedNote`,
    /// which keeps both.
    static func decodeNote(_ body: Data, operation: String) throws -> API.Note {
        try decode(body, operation: operation) {
            try API.decodeChecked(API.Note.self, from: $0, allowingTwinNames: true)
        }
    }

    /// RFC 3986's unreserved characters: `A-Z a-z 0-9 - . _ ~`.
    static func isUnreserved(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default: false
        }
    }

    static func escapeSegment(_ s: String) -> String {
        // Ids and fixed segments are unreserved characters only: nothing to escape (and no CharacterSet to build).
        if s.utf8.allSatisfy(isUnreserved) { return s }
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/;?#%")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    static func escapeQuery(_ s: String) -> String {
        if s.utf8.allSatisfy(isUnreserved) { return s }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    /// A bearer token, fetched with the API key pair and refreshed a minute before it expires. Single-flight:
    /// concurrent callers that find no usable token await one fetch.
    /// - Parameter stale: a token the server refused (401): fetch a new one unless another caller already has.
    func bearerToken(replacing stale: String? = nil) async throws -> String {
        enum Step {
            case ready(String)
            case wait(Task<String, any Error>)
        }
        let step: Step = token.withLock { state in
            switch state {
            case .valid(let value, let expires) where value != stale && expires.timeIntervalSinceNow > 60:
                return .ready(value)
            case .fetching(let running):
                return .wait(running)
            case .none, .valid:
                let started = Task { try await self.fetchBearerToken() }
                state = .fetching(started)
                return .wait(started)
            }
        }
        switch step {
        case .ready(let value): return value
        case .wait(let fetch): return try await Self.awaitToken(fetch)
        }
    }

    /// The outcome of the shared token fetch, or `.requestCancelled` as soon as the caller's task is cancelled: a
    /// cancelled caller leaves at once, while the fetch goes on for the other callers (and its token is still
    /// recorded when it succeeds).
    private static func awaitToken(_ fetch: Task<String, any Error>) async throws -> String {
        let race = FirstOutcome<String>()
        Task { race.finish(await fetch.result) }
        return try await race.outcome(cancellation: { cancelledError("token") })
    }

    /// Fetches a token and records it (or, on failure, forgets the fetch so that the next caller tries again).
    private func fetchBearerToken() async throws -> String {
        do {
            let (value, expires) = try await requestBearerToken()
            token.withLock { $0 = .valid(value: value, expires: expires) }
            return value
        } catch {
            token.withLock { $0 = .none }
            throw error
        }
    }

    /// One `POST /v1/auth/token` with the API key pair.
    private func requestBearerToken() async throws -> (String, Date) {
        guard let keyID = identity.apiKeyID, let secret = identity.apiSecret else {
            throw E3DBError(.missingKey, "the identity has no API credentials", context: .init(field: "api_key_id"))
        }
        // The Basic credentials are built in a temporary string for the header; the SecureBytes copy stays wiped.
        let basic = unsafe secret.withUnsafeBytes { unsafe Data((keyID + ":").utf8) + Data($0) }.base64EncodedString()
        let request = try Self.request(
            API.Endpoints.token.method, apiURL + API.Endpoints.token.template,
            [(.authorization, "Basic " + basic), (.contentType, "application/x-www-form-urlencoded")],
            operation: "token")
        let (body, _) = try await Self.exchange(
            transport, request, body: Data("grant_type=client_credentials".utf8), operation: "token",
            idempotent: true, timeout: timeout)
        let t = try Self.decode(API.Endpoints.token, body, operation: "token")
        // A token that cannot go in an Authorization header is the server's fault, refused here and never cached
        // (each request would otherwise fail on it until it expired).
        guard !t.accessToken.isEmpty, HTTPField.isValidValue("Bearer " + t.accessToken) else {
            throw E3DBError(
                .invalidResponse,
                "token: the server's access_token is empty or holds a character HTTP cannot carry (a line break, NUL "
                    + "or another control character) or trailing spaces",
                context: .init(field: "access_token", part: "token"))
        }
        return (t.accessToken, Date().addingTimeInterval(TimeInterval(t.expiresIn)))
    }
}
