@testable import E3DBServer
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Testing

/// `RecordFastPath` in a channel of its own: which requests it answers, that its answers are the router's,
/// and that everything else reaches the router unchanged and in order.
@Suite("Record reads and writes in the channel pipeline")
struct RecordFastPathTests {
    /// A service over a fresh SQLite storage with two clients (alice writes, bob reads what a policy shares), their
    /// Bearer tokens cached, and one record of alice's.
    final class Fixture {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-fast-\(UUID().uuidString)")
        let storage: SQLiteStorage
        let service: E3DBService
        let alice = newUUID(), bob = newUUID(), carol = newUUID()
        let record: RecordRow

        init() async throws {
            storage = try SQLiteStorage(directory: directory)
            try await storage.migrate()
            service = E3DBService(
                storage: storage, files: try LocalFileBodyStore(directory: directory.appendingPathComponent("files")),
                configuration: ServerConfiguration(dataDirectory: directory), secret: Data(count: 32),
                logger: Logger(label: "test"))
            let now = service.clock.now()
            for (name, id) in [("alice", alice), ("bob", bob), ("carol", carol)] {
                let client = ClientRow(clientID: id, name: name, publicKey: "k", signingKey: nil, apiKeyID: newUUID(),
                                       apiSecretHash: Data(), registrationTokenHash: Data(), created: now)
                service.bearerTokens.insert(hash: E3DBService.sha256("token-\(name)"), client: client,
                                            tokenExpires: now + 3_600_000_000, now: now)
            }
            record = try await storage.insertRecord(RecordRow(
                recordID: newUUID(), writerID: alice, userID: alice, type: "contact", plainJSON: #"{"p":"1"}"#,
                dataJSON: #"{"name":"c2VjcmV0"}"#, recSig: nil, fileMetaJSON: nil, created: now, lastModified: now,
                version: newUUID()))
            try await storage.upsertPolicy(PolicyRow(
                tuple: AccessTuple(writerID: alice, userID: alice, readerID: bob, type: "contact"), canRead: true,
                canAuthorize: false, authorizedBy: nil))
        }

        deinit { try? FileManager.default.removeItem(at: directory) }

        /// A connection: a channel with the handler (an `EmbeddedChannel` is used on the thread that made it, so a
        /// test makes one between its awaits).
        func connection() throws -> Connection { try Connection(service) }

        static func get(_ path: String, token: String?, extra: HTTPFields = [:]) -> HTTPRequest {
            var fields = extra
            if let token { fields[.authorization] = "Bearer token-\(token)" }
            return HTTPRequest(method: .get, scheme: nil, authority: "localhost", path: path, headerFields: fields)
        }
    }

    final class Connection {
        let channel = EmbeddedChannel()

        init(_ service: E3DBService) throws {
            try channel.pipeline.syncOperations.addHandler(RecordFastPath(service: service))
        }

        deinit { _ = try? channel.finish() }

        func send(_ parts: HTTPRequestPart...) throws {
            for part in parts { try channel.writeInbound(part) }
        }

        /// What the handler wrote itself: a head, a body and an end, or nothing.
        func answered() throws -> (HTTPResponse, String)? {
            guard let first = try channel.readOutbound(as: HTTPResponsePart.self) else { return nil }
            guard case .head(let head) = first, case .body(let body)? = try channel.readOutbound(as: HTTPResponsePart.self),
                  case .end(nil)? = try channel.readOutbound(as: HTTPResponsePart.self) else {
                Issue.record("the handler wrote something other than a head, a body and an end")
                return nil
            }
            return (head, String(buffer: body))
        }

        /// What reached the router (the next handler).
        func routed() throws -> [HTTPRequestPart] {
            var parts: [HTTPRequestPart] = []
            while let part = try channel.readInbound(as: HTTPRequestPart.self) { parts.append(part) }
            return parts
        }
    }

    @Test("the writer's and a policy holder's reads are answered with the router's body and headers")
    func answersReadableRecords() async throws {
        let f = try await Fixture()
        let c = try f.connection()
        for reader in ["alice", "bob"] {
            try c.send(.head(Fixture.get("/v1/storage/records/\(f.record.recordID.uppercased())", token: reader)), .end(nil))
            let (head, body) = try #require(try c.answered(), "\(reader)")
            #expect(head.status == .ok)
            #expect(head.headerFields[.contentType] == "application/json")
            #expect(head.headerFields[.contentLength] == String(body.utf8.count))
            let date = try #require(head.headerFields[.date])
            #expect(date.hasSuffix(" GMT") && date.count == 29, "\(date)")
            #expect(body == String(buffer: RecordJSON.render(f.record)))
            #expect(try c.routed().isEmpty)
        }
    }

