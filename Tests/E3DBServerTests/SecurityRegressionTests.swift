import E3DBAPI
import E3DBAsyncHTTPClient
import E3DBClient
import E3DBKit
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import Testing

/// Raw requests to a running `e3dbkit-server`, as an attacker (or a careful SDK) sends them: any header, any body,
/// TSV1 signed with any key.
struct RawAPI: Sendable {
    let url: String
    let transport = AsyncHTTPClientTransport()

    struct Reply {
        var status: Int
        var body: Data
        var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }
        var array: [[String: Any]]? { try? JSONSerialization.jsonObject(with: body) as? [[String: Any]] }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    func send(_ method: String, _ path: String, headers: [(String, String)] = [], body: Data? = nil) async throws
        -> Reply
    {
        var fields = HTTPFields()
        for (name, value) in headers {
            let name = try #require(HTTPField.Name(name), "a test header's name \(name)")
            fields.append(HTTPField(name: name, value: value))
        }
        if body != nil { fields.append(HTTPField(name: .contentType, value: "application/json")) }
        let (answer, response) = try await transport.send(
            try HTTPRequest(
                method: try #require(HTTPRequest.Method(method)), checkedURL: url + path, headerFields: fields),
            body: body, timeout: .seconds(60), maxResponseSize: 32 << 20)
        return Reply(status: response.status.code, body: answer)
    }

    func send(_ method: String, _ path: String, bearer: String, json: String? = nil) async throws -> Reply {
        try await send(method, path, headers: [("Authorization", "Bearer \(bearer)")], body: json.map { Data($0.utf8) })
    }

    /// A request signed with TSV1 by `key`, naming `uid` (empty: anonymous).
    func send(
        _ method: String, _ path: String, query: String = "", tsv1 key: Ed25519.PrivateKey, uid: String,
        json: String? = nil, nonce: String = UUID().uuidString.lowercased(), scheme: String = TSV1.method
    )
        async throws -> Reply
    {
        let header: String
        if scheme == TSV1.method {
            header = try TSV1.authorization(
                path: path, query: TSV1.canonicalQuery(query), method: method,
                timestamp: Int64(Date().timeIntervalSince1970), nonce: nonce, clientID: uid, signingKey: key)
        } else {  // the scheme spelled otherwise, and signed as sent
            let unsigned =
                "\(scheme); \(key.publicKey.base64URLEncoded); \(Int64(Date().timeIntervalSince1970)); "
                + "\(nonce); uid:\(uid)"
            let toSign = "\(path); \(TSV1.canonicalQuery(query)); \(method); \(unsigned)"
            header =
                unsigned + "; "
                + Base64URL.encode(key.signature(for: try BLAKE2b.hash(data: Data(toSign.utf8), outputByteCount: 32)))
        }
        return try await send(
            method, path + (query.isEmpty ? "" : "?" + query), headers: [("Authorization", header)],
            body: json.map { Data($0.utf8) })
    }
}

/// A client registered through the raw API, with a Bearer token.
struct RawClient: Sendable {
    let id: String
    let bearer: String
    let signingKey: Ed25519.PrivateKey?
    let publicKey: String

