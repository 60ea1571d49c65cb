import E3DBAPI
import E3DBClient
import E3DBDocuments
import E3DBPrimitives
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A sample `E3DBTransport` over Foundation's URLSession, as an app that does not want AsyncHTTPClient would
/// write it (the three calls of the protocol; `preferredTaskExecutor` keeps its default, nil).
struct URLSessionTransport: E3DBTransport {
    let session: URLSession

    init(session: URLSession = URLSession(configuration: .ephemeral)) { self.session = session }

    func urlRequest(_ request: TransportRequest, timeout: Duration) throws -> URLRequest {
        guard let url = URL(string: request.url) else { throw URLError(.badURL) }
        var r = URLRequest(url: url)
        r.httpMethod = request.method
        r.timeoutInterval = Double(timeout.components.seconds)
        for (name, value) in request.headers { r.addValue(value, forHTTPHeaderField: name) }
        return r
    }

    func response(_ response: URLResponse, body: Data) throws -> TransportResponse {
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        let headers = http.allHeaderFields.compactMap { (k, v) in (k as? String).map { ($0, "\(v)") } }
        return TransportResponse(status: http.statusCode, headers: headers, body: body)
    }

    func send(_ request: TransportRequest, timeout: Duration, maxResponseSize: Int) async throws -> TransportResponse {
        var r = try urlRequest(request, timeout: timeout)
        r.httpBody = request.body
        let (body, response) = try await session.data(for: r)
        guard body.count <= maxResponseSize else { throw URLError(.dataLengthExceedsMaximum) }
        return try self.response(response, body: body)
    }

    func upload(_ request: TransportRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> TransportResponse
    {
        var r = try urlRequest(request, timeout: timeout)
        r.setValue(String(size), forHTTPHeaderField: "Content-Length")
        let (body, response) = try await session.upload(for: r, fromFile: URL(fileURLWithPath: bodyPath))
        return try self.response(response, body: body)
    }

    /// URLSession's download task spools the body to its own temporary file; the pieces are read from there.
    func download(_ request: TransportRequest, timeout: Duration, receive: (Data) async throws -> Void) async throws
        -> TransportResponse
    {
        let (file, response) = try await session.download(for: try urlRequest(request, timeout: timeout))
        defer { try? FileManager.default.removeItem(at: file) }
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        guard let http = response as? HTTPURLResponse, (200..<300).contains(http.statusCode) else {
            return try self.response(response, body: try handle.read(upToCount: 1 << 20) ?? Data())
        }
        while let piece = try handle.read(upToCount: 256 << 10), !piece.isEmpty { try await receive(piece) }
        return try self.response(response, body: Data())
    }
}

@Suite("E3DBClient over a URLSession transport")
struct URLSessionTransportTests {
    @Test("register, write, read, query, share, and a file up and down, all through URLSession")
    func everythingThroughURLSession() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let transport = URLSessionTransport()
        let identity = try await E3DBClient.register(
            token: server.token, name: "url-session", apiURL: server.url,
            transport: transport)
        let alice = try E3DBClient(identity: identity, transport: transport)
        let bob = try await server.register("bob")
        let written = try await alice.write(type: "contact", data: ["name": "Jon"], plain: ["kind": "friend"])
        #expect(try await alice.read(try #require(written.id)).data["name"] == "Jon")
        var names: [String] = []
        for try await r in alice.query(RecordQuery(types: ["contact"])) { names.append(r.data["name"] ?? "") }
        #expect(names == ["Jon"])
        try await alice.share(type: "contact", with: bob.clientID)
        #expect(try await bob.read(try #require(written.id)).data["name"] == "Jon")

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("urlsession-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.bin").path
        let bytes = Data((0..<(1 << 20) + 777).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try bytes.write(to: URL(fileURLWithPath: input))
        let file = try await alice.writeFile(type: "blob", path: input)
        let output = dir.appendingPathComponent("out.bin").path
        _ = try await alice.readFile(try #require(file.id), to: output)
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == bytes)

        let missing = await #expect(throws: E3DBError.self) { _ = try await alice.read(UUID()) }
        #expect(missing?.code == .notFound)
    }
}
