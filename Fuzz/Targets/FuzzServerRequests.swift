import E3DBAPI
// Fuzz target FuzzServerRequests: the whole request path of the E3DB API server in process (E3DBServer's `E3DBRequestHandler`), over
// a real SQLite database in a temporary directory, without a socket.
//
// Set up once: a registration token, a client registered through the handler (with a fixed Ed25519 signing key),
// a bearer token, an already expired bearer token (minted by a second handler whose token lifetime is negative), a
// record, a note and a pending file.
//
// Input: byte 0 picks a path template, byte 1 the method, byte 2 the Authorization variant (none, valid bearer,
// fuzzed bearer, TSV1 signed by the client over the request as sent, anonymous TSV1, the fuzzed header text, HTTP
// Basic with the client's key pair, TSV1 with a replayed nonce, TSV1 outside the clock window, the expired bearer),
// byte 3 what fills the two path slots (fuzzed text or a real client, record, note or pending-file id, a version,
// a type), byte 4 the Content-Type, a wrong Content-Length, and whether the query is a real upload capability.
// The rest is split on 0x00 into slot 1, slot 2, the query, the header text and the body; `@me` in the body is
// replaced by the client's id and `@sk` by its signing key, so that seeds can hold valid bodies.
//
// Checks: no status is 5xx (storage failures would be 503; there are none here); every 4xx has a JSON object body
// with an `error` string and Content-Type application/json; on the authenticated templates, a replayed nonce, an
// expired timestamp or bearer token, a fuzzed bearer token or no credentials never get a 2xx.
import E3DBCanonicalJSON
import E3DBPrimitives
import E3DBServer
import Foundation
import HTTPTypes
import Hummingbird

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzServerRequests invariant violated: \(message())") }
}

/// The same request with an Authorization header (a Request's head is immutable).
private func authorized(_ request: Request, _ value: String) -> Request {
    var head = request.head
    head.headerFields[.authorization] = value
    return Request(head: head, body: request.body)
}

private func signingKey() -> Ed25519.PrivateKey {
    do { return try Ed25519.PrivateKey(seed: SecureBytes(copying: [UInt8](repeating: 0x42, count: 32))) } catch {
        fatalError("\(error)")
    }
}

private func tsv1(_ request: Request, uid: String, timestamp: Int64, nonce: String) -> String {
    do {
        return try TSV1.authorization(
            path: request.uri.path, query: TSV1.canonicalQuery(request.uri.query ?? ""),
            method: request.method.rawValue, timestamp: timestamp, nonce: nonce,
            clientID: uid, signingKey: signingKey())
    } catch { fatalError("signing failed: \(error)") }
}

private struct Fixture: Sendable {
    let handler: E3DBRequestHandler
    let clientID: String
    let apiKeyID: String
    let apiSecret: String
    let token: String
    let expiredToken: String
    let recordID: String
    let version: String
    let noteID: String
    let pendingID: String
    let uploadQuery: String
    let replayedNonce = "00000000-0000-4000-8000-0000000000aa"
}