    /// Registers a client (with a signing key unless `signing` is false) and takes a Bearer token.
    static func register(_ api: RawAPI, token: String, name: String = "c", signing: Bool = true) async throws
        -> RawClient
    {
        let key = signing ? Ed25519.PrivateKey() : nil
        let publicKey = Box.PrivateKey().publicKey.base64URLEncoded
        let signingMember = key.map { #","signing_key":{"ed25519":"\#($0.publicKey.base64URLEncoded)"}"# } ?? ""
        let body =
            #"{"token":"\#(token)","client":{"name":"\#(name)","public_key":{"curve25519":"\#(publicKey)"}\#(signingMember)}}"#
        let registered = try await api.send("POST", "/v1/account/e3db/clients/register", body: Data(body.utf8))
        try #require(registered.status == 201, "registration: \(registered.text)")
        let json = try #require(registered.json)
        let pair = "\(json["api_key_id"] as? String ?? ""):\(json["api_secret"] as? String ?? "")"
        let issued = try await api.send(
            "POST", "/v1/auth/token",
            headers: [
                ("Authorization", "Basic " + Data(pair.utf8).base64EncodedString()),
                ("Content-Type", "application/x-www-form-urlencoded"),
            ],
            body: Data("grant_type=client_credentials".utf8))
        try #require(issued.status == 200)
        return RawClient(
            id: try #require(json["client_id"] as? String),
            bearer: try #require(issued.json?["access_token"] as? String), signingKey: key,
            publicKey: publicKey)
    }

    /// Creates a pending file record for `body` (its MD5 and size) and returns the body's upload URL.
    func createFile(_ api: RawAPI, body: Data) async throws -> String {
        let md5 = Hashes.md5(body).base64EncodedString()
        let created = try await api.send(
            "POST", "/v1/storage/files", bearer: bearer,
            json:
                #"{"meta":{"writer_id":"\#(id)","user_id":"\#(id)","type":"f","file_meta":{"checksum":"\#(md5)","size":\#(body.count)}},"data":{}}"#
        )
        try #require(created.status == 202, "\(created.text)")
        return try #require(created.json?["file_url"] as? String)
    }

    /// Writes a record of `type` and returns its id.
    func write(_ api: RawAPI, type: String, plain: String = "{}") async throws -> String {
        let body =
            #"{"meta":{"writer_id":"\#(id)","user_id":"\#(id)","type":"\#(type)","plain":\#(plain)},"data":{"f":"x"}}"#
        let reply = try await api.send("POST", "/v1/storage/records", bearer: bearer, json: body)
        try #require(reply.status == 201, "write: \(reply.text)")
        return try #require((reply.json?["meta"] as? [String: Any])?["record_id"] as? String)
    }
}

/// A server process for one test, on a backend, with its raw API; stopped by `stop()`.
struct SecurityFixture: Sendable {
    let server: ServerProcess
    let api: RawAPI

    static func start(_ backend: ClientTestBackend, extraArguments: [String] = []) async throws -> SecurityFixture? {
        let server: ServerProcess?
        switch backend {
        case .sqlite: server = try await ServerProcess.start(extraArguments: extraArguments)
        case .postgres:
            guard let url = try await PostgresTestServer.newDatabase() else { return nil }
            server = try await ServerProcess.start(postgres: url, extraArguments: extraArguments)
        }
        guard let server else { return nil }
        return SecurityFixture(server: server, api: RawAPI(url: server.url))
    }

    func register(_ name: String = "c", signing: Bool = true) async throws -> RawClient {
        try await RawClient.register(api, token: server.token, name: name, signing: signing)
    }

    func stop() async { await server.stopped() }

    /// Runs `body` against a new server on `backend` (nothing when PostgreSQL is not installed) and stops the
    /// server however `body` ends.
    static func with(
        _ backend: ClientTestBackend, extraArguments: [String] = [],
        _ body: (SecurityFixture) async throws -> Void
    ) async throws {
        guard let fixture = try await start(backend, extraArguments: extraArguments) else { return }
        do { try await body(fixture) } catch {
            await fixture.stop()
            throw error
        }
        await fixture.stop()
    }
}

/// One regression test for each defect of the second adversarial review (H1-H4, M1, M2, L1, L3 and the minor
/// findings), on both backends where the backend matters. Each failed before its fix (see the commit that fixed it).
@Suite("Security regressions (second adversarial review)", .serialized, .postgresServer)
struct SecurityRegressionTests {
    // MARK: H1, L1: authentication

