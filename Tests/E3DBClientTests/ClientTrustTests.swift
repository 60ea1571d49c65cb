import E3DBAPI
import E3DBAsyncHTTPClient
import E3DBDocuments
import E3DBKit
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization
import Testing

@testable import E3DBClient

/// A malicious server for the client: an HTTP/1.1 forwarder on 127.0.0.1 in front of a real server that passes
/// every response through ``rewrite`` before answering. JSON responses name the proxy, not the server, in URLs
/// (capability `file_url`s), so that the client sees one origin.
final class RewritingProxy: Sendable {
    /// A response on its way back through the proxy: its head and its body.
    struct Response {
        var head: HTTPResponse
        var body: Data
    }

    /// Rewrites one response: the request's method and target (path and query), the response to change.
    typealias Rewrite = @Sendable (_ method: String, _ target: String, _ response: inout Response) -> Void

    let url: String
    let upstream: String
    private let rewriter = Mutex<Rewrite?>(nil)
    private let served = Mutex(0)
    private let task: Task<Void, any Error>

    /// Starts forwarding to `upstream` (the real server's base URL).
    init(upstream: String) async throws {
        self.upstream = upstream
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let forward = Forwarder(upstream: upstream)
        let responder = CallbackResponder<BasicRequestContext> { request, _ in try await forward.respond(request) }
        var logger = Logger(label: "e3dbkit.tests.proxy")
        logger.logLevel = .critical
        let app = Application(
            responder: responder, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: logger)
        task = Task { try await app.run() }
        var port = 0
        for await p in ports { port = p }
        guard port > 0 else { throw ServerProcess.ServerFailure(description: "the proxy did not start") }
        url = "http://127.0.0.1:\(port)"
        forward.proxy.withLock { $0 = self }
    }

    /// Sets (or with nil, clears) the rewrite applied to the responses from now on.
    func rewrite(_ body: Rewrite?) { rewriter.withLock { $0 = body } }

    func stop() { task.cancel() }

    /// How many requests the proxy has answered.
    var requestsServed: Int { served.withLock { $0 } }

    fileprivate func apply(_ method: String, _ target: String, _ response: inout Response) {
        served.withLock { $0 += 1 }
        var body = response.body
        if response.head.headerFields[.contentType]?.hasPrefix("application/json") == true {
            body = Data(String(decoding: body, as: UTF8.self).replacingOccurrences(of: upstream, with: url).utf8)
        }
        response.body = body
        rewriter.withLock { $0 }?(method, target, &response)
    }

    /// Forwards one request with the client's transport and answers with the (rewritten) response.
    private final class Forwarder: Sendable {
        let upstream: String
        let transport = AsyncHTTPClientTransport()
        let proxy = Mutex<RewritingProxy?>(nil)

        init(upstream: String) { self.upstream = upstream }

        func respond(_ incoming: Request) async throws -> Hummingbird.Response {
            var request = incoming
            let body = try await request.collectBody(upTo: 256 << 20)
            let target = request.head.path ?? "/"
            // Host is the authority.
            let skipped: Set<HTTPField.Name> = [.contentLength, .connection, .transferEncoding]
            let (answer, head) = try await transport.send(
                try HTTPRequest(
                    method: request.method, checkedURL: upstream + target,
                    headerFields: HTTPFields(request.headers.filter { !skipped.contains($0.name) })),
                body: body.readableBytes > 0 ? Data(body.readableBytesView) : nil,
                timeout: .seconds(60), maxResponseSize: 256 << 20)
            var response = RewritingProxy.Response(head: head, body: answer)
            proxy.withLock { $0 }?.apply(request.method.rawValue, target, &response)
            return Hummingbird.Response(
                status: response.head.status,
                headers: HTTPFields(response.head.headerFields.filter { !skipped.contains($0.name) }),
                body: .init(byteBuffer: ByteBuffer(bytes: response.body)))
        }
    }

    /// A JSON object body changed by `edit` (unchanged when it is not one).
    static func editJSON(_ response: inout Response, _ edit: (inout [String: Any]) -> Void) {
        guard var object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] else { return }
        edit(&object)
        response.body = (try? JSONSerialization.data(withJSONObject: object)) ?? response.body
    }

    /// Each result of a search response changed by `edit`.
    static func editResults(_ response: inout Response, _ edit: @escaping (inout [String: Any]) -> Void) {
        editJSON(&response) { object in
            object["results"] = (object["results"] as? [[String: Any]])?.map { result in
                var result = result
                edit(&result)
                return result
            }
        }
    }
}

