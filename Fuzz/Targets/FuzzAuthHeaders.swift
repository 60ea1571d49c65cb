import E3DBAPI
// Fuzz target FuzzAuthHeaders: the server's one authentication routine (`E3DBService.identify`, reached through the public
// `E3DBRequestHandler`) against hostile `Authorization` headers, over a real SQLite database in a temporary directory.
//
// Set up once, through the handler: client A registered with a signing key (seed 0x41…), client B registered
// without one, client C registered with a key (seed 0x43…) and then disabled through the storage (`setClientEnabled`,
// then 1.5 s so that the bearer-token cache, which keeps an entry at most 1 s, has forgotten C's token); a record
// written by each, and bearer tokens for A and C (C's minted and used while C was enabled).
//
// Input: byte 0 the base header (A's bearer token; A's TSV1; TSV1 signed by a chosen key naming a chosen uid;
// anonymous TSV1; raw text; C's bearer token; the last TSV1 request that got a 2xx, sent again; `Bearer <text>`),
// byte 1 the key (A's, C's, one seeded from the input) and the uid (A, B, C, empty, A upper-cased, text, B upper-cased),
// byte 2 the target (A's, B's or C's record, or their client entry) and whether the signature covers the request sent,
// another record's path or another method, byte 3 the mutations (scheme case, spaces or tabs after the scheme, `;`
// after the scheme, leading and trailing whitespace, truncation, byte flips; for TSV1 bit 7 applies them before
// signing, so that the harness signs the mutated text), byte 4 their parameter (case pattern, counts), byte 5 the
// nonce (fresh UUID, the input's text, `x` repeated, one fixed nonce, `é` repeated), byte 6 the timestamp offset,
// byte 7 a nonce length. The rest is split on 0x00 into: text (raw header, bearer token or uid; `@ta`/`@tc` stand
// for A's/C's token, `@ka` for A's public key, `@ia`/`@ib`/`@ic` for the ids), nonce text, key seed, flips (pairs of
// position and XOR byte), query.
//
// Checks, on the header as the request holds it (HTTPFields trims and legalizes values), parsed here:
// - never a 5xx; every 4xx is application/json with an `{"error": string}` object;
// - a 2xx only when the header is A's bearer token (scheme in any case, separated by spaces, tabs or `;`, any
//   surrounding whitespace) or a six-part TSV1 header whose first five parts are exactly the text this harness
//   signed with A's private key (libFuzzer cannot forge Ed25519, so that decides "signed by A's key"), whose key
//   part is A's public key, whose uid is A's id (ASCII case-insensitively), whose signature part is that signature,
//   signed over the path, query and method sent, with a timestamp inside the 300 s window of the harness's clock and
//   a nonce of 1-64 bytes;
// - never a 2xx for a TSV1 header naming B or C (B registered no key, C is disabled) or for C's bearer token;
// - a (key, nonce) pair never gets a second 2xx before the window of the header that first succeeded with it has
//   passed (the server keeps a nonce that long; a later header reusing it is a new request, not a replay), and the
//   last accepted TSV1 request sent again never succeeds;
// - liveness, so that the checks above are not vacuous: A's unmutated bearer token (any scheme case, spaces) and
//   A's TSV1 header (any scheme case, fresh nonce, current timestamp, empty query) get a 200 for A's record.
import E3DBCanonicalJSON
import E3DBPrimitives
import E3DBServer
import Foundation
import HTTPTypes
import Hummingbird

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzAuthHeaders invariant violated: \(message())") }
}

private func key(seed: [UInt8]) -> Ed25519.PrivateKey {
    do { return try Ed25519.PrivateKey(seed: SecureBytes(copying: seed)) } catch { fatalError("\(error)") }
}

private let tsv1Scheme = "TSV1-ED25519-BLAKE2B"

/// The signature TSV1 puts after a header's first five parts (`prefix`), made here rather than by `TSV1`, so that
/// the harness can sign mutated text.
private func sign(prefix: String, path: String, query: String, method: String, with key: Ed25519.PrivateKey) -> Data {
    let toSign = "\(path); \(query); \(method); \(prefix)"
    do { return key.signature(for: try BLAKE2b.hash(data: Data(toSign.utf8), outputByteCount: 32)) } catch {
        fatalError("hashing failed: \(error)")
    }
}

private struct Client: Sendable {
    let id: String
    let key: Ed25519.PrivateKey?
    let token: String
    let recordID: String
}

