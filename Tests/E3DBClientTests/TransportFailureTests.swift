import E3DBAPI
import E3DBAsyncHTTPClient
import E3DBClient
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import Testing

/// What a download's receiver throws in these tests: it must come back out of the transport as it is.
private struct ReceiverStop: Error, Equatable {}

/// Every failure of either transport is an `E3DBError` (issue 34): the transports map AsyncHTTPClient's, NIO's and
/// URLSession's errors themselves, keep the underlying error as `cause` where it holds no secret, and pass a
/// download receiver's own error on unchanged.
@Suite("Transport failures are E3DBError, for both transports", .serialized)
struct TransportFailureTests {
    @Test("a refused connection is transportFailed, with the host in the message and the system's error as cause")
    func refused() async throws {
        for kind in ClientTransport.allCases {
            let transport = kind.make()
            // Port 1 on the loopback: nothing listens there.
            let failure = await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await transport.send(
                    try HTTPRequest(method: .get, checkedURL: "http://127.0.0.1:1/v1/healthz"), body: nil,
                    timeout: .seconds(10), maxResponseSize: 1 << 20)
            }
            #expect(failure?.message.contains("127.0.0.1") == true, "\(kind): \(String(describing: failure))")
            #expect(failure?.cause != nil, "\(kind): \(String(describing: failure))")
        }
    }

    @Test("a refused request's presigned query and bearer token are in no error, message or cause")
    func secretsStayOut() async throws {
        let request = try HTTPRequest(
            method: .get, checkedURL: "http://127.0.0.1:1/x?X-Amz-Signature=S3CRET",
            headerFields: [.authorization: "Bearer S3CRET"])
        for kind in ClientTransport.allCases {
            let failure = await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await kind.make().send(request, body: nil, timeout: .seconds(10), maxResponseSize: 1 << 20)
            }
            let error = try #require(failure, "\(kind)")
            #expect(!String(reflecting: error).contains("S3CRET"), "\(kind): \(String(reflecting: error))")
            #expect(!error.message.contains("S3CRET"), "\(kind): \(error.message)")
            let cause = try #require(error.cause, "\(kind)")
            #expect(!String(reflecting: cause).contains("S3CRET"), "\(kind): \(String(reflecting: cause))")
        }
    }

    @Test("a header value HTTP cannot carry is invalidParameter before the request exists, naming no value")
    func invalidHeaderValue() throws {
        for value in ["Bearer S3CRET\r\nX: y", "Bearer S3CRET\nX: y", "S3CRET\u{0}", " S3CRET"] {
            let failure = #expect(throws: E3DBError(.invalidParameter), "\(value.debugDescription)") {
                _ = try HTTPField(name: .authorization, checkedValue: value)
            }
            #expect(failure?.context.field == "Authorization", "\(String(describing: failure))")
            #expect(failure?.cause == nil, "\(String(describing: failure?.cause))")
            #expect(!String(reflecting: failure as Any).contains("S3CRET"), "\(String(describing: failure))")
        }
        #expect(try HTTPField(name: .authorization, checkedValue: "Bearer x\ty").value == "Bearer x\ty")
    }

    @Test(
        "a server's token with a line break is invalidResponse, not cached, and nothing but the token request is sent")
    func tokenWithLineBreak() async throws {
        let s = try await ClientTrustTests.Setup.start()
        defer { s.stop() }
        let alice = try s.client(try await s.register("alice"))
        s.proxy.rewrite { _, target, response in
            guard target.hasPrefix(API.Endpoints.token.template) else { return }
            RewritingProxy.editJSON(&response) { $0["access_token"] = "S3CRET\r\nX-Injected: 1" }
        }
        let before = s.proxy.requestsServed
        let failure = await #expect(throws: E3DBError(.invalidResponse)) { _ = try await alice.read(UUID()) }
        #expect(s.proxy.requestsServed == before + 1, "the token request alone reached the server")
        #expect(failure?.message.hasPrefix("token: ") == true, "\(String(describing: failure))")
        #expect(failure?.context.field == "access_token", "\(String(describing: failure))")
        #expect(!String(reflecting: failure as Any).contains("S3CRET"), "\(String(describing: failure))")
        // The bad token was not kept: the next call fetches again (and is refused again), sending nothing else.
        await #expect(throws: E3DBError(.invalidResponse)) { _ = try await alice.read(UUID()) }
        #expect(s.proxy.requestsServed == before + 2, "a second token request, and nothing else")
        // An empty token is refused the same way.
        s.proxy.rewrite { _, target, response in
            guard target.hasPrefix(API.Endpoints.token.template) else { return }
            RewritingProxy.editJSON(&response) { $0["access_token"] = "" }
        }
        let empty = await #expect(throws: E3DBError(.invalidResponse)) { _ = try await alice.read(UUID()) }
        #expect(empty?.context.field == "access_token", "\(String(describing: empty))")
    }

    @Test("a server's file_url that cannot be requested is invalidResponse naming file_url, quoting none of it")
    func unsendableFileURL() async throws {
        let s = try await ClientTrustTests.Setup.start()
        defer { s.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-fileurl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: dir) }
        let plain = dir.appendingPathComponent("plain.bin")
        try Data(repeating: 7, count: 1000).write(to: plain)
        let alice = try s.client(try await s.register("alice"))
        let file = try #require(try await alice.writeFile(type: "doc", path: plain.path).id)
        // On the API's origin (the origin check passes) but with user info, which no request may carry.
        let proxyURL = s.proxy.url
        let withUser = "http://user:S3CRET@" + proxyURL.dropFirst("http://".count)
        s.proxy.rewrite { method, target, response in
            guard target.hasPrefix("/v1/storage/files") else { return }
            response.body = Data(
                String(decoding: response.body, as: UTF8.self).replacingOccurrences(of: proxyURL, with: withUser).utf8)
        }
        let out = dir.appendingPathComponent("out.bin").path
        let read = await #expect(throws: E3DBError(.invalidResponse)) { _ = try await alice.readFile(file, to: out) }
        #expect(read?.context.field == "file_url", "\(String(describing: read))")
        #expect(read?.message.hasPrefix("file download: ") == true, "\(String(describing: read))")
        #expect(!String(reflecting: read as Any).contains("S3CRET"), "\(String(describing: read))")
        let write = await #expect(throws: E3DBError(.invalidResponse)) {
            _ = try await alice.writeFile(type: "doc", path: plain.path)
        }
        #expect(write?.context.field == "file_url", "\(String(describing: write))")
        #expect(write?.message.hasPrefix("file upload: ") == true, "\(String(describing: write))")
    }

    @Test("a registration answer with X-Backup-Client twice, or without it, is invalidResponse before any backup")
    func backupClientOnce() async throws {
        let s = try await ClientTrustTests.Setup.start()
        defer { s.stop() }
        for count in [2, 0] {
            let backup = UUID().lowercasedString
            s.proxy.rewrite { _, target, response in
                guard target.hasPrefix(API.Endpoints.register.template) else { return }
                response.head.headerFields[.xBackupClient] = nil
                for _ in 0..<count { response.head.headerFields.append(HTTPField(name: .xBackupClient, value: backup)) }
            }
            let before = s.proxy.requestsServed
            let failure = await #expect(throws: E3DBError(.invalidResponse), "\(count)") {
                _ = try await E3DBClient.register(
                    token: s.server.token, name: "twice", apiURL: s.proxy.url, backup: true,
                    transport: ClientTransport.asyncHTTPClient.make())
            }
            #expect(failure?.context.field == "X-Backup-Client", "\(count): \(String(describing: failure))")
            #expect(failure?.context.actual == count, "\(count): \(String(describing: failure))")
            #expect(s.proxy.requestsServed == before + 1, "\(count): the registration alone reached the server")
        }
    }

    @Test("a URL that can never be requested is invalidParameter when the request is made, quoting no part of it")
    func unrequestableURL() {
        for url in [
            "http:///no-host?X-Amz-Signature=S3CRET", "no scheme S3CRET", "ftp://127.0.0.1/S3CRET",
            "http://user:S3CRET@127.0.0.1/x", "http://127.0.0.1/a b?S3CRET", "http://127.0.0.1/\u{e9}?S3CRET",
            "http://127.0.0.1/x\r\nS3CRET",
        ] {
            let failure = #expect(throws: E3DBError(.invalidParameter), "\(url.debugDescription)") {
                _ = try HTTPRequest(method: .get, checkedURL: url)
            }
            #expect(!String(reflecting: failure as Any).contains("S3CRET"), "\(String(describing: failure))")
        }
    }

    @Test("a typed request that can never succeed is invalidParameter (never retried), quoting none of it")
    func unsendable() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let authority = String(raw.url.dropFirst("http://".count))
        let path = "/x?X-Amz-Signature=S3CRET"
        let requests = [
            HTTPRequest(method: .get, scheme: "ftp", authority: authority, path: path),
            HTTPRequest(method: .get, scheme: "http", authority: nil, path: path),
            HTTPRequest(method: .get, scheme: "http", authority: "S3CRET@" + authority, path: path),
            HTTPRequest(method: .get, scheme: "http", authority: authority, path: "S3CRET"),
            HTTPRequest(method: .get, scheme: "http", authority: authority, path: "/a b?S3CRET"),
            // What would move or cut the URL's path: '/', '?' or '#' in the authority, '#' in the path.
            HTTPRequest(method: .get, scheme: "http", authority: authority + "/S3CRET", path: path),
            HTTPRequest(method: .get, scheme: "http", authority: authority + "?S3CRET", path: path),
            HTTPRequest(method: .get, scheme: "http", authority: authority + "#S3CRET", path: path),
            HTTPRequest(method: .get, scheme: "http", authority: authority, path: "/x#?X-Amz-Signature=S3CRET"),
        ]
        for kind in ClientTransport.allCases {
            let transport = kind.make()
            for request in requests {
                let failure = await #expect(throws: E3DBError(.invalidParameter), "\(kind): \(request)") {
                    _ = try await transport.send(request, body: nil, timeout: .seconds(10), maxResponseSize: 1 << 20)
                }
                #expect(
                    !String(reflecting: failure as Any).contains("S3CRET"), "\(kind): \(String(describing: failure))")
                #expect(failure?.cause == nil, "\(kind): \(String(describing: failure?.cause))")
                // Upload and download refuse the same way, before the body is opened or anything is sent.
                await #expect(throws: E3DBError(.invalidParameter), "\(kind)") {
                    _ = try await transport.download(request, timeout: .seconds(10)) { _ in }
                }
                await #expect(throws: E3DBError(.invalidParameter), "\(kind)") {
                    _ = try await transport.upload(request, bodyPath: "/dev/null", size: 0, timeout: .seconds(10))
                }
            }
        }
    }

    /// Percent-escapes (upper and lower case) that decoding and encoding again would change, a '+', an empty value,
    /// a ';' and a '~': what an S3 presigned URL and its signature are made of (under `/echo`, which answers with it).
    static let presignedTarget =
        "/echo/bucket/a%2Fb%20c~d?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261206%2fus-east-1"
        + "%2Fs3%2Faws4_request&X-Amz-Date=20261206T120000Z&X-Amz-SignedHeaders=host;content-md5&empty="
        + "&plus=a+b&X-Amz-Signature=0f%3D%2B"

    @Test("a presigned URL's path and query reach the server byte for byte, through both transports")
    func presignedQueryByteForByte() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let target = Self.presignedTarget
        let request = try HTTPRequest(method: .get, checkedURL: raw.url + target + "#fragment")
        #expect(request.path == target)
        #expect(try request.absoluteURL() == raw.url + target)
        for kind in ClientTransport.allCases {
            let transport = kind.make()
            let (sent, response) = try await transport.send(
                request, body: nil, timeout: .seconds(10), maxResponseSize: 1 << 20)
            #expect(response.status == .ok && String(decoding: sent, as: UTF8.self) == target, "\(kind)")
            var pieces = Data()
            _ = try await transport.download(request, timeout: .seconds(10)) { pieces.append($0) }
            #expect(String(decoding: pieces, as: UTF8.self) == target, "\(kind)")
        }
    }

    @Test("a URL's parts become the request's scheme, authority and path as they are written")
    func urlParts() throws {
        let request = try HTTPRequest(method: .put, checkedURL: "HTTPS://Files.Example:8443?k=%2f#top")
        #expect(request.scheme == "HTTPS" && request.authority == "Files.Example:8443" && request.path == "/?k=%2f")
        #expect(try request.absoluteURL() == "HTTPS://Files.Example:8443/?k=%2f")
        let ipv6 = try HTTPRequest(method: .get, checkedURL: "http://[::1]:8080/v1/x")
        #expect(ipv6.authority == "[::1]:8080" && ipv6.path == "/v1/x")
    }

    @Test("the deadline and a body cut short of its Content-Length are transportFailed")
    func deadlineAndShortBody() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        for kind in ClientTransport.allCases {
            let transport = kind.make()
            await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await transport.send(
                    try HTTPRequest(method: .get, checkedURL: raw.url + "/slow"), body: nil, timeout: .seconds(1),
                    maxResponseSize: 1 << 20)
            }
            let short = try HTTPRequest(method: .get, checkedURL: raw.url + "/short")
            await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await transport.send(short, body: nil, timeout: .seconds(10), maxResponseSize: 1 << 20)
            }
            await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await transport.download(short, timeout: .seconds(10)) { _ in }
            }
        }
    }

    @Test("a status below 100 (a three-digit 099) is refused: URLSession as an E3DBError, never reaching a receiver")
    func statusOutOfRange() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let body = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-099-\(UUID().uuidString)")
        try Data("body".utf8).write(to: body)
        defer { try? FileManager.default.removeItem(at: body) }
        let post = try HTTPRequest(method: .post, checkedURL: raw.url + "/status099")
        let put = try HTTPRequest(method: .put, checkedURL: raw.url + "/status099")
        let get = try HTTPRequest(method: .get, checkedURL: raw.url + "/status099")
        // Where URLSession hands the status on (Apple platforms), `HTTPResponse.Status(received:)` refuses it as
        // invalidResponse; libcurl (Linux) refuses the status line itself (URLError unsupportedURL), which the
        // transport reports as transportFailed. Either way an E3DBError, and no body reaches the receiver.
        func check(_ failure: E3DBError?, _ what: String) {
            let codes: [E3DBError.Code] = [.invalidResponse, .transportFailed]
            #expect(codes.contains { $0 == failure?.code }, "\(what): \(String(describing: failure))")
            if failure?.code == .invalidResponse { #expect(failure?.context.actual == 99, "\(what)") }
        }
        let transport = ClientTransport.urlSession.make()
        check(
            await #expect(throws: E3DBError.self) {
                _ = try await transport.send(
                    post, body: Data("body".utf8), timeout: .seconds(10), maxResponseSize: 1024)
            }, "send")
        check(
            await #expect(throws: E3DBError.self) {
                _ = try await transport.upload(put, bodyPath: body.path, size: 4, timeout: .seconds(10))
            }, "upload")
        var received = 0
        check(
            await #expect(throws: E3DBError.self) {
                _ = try await transport.download(get, timeout: .seconds(10)) { received += $0.count }
            }, "download")
        #expect(received == 0, "the body of a response that is not HTTP reached the receiver")
    }

    /// AsyncHTTPClient (1.x) takes any status below 200 but 101 for an informational head and waits for the next
    /// head, while NIO's parser treats only 100...199 as bodiless and hands on the body of a status below 100: its
    /// state machine then stops the process ("How can we receive a response body, if we haven't received a head").
    /// (a trap: SIGILL). An upstream bug no transport option avoids; this test shows it (in a child process) and fails once it is
    /// fixed, when `AsyncHTTPClientTransport` should join the test above.
    @Test("AsyncHTTPClient: a status below 100 with a body stops the process (upstream bug, in a child process)")
    func asyncHTTPClientStatusBelow100() async {
        await #expect(processExitsWith: .signal(SIGILL)) {
            let raw = try await RawHTTPServer()
            defer { raw.stop() }
            _ = try? await AsyncHTTPClientTransport().send(
                try HTTPRequest(method: .get, checkedURL: raw.url + "/status099"), body: nil, timeout: .seconds(10),
                maxResponseSize: 1024)
        }
    }

    @Test("a response with more than 1,000 header fields is invalidResponse; 1,000 are taken")
    func tooManyHeaderFields() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        for kind in ClientTransport.allCases {
            let transport = kind.make()
            // 998 fields, the Connection and the Content-Length: at the bound.
            let (_, head) = try await transport.send(
                try HTTPRequest(method: .get, checkedURL: raw.url + "/headers/998"), body: nil,
                timeout: .seconds(10), maxResponseSize: 1024)
            #expect(head.headerFields[HTTPField.Name("X-Field-997")!] == "997", "\(kind)")
            for fields in [999, 1000] {
                let request = try HTTPRequest(method: .get, checkedURL: raw.url + "/headers/\(fields)")
                let failure = await #expect(throws: E3DBError(.invalidResponse), "\(kind)") {
                    _ = try await transport.send(request, body: nil, timeout: .seconds(10), maxResponseSize: 1024)
                }
                #expect(failure?.context.actual == fields + 2, "\(kind): \(String(describing: failure))")
                await #expect(throws: E3DBError(.invalidResponse), "\(kind)") {
                    _ = try await transport.download(request, timeout: .seconds(10)) { _ in }
                }
            }
        }
    }

    @Test("a body over the limit is invalidResponse")
    func overLimit() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        for kind in ClientTransport.allCases {
            let failure = await #expect(throws: E3DBError(.invalidResponse), "\(kind)") {
                _ = try await kind.make().send(
                    try HTTPRequest(method: .get, checkedURL: raw.url + "/big/200000"), body: nil,
                    timeout: .seconds(10),
                    maxResponseSize: 100_000)
            }
            #expect(failure?.context.expected == 100_000, "\(kind): \(String(describing: failure))")
        }
    }

    @Test("what a download's receiver throws comes back unchanged")
    func receiverError() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        for kind in ClientTransport.allCases {
            await #expect(throws: ReceiverStop(), "\(kind)") {
                _ = try await kind.make().download(
                    try HTTPRequest(method: .get, checkedURL: raw.url + "/big/1000000"), timeout: .seconds(10)
                ) { _ in throw ReceiverStop() }
            }
        }
    }

    @Test("cancelling the calling task is requestCancelled")
    func cancelled() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        for kind in ClientTransport.allCases {
            let transport = kind.make()
            let task = Task {
                try await transport.send(
                    try HTTPRequest(method: .get, checkedURL: raw.url + "/slow"), body: nil, timeout: .seconds(60),
                    maxResponseSize: 1 << 20)
            }
            try await Task.sleep(for: .milliseconds(200))
            task.cancel()
            await #expect(throws: E3DBError(.requestCancelled), "\(kind)") { _ = try await task.value }
        }
    }

    @Test("the client names the operation in a transport's failure and keeps its cause")
    func clientFraming() async throws {
        for kind in ClientTransport.allCases {
            let failure = await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await E3DBClient.register(
                    token: "t", name: "n", apiURL: "http://127.0.0.1:1", transport: kind.make())
            }
            #expect(failure?.message.hasPrefix("register: ") == true, "\(kind): \(String(describing: failure))")
            #expect(failure?.context.part == "register", "\(kind): \(String(describing: failure))")
            #expect(failure?.cause != nil, "\(kind): \(String(describing: failure))")
            // A request the transport cannot send is framed the same way, and is final.
            let unsendable = await #expect(throws: E3DBError(.invalidParameter), "\(kind)") {
                _ = try await E3DBClient.register(
                    token: "t", name: "n", apiURL: "http:///no-host", transport: kind.make())
            }
            #expect(unsendable?.message.hasPrefix("register: ") == true, "\(kind): \(String(describing: unsendable))")
            #expect(unsendable?.context.part == "register", "\(kind): \(String(describing: unsendable))")
        }
    }
}
