import E3DBClient
import E3DBKit
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Record reads and writes over raw HTTP/1.1 connections to `e3dbkit-server run`: the statuses and bodies of reads
/// and writes by the writer, a reader and strangers, and request order on a connection that pipelines writes and
/// reads (every request goes through the one router).
@Suite("Record reads and writes over raw, pipelined HTTP/1.1", .serialized, .postgresServer)
struct PipelinedHTTPTests {
    /// One HTTP/1.1 connection that writes requests as given (several in one write: pipelining) and reads
    /// responses framed by `Content-Length`.
    final class RawConnection {
        struct Failure: Error, CustomStringConvertible { let description: String }
        struct Answer {
            var status: Int
            var headers: [String]  // "name: value" in order, without Date
            var body: String
        }

        private var socket: Int32
        private var pending: [UInt8] = []

        /// Connects to `url`'s port on 127.0.0.1; a read that waits longer than `receiveTimeout` seconds fails.
        init(_ url: String, receiveTimeout: Int = 20) throws {
            guard let port = URL(string: url)?.port.flatMap(UInt16.init(exactly:)) else {
                throw Failure(description: "no port in \(url)")
            }
            socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard socket >= 0 else { throw Failure(description: "socket() failed") }
            var timeout = timeval(tv_sec: receiveTimeout, tv_usec: 0)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                close(socket)
                throw Failure(description: "cannot connect to \(url)")
            }
        }

        deinit { if socket >= 0 { close(socket) } }

        /// Half-closes the connection: the server sees the end of its input.
        func finishSending() { shutdown(socket, Int32(SHUT_WR)) }

        /// Resets the connection (a close with `SO_LINGER` 0 sends RST): the client is gone.
        func reset() {
            guard socket >= 0 else { return }
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(socket, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            close(socket)
            socket = -1
        }

        /// Whether an answer (or the end of the connection) is there to read within `milliseconds`.
        func readable(within milliseconds: Int32) -> Bool {
            guard pending.isEmpty else { return true }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            return poll(&descriptor, 1, milliseconds) > 0
        }

        func send(_ text: String) throws {
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let sent = bytes.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard sent > 0 else { throw Failure(description: "send failed") }
                bytes = bytes.dropFirst(sent)
            }
        }

        func answer() throws -> Answer {
            let separator: [UInt8] = Array("\r\n\r\n".utf8)
            var headEnd: Int?
            while headEnd == nil {
                headEnd = pending.indices.dropLast(3).first { pending[$0..<$0 + 4].elementsEqual(separator) }
                if headEnd == nil { try receive() }
            }
            let lines = String(decoding: pending[..<headEnd!], as: UTF8.self).components(separatedBy: "\r\n")
            pending.removeFirst(headEnd! + 4)
            let status = Int(lines[0].split(separator: " ")[1]) ?? 0
            let headers = lines.dropFirst().filter { !$0.lowercased().hasPrefix("date:") }
            let length =
                headers.first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            while pending.count < length { try receive() }
            let body = String(decoding: pending[..<length], as: UTF8.self)
            pending.removeFirst(length)
            return Answer(status: status, headers: Array(headers), body: body)
        }

