import E3DBAPI
import E3DBClient
import E3DBKit
import E3DBServerTestSupport
import E3DBTestSupport
import E3DBURLSession
import Foundation
import HTTPTypes
import Testing

/// A transport whose uploads first kill the server process (a server dying mid-flow).
struct KillingTransport: E3DBTransport {
    let server: ServerProcess
    let inner: any E3DBTransport

    func send(_ request: HTTPRequest, body: Data?, timeout: Duration, maxResponseSize: Int) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.send(request, body: body, timeout: timeout, maxResponseSize: maxResponseSize)
    }

    func upload(_ request: HTTPRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> (Data, HTTPResponse)
    {
        await server.kill()
        return try await inner.upload(request, bodyPath: bodyPath, size: size, timeout: timeout)
    }

    func download(_ request: HTTPRequest, timeout: Duration, receive: (Data) async throws -> Void) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.download(request, timeout: timeout, receive: receive)
    }
}

@Suite("E3DBClient against e3dbkit-server", .serialized, .postgresServer)
struct ClientLibraryTests {
    @Test(
        "records: write, read fields, update with versions, delete, query pages and plain filters",
        arguments: ClientTestBackend.allCases, ClientTransport.allCases)
    func records(backend: ClientTestBackend, transport: ClientTransport) async throws {
        guard let server = try await backend.start() else { return }
        defer { server.stop() }
        let alice = try await server.register("alice", transport: transport)
        var written: [ClientRecord] = []
        for i in 0..<5 {
            written.append(
                try await alice.write(
                    type: "contact", data: ["name": "n\(i)", "phone": "\(i)"],
                    plain: ["parity": i % 2 == 0 ? "even" : "odd"]))
        }
        #expect(written[0].signatureStatus == .verified)
        let partial = try await alice.read(try #require(written[1].id), fields: ["name"])
        #expect(partial.data.keys == ["name"])
        // The whole record is fetched and verified; only then are the other fields dropped.
        #expect(partial.signatureStatus == .verified)
        var page: [String] = []
        for try await r in alice.query(RecordQuery(types: ["contact"], pageSize: 2)) {
            page.append(r.data["name"] ?? "")
        }
        #expect(page == ["n0", "n1", "n2", "n3", "n4"])
        var evens: [String] = []
        for try await r in alice.query(RecordQuery(types: ["contact"], plain: .equals(name: "parity", value: "even"))) {
            evens.append(r.data["name"] ?? "")
        }
        #expect(evens == ["n0", "n2", "n4"])
        var changed = written[2]
        changed.data = ["name": "changed"]
        let updated = try await alice.update(changed)
        #expect(updated.meta.version != written[2].meta.version)
        #expect(try await alice.read(try #require(written[2].id)).data["name"] == "changed")
        await #expect(throws: E3DBError(.conflict)) { _ = try await alice.update(changed) }
        await #expect(throws: E3DBError(.conflict)) {
            try await alice.delete(try #require(written[2].id), version: try #require(written[2].meta.version))
        }
        try await alice.delete(try #require(updated.id), version: try #require(updated.meta.version))
        await #expect(throws: E3DBError(.notFound)) { _ = try await alice.read(try #require(updated.id)) }
        await #expect(throws: E3DBError(.badRequest)) { _ = try await alice.write(type: "contact", data: [:]) }
    }

    @Test(
        "field names that differ only in Unicode normalization stay two fields through the server, rec_sig verifying",
        arguments: ClientTestBackend.allCases)
    func normalizationTwins(backend: ClientTestBackend) async throws {
        guard let server = try await backend.start() else { return }
        defer { server.stop() }
        let alice = try await server.register("alice", transport: .asyncHTTPClient)
        // What the other SDKs keep apart: "é" (U+00E9) and "e" + U+0301, equal as Swift strings.
        let data = try RecordData([("\u{E9}", "precomposed"), ("e\u{301}", "decomposed"), ("x", "1")])
        let plain = try RecordData([("\u{E9}", "p1"), ("e\u{301}", "p2")])
        let written = try await alice.write(type: "twins", data: data, plain: plain)
        #expect(written.data == data && written.data.count == 3 && written.signatureStatus == .verified)
        let id = try #require(written.id)
        let read = try await alice.read(id)
        #expect(read.data == data && read.signatureStatus == .verified)
        #expect(read.meta.plain == plain && read.meta.plain?["e\u{301}"] == "p2")
        // A field filter names one of the two by its code units.
        let one = try await alice.read(id, fields: ["e\u{301}"])
        #expect(one.data.count == 1 && one.data.keys.first?.unicodeScalars.count == 2)
        #expect(one.data["e\u{301}"] == "decomposed" && one.signatureStatus == .verified)
        var changed = read
        changed.data = try RecordData([("e\u{301}", "d2"), ("\u{E9}", "p2")])
        let updated = try await alice.update(changed)
        #expect(try await alice.read(id).data == changed.data && updated.signatureStatus == .verified)
    }

    @Test(
        "sharing, revocation, authorizers sharing on behalf, and the listings",
        arguments: ClientTestBackend.allCases, ClientTransport.allCases)
    func sharingAndAuthorizers(backend: ClientTestBackend, transport: ClientTransport) async throws {
        guard let server = try await backend.start() else { return }
        defer { server.stop() }
        let writer = try await server.register("writer", transport: transport)
        let helper = try await server.register("authorizer", transport: transport)
        let reader = try await server.register("reader", transport: transport)
        let record = try await writer.write(type: "doc", data: ["body": "shared"])
        let id = try #require(record.id)
        await #expect(throws: E3DBError(.notFound)) { _ = try await reader.read(id) }
        try await writer.share(type: "doc", with: reader.clientID)
        #expect(try await reader.read(id).data["body"] == "shared")
        #expect(try await reader.incomingSharing().map(\.recordType) == ["doc"])
        try await writer.revoke(type: "doc", from: reader.clientID)
        await #expect(throws: E3DBError(.notFound)) { _ = try await reader.read(id) }

        await #expect(throws: E3DBError.self) {
            try await helper.share(onBehalfOf: writer.clientID, type: "doc", with: reader.clientID)
        }
        try await writer.addAuthorizer(helper.clientID, type: "doc")
        #expect(try await writer.authorizers().map(\.authorizerID) == [helper.clientID.uuidString.lowercased()])
        #expect(try await helper.authorizedBy().map(\.authorizedBy) == [writer.clientID.uuidString.lowercased()])
        try await helper.share(onBehalfOf: writer.clientID, type: "doc", with: reader.clientID)
        #expect(try await reader.read(id).data["body"] == "shared")
        try await helper.revoke(onBehalfOf: writer.clientID, type: "doc", from: reader.clientID)
        await #expect(throws: E3DBError(.notFound)) { _ = try await reader.read(id) }
        try await writer.removeAuthorizer(helper.clientID, type: "doc")
        await #expect(throws: E3DBError(.forbidden)) {
            try await helper.share(onBehalfOf: writer.clientID, type: "doc", with: reader.clientID)
        }

        // Every type at once: both grants go, and sharing either type on behalf is refused.
        _ = try await writer.write(type: "memo", data: ["body": "second type"])
        try await writer.addAuthorizer(helper.clientID, type: "doc")
        try await writer.addAuthorizer(helper.clientID, type: "memo")
        #expect(Set(try await helper.authorizedBy().map(\.recordType)) == ["doc", "memo"])
        try await writer.removeAuthorizer(helper.clientID)
        #expect(try await writer.authorizers().isEmpty)
        #expect(try await helper.authorizedBy().isEmpty)
        for type in ["doc", "memo"] {
            await #expect(throws: E3DBError(.forbidden)) {
                try await helper.share(onBehalfOf: writer.clientID, type: type, with: reader.clientID)
            }
        }
        try await writer.removeAuthorizer(helper.clientID)
    }

    @Test(
        "search v2: strategies, data decrypted, offset pages", arguments: ClientTestBackend.allCases,
        ClientTransport.allCases)
    func searchV2(backend: ClientTestBackend, transport: ClientTransport) async throws {
        guard let server = try await backend.start() else { return }
        defer { server.stop() }
        let alice = try await server.register("alice", transport: transport)
        for word in ["veryveryfuzzy", "toznywebsite", "other", "another", "third"] {
            _ = try await alice.write(type: "word", data: ["w": word], plain: ["word": word])
        }
        let fuzzy = try await alice.search(
            API.SearchRequest(
                includeData: true, match: [.init(strategy: "FUZZY", terms: .init(values: ["veryveryfunny"]))]))
        #expect(fuzzy.records.map { $0.data["w"] } == ["veryveryfuzzy"])
        let regexp = try await alice.search(
            API.SearchRequest(
                match: [.init(strategy: "REGEXP", terms: .init(values: ["tozny.*"]))]))
        #expect(regexp.records.map { $0.meta.plain?["word"] } == ["toznywebsite"])
        let first = try await alice.search(
            API.SearchRequest(limit: 2, match: [.init(terms: .init(contentTypes: ["word"]))]))
        #expect(first.records.count == 2 && first.totalResults == 5 && first.nextToken == 2)
        let rest = try await alice.search(
            API.SearchRequest(
                limit: 10, nextToken: first.nextToken,
                match: [.init(terms: .init(contentTypes: ["word"]))]))
        #expect(rest.records.count == 3 && rest.nextToken == nil)
    }

    @Test(
        "typed errors: wrong credentials, a dead server, a server killed during an upload, cancellation",
        arguments: ClientTransport.allCases)
    func failures(transport: ClientTransport) async throws {
        let server = try await ServerProcess.start()
        let alice = try await server.register("alice", transport: transport)
        var wrong = alice.identity
        wrong.apiSecret = SecureBytes(copying: Data("0000".utf8))
        let impostor = try E3DBClient(identity: wrong, apiURL: server.url, transport: transport.make())
        await #expect(throws: E3DBError(.unauthorized)) { _ = try await impostor.write(type: "t", data: ["a": "b"]) }

        let big = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-big-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: big) }
        #expect(FileManager.default.createFile(atPath: big.path, contents: nil))
        let handle = try FileHandle(forWritingTo: big)
        for _ in 0..<48 { try handle.write(contentsOf: Data(repeating: 7, count: 1 << 20)) }
        try handle.close()
        // The server dies in the middle of the file flow: after the pending file exists, when the body upload starts
        // (the real transport, with a hook that kills the server process first).
        let dying = try E3DBClient(
            identity: alice.identity, apiURL: server.url,
            transport: KillingTransport(server: server, inner: transport.make()))
        do {
            _ = try await dying.writeFile(type: "big", path: big.path)
            Issue.record("an upload to a server killed mid-way succeeded")
        } catch let error as E3DBError {
            #expect(error.code == .transportFailed, "\(error)")
        }
        let dead = await #expect(throws: E3DBError(.transportFailed)) { _ = try await alice.read(UUID()) }
        // The message says what failed (here: nothing listens on the port), never only an error type's name.
        #expect(
            dead?.message.contains("could not connect to") == true || dead?.message.contains("IOError: ") == true
                || dead?.message.contains("URLError -1004: cannot connect to the host") == true,
            "\(String(describing: dead))")

        // The same data directory, a new process: the killed upload left nothing that can be committed or read.
        let again = try await ServerProcess.start(data: server.data)
        defer { again.stop() }
        let client = try E3DBClient(identity: alice.identity, apiURL: again.url, transport: transport.make())
        var files = 0
        for try await _ in client.query(RecordQuery(types: ["big"])) { files += 1 }
        #expect(files == 0)

        let cancelled = Task { try await client.writeFile(type: "big", path: big.path) }
        cancelled.cancel()
        await #expect(throws: (any Error).self) { _ = try await cancelled.value }
    }
}