private struct Fixture: Sendable {
    let handler: E3DBRequestHandler
    let a: Client, b: Client, c: Client
}

private let seedA = [UInt8](repeating: 0x41, count: 32)
private let seedC = [UInt8](repeating: 0x43, count: 32)

private func unixNow() -> Int64 { Int64(Date().timeIntervalSince1970) }

private func setUp() async throws -> Fixture {
    let server = try await makeInProcessServer("auth")
    let (storage, handler) = (server.storage, server.handler)

    func register(_ name: String, _ signing: Ed25519.PrivateKey?) async -> Client {
        let (id, token) = await registerClient(on: server, name: name, signingKey: signing)
        let record =
            #"{"meta":{"writer_id":"\#(id)","user_id":"\#(id)","type":"t","plain":{"k":"\#(name)"}},"data":{"f":"a.b.c.d"}}"#
        let written = await send(
            handler,
            makeRequest(
                method: .post, path: "/v1/storage/records",
                authorization: "Bearer \(token)", body: Data(record.utf8)))
        require(written.status == 201, "record of \(name) failed: \(written.status)")
        let recordID = (setUpJSON(written.body)["meta"] as? [String: Any])?["record_id"] as? String ?? ""
        require(canonical(id) == id && !recordID.isEmpty, "unexpected ids for \(name): \(id) \(recordID)")
        return Client(id: id, key: signing, token: token, recordID: recordID)
    }
    let a = await register("a", key(seed: seedA))
    let b = await register("b", nil)
    let c = await register("c", key(seed: seedC))
    // C works before it is disabled, both ways: the refusals later are the disabling's.
    let path = "/v1/storage/records/\(c.recordID)"
    let before = await send(handler, makeRequest(method: .get, path: path, authorization: "Bearer \(c.token)"))
    require(before.status == 200, "C's bearer token before disabling: \(before.status)")
    let signature =
        "\(tsv1Scheme); \(key(seed: seedC).publicKey.base64URLEncoded); \(unixNow()); \(UUID().uuidString); uid:\(c.id)"
    let signed =
        signature + "; "
        + Base64URL.encode(
            sign(
                prefix: signature, path: path, query: "", method: "GET",
                with: key(seed: seedC)))
    let beforeTSV1 = await send(handler, makeRequest(method: .get, path: path, authorization: signed))
    require(beforeTSV1.status == 200, "C's TSV1 before disabling: \(beforeTSV1.status)")
    guard let cID = ClientID(c.id) else { fatalError("C's id is not a UUID: \(c.id)") }
    let disabled = try await storage.setClientEnabled(id: cID, false)
    require(disabled, "disabling C failed")
    try await Task.sleep(for: .milliseconds(1500))
    return Fixture(handler: handler, a: a, b: b, c: c)
}

private let fixture: Fixture = blocking {
    do { return try await setUp() } catch { fatalError("set-up failed: \(error)") }
}

/// A UUID in lower case when `text` is one in any ASCII case (36 bytes, dashes at 8, 13, 18, 23), else nil.
private func canonical(_ text: some StringProtocol) -> String? {
    let bytes = Array(text.utf8)
    guard bytes.count == 36 else { return nil }
    var out: [UInt8] = []
    for (i, c) in bytes.enumerated() {
        if [8, 13, 18, 23].contains(i) {
            guard c == UInt8(ascii: "-") else { return nil }
            out.append(c)
        } else if (0x30...0x39).contains(c) || (0x61...0x66).contains(c) {
            out.append(c)
        } else if (0x41...0x46).contains(c) {
            out.append(c + 0x20)
        } else {
            return nil
        }
    }
    return String(decoding: out, as: UTF8.self)
}

private func isBlank(_ s: Unicode.Scalar) -> Bool { s == " " || s == "\t" }

/// The credentials of a `Bearer` header, parsed independently of the server: the scheme (any case) up to the first
/// space, tab or `;`, then any run of those, then the rest with surrounding whitespace removed. Nil for other schemes.
private func bearerCredentials(_ header: String) -> String? {
    let scalars = Array(header.unicodeScalars.drop(while: isBlank))
    let end = scalars.firstIndex { isBlank($0) || $0 == ";" } ?? scalars.count
    var scheme = String.UnicodeScalarView()
    scheme.append(contentsOf: scalars[..<end])
    guard String(scheme).lowercased() == "bearer" else { return nil }
    var rest = String.UnicodeScalarView()
    rest.append(contentsOf: scalars[end...].drop { isBlank($0) || $0 == ";" })
    return String(rest).trimmingCharacters(in: .whitespaces)
}