    @Test(
        "H1: TSV1 naming a client without a registered signing key is refused; the right key still works",
        arguments: ClientTestBackend.allCases)
    func tsv1NeedsTheRegisteredSigningKey(backend: ClientTestBackend) async throws {
        try await SecurityFixture.with(backend) { f in
            let victim = try await f.register("victim", signing: false)
            let record = try await victim.write(f.api, type: "medical")
            let attacker = Ed25519.PrivateKey()
            let refused: [(String, String, String?)] = [
                ("GET", "/v1/storage/records/\(record)", nil),
                ("POST", "/v2/search", #"{"include_all_writers":true}"#),
                (
                    "POST", "/v1/storage/records",
                    #"{"meta":{"writer_id":"\#(victim.id)","user_id":"\#(victim.id)","type":"medical"},"data":{"f":"x"}}"#
                ),
                (
                    "PUT", "/v1/storage/policy/\(victim.id)/\(victim.id)/\(UUID().uuidString.lowercased())/medical",
                    #"{"allow":[{"read":{}}]}"#
                ),
                ("GET", "/v1/storage/policy/outgoing", nil),
                ("DELETE", "/v1/storage/records/\(record)", nil),
            ]
            var messages = Set<String>()
            for (method, path, body) in refused {
                let reply = try await f.api.send(method, path, tsv1: attacker, uid: victim.id, json: body)
                #expect(reply.status == 401, "\(method) \(path): \(reply.status) \(reply.text)")
                messages.insert(reply.text)
            }
            // An unknown id gets the same answer as a keyless one: a refusal tells nobody who is registered.
            let unknown = try await f.api.send(
                "GET", "/v1/storage/records/\(record)", tsv1: attacker,
                uid: UUID().uuidString.lowercased())
            messages.insert(unknown.text)
            #expect(messages.count == 1, "\(messages)")
            let own = try await f.api.send("GET", "/v1/storage/records/\(record)", bearer: victim.bearer)
            #expect(own.status == 200, "the victim's record is intact")

            // A client with a signing key: another key is refused, its own key works, in any case of the scheme.
            let signer = try await f.register("signer")
            let signed = try await signer.write(f.api, type: "t")
            let wrongKey = try await f.api.send("GET", "/v1/storage/records/\(signed)", tsv1: attacker, uid: signer.id)
            #expect(wrongKey.status == 401)
            let key = try #require(signer.signingKey)
            for scheme in [TSV1.method, TSV1.method.lowercased(), "Tsv1-Ed25519-Blake2b"] {
                let reply = try await f.api.send(
                    "GET", "/v1/storage/records/\(signed)", tsv1: key, uid: signer.id,
                    scheme: scheme)
                #expect(reply.status == 200, "\(scheme): \(reply.text)")
            }
        }
    }

    @Test(
        "L1: a disabled client is refused on every scheme; enabled again, it works",
        arguments: [ClientTestBackend.sqlite])
    func disabledClientsAreRefused(backend: ClientTestBackend) async throws {
        try await SecurityFixture.with(backend) { f in
            let client = try await f.register()
            let record = try await client.write(f.api, type: "t")
            let key = try #require(client.signingKey)
            _ = try await ServerProcess.command([
                "client", "disable", "--client-id", client.id, "--data", f.server.data.path,
            ])
            try await Task.sleep(for: .milliseconds(1100))  // the Bearer-token cache keeps a client for a second
            #expect(try await f.api.send("GET", "/v1/storage/records/\(record)", bearer: client.bearer).status == 401)
            #expect(
                try await f.api.send("GET", "/v1/storage/records/\(record)", tsv1: key, uid: client.id).status == 401)
            let write = try await f.api.send(
                "POST", "/v1/storage/records", tsv1: key, uid: client.id,
                json: #"{"meta":{"writer_id":"\#(client.id)","user_id":"\#(client.id)","type":"t"},"data":{"f":"x"}}"#)
            #expect(write.status == 401)
            _ = try await ServerProcess.command([
                "client", "enable", "--client-id", client.id, "--data", f.server.data.path,
            ])
            #expect(
                try await f.api.send("GET", "/v1/storage/records/\(record)", tsv1: key, uid: client.id).status == 200)
        }
    }

    @Test("Authorization schemes are case-insensitive; an unknown scheme says which ones work")
    func authorizationSchemes() async throws {
        try await SecurityFixture.with(.sqlite) { f in
            let client = try await f.register()
            let record = try await client.write(f.api, type: "t")
            for scheme in ["Bearer", "bearer", "BEARER"] {
                let reply = try await f.api.send(
                    "GET", "/v1/storage/records/\(record)",
                    headers: [("Authorization", "\(scheme) \(client.bearer)")])
                #expect(reply.status == 200, "\(scheme)")
            }
            let basic = try await f.api.send(
                "GET", "/v1/storage/records/\(record)", headers: [("Authorization", "Basic eDp5")])
            #expect(basic.status == 401)
            #expect(basic.text.contains("Bearer"), "\(basic.text)")
            #expect(!basic.text.contains("needs a TSV1"), "\(basic.text)")
        }
    }

    // MARK: H4: authorizers