private func setUp() async throws -> Fixture {
    let server = try await makeInProcessServer("server")
    let (configuration, storage, files, handler, registrationToken) =
        (server.configuration, server.storage, server.files, server.handler, server.registrationToken)
    var expiring = configuration
    expiring.tokenLifetime = -60
    let expiringHandler = try await E3DBRequestHandler(configuration: expiring, storage: storage, files: files)
    let pk = Base64URL.encode(Data(repeating: 7, count: 32))
    let sk = signingKey().publicKey.base64URLEncoded
    let registration =
        #"{"token":"\#(registrationToken)","client":{"name":"fuzz","public_key":{"curve25519":"\#(pk)"},"signing_key":{"ed25519":"\#(sk)"}}}"#
    let registered = await send(
        handler,
        makeRequest(
            method: .post, path: "/v1/account/e3db/clients/register",
            headers: [:], body: Data(registration.utf8)))
    require(registered.status == 201, "registration failed: \(registered.status)")
    let client = setUpJSON(registered.body)
    let clientID = client["client_id"] as? String ?? ""
    let keyID = client["api_key_id"] as? String ?? ""
    let secret = client["api_secret"] as? String ?? ""
    let basic = "Basic " + Data("\(keyID):\(secret)".utf8).base64EncodedString()
    func token(_ h: E3DBRequestHandler) async -> String {
        let reply = await send(
            h,
            makeRequest(
                method: .post, path: "/v1/auth/token", headers: [.authorization: basic],
                body: Data("grant_type=client_credentials".utf8)))
        require(reply.status == 200, "token failed: \(reply.status)")
        return setUpJSON(reply.body)["access_token"] as? String ?? ""
    }
    let bearer = await token(handler)
    let expired = await token(expiringHandler)
    let record =
        #"{"meta":{"writer_id":"\#(clientID)","user_id":"\#(clientID)","type":"t","plain":{"k":"v"}},"data":{"f":"a.b.c.d"}}"#
    let written = await send(
        handler,
        makeRequest(
            method: .post, path: "/v1/storage/records",
            headers: [.authorization: "Bearer \(bearer)"],
            body: Data(record.utf8)))
    require(written.status == 201, "record write failed: \(written.status)")
    let meta = setUpJSON(written.body)["meta"] as? [String: Any] ?? [:]
    let note =
        #"{"mode":"Sodium","recipient_signing_key":"\#(sk)","writer_signing_key":"\#(sk)","writer_encryption_key":"\#(pk)","encrypted_access_key":"x.y","type":"t","data":{"f":"a.b.c.d"},"plain":{},"signature":"s","max_views":-1,"expires":false}"#
    var noteRequest = makeRequest(method: .post, path: "/v2/storage/notes", headers: [:], body: Data(note.utf8))
    let now = Int64(Date().timeIntervalSince1970)
    noteRequest = authorized(noteRequest, tsv1(noteRequest, uid: clientID, timestamp: now, nonce: UUID().uuidString))
    let noted = await send(handler, noteRequest)
    require(noted.status == 201, "note write failed: \(noted.status)")
    let file =
        #"{"meta":{"writer_id":"\#(clientID)","user_id":"\#(clientID)","type":"f","file_meta":{"checksum":"4vxxTEcn7pOV8yTNLn8zHw==","compression":"raw","size":4}},"data":{}}"#
    let pending = await send(
        handler,
        makeRequest(
            method: .post, path: "/v1/storage/files",
            headers: [.authorization: "Bearer \(bearer)"], body: Data(file.utf8)))
    require(pending.status == 202, "pending file failed: \(pending.status)")
    let pendingJSON = setUpJSON(pending.body)
    let url = pendingJSON["file_url"] as? String ?? ""
    // Use the replayed nonce once so that every later use of it is a replay.
    var replay = makeRequest(method: .get, path: "/v1/storage/policy/outgoing", headers: [:], body: Data())
    replay = authorized(
        replay, tsv1(replay, uid: clientID, timestamp: now, nonce: "00000000-0000-4000-8000-0000000000aa"))
    require(await send(handler, replay).status == 200, "the first use of a nonce failed")
    return Fixture(
        handler: handler, clientID: clientID, apiKeyID: keyID, apiSecret: secret, token: bearer, expiredToken: expired,
        recordID: meta["record_id"] as? String ?? "", version: meta["version"] as? String ?? "",
        noteID: setUpJSON(noted.body)["note_id"] as? String ?? "", pendingID: pendingJSON["id"] as? String ?? "",
        uploadQuery: url.split(separator: "?", maxSplits: 1).last.map(String.init) ?? "")
}

private let fixture: Fixture = blocking {
    do { return try await setUp() } catch { fatalError("set-up failed: \(error)") }
}

/// Path templates; `{0}` and `{1}` are the two slots. `authenticated` templates answer nothing without credentials.
private let templates: [(path: String, authenticated: Bool)] = [
    ("/v1/auth/token", true), ("/v1/account/e3db/clients/register", false), ("/v1/account/backup/{0}/{1}", false),
    ("/v1/storage/clients/{0}", true), ("/v1/storage/access_keys/{me}/{me}/{0}/{1}", true),
    ("/v1/storage/access_keys/{0}/{me}/{me}/{1}", true), ("/v1/storage/policy/{me}/{me}/{0}/{1}", true),
    ("/v1/storage/policy/{me}/{me}/{0}", true), ("/v1/storage/policy/{0}", true), ("/v1/storage/records", true),
    ("/v1/storage/records/{0}", true), ("/v1/storage/records/safe/{0}/{1}", true), ("/v1/storage/files", true),
    ("/v1/storage/files/{0}", true), ("/v1/storage/blobs/{0}", false), ("/v1/storage/search", true),
    ("/v2/search", true), ("/v2/storage/notes", true), ("/v2/storage/notes/{0}", true), ("/healthz", false),
    ("/{0}/{1}", false), ("{0}", false),
]