/// A TSV1 header this harness made: what it signed, with which key, over which request.
private struct Signed {
    let prefix: String
    let signature: Data
    let key: Ed25519.PrivateKey
    let path: String
    let query: String
    let method: String
}

/// Why a TSV1 header as sent is A's: nil when it is, else the reason it is not (parsed from the header itself).
private func tsv1NotA(
    _ header: String, signed: Signed?, sentPath: String, sentQuery: String, sentMethod: String,
    from t0: Int64, to t1: Int64, _ f: Fixture
) -> String? {
    let parts = header.components(separatedBy: "; ")
    guard parts.count == 6, parts[0].lowercased() == tsv1Scheme.lowercased() else { return "not six TSV1 parts" }
    guard let signed else { return "not signed by the harness" }
    guard parts[0..<5].joined(separator: "; ") == signed.prefix else { return "the sent parts are not the signed text" }
    guard (try? Base64URL.decodeLenient(parts[5])) == signed.signature else { return "not the harness's signature" }
    guard let aKey = f.a.key, signed.key.publicKey.rawRepresentation == aKey.publicKey.rawRepresentation else {
        return "signed by another key than A's"
    }
    guard (try? Base64URL.decodeLenient(parts[1])) == aKey.publicKey.rawRepresentation else {
        return "key part is not A's"
    }
    guard parts[4].utf8.starts(with: "uid:".utf8),
        canonical(String(decoding: parts[4].utf8.dropFirst(4), as: UTF8.self)) == f.a.id
    else {
        return "uid is not A's"
    }
    guard signed.path == sentPath, signed.query == TSV1.canonicalQuery(sentQuery), signed.method == sentMethod else {
        return "signed over another request"
    }
    guard let ts = Int64(parts[2]), ts >= t0 - 301, ts <= t1 + 301 else { return "timestamp outside the window" }
    guard (1...64).contains(parts[3].utf8.count) else { return "nonce not 1-64 bytes" }
    return nil
}

/// The uid a six-part TSV1 header names, as a lower-case UUID, when it is one.
private func tsv1Uid(_ header: String) -> String? {
    let parts = header.components(separatedBy: "; ")
    guard parts.count == 6, parts[4].utf8.starts(with: "uid:".utf8) else { return nil }
    return canonical(String(decoding: parts[4].utf8.dropFirst(4), as: UTF8.self).lowercased())
}

private final class State: @unchecked Sendable {
    /// (public key, nonce) pairs that got a 2xx, with the timestamp of the header that did.
    var accepted: [Data: Int64] = [:]
    /// The last TSV1 request that got a 2xx: method, path with query, header.
    var lastAccepted: (method: HTTPRequest.Method, path: String, header: String)?
}

private let state = State()

private func substituted(_ text: String, _ f: Fixture) -> String {
    guard text.contains("@") else { return text }
    return text.replacingOccurrences(of: "@ta", with: f.a.token).replacingOccurrences(of: "@tc", with: f.c.token)
        .replacingOccurrences(of: "@ka", with: f.a.key?.publicKey.base64URLEncoded ?? "")
        .replacingOccurrences(of: "@ia", with: f.a.id).replacingOccurrences(of: "@ib", with: f.b.id)
        .replacingOccurrences(of: "@ic", with: f.c.id)
}