/// The client against a server that lies: records without their signature, another record for an id, other public
/// keys for a client, paging that does not advance, file bodies elsewhere; and shared records verified against the
/// writer's own key (review findings M3, M4, M5, L2 and the informational query and readFile notes).
@Suite("E3DBClient trusts no more of the server than it must")
struct ClientTrustTests {
    /// A server, a proxy in front of it, and clients registered through the proxy.
    struct Setup {
        let server: ServerProcess
        let proxy: RewritingProxy

        static func start() async throws -> Setup {
            let server = try await ServerProcess.start()
            do { return Setup(server: server, proxy: try await RewritingProxy(upstream: server.url)) } catch {
                server.stop()
                throw error
            }
        }

        func stop() {
            proxy.stop()
            server.stop()
        }

        func register(_ name: String, transport: ClientTransport = .asyncHTTPClient) async throws -> ClientIdentity {
            try await E3DBClient.register(
                token: server.token, name: name, apiURL: proxy.url, transport: transport.make())
        }

        func client(
            _ identity: ClientIdentity, verification: RecordVerification? = nil,
            knownKeys: KnownKeys = KnownKeys(), fileOrigins: Set<String> = [],
            transport: ClientTransport = .asyncHTTPClient
        ) throws -> E3DBClient {
            try E3DBClient(
                identity: identity, transport: transport.make(),
                verification: verification ?? RecordVerification(policy: .required), knownKeys: knownKeys,
                fileOrigins: fileOrigins)
        }
    }

    static func code(_ body: () async throws -> Void) async -> E3DBError? {
        do { try await body() } catch let error as E3DBError { return error } catch { Issue.record("\(error)") }
        return nil
    }

    static func isRecordRead(_ method: String, _ target: String, _ id: UUID) -> Bool {
        method == "GET" && target.hasPrefix("/v1/storage/records/" + id.uuidString.lowercased())
    }

    @Test("M3: a record whose rec_sig the server removed (and whose plain it changed) is refused by default")
    func strippedSignature() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let writer = try s.client(try await s.register("writer"))
        let reader = try s.client(try await s.register("reader"))
        let record = try await writer.write(type: "med", data: ["ssn": "123"], plain: ["owner": "writer"])
        try await writer.share(type: "med", with: reader.clientID)
        let id = try #require(record.id)
        #expect(try await reader.read(id).signatureStatus == .verified)