    @Test("a record that is missing or not shared is a 404 with the router's message")
    func refusesUnreadable() async throws {
        let f = try await Fixture()
        do {
            let c = try f.connection()
            for (reader, id) in [("carol", f.record.recordID), ("alice", newUUID())] {
                try c.send(.head(Fixture.get("/v1/storage/records/\(id)", token: reader)), .end(nil))
                let (head, body) = try #require(try c.answered())
                #expect(head.status == .notFound)
                #expect(body == #"{"error":"no such record, or it is not shared with this client"}"#)
                #expect(body == String(buffer: JSONBody.errorBuffer(E3DBService.unreadableRecord.message)))
            }
        }
        // Revoking takes effect on the next read.
        try await f.storage.upsertPolicy(PolicyRow(
            tuple: AccessTuple(writerID: f.alice, userID: f.alice, readerID: f.bob, type: "contact"), canRead: false,
            canAuthorize: false, authorizedBy: nil))
        let later = try f.connection()
        try later.send(.head(Fixture.get("/v1/storage/records/\(f.record.recordID)", token: "bob")), .end(nil))
        #expect(try later.answered()?.0.status == .notFound)
    }

    @Test("requests it does not answer reach the router unchanged")
    func passesTheRestOn() async throws {
        let f = try await Fixture()
        let c = try f.connection()
        let path = "/v1/storage/records/\(f.record.recordID)"
        let declined: [HTTPRequest] = [
            Fixture.get(path, token: "unknown"),  // not in the cache: the router authenticates
            Fixture.get(path, token: nil),
            Fixture.get(path + "?field=name", token: "alice"),
            Fixture.get("/v1/storage/records//\(f.record.recordID.dropFirst())", token: "alice"),
            Fixture.get("/v1/storage/records/\(String(repeating: "z", count: 36))", token: "alice"),
            Fixture.get(path, token: "alice", extra: [.expect: "something"]),
            Fixture.get(path, token: "alice", extra: [.connection: "keep-alive"]),
            HTTPRequest(method: .delete, scheme: nil, authority: nil, path: path,
                        headerFields: [.authorization: "Bearer token-alice"]),
        ]
        for request in declined {
            try c.send(.head(request), .end(nil))
            #expect(try c.answered() == nil, "\(request)")
            let parts = try c.routed()
            #expect(parts.count == 2, "\(request)")
            guard case .head(let head)? = parts.first, case .end? = parts.last else {
                Issue.record("\(request) did not reach the router as a head and an end")
                continue
            }
            #expect(head == request)
            try c.channel.writeOutbound(HTTPResponsePart.end(nil))  // the router's response ends
            _ = try c.channel.readOutbound(as: HTTPResponsePart.self)
        }
        // A GET with a body goes to the router with it.
        try c.send(.head(Fixture.get(path, token: "alice")), .body(ByteBuffer(string: "x")), .end(nil))
        #expect(try c.answered() == nil)
        #expect(try c.routed().count == 3)
        try c.channel.writeOutbound(HTTPResponsePart.end(nil))
        _ = try c.channel.readOutbound(as: HTTPResponsePart.self)
        // Every routed response has ended: reads are answered here again.
        try c.send(.head(Fixture.get(path, token: "alice")), .end(nil))
        #expect(try c.answered()?.0.status == .ok)
        #expect(try c.routed().isEmpty)
    }

    @Test("a full send buffer, or a routed request that closes the connection, sends later reads to the router")
    func yieldsToTheRouter() async throws {
        let f = try await Fixture()
        let read = Fixture.get("/v1/storage/records/\(f.record.recordID)", token: "alice")
        let c = try f.connection()
        c.channel.isWritable = false
        try c.send(.head(read), .end(nil))
        #expect(try c.answered() == nil)
        #expect(try c.routed().count == 2)
        try c.channel.writeOutbound(HTTPResponsePart.end(nil))
        _ = try c.channel.readOutbound(as: HTTPResponsePart.self)
        c.channel.isWritable = true
        try c.send(.head(read), .end(nil))
        #expect(try c.answered()?.0.status == .ok)

        let closing = try f.connection()
        try closing.send(.head(Fixture.get("/v1/storage/records/\(f.record.recordID)", token: "alice",
                                           extra: [.connection: "close"])), .end(nil))
        #expect(try closing.routed().count == 2)
        try closing.channel.writeOutbound(HTTPResponsePart.end(nil))
        _ = try closing.channel.readOutbound(as: HTTPResponsePart.self)
        try closing.send(.head(read), .end(nil))
        #expect(try closing.answered() == nil)
        #expect(try closing.routed().count == 2)
    }

