import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import Foundation
import Hummingbird
import Testing

@testable import E3DBServer

/// The request path in process through ``E3DBRequestHandler`` over a real SQLite database: every refusal is a 4xx
/// with a JSON `{"error": …}` body, never a 5xx or a crash (the issue's list, and the fuzzers' reproducers).
@Suite("Request handler refusals")
struct RequestHandlerTests {
    struct Reply {
        var status: Int
        var json: [String: Any]?
        var body: Data
    }

    final class Sink: @unchecked Sendable { var bytes = Data() }
    struct Collector: ResponseBodyWriter {
        let sink: Sink
        mutating func write(_ buffer: ByteBuffer) async throws {
            sink.bytes.append(contentsOf: buffer.readableBytesView)
        }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }

    /// A handler with one registered client (signing key from seed 0x42) and its bearer token.
    struct Server {
        let handler: E3DBRequestHandler
        let storage: SQLiteStorage
        let clientID: String
        let basic: String
        let token: String
        let key: Ed25519.PrivateKey

        /// - Parameter files: the file store (default: `files/` beside the database).
        static func make(
            maxBodySize: Int = 1 << 20, tokenLifetime: Int = 3600, files: FileBodyBackend? = nil
        ) async throws -> Server {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("e3db-handler-\(UUID().uuidString)")
            var configuration = ServerConfiguration(dataDirectory: dir)
            configuration.maxBodySize = maxBodySize
            configuration.tokenLifetime = tokenLifetime
            // The public facade, as an embedding application opens it; the registration token goes in below it.
            let backend = try StorageBackend.sqlite(directory: dir)
            let storage = try #require(backend.storage as? SQLiteStorage)
            try await storage.migrate()
            let registrationToken = UUID().uuidString
            try await storage.createRegistrationToken(
                hash: Hashes.sha256(Data(registrationToken.utf8)), uses: nil,
                created: 0)
            let handler = try await E3DBRequestHandler(
                configuration: configuration, backend: backend,
                files: try files ?? FileBodyBackend.local(directory: dir.appendingPathComponent("files")))
            let key = try Ed25519.PrivateKey(seed: SecureBytes(copying: [UInt8](repeating: 0x42, count: 32)))
            let body =
                #"{"token":"\#(registrationToken)","client":{"name":"t","public_key":{"curve25519":"\#(Base64URL.encode(Data(repeating: 7, count: 32)))"},"signing_key":{"ed25519":"\#(key.publicKey.base64URLEncoded)"}}}"#
            let registered = await send(handler, .post, "/v1/account/e3db/clients/register", body: body)
            try #require(registered.status == 201)
            let clientID = try #require(registered.json?["client_id"] as? String)
            let pair =
                "\(registered.json?["api_key_id"] as? String ?? ""):\(registered.json?["api_secret"] as? String ?? "")"
            let basic = "Basic " + Data(pair.utf8).base64EncodedString()
            let issued = await send(
                handler, .post, "/v1/auth/token", headers: [.authorization: basic],
                body: "grant_type=client_credentials")
            try #require(issued.status == 200)
            return Server(
                handler: handler, storage: storage, clientID: clientID, basic: basic,
                token: try #require(issued.json?["access_token"] as? String), key: key)
        }

        var bearer: HTTPFields { [.authorization: "Bearer \(token)"] }

        func send(_ method: HTTPRequest.Method, _ path: String, headers: HTTPFields = [:], body: String = "") async
            -> Reply
        {
            await Self.send(handler, method, path, headers: headers, body: body)
        }

        static func send(
            _ handler: E3DBRequestHandler, _ method: HTTPRequest.Method, _ path: String,
            headers: HTTPFields = [:], body: String = ""
        ) async -> Reply {
            let head = HTTPRequest(
                method: method, scheme: "http", authority: "localhost", path: path, headerFields: headers)
            let response = await handler.respond(
                to: Request(head: head, body: RequestBody(buffer: ByteBuffer(string: body))))
            let sink = Sink()
            try? await response.body.write(Collector(sink: sink))
            let json = (try? JSONSerialization.jsonObject(with: sink.bytes)) as? [String: Any]
            if response.status.code >= 400 {
                #expect(response.headers[.contentType] == "application/json")
                #expect(json?["error"] is String, "a \(response.status.code) without {\"error\": string}")
            }
            #expect(response.status.code < 500, "\(method) \(path) gave \(response.status.code)")
            return Reply(status: response.status.code, json: json, body: sink.bytes)
        }

        /// A TSV1 header over the request as sent.
        func tsv1(
            _ method: HTTPRequest.Method, _ path: String, query: String = "", timestamp: Int64? = nil,
            nonce: String = UUID().uuidString.lowercased(), uid: String? = nil
        ) throws -> HTTPFields {
            [
                .authorization: try TSV1.authorization(
                    path: path, query: TSV1.canonicalQuery(query), method: method.rawValue,
                    timestamp: timestamp ?? Int64(Date().timeIntervalSince1970), nonce: nonce,
                    clientID: uid ?? clientID,
                    signingKey: key)
            ]
        }

        func record(plain: [String: String]) -> String {
            let p = String(decoding: (try? JSONEncoder().encode(plain)) ?? Data("{}".utf8), as: UTF8.self)
            return
                #"{"meta":{"writer_id":"\#(clientID)","user_id":"\#(clientID)","type":"t","plain":\#(p)},"data":{"f":"a.b.c.d"}}"#
        }
    }

