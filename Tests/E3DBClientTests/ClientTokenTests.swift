import E3DBAPI
import E3DBAsyncHTTPClient
import E3DBCanonicalJSON
import E3DBClient
import E3DBDocuments
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import Synchronization
import Testing

/// A transport that counts the token requests it passes to a real one, and sends a request that carries the
/// `revoked` bearer token with one the server never issued instead (so the server answers 401, as for a revoked
/// token), recording the headers of every request it sends. While `holdTokens` is set, a token request waits before
/// it goes to the server (a slow token endpoint).
final class TokenCountingTransport: E3DBTransport {
    let inner: any E3DBTransport
    let tokenRequests = Atomic<Int>(0)
    let holdTokens = Atomic<Bool>(false)
    let revoked = Mutex<String?>(nil)
    let sent = Mutex<[HTTPRequest]>([])

    init(inner: any E3DBTransport) { self.inner = inner }

    func observe(_ request: HTTPRequest) -> HTTPRequest {
        var r = request
        if r.path?.hasSuffix(API.Endpoints.token.template) == true {
            tokenRequests.add(1, ordering: .relaxed)
        } else if let revoked = revoked.withLock({ $0 }), r.headerFields[.authorization] == revoked {
            r.headerFields[.authorization] = "Bearer " + String(repeating: "0", count: 64)
        }
        sent.withLock { $0.append(r) }
        return r
    }

    func send(_ request: HTTPRequest, body: Data?, timeout: Duration, maxResponseSize: Int) async throws
        -> (Data, HTTPResponse)
    {
        let request = observe(request)
        if request.path?.hasSuffix(API.Endpoints.token.template) == true {
            while holdTokens.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(5)) }
        }
        return try await inner.send(request, body: body, timeout: timeout, maxResponseSize: maxResponseSize)
    }

    func upload(_ request: HTTPRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.upload(observe(request), bodyPath: bodyPath, size: size, timeout: timeout)
    }

    func download(_ request: HTTPRequest, timeout: Duration, receive: (Data) async throws -> Void) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.download(observe(request), timeout: timeout, receive: receive)
    }
}

@Suite("E3DBClient's bearer token against e3dbkit-server")
struct ClientTokenTests {
    /// A client of a registered identity over `transport`.
    static func client(_ server: ServerProcess, _ transport: TokenCountingTransport) async throws -> E3DBClient {
        let identity = try await E3DBClient.register(
            token: server.token, name: "alice", apiURL: server.url, transport: AsyncHTTPClientTransport())
        return try E3DBClient(identity: identity, transport: transport)
    }

    @Test("32 concurrent requests of a client without a token fetch one token")
    func singleFlight() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let transport = TokenCountingTransport(inner: AsyncHTTPClientTransport())
        let alice = try await Self.client(server, transport)
        try await withThrowingTaskGroup { group in
            for _ in 0..<32 { group.addTask { _ = try await alice.clientInfo(alice.clientID) } }
            try await group.waitForAll()
        }
        #expect(transport.tokenRequests.load(ordering: .relaxed) == 1)
    }

    @Test(
        "a caller cancelled while it waits for the shared token fetch leaves at once; the fetch goes on for the other")
    func cancelledWaiterLeaves() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let transport = TokenCountingTransport(inner: AsyncHTTPClientTransport())
        let alice = try await Self.client(server, transport)
        transport.holdTokens.store(true, ordering: .releasing)
        // Bounds a regression (a cancelled caller that keeps waiting): the fetch is let through after 10 s anyway.
        let backstop = Task {
            try await Task.sleep(for: .seconds(10))
            transport.holdTokens.store(false, ordering: .releasing)
        }
        defer { backstop.cancel() }
        let patient = Task { try await alice.clientInfo(alice.clientID) }
        let impatient = Task { try await alice.clientInfo(alice.clientID) }
        let deadline = ContinuousClock.now + .seconds(5)
        while transport.tokenRequests.load(ordering: .relaxed) < 1 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(transport.tokenRequests.load(ordering: .relaxed) == 1)
        try await Task.sleep(for: .milliseconds(50))  // both callers are waiting for the one fetch by now
        let cancelledAt = ContinuousClock.now
        impatient.cancel()
        let outcome = await impatient.result
        #expect(ContinuousClock.now - cancelledAt < .seconds(1))
        #expect(throws: E3DBError(.requestCancelled)) { _ = try outcome.get() }
        // The fetch is still held at the token endpoint: the cancelled caller did not wait for it.
        let stillHeld = transport.holdTokens.load(ordering: .acquiring)
        #expect(stillHeld)
        transport.holdTokens.store(false, ordering: .releasing)
        _ = try await patient.value
        // The fetched token was recorded: a later request fetches none.
        await #expect(throws: E3DBError(.notFound)) { _ = try await alice.read(UUID()) }
        #expect(transport.tokenRequests.load(ordering: .relaxed) == 1)
    }

    @Test("requests refused their token (401) fetch one new token between them and keep their other headers")
    func refusedTokenRefetchedOnce() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let transport = TokenCountingTransport(inner: AsyncHTTPClientTransport())
        let alice = try await Self.client(server, transport)
        // One write per type first, so that each write below starts with its record's POST (a JSON body).
        for i in 0..<8 { _ = try await alice.write(type: "note\(i)", data: ["n": "first"]) }
        #expect(transport.tokenRequests.load(ordering: .relaxed) == 1)
        let first = try #require(transport.sent.withLock { $0.last?.headerFields[.authorization] })
        transport.revoked.withLock { $0 = first }
        transport.sent.withLock { $0 = [] }
        let written = try await withThrowingTaskGroup { group in
            for i in 0..<8 { group.addTask { try await alice.write(type: "note\(i)", data: ["n": "\(i)"]) } }
            return try await group.reduce(into: [ClientRecord]()) { $0.append($1) }
        }
        #expect(written.count == 8)
        #expect(transport.tokenRequests.load(ordering: .relaxed) == 2)
        // Every request sent one Authorization header; each refused one was sent again with the new token and
        // the same other headers (a JSON body's Content-Type among them).
        let sent = transport.sent.withLock { $0 }
        for request in sent {
            #expect(request.headerFields[values: .authorization].count == 1)
        }
        func others(_ r: HTTPRequest) -> [HTTPField] { r.headerFields.filter { $0.name != .authorization } }
        let refused = sent.filter { $0.headerFields[.authorization]?.hasSuffix("0000") == true }
        #expect(refused.contains { $0.headerFields[.contentType] == "application/json" })
        for r in refused {
            #expect(
                sent.contains {
                    $0.method == r.method && $0.authority == r.authority && $0.path == r.path
                        && others($0) == others(r)
                        && $0.headerFields[.authorization] != r.headerFields[.authorization]
                        && $0.headerFields[.authorization] != first
                })
        }
    }
}
