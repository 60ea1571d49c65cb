import E3DBAPI
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

@testable import E3DBURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// This process's resident memory in bytes (Linux), nil elsewhere.
func residentBytes() -> Int? {
    #if os(Linux)
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    #else
        return nil
    #endif
}

@Suite("E3DBURLSession: URLSessionTransport", .serialized)
struct URLSessionTransportTests {
    @Test("register, write, read, query, share, and a file up and down, all through URLSession")
    func everythingThroughURLSession() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("url-session", transport: .urlSession)
        let bob = try await server.register("bob")
        let written = try await alice.write(type: "contact", data: ["name": "Jon"], plain: ["kind": "friend"])
        #expect(try await alice.read(try #require(written.id)).data["name"] == "Jon")
        var names: [String] = []
        for try await r in alice.query(RecordQuery(types: ["contact"])) { names.append(r.data["name"] ?? "") }
        #expect(names == ["Jon"])
        try await alice.share(type: "contact", with: bob.clientID)
        #expect(try await bob.read(try #require(written.id)).data["name"] == "Jon")

        let scratch = try Scratch()
        let input = scratch.path("in.bin")
        let bytes = Data((0..<(1 << 20) + 777).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try bytes.write(to: URL(fileURLWithPath: input))
        let file = try await alice.writeFile(type: "blob", path: input)
        let output = scratch.path("out.bin")
        _ = try await alice.readFile(try #require(file.id), to: output)
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == bytes)

        let missing = await #expect(throws: E3DBError.self) { _ = try await alice.read(UUID()) }
        #expect(missing?.code == .notFound)
    }