        private func receive() throws {
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw Failure(description: "the connection closed or timed out") }
            pending += chunk[..<n]
        }

        static func get(_ path: String, token: String) -> String {
            "GET \(path) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token)\r\n\r\n"
        }

        static func post(_ path: String, token: String, body: String) -> String {
            "POST \(path) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        }
    }

    /// A Bearer token for `client` from `POST /v1/auth/token`.
    static func token(_ client: E3DBClient, _ url: String) throws -> String {
        let key = try #require(client.identity.apiKeyID)
        let secret = try #require(client.identity.apiSecret).withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let body = "grant_type=client_credentials"
        let connection = try RawConnection(url)
        try connection.send(
            "POST /v1/auth/token HTTP/1.1\r\nHost: localhost\r\n"
                + "Authorization: Basic \(Data("\(key):\(secret)".utf8).base64EncodedString())\r\n"
                + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        )
        let answer = try connection.answer()
        #expect(answer.status == 200)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        return try #require(json["access_token"] as? String)
    }

    @Test(
        "record reads and writes are answered in order, one request at a time and pipelined",
        arguments: ClientTestBackend.allCases)
    func readsAndWritesInOrder(backend: ClientTestBackend) async throws {
        var postgres: String?
        if backend == .postgres {
            guard let url = try await PostgresTestServer.newDatabase() else { return }
            postgres = url
        }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-rawhttp-\(UUID())")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let log = scratch.appendingPathComponent("server.log")
        let server = try await ServerProcess.start(postgres: postgres, log: log)
        defer { server.stop() }

        let alice = try await server.register("alice")
        let bob = try await server.register("bob")
        let carol = try await server.register("carol")
        let record = try #require(try await alice.write(type: "contact", data: ["name": "Ada"], plain: ["k": "v"]).id)
        try await alice.share(type: "contact", with: try #require(bob.identity.clientID))
        try Data("file body".utf8).write(to: scratch.appendingPathComponent("in"))
        let file = try #require(
            try await alice.writeFile(type: "blob", path: scratch.appendingPathComponent("in").path).id)
        let tokens = [
            "alice": try Self.token(alice, server.url), "bob": try Self.token(bob, server.url),
            "carol": try Self.token(carol, server.url), "nobody": String(repeating: "0", count: 64),
        ]

        let id = record.uuidString.lowercased()
        let reads: [(String, String)] = [
            ("alice", "/v1/storage/records/\(id)"), ("alice", "/v1/storage/records/\(id.uppercased())"),
            ("bob", "/v1/storage/records/\(id)"), ("carol", "/v1/storage/records/\(id)"),
            ("alice", "/v1/storage/records/\(UUID().uuidString.lowercased())"),
            ("alice", "/v1/storage/records/\(file.uuidString.lowercased())"),
            ("alice", "/v1/storage/records/\(id)?field=name"), ("alice", "//v1/storage/records/\(id)"),
            ("nobody", "/v1/storage/records/\(id)"),
        ]
        let connection = try RawConnection(server.url)
        for _ in 0..<2 {  // the second time with every token in the server's cache
            let answers = try reads.map { who, path in
                try connection.send(RawConnection.get(path, token: try #require(tokens[who])))
                return try connection.answer()
            }
            #expect(answers.map(\.status) == [200, 200, 200, 404, 404, 200, 200, 200, 401])
            #expect(answers[0].body == answers[1].body && answers[0].body == answers[2].body)
            #expect(answers[0].body.contains(#""name":"#) && answers[0].body.contains(#""k":"v""#))
            #expect(answers[3].body == answers[4].body && answers[3].body.contains(#""error""#))
            #expect(
                answers.allSatisfy { $0.headers.contains { $0.lowercased() == "content-type: application/json" } },
                "\(answers.map(\.headers))")
        }

        // Writes: a record written, and the writer rules' refusals.
        let aliceID = try #require(alice.identity.clientID).uuidString.lowercased()
        let aliceToken = try #require(tokens["alice"])
        func body(writer: String = aliceID, data: String = #"{"f":"x"}"#) -> String {
            #"{"meta":{"writer_id":"\#(writer)","user_id":"\#(writer)","type":"t","plain":{"p":"1"}},"data":\#(data)}"#
        }
        let writes = [
            body(), "{not json", body(writer: UUID().uuidString.lowercased()), body(data: "{}"),
            #"{"meta":{}}"#,
        ]
        let statuses = try writes.map { text in
            try connection.send(RawConnection.post("/v1/storage/records", token: aliceToken, body: text))
            let answer = try connection.answer()
            if answer.status == 201 {
                let json = try #require(
                    try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
                #expect((json["data"] as? NSDictionary) == ["f": "x"] as NSDictionary)
                let meta = try #require(json["meta"] as? [String: Any])
                #expect(meta["writer_id"] as? String == aliceID && meta["type"] as? String == "t")
            } else {
                #expect(answer.body.contains(#""error""#), "\(text)")
            }
            return answer.status
        }
        #expect(statuses == [201, 400, 403, 400, 400])

        // Writes and reads in one packet: answers in order, each read after the write before it.
        let pipelined = try RawConnection(server.url)
        try pipelined.send(
            RawConnection.post("/v1/storage/records", token: aliceToken, body: body())
                + RawConnection.get("/v1/storage/records/\(id)", token: aliceToken)
                + RawConnection.post("/v1/storage/records", token: aliceToken, body: body(data: #"{"g":"y"}"#))
                + RawConnection.get("/v1/storage/records/\(id)", token: try #require(tokens["bob"]))
                + RawConnection.post("/v1/storage/records", token: aliceToken, body: "{not json"))
        let answers = try (0..<5).map { _ in try pipelined.answer() }
        #expect(answers.map(\.status) == [201, 200, 201, 200, 400])
        #expect(answers[0].body.contains(#""f":"x""#) && answers[2].body.contains(#""g":"y""#))
        #expect(answers[1].body == answers[3].body && answers[1].body.contains(id))
        try pipelined.send(
            RawConnection.post("/v1/storage/records", token: aliceToken, body: body())
                + RawConnection.get("/v1/storage/records/\(id)?field=name", token: aliceToken)
                + RawConnection.get("/v1/storage/records/\(id)", token: "unknown-token")
                + RawConnection.post("/v1/storage/records", token: aliceToken, body: body()))
        #expect(try (0..<4).map { _ in try pipelined.answer().status } == [201, 200, 401, 201])

        // Many reads in one packet: every read is answered, in order.
        try pipelined.send(
            (0..<200).map { _ in RawConnection.get("/v1/storage/records/\(id)", token: aliceToken) }
                .joined())
        let many = try (0..<200).map { _ in try pipelined.answer() }
        #expect(many.allSatisfy { $0.status == 200 && $0.body == answers[1].body })

        // A write followed by the end of the client's input: its answer still arrives.
        let halfClosed = try RawConnection(server.url)
        try halfClosed.send(RawConnection.post("/v1/storage/records", token: aliceToken, body: body()))
        halfClosed.finishSending()
        #expect(try halfClosed.answer().status == 201)

        let written = try (0..<100).map { i in
            try pipelined.send(
                RawConnection.post(
                    "/v1/storage/records", token: aliceToken,
                    body: body(data: #"{"n":"\#(i)"}"#)))
            let answer = try pipelined.answer()
            #expect(answer.status == 201)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
            return try #require((json["meta"] as? [String: Any])?["record_id"] as? String)
        }
        for (i, recordID) in written.enumerated() where i % 10 == 0 {
            try connection.send(RawConnection.get("/v1/storage/records/\(recordID)", token: aliceToken))
            let read = try connection.answer()
            #expect(read.status == 200 && read.body.contains(#""n":"\#(i)""#))
        }

        // The server's log names each request's route template.
        let lines = String(decoding: try Data(contentsOf: log), as: UTF8.self).split(separator: "\n")
        #expect(
            lines.filter { $0.contains("route=/v1/storage/records/{id}") && $0.contains("method=GET") }.count >= 220,
            "\(lines.suffix(5))")
        #expect(
            lines.filter { $0.contains("route=/v1/storage/records ") && $0.contains("method=POST") }.count >= 100,
            "\(lines.suffix(5))")
    }
}