/// Applies the mutations of `flags` (byte 3) with parameter `p` (byte 4) and `flips` to a header text.
private func mutate(_ text: String, flags: UInt8, p: UInt8, flips: [UInt8]) -> String {
    var s = text
    let schemeEnd = s.firstIndex { $0 == " " || $0 == ";" || $0 == "\t" } ?? s.endIndex
    if flags & 0x02 != 0 {
        let filler = String(repeating: p & 0x80 != 0 ? "\t" : " ", count: Int(p >> 4 & 3) + 1)
        s.insert(contentsOf: filler, at: schemeEnd)
    }
    if flags & 0x04 != 0 { s.insert(";", at: s.firstIndex { $0 == " " || $0 == ";" || $0 == "\t" } ?? s.endIndex) }
    if flags & 0x08 != 0 { s = (p & 1 == 0 ? " " : "\t") + s }
    if flags & 0x10 != 0 { s += p & 2 == 0 ? "  " : "\t" }
    var bytes = Array(s.utf8)
    if flags & 0x20 != 0, !bytes.isEmpty { bytes.removeLast(min(bytes.count, Int(p & 0x1f) + 1)) }
    if flags & 0x40 != 0, !bytes.isEmpty {
        var i = 0
        while i + 1 < flips.count {
            bytes[Int(flips[i]) % bytes.count] ^= flips[i + 1]
            i += 2
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// The scheme text with the case of letter i flipped when bit i % 8 of `p` is set.
private func cased(_ scheme: String, _ p: UInt8) -> String {
    String(
        scheme.enumerated().map { i, c in
            p >> (i % 8) & 1 == 0 ? c : (c.isUppercase ? Character(c.lowercased()) : Character(c.uppercased()))
        })
}

private let offsets: [Int64] = [0, 0, -1, 1, -299, 299, -300, 300, -301, 301, -302, 302, -3600, 3600]

func fuzzAuthHeaders(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let start = unsafe start, count >= 8 else { return 0 }
    let bytes = unsafe Array(UnsafeRawBufferPointer(start: start, count: count))
    let f = fixture
    var pieces = bytes[8...].split(separator: 0, maxSplits: 4, omittingEmptySubsequences: false).map { Array($0) }
    while pieces.count < 5 { pieces.append([]) }
    func text(_ b: [UInt8]) -> String { String(decoding: b, as: UTF8.self) }
    let base = Int(bytes[0] % 8)
    let flags = bytes[3]
    let p = bytes[4]
    let clients = [f.a, f.b, f.c]
    let target = clients[Int(bytes[2] & 3) % 3]
    let onClient = bytes[2] & 4 != 0
    var path = onClient ? "/v1/storage/clients/\(target.id)" : "/v1/storage/records/\(target.recordID)"
    let queryText = text(pieces[4])
    if !queryText.isEmpty { path += "?" + queryText }
    var method = HTTPRequest.Method.get
    let unsigned = makeRequest(method: .get, path: path)
    let sentPath = unsigned.uri.path
    let sentQuery = unsigned.uri.query ?? ""

    var header: String
    var signed: Signed?
    var liveness = false
    var replaying = false
    switch base {
    case 0, 5, 7:
        let credentials = base == 0 ? f.a.token : base == 5 ? f.c.token : substituted(text(pieces[0]), f)
        let scheme = flags & 1 != 0 ? cased("Bearer", p) : "Bearer"
        header = mutate("\(scheme) \(credentials)", flags: flags, p: p, flips: pieces[3])
        liveness = base == 0 && flags & 0x64 == 0
    case 4:
        header = mutate(substituted(text(pieces[0]), f), flags: flags, p: p, flips: pieces[3])
    case 6 where state.lastAccepted != nil:
        let last = state.lastAccepted!
        replaying = true
        method = last.method
        path = last.path
        header = last.header
    default:
        // TSV1: base 1 is A's own header; 2 a chosen key naming a chosen uid; 3 anonymous (chosen key).
        let keyChoice = base == 1 ? 0 : Int(bytes[1] & 3)
        let signer: Ed25519.PrivateKey =
            switch keyChoice {
            case 1: key(seed: seedC)
            case 2: key(seed: Array((pieces[2] + [UInt8](repeating: 0, count: 32)).prefix(32)))
            default: key(seed: seedA)
            }
        let uid: String =
            switch base == 1 ? 0 : base == 3 ? 3 : Int(bytes[1] >> 2 & 7) {
            case 0: f.a.id
            case 1: f.b.id
            case 2: f.c.id
            case 3: ""
            case 4: f.a.id.uppercased()
            case 5: substituted(text(pieces[0]), f)
            case 6: f.b.id.uppercased()
            default: f.c.id.uppercased()
            }
        let nonceMode = Int(bytes[5] % 5)
        let nonce: String =
            switch nonceMode {
            case 0: UUID().uuidString
            case 1: text(pieces[1])
            case 2: String(repeating: "x", count: Int(bytes[7] & 0x7f))
            case 3: "the-one-fixed-nonce"
            default: String(repeating: "é", count: Int(bytes[7] & 0x3f))
            }
        let now = unixNow()
        let offsetChoice = Int(bytes[6])
        let timestamp: Int64 =
            switch offsetChoice {
            case 0..<offsets.count * 8: now + offsets[offsetChoice % offsets.count]
            case 240: Int64.min
            case 241: Int64.max
            case 242: 0
            case 243: -now
            default: now + Int64(Int8(bitPattern: bytes[6])) * 10
            }
        let scheme = flags & 1 != 0 ? cased(tsv1Scheme, p) : tsv1Scheme
        var prefix = "\(scheme); \(signer.publicKey.base64URLEncoded); \(timestamp); \(nonce); uid:\(uid)"
        let preSign = flags & 0x80 != 0
        if preSign { prefix = mutate(prefix, flags: flags & 0x7e, p: p, flips: pieces[3]) }
        var signedPath = sentPath
        var signedMethod = "GET"
        switch bytes[2] >> 3 & 3 {
        case 1:
            signedPath = sentPath.replacingOccurrences(
                of: target.recordID,
                with: f.a.recordID == target.recordID
                    ? f.b.recordID : f.a.recordID
            )
            .replacingOccurrences(of: target.id, with: f.a.id == target.id ? f.b.id : f.a.id)
        case 2: signedMethod = "POST"
        default: break
        }
        let signature = sign(
            prefix: prefix, path: signedPath, query: TSV1.canonicalQuery(sentQuery),
            method: signedMethod, with: signer)
        signed = Signed(
            prefix: prefix, signature: signature, key: signer, path: signedPath,
            query: TSV1.canonicalQuery(sentQuery), method: signedMethod)
        header = prefix + "; " + Base64URL.encode(signature)
        if !preSign { header = mutate(header, flags: flags & 0x7e, p: p, flips: pieces[3]) }
        liveness =
            base == 1 && flags & 0x7e == 0 && nonceMode == 0 && offsetChoice % offsets.count < 2
            && offsetChoice < offsets.count * 8 && bytes[2] >> 3 & 3 == 0
    }
    liveness = liveness && target.id == f.a.id && !onClient && queryText.isEmpty

    let request = makeRequest(method: method, path: path, authorization: header)
    // What is sent: HTTPFields trims and legalizes the value; an empty one may be dropped.
    let sent = request.headers[.authorization] ?? ""
    let t0 = unixNow()
    let reply = blocking { await send(f.handler, request) }
    let t1 = unixNow()
    let describe = "header \(sent.debugDescription.prefix(300)) on \(method.rawValue) \(path.prefix(200))"

    require(reply.status < 500, "status \(reply.status) for \(describe)")
    if reply.status >= 400 {
        require(reply.contentType == "application/json", "a \(reply.status) without a JSON Content-Type")
        let object = try? JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
        require(
            object?["error"] is String,
            "a \(reply.status) body is not {\"error\": string}: \(text(Array(reply.body)).prefix(200))")
    }
    let success = (200..<300).contains(reply.status)
    if liveness {
        require(reply.status == 200, "A's own valid header got \(reply.status) for A's record: \(describe)")
    }
    guard success else { return 0 }
    if let uid = tsv1Uid(sent) {
        require(
            uid != f.b.id, "a TSV1 header naming B (registered without a signing key) got \(reply.status): \(describe)")
        require(uid != f.c.id, "a TSV1 header naming C (disabled) got \(reply.status): \(describe)")
    }
    require(bearerCredentials(sent) != f.c.token, "C's bearer token (C disabled) got \(reply.status): \(describe)")
    if bearerCredentials(sent) == f.a.token { return 0 }
    let sentURI = makeRequest(method: method, path: path).uri
    let why = tsv1NotA(
        sent, signed: replaying ? nil : signed, sentPath: sentURI.path, sentQuery: sentURI.query ?? "",
        sentMethod: method.rawValue, from: t0, to: t1, f)
    if replaying {
        fatalError("FuzzAuthHeaders invariant violated: a replayed TSV1 request got \(reply.status) again: \(describe)")
    }
    require(
        why == nil,
        "a 2xx (\(reply.status)) for a header that is neither A's bearer token nor A's TSV1 (\(why ?? "")): \(describe)"
    )
    // A TSV1 header of A's: its (key, nonce) may succeed once while the first success's window lasts. The server
    // keeps a nonce until (timestamp + window + 1) s and refuses it until then; after that only a header with a later
    // timestamp can use it again (the first one is expired), which is not a replay.
    let parts = sent.components(separatedBy: "; ")
    let pair = Hashes.sha256(((try? Base64URL.decodeLenient(parts[1])) ?? Data()) + Data([0]) + Data(parts[3].utf8))
    let timestamp = Int64(parts[2]) ?? 0
    if let first = state.accepted[pair] {
        require(
            t1 > first + 301,
            "a (key, nonce) pair got a second 2xx inside the window of the first (timestamp \(first), now \(t1)): \(describe)"
        )
    }
    state.accepted[pair] = timestamp
    state.lastAccepted = (method, path, header)
    return 0
}