    @Test func malformedJSONAndWrongContentTypes() async throws {
        let s = try await Server.make()
        for body in ["{", "", "null", "[]", #"{"meta":5}"#, "\u{FEFF}{}", #"{"meta":{"writer_id":1}}"#] {
            #expect(await s.send(.post, "/v1/storage/records", headers: s.bearer, body: body).status == 400)
        }
        // The body is JSON whatever the Content-Type says (e3db-go sends none, js odd ones).
        var headers = s.bearer
        headers[.contentType] = "text/plain"
        #expect(await s.send(.post, "/v1/storage/records", headers: headers, body: s.record(plain: [:])).status == 201)
        headers[.contentType] = "application/x-www-form-urlencoded"
        #expect(await s.send(.post, "/v2/search", headers: headers, body: "a=b").status == 400)
        // Nesting: deeper than JSONDecoder's limit, and deeper than a plain filter may be.
        let deep = String(repeating: #"{"not":"#, count: 300) + "{}" + String(repeating: "}", count: 300)
        #expect(
            await s.send(.post, "/v1/storage/search", headers: s.bearer, body: #"{"plain":"# + deep + "}").status == 400
        )
        let deeper = String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000)
        #expect(
            await s.send(.post, "/v1/storage/search", headers: s.bearer, body: #"{"plain":"# + deeper + "}").status
                == 400)
    }

    @Test func oversizedBodies() async throws {
        let s = try await Server.make(maxBodySize: 1024)
        let big = s.record(plain: ["k": String(repeating: "x", count: 2048)])
        #expect(await s.send(.post, "/v1/storage/records", headers: s.bearer, body: big).status == 413)
        var declared = s.bearer
        declared[.contentLength] = "99999999999"
        #expect(await s.send(.post, "/v1/storage/records", headers: declared, body: "{}").status == 413)
    }

    @Test func badUUIDs() async throws {
        let s = try await Server.make()
        #expect(await s.send(.get, "/v1/storage/records/not-a-uuid", headers: s.bearer).status == 404)
        #expect(await s.send(.get, "/v1/storage/clients/%zz", headers: s.bearer).status == 400)
        #expect(await s.send(.get, "/v1/storage/access_keys/x/y/z/t", headers: s.bearer).status == 400)
        #expect(await s.send(.delete, "/v1/storage/records/safe/zz/v", headers: s.bearer).status == 403)
        let path = "/v2/storage/notes/not-a-uuid"
        #expect(await s.send(.delete, path, headers: try s.tsv1(.delete, path)).status == 400)
    }