    @Test("a 256 MiB download to a slow receiver arrives whole, in order, in pieces, in bounded memory")
    func slowReceiverBoundedMemory() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let size = 256 << 20
        let transport = URLSessionTransport()
        // What the server sends: byte i is i mod 256. Pieces are compared with a slice of it.
        let pattern = Data((0..<(4 << 20) + 256).map { UInt8(truncatingIfNeeded: $0) })
        var received = 0
        var pieces = 0
        var inOrder = true
        let (body, response) = try await transport.download(
            try HTTPRequest(method: .get, checkedURL: raw.url + "/big/\(size)"), timeout: .seconds(120)
        ) { piece in
            if pieces == 0 {
                // Lag well behind: the whole body reaches this host meanwhile.
                try await Task.sleep(for: .seconds(2))
            }
            let start = received % 256
            if piece.count > pattern.count - start || piece != pattern[start..<start + piece.count] {
                inOrder = false
            }
            received += piece.count
            pieces += 1
        }
        #expect(response.status == .ok && body.isEmpty)
        #expect(received == size && inOrder)
        #expect(pieces > 64, "\(pieces) pieces")
        // What bounds the memory: never more than `memoryAhead` bytes held ahead of the receiver (the rest waited
        // in the spill file). The process's resident size is not measured: tests run in parallel in it.
        #expect(transport.bufferedBytesHighWater > 0)
        #expect(
            transport.bufferedBytesHighWater <= URLSessionTransport.memoryAhead,
            "\(transport.bufferedBytesHighWater) bytes held in memory ahead of the receiver")
    }

    @Test("a 256 MiB upload goes from the file with its Content-Length, in bounded memory")
    func streamedUpload() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let scratch = try Scratch()
        let size = 256 << 20
        let path = try scratch.file("upload", count: size)
        let before = residentBytes()
        let peak = MemoryPeak()
        let sampler = Task {
            while !Task.isCancelled {
                peak.sample()
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let (body, response) = try await URLSessionTransport().upload(
            try HTTPRequest(method: .post, checkedURL: raw.url + "/upload"), bodyPath: path, size: Int64(size),
            timeout: .seconds(120))
        sampler.cancel()
        await sampler.value
        #expect(response.status == .ok)
        #expect(String(decoding: body, as: UTF8.self) == "\(size) \(size)", "Content-Length, bytes read")
        // Other suites run in this process at the same time, so the margin is wide: a body read into memory would
        // add its whole 256 MiB.
        if let before {
            let growth = peak.bytes - before
            #expect(growth < size / 2, "resident memory grew by \(growth >> 20) MiB for a \(size >> 20) MiB file")
        }
    }

    @Test("maxResponseSize is enforced while receiving; a non-2xx download body is collected up to 1 MiB")
    func responseLimits() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let transport = URLSessionTransport()
        let big = try HTTPRequest(method: .get, checkedURL: raw.url + "/big/\(64 << 20)")
        let started = ContinuousClock.now
        let refused = await #expect(throws: E3DBError.self) {
            _ = try await transport.send(big, body: nil, timeout: .seconds(60), maxResponseSize: 1 << 20)
        }
        #expect(refused?.code == .invalidResponse && refused?.context.expected == 1 << 20)
        #expect(ContinuousClock.now - started < .seconds(30))
        let (small, response) = try await transport.send(
            try HTTPRequest(method: .get, checkedURL: raw.url + "/big/1000"), body: nil, timeout: .seconds(10),
            maxResponseSize: 1000)
        #expect(response.status == .ok && small.count == 1000)
    }

    @Test("a body shorter than its Content-Length is transportFailed, for send and for download")
    func shortBody() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let transport = URLSessionTransport()
        let request = try HTTPRequest(method: .get, checkedURL: raw.url + "/short")
        await #expect(throws: E3DBError(.transportFailed)) {
            _ = try await transport.send(request, body: nil, timeout: .seconds(10), maxResponseSize: 1 << 20)
        }
        await #expect(throws: E3DBError(.transportFailed)) {
            _ = try await transport.download(request, timeout: .seconds(10)) { _ in }
        }
    }

    @Test("a redirect is returned, not followed (the Location's server is never contacted)")
    func redirectRefused() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let transport = URLSessionTransport()
        let request = try HTTPRequest(method: .get, checkedURL: raw.url + "/redirect")
        let (_, sent) = try await transport.send(request, body: nil, timeout: .seconds(10), maxResponseSize: 1 << 20)
        #expect(sent.status == .found && sent.headerFields[.location] == "http://127.0.0.1:1/elsewhere")
        let (_, downloaded) = try await transport.download(request, timeout: .seconds(10)) { _ in
            Issue.record("a redirect's body was handed on")
        }
        #expect(downloaded.status == .found)
    }

    @Test("the timeout ends an exchange that gets no answer; the client reports it as transportFailed, timed out")
    func timeout() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let transport = URLSessionTransport()
        let started = ContinuousClock.now
        // The transport throws E3DBError, with a URLError of the same code (and no user info: no URL) as its cause.
        let sent = await #expect(throws: E3DBError(.transportFailed)) {
            _ = try await transport.send(
                try HTTPRequest(method: .get, checkedURL: raw.url + "/slow"), body: nil, timeout: .seconds(1),
                maxResponseSize: 1 << 20)
        }
        #expect((sent?.cause as? URLError)?.code == .timedOut, "\(String(describing: sent?.cause))")
        #expect((sent?.cause as? URLError)?.userInfo.isEmpty == true)
        await #expect(throws: E3DBError(.transportFailed)) {
            _ = try await transport.download(
                try HTTPRequest(method: .get, checkedURL: raw.url + "/slow"), timeout: .seconds(1)
            ) { _ in }
        }
        #expect(ContinuousClock.now - started < .seconds(15))
        // Registration is not retried: one timeout, mapped where the client maps every transport failure.
        let failed = await #expect(throws: E3DBError.self) {
            _ = try await E3DBClient.register(token: "t", name: "n", apiURL: raw.url + "/slow", transport: transport)
        }
        #expect(failed?.code == .transportFailed)
        #expect(failed?.message.contains("URLError -1001: timed out") == true, "\(String(describing: failed))")
    }

    @Test("a refused request's cause is URLSession's URLError without its user info, which holds the URL")
    func causeWithoutUserInfo() async throws {
        let url = "http://127.0.0.1:1/x?X-Amz-Signature=S3CRET"
        // What URLSession itself throws for it: the URL, signature and all, in the user info.
        let raw = await #expect(throws: URLError.self) {
            _ = try await URLSession(configuration: .ephemeral).data(from: try #require(URL(string: url)))
        }
        #expect(raw?.userInfo.isEmpty == false)
        #expect(String(reflecting: raw as Any).contains("S3CRET"), "\(String(reflecting: raw as Any))")
        let failure = await #expect(throws: E3DBError(.transportFailed)) {
            _ = try await URLSessionTransport().send(
                try HTTPRequest(method: .get, checkedURL: url), body: nil, timeout: .seconds(10),
                maxResponseSize: 1 << 20)
        }
        let cause = try #require(failure?.cause as? URLError)
        #expect(cause.code == raw?.code)
        #expect(cause.userInfo.isEmpty, "\(cause.userInfo)")
        #expect(!String(reflecting: cause).contains("S3CRET"))
    }

    @Test("cancelling the calling task ends a download at once")
    func cancellation() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let transport = URLSessionTransport()
        let task = Task {
            try await transport.download(
                try HTTPRequest(method: .get, checkedURL: raw.url + "/slow"), timeout: .seconds(60)
            ) { _ in }
        }
        try await Task.sleep(for: .milliseconds(200))
        let started = ContinuousClock.now
        task.cancel()
        await #expect(throws: E3DBError(.requestCancelled)) { _ = try await task.value }
        #expect(ContinuousClock.now - started < .seconds(5))
    }
}