    @Test("answers to pipelined reads are flushed once per socket read")
    func flushesOncePerRead() async throws {
        let f = try await Fixture()
        let c = try f.connection()
        let read = Fixture.get("/v1/storage/records/\(f.record.recordID)", token: "alice")
        for part in [HTTPRequestPart.head(read), .end(nil), .head(read), .end(nil)] {
            c.channel.pipeline.syncOperations.fireChannelRead(NIOAny(part))  // no read-complete yet
        }
        #expect(try c.channel.readOutbound(as: HTTPResponsePart.self) == nil)
        c.channel.pipeline.fireChannelReadComplete()
        #expect(try c.answered()?.0.status == .ok)
        #expect(try c.answered()?.0.status == .ok)
    }

    @Test("while the router owes a response on the connection, reads wait their turn behind it")
    func keepsPipelinedOrder() async throws {
        let f = try await Fixture()
        let c = try f.connection()
        let read = Fixture.get("/v1/storage/records/\(f.record.recordID)", token: "alice")
        let write = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/v1/storage/records",
                                headerFields: [.authorization: "Bearer token-alice"])
        try c.send(.head(write), .body(ByteBuffer(string: "{}")), .end(nil), .head(read), .end(nil))
        #expect(try c.answered() == nil)
        #expect(try c.routed().count == 5)  // the write and the read behind it
        // The router answers the write, then the read; the next read is answered in the pipeline again.
        for _ in 0..<2 {
            try c.channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
            try c.channel.writeOutbound(HTTPResponsePart.end(nil))
            _ = try c.channel.readOutbound(as: HTTPResponsePart.self)
            _ = try c.channel.readOutbound(as: HTTPResponsePart.self)
        }
        try c.send(.head(read), .end(nil))
        #expect(try c.answered()?.0.status == .ok)
        #expect(try c.routed().isEmpty)
    }

    @Test("a closed storage sends reads to the router, which reports the failure")
    func declinesWhenStorageFails() async throws {
        let f = try await Fixture()
        try await f.storage.close()
        let c = try f.connection()
        try c.send(.head(Fixture.get("/v1/storage/records/\(f.record.recordID)", token: "alice")), .end(nil))
        #expect(try c.answered() == nil)
        #expect(try c.routed().count == 2)
    }

    @Test("a record write refused before storage is answered here; one with an uncached token goes to the router as it comes")
    func writesRefusedOrRouted() async throws {
        let f = try await Fixture()
        let c = try f.connection()
        func post(_ body: String, token: String) -> [HTTPRequestPart] {
            let head = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/v1/storage/records", headerFields: [
                .authorization: "Bearer token-\(token)", .contentType: "application/json",
                .contentLength: String(body.utf8.count)])
            let bytes = ByteBuffer(string: body)
            return [.head(head), .body(bytes.getSlice(at: 0, length: 3)!),
                    .body(bytes.getSlice(at: 3, length: bytes.readableBytes - 3)!), .end(nil)]
        }
        for part in post("{not json", token: "alice") { try c.channel.writeInbound(part) }
        let (head, body) = try #require(try c.answered())
        #expect(head.status == .badRequest)
        #expect(body == String(buffer: JSONBody.errorBuffer("the record body is not valid: not JSON")))
        #expect(try c.routed().isEmpty)

        let wrongWriter = #"{"meta":{"writer_id":"\#(f.bob)","user_id":"\#(f.bob)","type":"t"},"data":{"f":"x"}}"#
        for part in post(wrongWriter, token: "alice") { try c.channel.writeInbound(part) }
        #expect(try c.answered()?.0.status == .forbidden)

        let text = #"{"meta":{"writer_id":"x","user_id":"x","type":"t"},"data":{"f":"x"}}"#
        for part in post(text, token: "unknown") { try c.channel.writeInbound(part) }
        #expect(try c.answered() == nil)
        let parts = try c.routed()
        #expect(parts.count == 4)  // not held here (the token is not cached): passed on as it came
        var routedBody = ""
        for case .body(let chunk) in parts { routedBody += String(buffer: chunk) }
        #expect(routedBody == text)
    }

    @Test("the Date header is RFC 9110's IMF-fixdate")
    func dateFormat() {
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(1_795_705_201) == "Thu, 26 Nov 2026 15:00:01 GMT")
        #expect(HTTPDate.format(951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
    }
}