private let methods: [HTTPRequest.Method] = [
    .get, .post, .put, .delete, .patch, .head, .options, HTTPRequest.Method("FUZZ") ?? .get,
]

private let contentTypes: [String?] = [
    nil, "application/json", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-16",
]

private func slot(_ choice: Int, fuzzed: String, _ f: Fixture) -> String {
    switch choice {
    case 1: f.clientID
    case 2: f.recordID
    case 3: f.noteID
    case 4: f.pendingID
    case 5: f.version
    case 6: "t"
    default: fuzzed
    }
}

private func replacing(_ body: Data, _ f: Fixture) -> Data {
    guard let text = String(data: body, encoding: .utf8), text.contains("@") else { return body }
    return Data(
        text.replacingOccurrences(of: "@me", with: f.clientID)
            .replacingOccurrences(of: "@sk", with: signingKey().publicKey.base64URLEncoded).utf8)
}

func fuzzServerRequests(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let start = unsafe start, count >= 5 else { return 0 }
    let bytes = unsafe Array(UnsafeRawBufferPointer(start: start, count: count))
    let f = fixture
    let template = templates[Int(bytes[0]) % templates.count]
    let method = methods[Int(bytes[1]) % methods.count]
    let auth = Int(bytes[2]) % 10
    var parts = bytes[5...].split(separator: 0, maxSplits: 4, omittingEmptySubsequences: false).map { Data($0) }
    while parts.count < 5 { parts.append(Data()) }
    func text(_ d: Data) -> String { String(decoding: d, as: UTF8.self) }
    let slot0 = slot(Int(bytes[3] & 7), fuzzed: text(parts[0]), f)
    let slot1 = slot(Int(bytes[3] >> 3 & 7), fuzzed: text(parts[1]), f)
    var path = template.path.replacingOccurrences(of: "{me}", with: f.clientID)
        .replacingOccurrences(of: "{0}", with: slot0).replacingOccurrences(of: "{1}", with: slot1)
    let query = bytes[4] & 0x40 != 0 ? f.uploadQuery : text(parts[2])
    if !query.isEmpty { path += "?" + query }
    let body = replacing(parts[4], f)
    var headers = HTTPFields()
    if let type = contentTypes[Int(bytes[4] & 7) % contentTypes.count] { headers[.contentType] = type }
    if bytes[4] & 0x80 != 0 { headers[.contentLength] = bytes[4] & 0x20 != 0 ? "99999999999" : String(body.count + 1) }
    if bytes[4] & 0x10 != 0 { headers[HTTPField.Name("Content-MD5")!] = text(parts[3]) }
    var request = makeRequest(method: method, path: path, headers: headers, body: body)
    let now = Int64(Date().timeIntervalSince1970)
    switch auth {
    case 1: request = authorized(request, "Bearer \(f.token)")
    case 2: request = authorized(request, "Bearer \(text(parts[3]))")
    case 3: request = authorized(request, tsv1(request, uid: f.clientID, timestamp: now, nonce: UUID().uuidString))
    case 4: request = authorized(request, tsv1(request, uid: "", timestamp: now, nonce: UUID().uuidString))
    case 5: request = authorized(request, text(parts[3]))
    case 6: request = authorized(request, "Basic " + Data("\(f.apiKeyID):\(f.apiSecret)".utf8).base64EncodedString())
    case 7: request = authorized(request, tsv1(request, uid: f.clientID, timestamp: now, nonce: f.replayedNonce))
    case 8:
        request = authorized(request, tsv1(request, uid: f.clientID, timestamp: now - 3600, nonce: UUID().uuidString))
    case 9: request = authorized(request, "Bearer \(f.expiredToken)")
    default: break
    }
    let sent = request
    let reply = blocking { await send(f.handler, sent) }
    require(reply.status < 500, "status \(reply.status) for \(method.rawValue) \(template.path)")
    if reply.status >= 400 {
        require(reply.contentType == "application/json", "a \(reply.status) without a JSON Content-Type")
        let object = try? JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
        require(
            object?["error"] is String,
            "a \(reply.status) body is not {\"error\": string}: \(text(reply.body).prefix(200))")
    }
    if template.authenticated, [0, 2, 7, 8, 9].contains(auth) {
        require(
            !(200..<300).contains(reply.status),
            "\(method.rawValue) \(template.path) succeeded with auth variant \(auth) (status \(reply.status))")
    }
    return 0
}