/// `URLSessionTransport.failure(_:url:)`: URLSession's errors as the transport reports them (issue 34).
@Suite("E3DBURLSession: URLError mapping")
struct URLSessionFailureMappingTests {
    static let url = "https://files.example/bucket/key?X-Amz-Signature=S3CRET"

    /// A URLError as URLSession makes it: with the request's URL (and a description) in its user info.
    static func urlError(_ code: URLError.Code, description: String? = nil) -> URLError {
        var info: [String: Any] = [NSURLErrorFailingURLErrorKey: URL(string: url) as Any]
        if let description { info[NSLocalizedDescriptionKey] = description }
        return URLError(code, userInfo: info)
    }

    @Test(
        "TLS verdicts are TLS codes, never retried; a delegate that cancels the challenge is a failed handshake",
        arguments: [
            (URLError.Code.serverCertificateUntrusted, E3DBError.Code.untrustedCertificate),
            (.serverCertificateHasUnknownRoot, .untrustedCertificate),
            (.serverCertificateHasBadDate, .certificateExpired),
            (.serverCertificateNotYetValid, .certificateExpired),
            (.secureConnectionFailed, .tlsHandshakeFailed),
            (.clientCertificateRejected, .tlsHandshakeFailed),
            (.cancelled, .tlsHandshakeFailed),
            (.userCancelledAuthentication, .tlsHandshakeFailed),
            (.cannotConnectToHost, .transportFailed),
            (.timedOut, .transportFailed),
        ])
    func codes(urlCode: URLError.Code, expected: E3DBError.Code) {
        let failure = URLSessionTransport.failure(Self.urlError(urlCode), url: Self.url)
        #expect(failure.code == expected, "\(failure)")
        #expect(failure.message.contains("files.example"), "\(failure)")
        #expect(failure.context.part == (expected == .transportFailed ? nil : "tls"), "\(failure)")
        let cause = failure.cause as? URLError
        #expect(cause?.code == urlCode && cause?.userInfo.isEmpty == true, "\(String(describing: failure.cause))")
        #expect(!String(reflecting: failure).contains("S3CRET"))
        #expect(!String(reflecting: failure.cause as Any).contains("S3CRET"))
    }

    @Test("Linux: libcurl's text of an unknown error decides the TLS code and is kept, unless it quotes the URL")
    func libcurlText() {
        let cases: [(String, E3DBError.Code)] = [
            ("SSL certificate problem: unable to get local issuer certificate", .untrustedCertificate),
            ("SSL certificate problem: self-signed certificate in certificate chain", .untrustedCertificate),
            ("SSL certificate problem: certificate has expired", .certificateExpired),
            ("SSL: no alternative certificate subject name matches target host name 'x'", .hostnameMismatch),
            ("OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to files.example:443", .tlsHandshakeFailed),
            ("Recv failure: Connection reset by peer", .transportFailed),
        ]
        for (text, expected) in cases {
            let failure = URLSessionTransport.failure(Self.urlError(.unknown, description: text), url: Self.url)
            #expect(failure.code == expected, "\(text): \(failure)")
            #expect(failure.message.contains(text), "\(failure)")
            #expect((failure.cause as? URLError)?.userInfo.isEmpty == true)
        }
        // A description that quotes the query (a presigned signature) is left out.
        let quoting = URLSessionTransport.failure(
            Self.urlError(.unknown, description: "SSL: failed for /bucket/key?X-Amz-Signature=S3CRET"), url: Self.url)
        #expect(quoting.code == .transportFailed, "\(quoting)")
        #expect(!String(reflecting: quoting).contains("S3CRET"), "\(quoting)")
        #expect(quoting.message.contains("URLError -1"), "\(quoting)")
    }
}

/// The highest resident memory sampled.
final class MemoryPeak: Sendable {
    private let highest = Mutex(0)

    func sample() {
        guard let now = residentBytes() else { return }
        highest.withLock { $0 = max($0, now) }
    }

    var bytes: Int { highest.withLock { $0 } }
}