    /// Ids are parsed once where they enter (``Identifier``): a malformed one in a path, a query or a body is refused
    /// with the route's message before any storage call, and changes nothing; either case is an id.
    @Test func malformedIDsAtEachEdgeAreRefusedBeforeStorage() async throws {
        let s = try await Server.make()
        let written = await s.send(.post, "/v1/storage/records", headers: s.bearer, body: s.record(plain: [:]))
        try #require(written.status == 201)
        let stored = try await s.storage.statistics()
        let me = s.clientID
        func refused(
            _ reply: Reply, _ status: Int, _ message: String, sourceLocation: SourceLocation = #_sourceLocation
        ) {
            #expect(reply.status == status, sourceLocation: sourceLocation)
            #expect(reply.json?["error"] as? String == message, sourceLocation: sourceLocation)
        }
        // Path segments.
        for path in [
            "/v1/storage/access_keys/\(me)/\(me)/not-a-uuid/t", "/v1/storage/access_keys/\(me)x/\(me)/\(me)/t",
        ] {
            refused(
                await s.send(.put, path, headers: s.bearer, body: #"{"eak":"e"}"#), 400,
                "writer, user and reader must be UUIDs")
        }
        refused(
            await s.send(
                .put, "/v1/storage/policy/\(me)/\(me)/\(me.dropLast())/t", headers: s.bearer,
                body: #"{"allow":[{"read":{}}]}"#), 400, "writer, user and reader must be UUIDs")
        let note = "/v2/storage/notes/\(me.dropLast())g"
        refused(await s.send(.delete, note, headers: try s.tsv1(.delete, note)), 400, "the note id is not a UUID")
        refused(
            await s.send(.get, "/v1/storage/clients/\(me)-", headers: s.bearer), 404, "no such client")
        // A query parameter.
        refused(
            await s.send(
                .get, "/v2/storage/notes?note_id=not-a-uuid",
                headers: try s.tsv1(.get, "/v2/storage/notes", query: "note_id=not-a-uuid")),
            400, "note_id is not a UUID")
        // JSON bodies: a record naming a malformed user, and a query whose only writer is malformed (it names no
        // record: an empty page, not every record as an empty filter would be).
        let badUser =
            #"{"meta":{"writer_id":"\#(me)","user_id":"\#(me)z","type":"t","plain":{}},"data":{"f":"a.b.c.d"}}"#
        refused(
            await s.send(.post, "/v1/storage/records", headers: s.bearer, body: badUser), 400,
            "meta.user_id must equal meta.writer_id")
        let query = await s.send(
            .post, "/v1/storage/search", headers: s.bearer, body: #"{"writer_ids":["nobody"],"include_data":true}"#)
        #expect(query.status == 200)
        #expect((query.json?["results"] as? [Any])?.count == 0)
        let upper = await s.send(
            .post, "/v1/storage/search", headers: s.bearer, body: #"{"writer_ids":["\#(me.uppercased())"]}"#)
        #expect((upper.json?["results"] as? [Any])?.count == 1, "an uppercase id is the same id")
        refused(
            await s.send(
                .get, "/v1/storage/access_keys/\(me.uppercased())/\(me)/\(me.uppercased())/t", headers: s.bearer),
            404, "no access key")
        let after = try await s.storage.statistics()
        for table in ["records", "access_keys", "policies", "notes", "clients"] {
            #expect(after[table] == stored[table], "\(table) changed")
        }
    }

    @Test func badSignaturesReplaysAndExpiry() async throws {
        let s = try await Server.make()
        let path = "/v1/storage/policy/outgoing"
        let good = try s.tsv1(.get, path, nonce: "00000000-0000-4000-8000-000000000001")
        let first = await s.send(.get, path, headers: good)
        #expect(first.status == 200, "\(String(decoding: first.body, as: UTF8.self))")
        #expect(await s.send(.get, path, headers: good).status == 401)  // the same nonce again
        #expect(await s.send(.get, path, headers: try s.tsv1(.post, path)).status == 401)  // signed for POST
        #expect(await s.send(.get, path, headers: try s.tsv1(.get, "/v1/storage/policy/incoming")).status == 401)
        let old = Int64(Date().timeIntervalSince1970) - 3600
        #expect(await s.send(.get, path, headers: try s.tsv1(.get, path, timestamp: old)).status == 401)
        #expect(await s.send(.get, path, headers: [.authorization: "Bearer 00"]).status == 401)
        #expect(await s.send(.get, path, headers: [.authorization: "TSV1-ED25519-BLAKE2B; x"]).status == 401)
        #expect(await s.send(.get, path).status == 401)
    }

    /// FailCase FuzzTSV1Verify/timestamp-int64-min: `abs(now - timestamp)` trapped on overflow.
    @Test func tsv1TimestampAtTheEdgesOfInt64() async throws {
        let s = try await Server.make()
        let path = "/v1/storage/policy/outgoing"
        for ts in [Int64.min, Int64.min + 1, Int64.max] {
            #expect(await s.send(.get, path, headers: try s.tsv1(.get, path, timestamp: ts)).status == 401)
            let header = try TSV1.authorization(
                path: path, query: "", method: "GET", timestamp: ts, nonce: "n",
                clientID: "", signingKey: s.key)
            #expect(throws: E3DBError(.tsv1Expired)) {
                try TSV1.verify(authorization: header, rawPath: path, rawQuery: "", method: "GET", now: 1_764_072_000)
            }
        }
        let header = try TSV1.authorization(
            path: "/", query: "", method: "GET", timestamp: 10, nonce: "n",
            clientID: "", signingKey: s.key)
        #expect(throws: E3DBError(.tsv1Expired)) {  // a negative window accepts nothing
            try TSV1.verify(authorization: header, rawPath: "/", rawQuery: "", method: "GET", now: 10, window: -1)
        }
    }

    /// FailCase FuzzTSV1Verify/uid-starting-with-a-combining-mark: `hasPrefix("uid:")` compared Characters, and a uid
    /// starting with a combining mark (U+059E) fuses with the ":" into one grapheme, so a correctly signed header
    /// was refused as malformed (and `dropFirst(4)` would have lost the mark).
    @Test func tsv1UidStartingWithACombiningMark() throws {
        let key = try Ed25519.PrivateKey(seed: SecureBytes(copying: [UInt8](repeating: 0x42, count: 32)))
        for uid in ["\u{59E}abc", "\u{301}", "e\u{301}X", "ABC"] {
            let header = try TSV1.authorization(
                path: "/p", query: "", method: "GET", timestamp: 10, nonce: "n",
                clientID: uid, signingKey: key)
            let verified = try TSV1.verify(authorization: header, rawPath: "/p", rawQuery: "", method: "GET", now: 10)
            #expect(verified.clientID == uid.lowercased())
            #expect(verified.clientID?.unicodeScalars.elementsEqual(uid.lowercased().unicodeScalars) == true)
        }
    }

    /// Searches compare plain names and values by code units, as the stored `RecordData` keeps them: a record with
    /// the precomposed name "é" (U+00E9) is not found by a filter on "e\u{301}" and the other way round, in v1
    /// (`plain` filters) and v2 (EXACT `keys`, `values` and `tags` terms) searches.
    @Test func searchesCompareNamesAndValuesByCodeUnits() async throws {
        let s = try await Server.make()
        let nfc = "\u{e9}"
        let nfd = "e\u{301}"
        var recordIDs: [String: String] = [:]
        for (label, plain) in [("nfcName", [nfc: "x"]), ("nfdName", [nfd: "x"]), ("nfdValue", ["k": nfd])] {
            let reply = await s.send(.post, "/v1/storage/records", headers: s.bearer, body: s.record(plain: plain))
            try #require(reply.status == 201)
            recordIDs[label] = ((reply.json?["meta"] as? [String: Any])?["record_id"] as? String)?.lowercased()
        }
        func found(_ path: String, _ body: String) async -> Set<String> {
            let reply = await s.send(.post, path, headers: s.bearer, body: body)
            #expect(reply.status == 200, "\(body)")
            let results = reply.json?["results"] as? [[String: Any]] ?? []
            return Set(
                results.compactMap { ($0["meta"] as? [String: Any])?["record_id"] as? String }.map { $0.lowercased() })
        }
        func ids(_ labels: String...) -> Set<String> { Set(labels.compactMap { recordIDs[$0] }) }
        // The JSON text names "e\u0301" with an escape, so that no tool on the way normalizes it.
        let eqNFD = #"{"plain":{"eq":{"name":"e\u0301","value":"x"}}}"#
        let eqNFC = #"{"plain":{"eq":{"name":"\u00e9","value":"x"}}}"#
        #expect(await found("/v1/storage/search", eqNFD) == ids("nfdName"))
        #expect(await found("/v1/storage/search", eqNFC) == ids("nfcName"))
        #expect(await found("/v1/storage/search", #"{"plain":{"k":"\u00e9"}}"#).isEmpty)
        #expect(await found("/v1/storage/search", #"{"plain":{"k":"e\u0301"}}"#) == ids("nfdValue"))
        func v2(_ terms: String) -> String { #"{"match":[{"strategy":"EXACT","terms":\#(terms)}]}"# }
        #expect(await found("/v2/search", v2(#"{"keys":["e\u0301"]}"#)) == ids("nfdName"))
        #expect(await found("/v2/search", v2(#"{"keys":["\u00e9"]}"#)) == ids("nfcName"))
        #expect(await found("/v2/search", v2(#"{"values":["\u00e9"]}"#)).isEmpty)
        #expect(await found("/v2/search", v2(#"{"values":["e\u0301"]}"#)) == ids("nfdValue"))
        #expect(await found("/v2/search", v2(#"{"tags":{"e\u0301":"x"}}"#)) == ids("nfdName"))
    }

    /// Bodies `JSONDecoder` reads (searches, policies, notes…) go through the one JSON grammar first: a byte order
    /// mark, a repeated name, and two names equal as Swift `String`s, which `JSONDecoder` would merge into one
    /// filter or tag, are refused with the record reader's wording.
    @Test func decodedBodiesAreReadWithTheOneGrammar() async throws {
        let s = try await Server.make()
        func refusal(_ path: String, _ body: String) async -> String {
            let reply = await s.send(.post, path, headers: s.bearer, body: body)
            #expect(reply.status == 400, "\(body)")
            return reply.json?["error"] as? String ?? ""
        }
        let bom = await refusal("/v1/storage/search", "\u{FEFF}" + #"{"plain":{"k":"1"}}"#)
        #expect(bom.hasPrefix("the query body is not valid: a byte order mark (U+FEFF)"), "\(bom)")
        #expect(bom.hasSuffix(" at byte 0"), "\(bom)")
        let repeated = await refusal("/v1/storage/search", #"{"plain":{"k":"1","k":"2"}}"#)
        #expect(repeated == #"the query body is not valid: repeated member "k" in the body at byte 18"#)
        let twins = await refusal("/v1/storage/search", #"{"plain":{"\u00e9":"1","e\u0301":"2"}}"#)
        #expect(twins.hasPrefix("the query body is not valid: repeated member "), "\(twins)")
        func v2(_ tags: String) -> String { #"{"match":[{"strategy":"EXACT","terms":{"tags":\#(tags)}}]}"# }
        _ = await refusal("/v2/search", v2(#"{"k":"1","k":"2"}"#))
        _ = await refusal("/v2/search", v2(#"{"\u00e9":"1","e\u0301":"2"}"#))
        _ = await refusal("/v2/search", "\u{FEFF}" + v2(#"{"k":"1"}"#))
        // Names distinct as text still read, and so does a search with one tag.
        let ok = await s.send(.post, "/v2/search", headers: s.bearer, body: v2(#"{"k":"1","K":"2"}"#))
        #expect(ok.status == 200)
    }

    @Test func expiredBearerTokens() async throws {
        let s = try await Server.make(tokenLifetime: -60)
        #expect(await s.send(.get, "/v1/storage/policy/outgoing", headers: s.bearer).status == 401)
    }

    /// `(a|a)*b` backtracks exponentially in Swift `Regex` on a run of `a`s; the NFA matcher answers at once.
    @Test func hostileRegexpAndWildcardTermsAreBounded() async throws {
        let s = try await Server.make()
        let value = String(repeating: "a", count: 4000) + "c"
        #expect(
            await s.send(.post, "/v1/storage/records", headers: s.bearer, body: s.record(plain: ["k": value])).status
                == 201)
        let started = ContinuousClock.now
        for (strategy, term) in [
            ("REGEXP", "(a|a)*b"), ("REGEXP", "(a*)*b"), ("REGEXP", "(a|aa)+b"),
            ("WILDCARD", String(repeating: "*a", count: 500) + "b"), ("FUZZY", String(repeating: "a", count: 1000)),
        ] {
            let body = #"{"match":[{"strategy":"\#(strategy)","terms":{"values":["\#(term)"]}}]}"#
            let reply = await s.send(.post, "/v2/search", headers: s.bearer, body: body)
            #expect(reply.status == 200, "\(strategy) \(term.prefix(20))")
            #expect(reply.json?["total_results"] as? Int ?? 0 == 0)
        }
        // Backtracking `(a|a)*b` over 4000 `a`s would take longer than the universe has existed; the bound is only
        // generous enough for a loaded 2-core machine (27 s seen with two more busy processes in the full run).
        #expect(ContinuousClock.now - started < .seconds(120))
        let tooLong =
            #"{"match":[{"strategy":"REGEXP","terms":{"values":["\#(String(repeating: "a", count: 1025))"]}}]}"#
        #expect(await s.send(.post, "/v2/search", headers: s.bearer, body: tooLong).status == 400)
        for bad in ["a~b", "(a", "a{3,1}", "[z-a]", "*", "a{99999}"] {
            let body = #"{"match":[{"strategy":"REGEXP","terms":{"values":["\#(bad)"]}}]}"#
            #expect(await s.send(.post, "/v2/search", headers: s.bearer, body: body).status == 400, "\(bad)")
        }
        let many = (0..<1025).map { "\"v\($0)\"" }.joined(separator: ",")
        #expect(
            await s.send(
                .post, "/v2/search", headers: s.bearer,
                body: #"{"match":[{"terms":{"values":[\#(many)]}}]}"#
            ).status == 400)
        let found = await s.send(
            .post, "/v2/search", headers: s.bearer,
            body: #"{"match":[{"strategy":"REGEXP","terms":{"values":["a*c"]}}]}"#)
        #expect(found.json?["total_results"] as? Int == 1)
    }
}

@Suite("Search term matching")
struct SearchMatchingTests {
    func regex(_ pattern: String) throws -> LinearRegex { try LinearRegex(pattern) }

    @Test func lucenePatterns() throws {
        let cases: [(String, String, Bool)] = [
            ("tozny.*", "toznywebsite", true), ("tozny.*", "xtozny", false), ("abc", "abc", true),
            ("abc", "abcd", false),
            ("a|b", "b", true), ("(ab)+", "ababab", true), ("(ab)+", "", false), ("a?b", "b", true),
            ("a{2,3}", "aaa", true), ("a{2,3}", "aaaa", false), ("a{2,}", "aaaaa", true), ("a{2}", "a", false),
            ("[a-c]+", "abcabc", true), ("[^a-c]", "d", true), ("[^a-c]", "a", false), ("[]a]", "]", true),
            ("\"a.b\"", "a.b", true), ("\"a.b\"", "axb", false), ("\\.", ".", true), ("\\.", "x", false),
            ("@", "anything", true), ("#", "", false), ("()", "", true), ("", "", true), ("", "a", false),
            ("é.", "éa", true), ("[a\\-]", "-", true), ("a**", "aaa", true), ("(a|)b", "b", true),
        ]
        for (pattern, value, expected) in cases {
            #expect(try regex(pattern).wholeMatch(value) == expected, "\(pattern) on \(value)")
        }
        for bad in [
            "(", ")", "a)", "[", "[a", "{", "a{", "a{2", "a{x}", "a{3,2}", "[b-a]", "\\", "\"a", "+", "~a",
            "a&b", "<1-2>", "a{2049}", String(repeating: "(", count: 70) + String(repeating: ")", count: 70),
        ] {
            #expect(throws: LinearRegex.SyntaxError.self, "\(bad)") { try regex(bad) }
        }
        // Repetitions of nothing cost nothing; repetitions of something hit the state budget.
        #expect(try regex("((){2000}){2000}").wholeMatch(""))
        #expect(throws: LinearRegex.SyntaxError.self) { try regex("(a{2000}){2000}") }
    }

    /// The banded distance equals the full optimal-string-alignment distance wherever that is within the limit.
    @Test func bandedDistanceAgreesWithTheFullTable() throws {
        func full(_ a: [Character], _ b: [Character]) -> Int {
            var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
            for i in 0...a.count { d[i][0] = i }
            for j in 0...b.count { d[0][j] = j }
            for i in stride(from: 1, through: a.count, by: 1) {
                for j in stride(from: 1, through: b.count, by: 1) {
                    d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
                    if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                        d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                    }
                }
            }
            return d[a.count][b.count]
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            let a = (0..<Int.random(in: 0...8, using: &rng)).map { _ in "abc".randomElement(using: &rng)! }
            let b = (0..<Int.random(in: 0...8, using: &rng)).map { _ in "abc".randomElement(using: &rng)! }
            let limit = Int.random(in: 0...2, using: &rng)
            let expected = min(full(a, b), limit + 1)
            let got = SearchTerm.distance(
                a.map { $0.unicodeScalars.first! }, b.map { $0.unicodeScalars.first! },
                limit: limit)
            #expect(min(got, limit + 1) == expected, "\(String(a)) \(String(b)) limit \(limit)")
        }
        let funny = try SearchTerm("veryveryfunny", .fuzzy)
        var budget = WorkBudget(limit: .max)
        #expect(try funny.matches("veryveryfuzzy", budget: &budget))
        #expect(try !funny.matches("veryveryfuzzzz", budget: &budget))
        #expect(try SearchTerm("abcd", .fuzzy).matches("abdc", budget: &budget))
    }
}

/// The `plain` and `data` of a record body are stored as the client sent them and answered as stored: the server
/// reads them once and never writes them again.
@Suite("Record text as received")
struct ReceivedRecordTextTests {
    @Test("write, update and read: plain and data as sent (separators, escapes, order); a repeated field refused")
    func storedAsSent() async throws {
        let s = try await RequestHandlerTests.Server.make()
        let plain = #"{"z": "1", "k": "caf\u00e9"}"#
        let data = #"{"g": "e.f.g.h", "f": "a.b\/c.d"}"#
        let written = await s.send(
            .post, "/v1/storage/records", headers: s.bearer,
            body:
                #"{"meta": {"writer_id": "\#(s.clientID)", "user_id": "\#(s.clientID)", "type": "t", "plain": \#(plain)}, "data": \#(data)}"#
        )
        #expect(written.status == 201)
        let echoed = String(decoding: written.body, as: UTF8.self)
        #expect(echoed.contains(#""plain":\#(plain),"#) && echoed.contains(#""data":\#(data)"#), "\(echoed)")
        let meta = try #require(written.json?["meta"] as? [String: Any])
        #expect(meta["plain"] as? [String: String] == ["z": "1", "k": "café"])
        let id = try #require(meta["record_id"] as? String)
        let recordID = try #require(RecordID(id))
        let row = try #require(try await s.storage.record(id: recordID))
        #expect(row.plainJSON == plain && row.dataJSON == data)
        let read = await s.send(.get, "/v1/storage/records/\(id)", headers: s.bearer)
        #expect(read.status == 200 && read.body == written.body)
        // A field-filtered read keeps the stored text of the members it names, byte for byte.
        let field = await s.send(.get, "/v1/storage/records/\(id)?field=f", headers: s.bearer)
        #expect(field.json?["data"] as? [String: String] == ["f": "a.b/c.d"])
        let filtered = echoed.replacingOccurrences(of: #""data":\#(data)"#, with: #""data":{"f": "a.b\/c.d"}"#)
        #expect(field.status == 200 && String(decoding: field.body, as: UTF8.self) == filtered)

        // An update without plain keeps the stored plain and stores its data as sent.
        let version = try #require(meta["version"] as? String)
        let newData = #"{ "f" : "x.y.z.w" }"#
        let updated = await s.send(
            .put, "/v1/storage/records/safe/\(id)/\(version)", headers: s.bearer,
            body:
                #"{"meta":{"writer_id":"\#(s.clientID)","user_id":"\#(s.clientID)","type":"t"},"data":\#(newData)}"#)
        #expect(updated.status == 200)
        let after = try #require(try await s.storage.record(id: recordID))
        #expect(after.plainJSON == plain && after.dataJSON == newData)
        // Its response leaves plain out (the request had none) and carries the data as sent.
        let updatedText = String(decoding: updated.body, as: UTF8.self)
        let updatedMeta = try #require(updated.json?["meta"] as? [String: Any])
        #expect(updatedMeta["plain"] == nil && updatedMeta["version"] as? String == after.version)
        #expect(updatedText.contains(#""data":\#(newData)"#), "\(updatedText)")
        // With plain, the response echoes the request's plain as sent.
        let newPlain = #"{ "q" : "r\/s" }"#
        let withPlain = await s.send(
            .put, "/v1/storage/records/safe/\(id)/\(after.version)", headers: s.bearer,
            body:
                #"{"meta":{"writer_id":"\#(s.clientID)","user_id":"\#(s.clientID)","type":"t","plain":\#(newPlain)},"data":\#(newData)}"#
        )
        let withPlainText = String(decoding: withPlain.body, as: UTF8.self)
        #expect(withPlain.status == 200 && withPlainText.contains(#""plain":\#(newPlain),"#), "\(withPlainText)")

        // A repeated field is refused by the one reader, saying what and where (no JSONDecoder fallback).
        let repeated = await s.send(
            .post, "/v1/storage/records", headers: s.bearer,
            body:
                #"{"meta":{"writer_id":"\#(s.clientID)","user_id":"\#(s.clientID)","type":"t"},"data":{"f":"1","f":"2"}}"#
        )
        #expect(repeated.status == 400)
        let message = try #require(repeated.json?["error"] as? String)
        #expect(message.hasPrefix(#"the record body is not valid: repeated member "f" in data at byte "#), "\(message)")
    }
}
