import E3DBAPI
import E3DBClient
import E3DBKit
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Testing

/// One regression test for each finding of the third adversarial review on the server's request path (L2, L3,
/// L8), against `e3dbkit-server run` over raw connections. Each failed before its fix (see the commit that fixed
/// it).
@Suite("Security regressions (third adversarial review): the server's request path", .serialized)
struct ServerRequestPathTests {
    typealias RawConnection = PipelinedHTTPTests.RawConnection

    static func wildcard(_ pattern: String) -> String {
        #"{"match":[{"condition":"OR","strategy":"WILDCARD","terms":{"values":["\#(pattern)"]}}]}"#
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Polls `condition` every 50 ms for up to `seconds`; whether it held.
    static func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) async throws -> Bool {
        for _ in 0..<Int(seconds * 20) {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try condition()
    }

    @Test("L2: searches whose clients reset their connections give up their places; a client queues at most two")
    func abandonedSearches() async throws {
        try await SecurityFixture.with(.sqlite, extraArguments: ["--concurrent-searches", "1"]) { f in
            let a = try await f.register("a")
            let b = try await f.register("b")
            let long = String(repeating: "a", count: 16 << 10)
            for _ in 0..<8 { _ = try await a.write(f.api, type: "t", plain: #"{"x":"\#(long)"}"#) }
            _ = try await b.write(f.api, type: "t")
            // A search that runs to its budget over a few rows (each row's comparison costs about a third of it).
            let expensive = Self.wildcard("*" + String(repeating: "a", count: 1022) + "b")
            let started = ContinuousClock.now
            let one = try await f.api.send("POST", "/v2/search", bearer: a.bearer, json: expensive)
            let cost = started.duration(to: .now)
            try #require(one.status == 400 && one.text.contains("more work"), "\(one.text)")

            // As many abandoned searches as would keep B waiting about 6 s if they all ran (at most 60: the
            // waiting room has 64 places).
            let count = min(60, max(8, Int((6 / Self.seconds(cost)).rounded(.up))))
            let url = f.server.url
            let request = RawConnection.post("/v2/search", token: a.bearer, body: expensive)
            try await offCooperativePool {
                let connections = try (0..<count).map { _ in try RawConnection(url) }
                for connection in connections { try connection.send(request) }
                Thread.sleep(forTimeInterval: 0.3)  // the server has read them all
                for connection in connections { connection.reset() }
            }
            let asked = ContinuousClock.now
            let other = try await f.api.send("POST", "/v2/search", bearer: b.bearer, json: #"{"limit":1}"#)
            let waited = asked.duration(to: .now)
            #expect(other.status == 200, "\(other.text)")
            #expect(
                waited < max(.seconds(1), cost * 2),
                "B waited \(waited) behind \(count) abandoned searches of \(cost) each")

            // Six at once from one client: one runs, two wait, the others are refused at once. The last waiting
            // one answers after three searches' cost, which a loaded machine has stretched past the usual 20 s.
            let answerWithin = 20 + Int((3 * Self.seconds(cost)).rounded(.up))
            let statuses = try await offCooperativePool { () -> [(Int, String)] in
                let connections = try (0..<6).map { _ in try RawConnection(url, receiveTimeout: answerWithin) }
                for connection in connections { try connection.send(request) }
                return try connections.map { connection in
                    let answer = try connection.answer()
                    return (answer.status, answer.body)
                }
            }
            let refused = statuses.filter { $0.0 == 503 }
            #expect(refused.count >= 3, "\(statuses.map(\.0))")
            #expect(refused.allSatisfy { $0.1.contains("this client") }, "\(refused.map(\.1))")
            #expect(statuses.contains { $0.0 == 400 }, "\(statuses.map(\.0))")
            // No place was lost: B's search still runs at once.
            let again = ContinuousClock.now
            #expect(try await f.api.send("POST", "/v2/search", bearer: b.bearer, json: #"{"limit":1}"#).status == 200)
            #expect(again.duration(to: .now) < max(.seconds(1), cost * 2))
        }
    }

    @Test("The access log line of a request: its metadata sorted by name, as swift-log's StreamLogHandler writes it")
    func accessLogLine() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-access-\(UUID())")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let log = scratch.appendingPathComponent("server.log")
        let server = try await ServerProcess.start(log: log)
        defer { server.stop() }
        #expect(try await RawAPI(url: server.url).send("GET", "/healthz").status == 200)
        // The metadata lives in the server's handler until a line is written (Hummingbird sets some on every
        // request); the line is StreamLogHandler's, unchanged.
        let pattern =
            #" info e3dbkit\.server: method=GET ms=[0-9.]+ route=/healthz status=200 \[E3DBServer\] request$"#
        func line() throws -> Substring? {
            String(decoding: try Data(contentsOf: log), as: UTF8.self).split(separator: "\n")
                .first { $0.range(of: pattern, options: .regularExpression) != nil }
        }
        let found = try await Self.eventually { try line() != nil }
        let written = String(decoding: try Data(contentsOf: log), as: UTF8.self)
        #expect(found, "\(written.suffix(600))")
    }

    @Test("L3: request bodies the client cuts off, and requests it abandons, are not logged as errors; counted as 499")
    func abortedBodiesAreNotErrors() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-aborts-\(UUID())")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let log = scratch.appendingPathComponent("server.log")
        let server = try await ServerProcess.start(log: log)
        defer { server.stop() }
        let api = RawAPI(url: server.url)
        let client = try await RawClient.register(api, token: server.token)
        let url = server.url
        let bearer = client.bearer
        let aborted = 30
        try await offCooperativePool {
            for i in 0..<aborted {
                let connection = try RawConnection(url)
                // Registrations (no account needed) and record writes, each cut off at half its declared body:
                // reset, or half-closed first.
                let (path, authorization) =
                    i % 2 == 0
                    ? ("/v1/account/e3db/clients/register", "")
                    : ("/v1/storage/records", "Authorization: Bearer \(bearer)\r\n")
                try connection.send(
                    "POST \(path) HTTP/1.1\r\nHost: localhost\r\n\(authorization)Content-Type: application/json\r\n"
                        + "Content-Length: 60000\r\n\r\n" + String(repeating: " ", count: 30000))
                Thread.sleep(forTimeInterval: 0.02)
                if i % 3 == 0 {
                    connection.finishSending()
                    Thread.sleep(forTimeInterval: 0.02)
                }
                connection.reset()
            }
        }
        // Searches abandoned while they run (their storage reads and scans cancelled).
        for _ in 0..<4 {
            _ = try await client.write(api, type: "t", plain: #"{"x":"\#(String(repeating: "a", count: 16 << 10))"}"#)
        }
        let search = RawConnection.post(
            "/v2/search", token: bearer, body: Self.wildcard("*" + String(repeating: "a", count: 1022) + "b"))
        let searches = 3
        try await offCooperativePool {
            for _ in 0..<searches {
                let connection = try RawConnection(url)
                try connection.send(search)
                Thread.sleep(forTimeInterval: 0.1)
                connection.reset()
            }
        }
        func lines() throws -> [Substring] {
            String(decoding: try Data(contentsOf: log), as: UTF8.self).split(separator: "\n")
        }
        let counted = try await Self.eventually {
            try lines().filter { $0.contains("status=499") }.count >= aborted + searches
        }
        let tail = try lines().suffix(5)
        #expect(counted, "\(tail)")
        let errors = try lines().filter {
            $0.split(separator: " ").dropFirst().first.map { ["error", "critical"].contains($0) } ?? false
        }
        #expect(errors.isEmpty, "\(errors.prefix(3))")
        #expect(try await api.send("GET", "/healthz").status == 200)
    }

    @Test("L8: an upload trickled past --body-timeout gets 408 in bounded time and leaves no temporary file")
    func uploadsAreTimely() async throws {
        try await SecurityFixture.with(.sqlite, extraArguments: ["--body-timeout", "2"]) { f in
            let client = try await f.register()
            let body = Data(repeating: 7, count: 64)
            let fileURL = try await client.createFile(f.api, body: body)
            let upload = try #require(URLComponents(string: fileURL))
            let target = upload.percentEncodedPath + "?" + (upload.percentEncodedQuery ?? "")
            let url = f.server.url
            let count = body.count
            // A byte every 250 ms: the whole body would take 16 s.
            let (status, elapsed) = try await offCooperativePool { () -> (Int, Double) in
                let connection = try RawConnection(url)
                let started = Date()
                try connection.send("PUT \(target) HTTP/1.1\r\nHost: localhost\r\nContent-Length: \(count)\r\n\r\n")
                for _ in 0..<count where !connection.readable(within: 250) {
                    try connection.send("\u{7}")
                }
                return (try connection.answer().status, Date().timeIntervalSince(started))
            }
            #expect(status == 408)
            #expect(elapsed < 6, "answered after \(elapsed) s")
            let temporary = f.server.data.appendingPathComponent("files/tmp")
            let cleaned = try await Self.eventually {
                try FileManager.default.contentsOfDirectory(atPath: temporary.path).isEmpty
            }
            #expect(cleaned)
            // The claim was released: the same URL takes a prompt upload.
            let retried = try await f.api.send("PUT", target, body: body)
            #expect(retried.status == 200, "\(retried.text)")
        }
    }
}