    @Test(
        "H4: an authorizer shares and revokes read for other readers, and nothing more",
        arguments: ClientTestBackend.allCases)
    func authorizersShareForOthersOnly(backend: ClientTestBackend) async throws {
        try await SecurityFixture.with(backend) { f in
            let writer = try await f.register("w")
            let authorizer = try await f.register("a")
            let second = try await f.register("a2")
            let reader = try await f.register("r")
            let record = try await writer.write(f.api, type: "docs")
            func key(_ reader: String) -> String { "/v1/storage/access_keys/\(writer.id)/\(writer.id)/\(reader)/docs" }
            func policy(_ reader: String) -> String { "/v1/storage/policy/\(writer.id)/\(writer.id)/\(reader)/docs" }
            let eak = #"{"eak":"opaque.key"}"#
            let read = #"{"allow":[{"read":{}}]}"#
            let unread = #"{"deny":[{"read":{}}]}"#
            let authorize = #"{"allow":[{"authorizer":{}}]}"#
            #expect(try await f.api.send("PUT", key(writer.id), bearer: writer.bearer, json: eak).status == 201)
            #expect(try await f.api.send("PUT", key(second.id), bearer: writer.bearer, json: eak).status == 201)
            for a in [authorizer, second] {
                #expect(try await f.api.send("PUT", policy(a.id), bearer: writer.bearer, json: authorize).status == 201)
            }
            // Allowed: a plain reader's key and read.
            #expect(try await f.api.send("PUT", key(reader.id), bearer: authorizer.bearer, json: eak).status == 201)
            #expect(try await f.api.send("PUT", policy(reader.id), bearer: authorizer.bearer, json: read).status == 201)
            #expect(try await f.api.send("GET", "/v1/storage/records/\(record)", bearer: reader.bearer).status == 200)
            // Refused: the writer's own key, its own, another authorizer's; read for itself or another authorizer;
            // any authorizer grant.
            for (method, path, body) in [
                ("DELETE", key(writer.id), nil), ("PUT", key(writer.id), eak), ("DELETE", key(second.id), nil),
                ("PUT", key(authorizer.id), eak), ("PUT", policy(authorizer.id), read),
                ("PUT", policy(second.id), unread),
                ("PUT", policy(writer.id), unread), ("PUT", policy(reader.id), authorize),
                ("DELETE", "/v1/storage/policy/\(writer.id)/\(writer.id)/\(second.id)", nil),
            ] {
                let reply = try await f.api.send(method, path, bearer: authorizer.bearer, json: body)
                #expect(reply.status == 403, "\(method) \(path): \(reply.status) \(reply.text)")
            }
            #expect(
                try await f.api.send("GET", "/v1/storage/records/\(record)", bearer: authorizer.bearer).status == 404)
            let own = try await f.api.send("GET", key(writer.id), bearer: writer.bearer)
            #expect((own.json?["eak"] as? String) == "opaque.key", "\(own.text)")
            #expect(try await f.api.send("GET", key(second.id), bearer: second.bearer).status == 200)

            // The writer removes the authorizer: what it granted stays, visible in the writer's listing, and it can
            // share no more.
            #expect(
                try await f.api.send(
                    "DELETE", "/v1/storage/policy/\(writer.id)/\(writer.id)/\(authorizer.id)",
                    bearer: writer.bearer
                ).status == 200)
            let outgoing = try await f.api.send("GET", "/v1/storage/policy/outgoing", bearer: writer.bearer)
            #expect(outgoing.array?.contains { $0["reader_id"] as? String == reader.id } == true, "\(outgoing.text)")
            #expect(
                try await f.api.send("PUT", policy(reader.id), bearer: authorizer.bearer, json: unread).status == 403)
            #expect(try await f.api.send("GET", "/v1/storage/records/\(record)", bearer: reader.bearer).status == 200)
        }
    }

    // MARK: H2: search budget

    @Test("H2: a search costs at most its budget: an expensive one is refused with 400, long patterns too")
    func searchesAreBounded() async throws {
        try await SecurityFixture.with(.sqlite) { f in
            let client = try await f.register()
            let long = String(repeating: "a", count: 16 << 10)
            _ = try await client.write(f.api, type: "t", plain: #"{"x":"\#(long)","y":"\#(long)"}"#)
            let pattern = "*" + String(repeating: "a", count: 1022) + "b"
            func search(_ terms: [String]) -> String {
                let values = terms.map { "\"\($0)\"" }.joined(separator: ",")
                return #"{"match":[{"condition":"OR","strategy":"WILDCARD","terms":{"values":[\#(values)]}}]}"#
            }
            let expensive = try await f.api.send(
                "POST", "/v2/search", bearer: client.bearer,
                json: search([pattern, pattern, pattern]))
            #expect(expensive.status == 400, "\(expensive.text)")
            #expect(expensive.text.contains("more work"), "\(expensive.text)")
            let tooLong = try await f.api.send(
                "POST", "/v2/search", bearer: client.bearer,
                json: search(Array(repeating: pattern, count: 5)))
            #expect(tooLong.status == 400)
            #expect(tooLong.text.contains("4096 bytes"), "\(tooLong.text)")
            let cheap = try await f.api.send("POST", "/v2/search", bearer: client.bearer, json: search(["a*"]))
            #expect(cheap.status == 200, "\(cheap.text)")
            #expect((cheap.json?["total_results"] as? Int) == 1, "\(cheap.text)")
            // The server answers other requests in the meantime.
            #expect(try await f.api.send("GET", "/healthz").status == 200)
        }
    }

    @Test(
        "H2, second look: v1 filters pay for their text, v2 pays for rows outside its range, REGEXP states are capped")
    func searchCostsHaveNoBypass() async throws {
        try await SecurityFixture.with(.sqlite, extraArguments: ["--search-budget", "200000"]) { f in
            let client = try await f.register()
            for i in 0..<300 { _ = try await client.write(f.api, type: "t", plain: #"{"k":"v\#(i)"}"#) }
            // A filter name of 20,000 decomposed characters (60,000 bytes): each row hashes it again.
            let name = String(repeating: "e\u{301}", count: 20_000)
            let filter = #"{"count":1000,"plain":{"eq":{"name":"\#(name)","value":"x"}}}"#
            let v1 = try await f.api.send("POST", "/v1/storage/search", bearer: client.bearer, json: filter)
            #expect(v1.status == 400 && v1.text.contains("more work"), "\(v1.text)")
            let huge = #"{"plain":{"eq":{"name":"\#(String(repeating: "n", count: 70_000))","value":"x"}}}"#
            let tooBig = try await f.api.send("POST", "/v1/storage/search", bearer: client.bearer, json: huge)
            #expect(tooBig.status == 400 && tooBig.text.contains("65536"), "\(tooBig.text)")
            let regexes = Array(repeating: #""[a-z]{2046}""#, count: 40).joined(separator: ",")
            let states = try await f.api.send(
                "POST", "/v2/search", bearer: client.bearer,
                json: #"{"match":[{"strategy":"REGEXP","terms":{"values":[\#(regexes)]}}]}"#)
            #expect(states.status == 400 && states.text.contains("automaton states"), "\(states.text)")
            let cheap = try await f.api.send("POST", "/v2/search", bearer: client.bearer, json: #"{"limit":1}"#)
            #expect((cheap.json?["total_results"] as? Int) == 300, "\(cheap.text)")
        }
        try await SecurityFixture.with(.sqlite, extraArguments: ["--search-budget", "1000"]) { f in
            let client = try await f.register()
            for i in 0..<300 { _ = try await client.write(f.api, type: "t", plain: #"{"k":"v\#(i)"}"#) }
            // An empty time range matches nothing but still scans every row, and pays for it.
            let empty = #"{"range":{"after":"2100-01-01T00:00:00Z","before":"2000-01-01T00:00:00Z"}}"#
            let ranged = try await f.api.send("POST", "/v2/search", bearer: client.bearer, json: empty)
            #expect(ranged.status == 400, "rows outside the range are charged too: \(ranged.text)")
        }
    }

    @Test("H3, second look: UTF-16 JSON is refused before decoding; a trickled body gets 408")
    func bodiesAreUTF8AndTimely() async throws {
        try await SecurityFixture.with(.sqlite, extraArguments: ["--body-timeout", "1"]) { f in
            let client = try await f.register()
            let json =
                #"{"meta":{"writer_id":"\#(client.id)","user_id":"\#(client.id)","type":"t\u0000x"},"data":{"f":"x"}}"#
            let utf16 = try await f.api.send(
                "POST", "/v1/storage/records",
                headers: [
                    ("Authorization", "Bearer \(client.bearer)"),
                    ("Content-Type", "application/json"),
                ],
                body: json.data(using: .utf16LittleEndian))
            #expect(utf16.status == 400 && utf16.text.contains("UTF-8"), "\(utf16.text)")
            let bearer = client.bearer
            let url = f.server.url
            let status = try await offCooperativePool { () -> Int in
                let c = try PipelinedHTTPTests.RawConnection(url)
                let body = #"{"count":1}"#
                try c.send(
                    "POST /v1/storage/search HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(bearer)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n{")
                Thread.sleep(forTimeInterval: 1.5)
                try c.send(String(body.dropFirst()))
                return try c.answer().status
            }
            #expect(status == 408)
        }
    }

    // MARK: H3: U+0000 and bad input on PostgreSQL

    @Test(
        "H3: U+0000 is a 400 everywhere, other tenants' writes go on, and a failed registration uses no token",
        arguments: ClientTestBackend.allCases)
    func nulIsRefusedAtTheBoundary(backend: ClientTestBackend) async throws {
        try await SecurityFixture.with(backend) { f in
            let a = try await f.register("a")
            let b = try await f.register("b")
            let poison = #"{"meta":{"writer_id":"\#(a.id)","user_id":"\#(a.id)","type":"t\u0000"},"data":{"f":"x"}}"#
            let good = #"{"meta":{"writer_id":"\#(b.id)","user_id":"\#(b.id)","type":"t"},"data":{"f":"x"}}"#
            let statuses = try await withThrowingTaskGroup(of: (Bool, Int).self) { group in
                for i in 0..<40 {
                    let poisoned = i % 2 == 0
                    group.addTask {
                        let client = poisoned ? a : b
                        return (
                            poisoned,
                            try await f.api.send(
                                "POST", "/v1/storage/records", bearer: client.bearer,
                                json: poisoned ? poison : good
                            ).status
                        )
                    }
                }
                return try await group.reduce(into: [(Bool, Int)]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0.0 }.allSatisfy { $0.1 == 400 }, "\(statuses)")
            #expect(statuses.filter { !$0.0 }.allSatisfy { $0.1 == 201 }, "\(statuses)")
            for (method, path, body) in [
                ("PUT", "/v1/storage/access_keys/\(a.id)/\(a.id)/\(a.id)/t%00", #"{"eak":"e"}"#),
                ("PUT", "/v1/storage/policy/\(a.id)/\(a.id)/\(b.id)/t%00", #"{"allow":[{"read":{}}]}"#),
                ("POST", "/v1/storage/search", #"{"content_types":["t\u0000"]}"#),
                ("POST", "/v2/search", #"{"match":[{"terms":{"values":["\u0000"]}}]}"#),
            ] {
                let reply = try await f.api.send(method, path, bearer: a.bearer, json: body)
                #expect(reply.status == 400, "\(method) \(path): \(reply.status) \(reply.text)")
            }
            // Not a U+0000: an escaped backslash followed by u0000 is text.
            let text = #"{"meta":{"writer_id":"\#(a.id)","user_id":"\#(a.id)","type":"t\\u0000"},"data":{"f":"x"}}"#
            #expect(try await f.api.send("POST", "/v1/storage/records", bearer: a.bearer, json: text).status == 201)
            let note = try await f.api.send(
                "GET", "/v2/storage/notes", query: "id_string=%00", tsv1: Ed25519.PrivateKey(),
                uid: "")
            #expect(note.status == 400, "\(note.text)")

            let oneUse = try await ServerProcess.command(
                ["token", "create", "--uses", "1", "--data", f.server.data.path]
                    + (f.server.postgres.map { ["--postgres", $0] } ?? []))
            let bad =
                #"{"token":"\#(oneUse)","client":{"name":"a\u0000b","public_key":{"curve25519":"\#(Box.PrivateKey().publicKey.base64URLEncoded)"}}}"#
            let refused = try await f.api.send("POST", "/v1/account/e3db/clients/register", body: Data(bad.utf8))
            #expect(refused.status == 400, "\(refused.text)")
            _ = try await RawClient.register(f.api, token: oneUse, name: "valid")  // the token's one use is still there
        }
    }

    // MARK: M1, M2: unauthenticated resource use

    @Test("M1: a TSV1 nonce longer than 64 bytes is refused before anything is stored")
    func noncesAreBounded() async throws {
        try await SecurityFixture.with(.sqlite) { f in
            let anyone = Ed25519.PrivateKey()
            let path = "/v2/storage/notes"
            let query = "note_id=\(UUID().uuidString.lowercased())"
            let long = try await f.api.send(
                "GET", path, query: query, tsv1: anyone, uid: "",
                nonce: String(repeating: "n", count: 65))
            #expect(long.status == 401 && long.text.contains("nonce"), "\(long.text)")
            let fine = try await f.api.send(
                "GET", path, query: query, tsv1: anyone, uid: "",
                nonce: String(repeating: "n", count: 64))
            #expect(fine.status == 404, "\(fine.text)")
            let stats = try await ServerProcess.command(["stats", "--data", f.server.data.path])
            #expect(stats.contains(#""tsv1_nonces":1"#), "\(stats)")
        }
    }

    @Test("M2: registration bodies and anonymous notes are bounded before anything is checked")
    func unauthenticatedBodiesAreBounded() async throws {
        try await SecurityFixture.with(.sqlite, extraArguments: ["--max-anonymous-note-size", "4096"]) { f in
            let big = Data(#"{"token":"\#(String(repeating: "x", count: 70_000))"}"#.utf8)
            let register = try await f.api.send("POST", "/v1/account/e3db/clients/register", body: big)
            #expect(register.status == 413, "\(register.text)")
            let anyone = Ed25519.PrivateKey()
            let key = anyone.publicKey.base64URLEncoded
            func note(_ size: Int) -> String {
                #"{"recipient_signing_key":"\#(key)","writer_signing_key":"\#(key)","writer_encryption_key":"\#(key)","encrypted_access_key":"e","#
                    + #""data":{"f":"\#(String(repeating: "d", count: size))"}}"#
            }
            let anonymous = try await f.api.send("POST", "/v2/storage/notes", tsv1: anyone, uid: "", json: note(5000))
            #expect(anonymous.status == 413, "\(anonymous.text)")
            let small = try await f.api.send("POST", "/v2/storage/notes", tsv1: anyone, uid: "", json: note(100))
            #expect(small.status == 201, "\(small.text)")
            let client = try await f.register()
            let signer = try #require(client.signingKey)
            let signerKey = signer.publicKey.base64URLEncoded
            let registered =
                #"{"recipient_signing_key":"\#(signerKey)","writer_signing_key":"\#(signerKey)","#
                + #""writer_encryption_key":"\#(signerKey)","encrypted_access_key":"e","data":{"f":"\#(String(repeating: "d", count: 5000))"}}"#
            let named = try await f.api.send(
                "POST", "/v2/storage/notes", tsv1: signer, uid: client.id, json: registered)
            #expect(named.status == 201, "a registered writer's note may be larger: \(named.text)")
        }
    }

    @Test("M2: one address may hold at most --max-connections-per-address connections")
    func connectionsPerAddressAreBounded() async throws {
        try await SecurityFixture.with(.sqlite, extraArguments: ["--max-connections-per-address", "3"]) { f in
            let url = f.server.url
            let outcome = try await offCooperativePool { () -> [Bool] in
                let held = try (0..<3).map { _ in try PipelinedHTTPTests.RawConnection(url) }
                for c in held { try c.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n") }
                var answered = try held.map { try $0.answer().status == 200 }
                let fourth = try PipelinedHTTPTests.RawConnection(url)
                try? fourth.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
                answered.append((try? fourth.answer())?.status == 200)
                return answered
            }
            #expect(outcome == [true, true, true, false])
            // Once those are closed, new connections are accepted again: once the server has seen them close, which
            // it learns asynchronously (a connection made before that is refused, reset by the server).
            var status: Int?
            for _ in 0..<100 where status != 200 {
                status = try? await f.api.send("GET", "/healthz").status
                if status != 200 { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(status == 200)
        }
    }

    // MARK: Minor findings

    @Test(
        "Concurrent uploads of one file: one stores the body, the others get 409", arguments: ClientTestBackend.allCases
    )
    func uploadsAreClaimedAtomically(backend: ClientTestBackend) async throws {
        try await SecurityFixture.with(backend) { f in
            let client = try await f.register()
            let body = Data(repeating: 7, count: 256 << 10)
            let upload = try await client.createFile(f.api, body: body)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await f.api.transport.send(
                            try HTTPRequest(method: .put, checkedURL: upload), body: body,
                            timeout: .seconds(60), maxResponseSize: 1 << 20
                        ).1.status.code
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.sorted() == [200, 409, 409, 409], "\(statuses)")
        }
    }

    @Test("An update with empty data is refused like a write; an anonymous note cannot claim a client_id")
    func smallGaps() async throws {
        try await SecurityFixture.with(.sqlite) { f in
            let client = try await f.register()
            let id = try await client.write(f.api, type: "t")
            let read = try await f.api.send("GET", "/v1/storage/records/\(id)", bearer: client.bearer)
            let version = try #require((read.json?["meta"] as? [String: Any])?["version"] as? String)
            let update = try await f.api.send(
                "PUT", "/v1/storage/records/safe/\(id)/\(version)", bearer: client.bearer,
                json: #"{"meta":{"writer_id":"\#(client.id)","user_id":"\#(client.id)","type":"t"},"data":{}}"#)
            #expect(update.status == 400, "\(update.text)")

            let anyone = Ed25519.PrivateKey()
            let key = anyone.publicKey.base64URLEncoded
            let note =
                #"{"recipient_signing_key":"\#(key)","writer_signing_key":"\#(key)","writer_encryption_key":"\#(key)","encrypted_access_key":"e","#
                + #""client_id":"\#(client.id)","data":{"f":"d"}}"#
            let written = try await f.api.send("POST", "/v2/storage/notes", tsv1: anyone, uid: "", json: note)
            #expect(written.status == 201, "\(written.text)")
            let claimed = written.json?["client_id"] as? String
            #expect(claimed == nil || claimed == "", "\(written.text)")
        }
    }

    @Test("A timestamp naming a date that does not exist is refused with 400, not read as one in the next month")
    func impossibleDatesAreRefused() async throws {
        try await SecurityFixture.with(.sqlite) { f in
            let client = try await f.register()
            for (after, status) in [("2028-02-29T00:00:00Z", 200), ("2026-02-31T00:00:00Z", 400)] {
                let search = try await f.api.send(
                    "POST", "/v2/search", bearer: client.bearer, json: #"{"range":{"after":"\#(after)"}}"#)
                #expect(search.status == status, "\(after): \(search.text)")
                if status == 400 { #expect(search.text.contains("range.after"), "\(search.text)") }
            }
            let anyone = Ed25519.PrivateKey()
            let key = anyone.publicKey.base64URLEncoded
            /// A note with `expires` and `"expiration":` followed by `member` (nil: no expiration member).
            func note(expires: Bool = true, expirationJSON member: String?) -> String {
                #"{"recipient_signing_key":"\#(key)","writer_signing_key":"\#(key)","writer_encryption_key":"\#(key)","#
                    + #""encrypted_access_key":"e","data":{"f":"d"},"expires":\#(expires)"#
                    + (member.map { #","expiration":\#($0)}"# } ?? "}")
            }
            func note(expiring expiration: String) -> String { note(expirationJSON: #""\#(expiration)""#) }
            // A note asked to expire at an impossible time, or at one the server cannot read, was stored as one that
            // never expires; so was one asked to expire with no expiration, or one that is not a string.
            let unreadable = [
                "2026-02-31T00:00:00Z", "2026-04-31T00:00:00Z", "soon", "2026-01-01T00:00:00+0000", "2026-01-01T00:00",
                " 2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z ", "",
            ].map { #""\#($0)""# }
            for bad in unreadable + ["null", "12", "{}"] as [String?] + [nil] {
                let written = try await f.api.send(
                    "POST", "/v2/storage/notes", tsv1: anyone, uid: "", json: note(expirationJSON: bad))
                #expect(
                    written.status == 400 && written.text.contains("expiration"), "\(bad ?? "none"): \(written.text)")
            }
            let leap = try await f.api.send(
                "POST", "/v2/storage/notes", tsv1: anyone, uid: "", json: note(expiring: "2096-02-29T00:00:00Z"))
            #expect(leap.status == 201, "\(leap.text)")
            // Go's zero time with expires true is the one "never" form kept; without expires nothing is read.
            for (expires, member) in [(true, #""0001-01-01T00:00:00Z""#), (false, nil), (false, "null"), (false, "12")]
            {
                let kept = try await f.api.send(
                    "POST", "/v2/storage/notes", tsv1: anyone, uid: "",
                    json: note(expires: expires, expirationJSON: member))
                #expect(kept.status == 201, "\(expires) \(member ?? "none"): \(kept.text)")
            }
        }
    }

    @Test("Partial uploads left by a killed server are removed at the next start")
    func abandonedUploadsAreRemoved() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-srv-\(UUID().uuidString)")
        let tmp = data.appendingPathComponent("files/tmp")
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
        let old = tmp.appendingPathComponent("abandoned")
        let fresh = tmp.appendingPathComponent("in-progress")
        for file in [old, fresh] { try Data(repeating: 1, count: 1024).write(to: file) }
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(-3600)], ofItemAtPath: old.path)
        let server = try await ServerProcess.start(data: data)
        var gone = false
        for _ in 0..<50 where !gone {
            gone = !FileManager.default.fileExists(atPath: old.path)
            if !gone { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(gone)
        #expect(FileManager.default.fileExists(atPath: fresh.path), "a recently written upload stays")
        await server.stopped()
    }
}