        s.proxy.rewrite { method, target, response in
            guard ClientTrustTests.isRecordRead(method, target, id) || target.hasPrefix("/v1/storage/search") else {
                return
            }
            func strip(_ object: inout [String: Any]) {
                object["rec_sig"] = nil
                if var meta = object["meta"] as? [String: Any] {
                    meta["plain"] = ["owner": "mallory"]
                    object["meta"] = meta
                }
            }
            RewritingProxy.editJSON(&response, strip)
            RewritingProxy.editResults(&response, strip)
        }
        // The writer's own record and a record of a writer that signs: both refused, by read and by query.
        for client in [writer, reader] {
            #expect(await Self.code { _ = try await client.read(id) }?.code == .missingSignature)
            let query = RecordQuery(types: ["med"], writers: [writer.clientID])
            #expect(await Self.code { for try await _ in client.query(query) {} }?.code == .missingSignature)
        }
        // Only an explicit policy accepts the unsigned record, and says so.
        let lenient = try s.client(reader.identity, verification: RecordVerification(policy: .verifyIfPresent))
        let forged = try await lenient.read(id)
        #expect(forged.signatureStatus == .absent && forged.meta.plain == ["owner": "mallory"])
        // A changed plain with rec_sig kept still fails verification.
        s.proxy.rewrite { method, target, response in
            guard ClientTrustTests.isRecordRead(method, target, id) else { return }
            RewritingProxy.editJSON(&response) { object in
                var meta = object["meta"] as? [String: Any] ?? [:]
                meta["plain"] = ["owner": "mallory"]
                object["meta"] = meta
            }
        }
        #expect(await Self.code { _ = try await lenient.read(id) }?.code == .invalidSignature)
    }

    @Test("M4: a signed record shared on the writer's behalf by an authorizer verifies on the reader's first read")
    func authorizerSharedRecordVerifies() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let writer = try s.client(try await s.register("writer"))
        let authorizer = try s.client(try await s.register("authorizer"))
        let reader = try s.client(try await s.register("reader"))
        let record = try await writer.write(type: "med2", data: ["dx": "flu"])
        try await writer.addAuthorizer(authorizer.clientID, type: "med2")
        try await authorizer.share(onBehalfOf: writer.clientID, type: "med2", with: reader.clientID)
        let read = try await reader.read(try #require(record.id))
        #expect(read.data == ["dx": "flu"] && read.signatureStatus == .verified)
    }

    @Test("L2: a read answered with another record of the same writer and type is refused")
    func swappedRecord() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let alice = try s.client(try await s.register("alice"))
        let x = try #require(try await alice.write(type: "dx", data: ["diagnosis": "flu"]).id)
        let y = try #require(try await alice.write(type: "dx", data: ["diagnosis": "cancer"]).id)
        let other = try #require(try await alice.write(type: "note", data: ["diagnosis": "none"]).id)
        let (yBody, _) = try await alice.send(
            API.Endpoints.readRecord, [y.uuidString.lowercased()],
            operation: "test read"
        )
        // The proxy answers x with y, a record of the same writer and type that verifies.
        s.proxy.rewrite { method, target, response in
            if ClientTrustTests.isRecordRead(method, target, x) { response.body = yBody }
        }
        let swapped = await Self.code { _ = try await alice.read(x) }
        #expect(
            swapped?.code == .invalidResponse && swapped?.context.field == "record_id"
                && swapped?.context.item == x.uuidString.lowercased())
        // Where the caller knows the writer and type, those are checked too.
        s.proxy.rewrite(nil)
        #expect(try await alice.read(x, writer: alice.clientID, type: "dx").data == ["diagnosis": "flu"])
        let wrongType = await Self.code { _ = try await alice.read(other, type: "dx") }
        #expect(wrongType?.code == .invalidResponse && wrongType?.context.field == "type")
        let wrongWriter = await Self.code { _ = try await alice.read(x, writer: UUID()) }
        #expect(wrongWriter?.code == .invalidResponse && wrongWriter?.context.field == "writer_id")
    }

    @Test("M5: a reader's public key the server substitutes is refused against the pinned one, with both fingerprints")
    func substitutedReaderKey() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: dir) }
        let pins = dir.appendingPathComponent("w.known-keys.json").path
        let writerIdentity = try await s.register("writer")
        let reader = try s.client(try await s.register("reader"))
        let mallory = try s.client(try await s.register("mallory"))

        let writer = try s.client(writerIdentity, knownKeys: try KnownKeys(path: pins))
        try await writer.share(type: "secret", with: reader.clientID)
        let readerPrint = KnownKeys.fingerprint(reader.identity.publicKey.rawRepresentation)
        #expect(FileManager.default.fileExists(atPath: pins))

        let readerID = reader.clientID.uuidString.lowercased()
        let malloryKey = mallory.identity.publicKey.base64URLEncoded
        s.proxy.rewrite { method, target, response in
            guard method == "GET", target == "/v1/storage/clients/" + readerID else { return }
            RewritingProxy.editJSON(&response) { $0["public_key"] = ["curve25519": malloryKey] }
        }
        // A new client object (no cached lookup) with the same pins, as the next CLI run would have.
        let again = try s.client(writerIdentity, knownKeys: try KnownKeys(path: pins))
        let refused = await Self.code { try await again.share(type: "secret2", with: reader.clientID) }
        let malloryPrint = KnownKeys.fingerprint(mallory.identity.publicKey.rawRepresentation)
        #expect(refused?.code == .keyChanged && refused?.context.item == readerID)
        #expect(refused?.message.contains(readerPrint) == true && refused?.message.contains(malloryPrint) == true)
        // Nothing was stored for the reader under the substituted key.
        #expect(try await reader.eakInfo(writer: writer.clientID, user: writer.clientID, type: "secret2") == nil)

        // Accepting another fingerprint than the new key's (the old one, say) still refuses the change.
        let wrong = try s.client(
            writerIdentity,
            knownKeys: try KnownKeys(path: pins, acceptingChangesOf: [reader.clientID: [readerPrint]]))
        #expect(await Self.code { try await wrong.share(type: "secret2", with: reader.clientID) }?.code == .keyChanged)
        // Told to accept the new key's fingerprint, the client pins it (in the file, for the next run too).
        let accepting = try s.client(
            writerIdentity,
            knownKeys: try KnownKeys(
                path: pins, acceptingChangesOf: [reader.clientID: [malloryPrint.uppercased()]]))
        try await accepting.share(type: "secret2", with: reader.clientID)
        #expect(try KnownKeys(path: pins).keys(of: reader.clientID)?.publicKey == malloryKey)

        // A substituted signing key fails a read of that writer's records the same way.
        s.proxy.rewrite(nil)
        let signer = try s.client(try await s.register("signer"))
        let signed = try #require(try await signer.write(type: "t", data: ["a": "b"]).id)
        try await signer.share(type: "t", with: reader.clientID)
        let readerPins = KnownKeys()
        #expect(try await s.client(reader.identity, knownKeys: readerPins).read(signed).signatureStatus == .verified)
        let signerID = signer.clientID.uuidString.lowercased()
        let forgedKey = mallory.identity.publicSigningKey?.base64URLEncoded ?? ""
        s.proxy.rewrite { method, target, response in
            guard method == "GET", target == "/v1/storage/clients/" + signerID else { return }
            RewritingProxy.editJSON(&response) { $0["signing_key"] = ["ed25519": forgedKey] }
        }
        let changed = await Self.code { _ = try await s.client(reader.identity, knownKeys: readerPins).read(signed) }
        #expect(changed?.code == .keyChanged && changed?.context.field == "signing_key")
    }

    @Test("M5: two KnownKeys on one file (two CLI runs) keep each other's pins and refuse a change the other pinned")
    func knownKeysAcrossInstances() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("a.known-keys.json").path
        func keys() -> KnownKeys.Keys {
            KnownKeys.Keys(publicKey: Base64URL.encode(Array(UUID().uuidString.utf8.prefix(32))), signingKey: nil)
        }
        // Both read the (missing) file before either pins.
        let first = try KnownKeys(path: path)
        let second = try KnownKeys(path: path)
        let (a, b) = (UUID(), UUID())
        let (aKeys, bKeys) = (keys(), keys())
        try await first.check(aKeys, for: a)
        try await second.check(bKeys, for: b)
        // second wrote the file without losing first's pin,
        #expect(try KnownKeys(path: path).keys(of: a) == aKeys && KnownKeys(path: path).keys(of: b) == bKeys)
        // and refuses another key for a, which only first pinned, as a change (not a first sight).
        let changed = await Self.code { try await second.check(keys(), for: a) }
        #expect(changed?.code == .keyChanged && changed?.context.item == a.uuidString.lowercased())
        #expect(try KnownKeys(path: path).keys(of: a) == aKeys)
        // Many pins at once from both: none lost.
        let ids = (0..<24).map { _ in (UUID(), keys()) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, (id, k)) in ids.enumerated() {
                group.addTask { try await (i % 2 == 0 ? first : second).check(k, for: id) }
            }
            try await group.waitForAll()
        }
        let final = try KnownKeys(path: path)
        #expect(ids.allSatisfy { final.keys(of: $0.0) == $0.1 })
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // No temporary files are left beside it.
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
                == ["a.known-keys.json", "a.known-keys.json.lock"])
    }

    /// A new directory for known-keys files (mode 0700), removed by the caller.
    static func keysDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        return dir
    }

    static let onePin = KnownKeys.Keys(publicKey: Base64URL.encode(Array(repeating: 1, count: 32)), signingKey: nil)

    @Test("L5: a known-keys file (or its directory) that group or others may write is refused, naming the path")
    func knownKeysModes() async throws {
        let dir = try Self.keysDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("k.known-keys.json").path
        try await KnownKeys(path: path).check(Self.onePin, for: UUID())
        #expect(try KnownKeys(path: path).keys(of: UUID()) == nil, "a 0600 file in a 0700 directory is read")
        for mode in [0o620, 0o602, 0o666] {
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
            let refused = await Self.code { _ = try KnownKeys(path: path) }
            #expect(refused?.code.rawValue == "untrustedKnownKeys" && refused?.context.item == path, "\(mode)")
            #expect(refused?.message.contains(path) == true, "\(refused?.message ?? "")")
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        // The directory: group-writable is refused; world-writable only with the sticky bit (as /tmp).
        try FileManager.default.setAttributes([.posixPermissions: 0o770], ofItemAtPath: dir.path)
        let inGroupDirectory = await Self.code { _ = try KnownKeys(path: path) }
        #expect(inGroupDirectory?.code.rawValue == "untrustedKnownKeys" && inGroupDirectory?.context.item == dir.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o1777], ofItemAtPath: dir.path)
        _ = try KnownKeys(path: path)
        // A pin into a file that is not there yet checks the directory too.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: dir.path)
        let fresh = dir.appendingPathComponent("new.known-keys.json").path
        let pinning = await Self.code { try await KnownKeys(path: fresh).check(Self.onePin, for: UUID()) }
        #expect(pinning?.code.rawValue == "untrustedKnownKeys", "\(String(describing: pinning))")
        #expect(!FileManager.default.fileExists(atPath: fresh))
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dir.path)
        if getuid() == 0 {  // another owner (only root can give a file away)
            #expect(chown(path, 65534, 65534) == 0)
            let foreign = await Self.code { _ = try KnownKeys(path: path) }
            #expect(foreign?.code.rawValue == "untrustedKnownKeys" && foreign?.message.contains("owned") == true)
        }
    }

    @Test("L5: a symbolic link in place of the lock file is refused; nothing is created where it points")
    func knownKeysLockSymlink() async throws {
        let dir = try Self.keysDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("k.known-keys.json").path
        let target = dir.appendingPathComponent("chosen-by-someone-else").path
        try FileManager.default.createSymbolicLink(atPath: path + ".lock", withDestinationPath: target)
        let refused = await Self.code { try await KnownKeys(path: path).check(Self.onePin, for: UUID()) }
        #expect(refused?.code.rawValue == "untrustedKnownKeys" && refused?.context.item == path + ".lock")
        #expect(refused?.message.contains("symbolic link") == true, "\(refused?.message ?? "")")
        #expect(!FileManager.default.fileExists(atPath: target))
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("the known-keys file's bytes: one line, member names sorted, / not escaped, a missing signing key null")
    func knownKeysFileBytes() async throws {
        let dir = try Self.keysDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("k.known-keys.json").path
        let keys = try KnownKeys(path: path)
        let second = try #require(UUID(uuidString: "00000000-0000-0000-0000-00000000000B"))
        let first = try #require(UUID(uuidString: "00000000-0000-0000-0000-00000000000A"))
        let signed = KnownKeys.Keys(publicKey: "p/+", signingKey: "s/+")
        try await keys.check(signed, for: second)
        try await keys.check(Self.onePin, for: first)
        let written = try String(contentsOfFile: path, encoding: .utf8)
        #expect(
            written
                == #"{"clients":{"00000000-0000-0000-0000-00000000000a":{"public_key":"\#(Self.onePin.publicKey)","#
                + #""signing_key":null},"00000000-0000-0000-0000-00000000000b":{"public_key":"p/+","signing_key":"s/+"}},"#
                + #""version":1}"#)
    }

    @Test("a note whose field names are equal as Unicode text (another SDK's) is read with both fields")
    func noteWithTwinFieldNames() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let (writer, reader) = (NoteKeyPairs.generate(), NoteKeyPairs.generate())
        let written = try await E3DBClient.writeAnonymousNote(
            ["a": "1"], recipientEncryptionKey: reader.publicKey, recipientSigningKey: reader.publicSigningKey,
            writer: writer, apiURL: s.proxy.url, transport: ClientTransport.asyncHTTPClient.make())
        // What Python writes for {"é": "1", "e\u{301}": "2"}, served in place of the stored note.
        let twins: RecordData = ["\u{e9}": "1", "e\u{301}": "2"]
        let crafted = try EncryptedNote.encrypt(
            data: twins, recipientEncryptionKey: reader.publicKey, recipientSigningKey: reader.publicSigningKey,
            writerBoxKey: writer.boxKey, writerSigningKey: writer.signingKey
        ).jsonData()
        s.proxy.rewrite { method, target, response in
            if method == "GET", target.hasPrefix("/v2/storage/notes") { response.body = crafted }
        }
        let read = try await E3DBClient.readAnonymousNote(
            id: UUID(uuidString: written.noteID ?? ""), reader: reader, apiURL: s.proxy.url,
            transport: ClientTransport.asyncHTTPClient.make())
        #expect(read.data == twins && read.data.count == 2)
    }

    @Test("a known-keys file with a repeated name (two entries for one client) is refused, not read as the last")
    func knownKeysRepeatedName() async throws {
        let dir = try Self.keysDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("k.known-keys.json").path
        let id = "00000000-0000-0000-0000-00000000000a"
        let body =
            #"{"clients":{"\#(id)":{"public_key":"A","signing_key":null},"\#(id)":{"public_key":"B","#
            + #""signing_key":null}},"version":1}"#
        #expect(
            FileManager.default.createFile(
                atPath: path, contents: Data(body.utf8), attributes: [.posixPermissions: 0o600]))
        let refused = await Self.code { _ = try KnownKeys(path: path) }
        #expect(refused?.code == .invalidKnownKeys, "\(String(describing: refused))")
    }

    @Test("L5: a known-keys file larger than 16 MiB is refused before it is read")
    func knownKeysSize() async throws {
        let dir = try Self.keysDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("k.known-keys.json").path
        // Valid JSON, padded with spaces past the bound.
        var body = Data(#"{"version":1,"clients":{}"#.utf8)
        body.append(Data(repeating: 0x20, count: 16 << 20))
        body.append(Data("}".utf8))
        #expect(FileManager.default.createFile(atPath: path, contents: body, attributes: [.posixPermissions: 0o600]))
        let refused = await Self.code { _ = try KnownKeys(path: path) }
        #expect(refused?.code == .invalidKnownKeys && refused?.message.contains("16 MiB") == true)
        // Grown past the bound after it was read: the pin refuses it too, and leaves it as it is.
        let small = dir.appendingPathComponent("small.known-keys.json").path
        let keys = try KnownKeys(path: small)
        try FileManager.default.moveItem(atPath: path, toPath: small)
        let pinning = await Self.code { try await keys.check(Self.onePin, for: UUID()) }
        #expect(pinning?.code == .invalidKnownKeys, "\(String(describing: pinning))")
        #expect(try FileManager.default.attributesOfItem(atPath: small)[.size] as? Int == body.count)
    }

    @Test(
        "query: a full page whose last_index does not advance, and results without the record_data asked for, are refused"
    )
    func queryPaging() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let alice = try s.client(try await s.register("alice"))
        for i in 0..<3 { _ = try await alice.write(type: "item", data: ["n": "\(i)"]) }
        s.proxy.rewrite { method, target, response in
            guard method == "POST", target.hasPrefix("/v1/storage/search") else { return }
            RewritingProxy.editJSON(&response) { $0["last_index"] = 0 }
        }
        var seen = 0
        let stuck = await Self.code {
            for try await _ in alice.query(RecordQuery(types: ["item"], pageSize: 2)) {
                seen += 1
                if seen > 10 { break }
            }
        }
        #expect(stuck?.code == .invalidResponse && stuck?.context.field == "last_index" && seen == 0)

        s.proxy.rewrite { method, target, response in
            guard method == "POST", target.hasPrefix("/v1/storage/search") else { return }
            RewritingProxy.editResults(&response) { $0["record_data"] = nil }
        }
        let missing = await Self.code { for try await _ in alice.query(RecordQuery(types: ["item"])) {} }
        #expect(missing?.code == .invalidResponse && missing?.context.field == "record_data")
        // Metadata only: nothing was asked for, nothing is missing.
        var metadata = 0
        for try await _ in alice.query(RecordQuery(types: ["item"], includeData: false)) { metadata += 1 }
        #expect(metadata == 3)
        // A result outside the query's filters is refused too.
        s.proxy.rewrite { method, target, response in
            guard method == "POST", target.hasPrefix("/v1/storage/search") else { return }
            RewritingProxy.editResults(&response) { result in
                var meta = result["meta"] as? [String: Any] ?? [:]
                meta["type"] = "other"
                result["meta"] = meta
            }
        }
        let foreign = await Self.code { for try await _ in alice.query(RecordQuery(types: ["item"])) {} }
        #expect(foreign?.code == .invalidResponse && foreign?.context.field == "type")
    }

    @Test(
        "a redirect is not followed: record reads and file bodies answered with 302 to another host fail typed",
        arguments: ClientTransport.allCases)
    func redirectsAreNotFollowed(transport: ClientTransport) async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        // Another host (here another port) that would serve everything, and records whether it was contacted.
        let elsewhere = try await RewritingProxy(upstream: s.server.url)
        defer { elsewhere.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-redirect-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: dir) }
        let plain = dir.appendingPathComponent("plain.bin")
        try Data(repeating: 1, count: 1000).write(to: plain)
        let alice = try s.client(try await s.register("alice", transport: transport), transport: transport)
        let record = try #require(try await alice.write(type: "r", data: ["a": "b"]).id)
        let file = try #require(try await alice.writeFile(type: "f", path: plain.path).id)

        let target = elsewhere.url
        s.proxy.rewrite { method, path, response in
            // A record read, and a file body (its file_url is on the API's origin).
            guard
                ClientTrustTests.isRecordRead(method, path, record)
                    || (method == "GET" && path.hasPrefix("/v1/storage/blobs/"))
            else { return }
            response = RewritingProxy.Response(
                head: HTTPResponse(status: .found, headerFields: [.location: target + path, .contentLength: "0"]),
                body: Data())
        }
        let read = await Self.code { _ = try await alice.read(record) }
        #expect(read?.code == .invalidResponse && read?.context.actual == 302, "\(String(describing: read))")
        let out = dir.appendingPathComponent("out.bin").path
        let body = await Self.code { _ = try await alice.readFile(file, to: out) }
        #expect(body?.code == .invalidResponse && body?.context.actual == 302, "\(String(describing: body))")
        #expect(elsewhere.requestsServed == 0 && !FileManager.default.fileExists(atPath: out))
    }

    @Test("read with selected fields verifies the whole record: a field the server swapped in is refused")
    func selectedFieldsAreVerified() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let alice = try s.client(try await s.register("alice"))
        let x = try #require(try await alice.write(type: "p", data: ["ssn": "111", "name": "x"]).id)
        let y = try #require(try await alice.write(type: "p", data: ["ssn": "999", "name": "y"]).id)
        let selected = try await alice.read(x, fields: ["ssn"])
        #expect(selected.data == ["ssn": "111"] && selected.signatureStatus == .verified)
        // The server answers x with y's ssn (same writer, type and access key: it decrypts).
        let (yBody, _) = try await alice.send(
            API.Endpoints.readRecord, [y.uuidString.lowercased()],
            operation: "test read"
        )
        let yObject = try #require(try JSONSerialization.jsonObject(with: yBody) as? [String: Any])
        let ySSN = try #require((yObject["data"] as? [String: Any])?["ssn"] as? String)
        s.proxy.rewrite { method, target, response in
            guard ClientTrustTests.isRecordRead(method, target, x) else { return }
            RewritingProxy.editJSON(&response) { object in
                var data = object["data"] as? [String: Any] ?? [:]
                data["ssn"] = ySSN
                object["data"] = data
            }
        }
        #expect(await Self.code { _ = try await alice.read(x, fields: ["ssn"]) }?.code == .invalidSignature)
        #expect(await Self.code { _ = try await alice.read(x) }?.code == .invalidSignature)
    }

    @Test("readFile fetches a body only from the API's origin unless another is allowed")
    func foreignFileURL() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-origin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: dir) }
        let plain = dir.appendingPathComponent("plain.bin")
        try Data(repeating: 7, count: 100_000).write(to: plain)
        let identity = try await s.register("alice")
        let alice = try s.client(identity)
        let file = try #require(try await alice.writeFile(type: "doc", path: plain.path).id)
        #expect(try await alice.readFile(file, to: dir.appendingPathComponent("ok.bin").path).meta.recordID != nil)

        // The server names another origin (here the real server's own port, which would serve the body).
        let (proxyURL, serverURL) = (s.proxy.url, s.server.url)
        s.proxy.rewrite { method, target, response in
            guard method == "GET", target.hasPrefix("/v1/storage/files/") else { return }
            response.body = Data(
                String(decoding: response.body, as: UTF8.self)
                    .replacingOccurrences(of: proxyURL, with: serverURL).utf8)
        }
        let out = dir.appendingPathComponent("elsewhere.bin").path
        let refused = await Self.code { _ = try await alice.readFile(file, to: out) }
        #expect(refused?.code == .foreignFileURL && !FileManager.default.fileExists(atPath: out))
        // Allowed explicitly (a CDN, say), the other origin serves the body.
        let cdn = try s.client(identity, fileOrigins: [s.server.url])
        _ = try await cdn.readFile(file, to: out)
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data(contentsOf: plain))
        #expect(await Self.code { _ = try s.client(identity, fileOrigins: ["not a url"]) }?.code == .invalidParameter)
    }
}

/// `e3dbkit client read` and `query` through the proxy: signature status printed, unsigned records refused
/// unless `--allow-unsigned`; `share` prints the reader's fingerprint and refuses a substituted key.
@Suite("e3dbkit client: signature status, --allow-unsigned, pinned keys")
struct ClientTrustCLITests {
    static func run(_ arguments: [String]) async throws -> CLIRunner.Result {
        try await CLIRunner.run(["client"] + arguments)
    }

    static func json(_ result: CLIRunner.Result) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: result.stdout.split(separator: UInt8(ascii: "\n")).first ?? Data()))
            as? [String: Any] ?? [:]
    }

    @Test("read and query print signature_status and refuse unsigned records without --allow-unsigned; share pins keys")
    func signatureStatusAndPins() async throws {
        let s = try await ClientTrustTests.Setup.start()
        defer { s.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-trust-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: dir) }
        let token = dir.appendingPathComponent("token").path
        try Data(s.server.token.utf8).write(to: URL(fileURLWithPath: token))
        func register(_ name: String) async throws -> (config: String, id: String) {
            let config = dir.appendingPathComponent("\(name).json").path
            let r = try await Self.run([
                "register", "--api-url", s.proxy.url, "--token-file", token, "--name", name,
                "--out", config,
            ])
            #expect(r.status == 0, "\(r.stderr)")
            return (config, Self.json(r)["client_id"] as? String ?? "")
        }
        let writer = try await register("writer")
        let reader = try await register("reader")
        let data = dir.appendingPathComponent("data.json").path
        try Data(#"{"ssn":"123"}"#.utf8).write(to: URL(fileURLWithPath: data))
        let written = try await Self.run(["write", "--config", writer.config, "--type", "med", data])
        let id = try #require((Self.json(written)["meta"] as? [String: Any])?["record_id"] as? String)
        #expect(Self.json(written)["signature_status"] as? String == "verified")

        // share prints the fingerprint of the key the server gave; whoami prints the reader's own.
        let shared = try await Self.run(["share", "--config", writer.config, "--type", "med", "--reader", reader.id])
        let whoami = try await Self.run(["whoami", "--config", reader.config])
        let fingerprint = Self.json(whoami)["public_key_fingerprint"] as? String
        #expect(
            shared.status == 0 && fingerprint != nil
                && Self.json(shared)["reader_fingerprint"] as? String == fingerprint)
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("writer.known-keys.json").path))

        let read = try await Self.run(["read", "--config", reader.config, id])
        #expect(read.status == 0 && Self.json(read)["signature_status"] as? String == "verified", "\(read.stderr)")

        s.proxy.rewrite { method, target, response in
            guard
                (method == "GET" && target.hasPrefix("/v1/storage/records/")) || target.hasPrefix("/v1/storage/search")
            else { return }
            RewritingProxy.editJSON(&response) { $0["rec_sig"] = nil }
            RewritingProxy.editResults(&response) { $0["rec_sig"] = nil }
        }
        for config in [writer.config, reader.config] {
            let refused = try await Self.run(["read", "--config", config, id])
            #expect(
                refused.status == 2 && refused.stdout.isEmpty && refused.stderr.contains("rec_sig"), "\(refused.stderr)"
            )
            // Selected fields are verified as a whole read (the whole record is fetched, then cut locally).
            let field = try await Self.run(["read", "--config", config, "--field", "ssn", id])
            #expect(field.status == 2 && field.stdout.isEmpty, "\(field.stderr)")
            let fieldAllowed = try await Self.run([
                "read", "--config", config, "--field", "ssn", "--allow-unsigned", id,
            ])
            #expect(
                fieldAllowed.status == 0 && Self.json(fieldAllowed)["signature_status"] as? String == "absent"
                    && Self.json(fieldAllowed)["data"] as? [String: String] == ["ssn": "123"], "\(fieldAllowed.stderr)")
            let allowed = try await Self.run(["read", "--config", config, "--allow-unsigned", id])
            #expect(allowed.status == 0 && Self.json(allowed)["signature_status"] as? String == "absent")
            let query = ["query", "--config", config, "--writer", writer.id, "--include-data"]
            let queryRefused = try await Self.run(query)
            #expect(queryRefused.status == 2 && queryRefused.stdout.isEmpty, "\(queryRefused.stderr)")
            let queryAllowed = try await Self.run(query + ["--allow-unsigned"])
            #expect(queryAllowed.status == 0 && Self.json(queryAllowed)["signature_status"] as? String == "absent")
        }

        // The server substitutes another key for the reader: share refuses it, naming the reader, until accepted.
        let mallory = try await register("mallory")
        let malloryKey =
            Self.json(try await Self.run(["whoami", "--config", mallory.config]))["public_key"] as? String ?? ""
        s.proxy.rewrite { method, target, response in
            guard method == "GET", target == "/v1/storage/clients/" + reader.id else { return }
            RewritingProxy.editJSON(&response) { $0["public_key"] = ["curve25519": malloryKey] }
        }
        let share = ["share", "--config", writer.config, "--type", "med2", "--reader", reader.id]
        let substituted = try await Self.run(share)
        #expect(
            substituted.status == 2 && substituted.stderr.contains(reader.id)
                && substituted.stderr.contains(fingerprint ?? "-"), "\(substituted.stderr)")
        // Accepted only with the new key's fingerprint (as mallory's whoami prints it), not another.
        let malloryPrint =
            Self.json(try await Self.run(["whoami", "--config", mallory.config]))["public_key_fingerprint"]
            as? String ?? ""
        let mismatch = try await Self.run(share + ["--accept-new-key", "\(reader.id)=\(fingerprint ?? "")"])
        #expect(mismatch.status == 2 && mismatch.stderr.contains(reader.id), "\(mismatch.stderr)")
        for malformed in [reader.id, "\(reader.id)=abcd", "not-a-uuid=\(malloryPrint)"] {
            let usage = try await Self.run(share + ["--accept-new-key", malformed])
            #expect(usage.status == 64, "\(malformed): \(usage.stderr)")
        }
        let accepted = try await Self.run(share + ["--accept-new-key", "\(reader.id)=\(malloryPrint)"])
        #expect(
            accepted.status == 0 && Self.json(accepted)["reader_fingerprint"] as? String == malloryPrint,
            "\(accepted.stderr)")

        // Two CLI runs at once with the same credentials, each pinning another reader: the file keeps both.
        s.proxy.rewrite(nil)
        let (one, two) = (try await register("one"), try await register("two"))
        async let first = Self.run(["share", "--config", writer.config, "--type", "med", "--reader", one.id])
        async let second = Self.run(["share", "--config", writer.config, "--type", "med", "--reader", two.id])
        let (r1, r2) = try await (first, second)
        #expect(r1.status == 0 && r2.status == 0, "\(r1.stderr) \(r2.stderr)")
        let pins = try KnownKeys(path: dir.appendingPathComponent("writer.known-keys.json").path)
        let (oneID, twoID) = (try #require(UUID(uuidString: one.id)), try #require(UUID(uuidString: two.id)))
        #expect(pins.keys(of: oneID) != nil && pins.keys(of: twoID) != nil)
    }
}
