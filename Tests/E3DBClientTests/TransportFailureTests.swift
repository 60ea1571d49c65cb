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
                    try HTTPRequest(method: .get, url: "http://127.0.0.1:1/v1/healthz"), body: nil,
                    timeout: .seconds(10), maxResponseSize: 1 << 20)
            }
            #expect(failure?.message.contains("127.0.0.1") == true, "\(kind): \(String(describing: failure))")
            #expect(failure?.cause != nil, "\(kind): \(String(describing: failure))")
        }
    }

    @Test("a refused request's presigned query and bearer token are in no error, message or cause")
    func secretsStayOut() async throws {
        let request = try HTTPRequest(
            method: .get, url: "http://127.0.0.1:1/x?X-Amz-Signature=S3CRET",
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

    @Test("a server's token with a line break is invalidParameter, and nothing but the token request is sent")
    func tokenWithLineBreak() async throws {
        let s = try await ClientTrustTests.Setup.start()
        defer { s.stop() }
        let alice = try s.client(try await s.register("alice"))
        s.proxy.rewrite { _, target, response in
            guard target.hasPrefix(API.Endpoints.token.template) else { return }
            RewritingProxy.editJSON(&response) { $0["access_token"] = "S3CRET\r\nX-Injected: 1" }
        }
        let before = s.proxy.requestsServed
        let failure = await #expect(throws: E3DBError(.invalidParameter)) { _ = try await alice.read(UUID()) }
        #expect(s.proxy.requestsServed == before + 1, "the token request alone reached the server")
        #expect(failure?.message.hasPrefix("record read: ") == true, "\(String(describing: failure))")
        #expect(failure?.context.field == "Authorization", "\(String(describing: failure))")
        #expect(!String(reflecting: failure as Any).contains("S3CRET"), "\(String(describing: failure))")
    }

    @Test("a URL that can never be requested is invalidParameter when the request is made, quoting no part of it")
    func unrequestableURL() {
        for url in [
            "http:///no-host?X-Amz-Signature=S3CRET", "no scheme S3CRET", "ftp://127.0.0.1/S3CRET",
            "http://user:S3CRET@127.0.0.1/x", "http://127.0.0.1/a b?S3CRET", "http://127.0.0.1/\u{e9}?S3CRET",
            "http://127.0.0.1/x\r\nS3CRET",
        ] {
            let failure = #expect(throws: E3DBError(.invalidParameter), "\(url.debugDescription)") {
                _ = try HTTPRequest(method: .get, url: url)
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

    @Test("a presigned URL's path and query reach the server byte for byte, through both transports")
    func presignedQueryByteForByte() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        // Percent-escapes (upper and lower case) that decoding and encoding again would change, a '+', an empty
        // value, a ';' and a '~': what an S3 presigned URL and its signature are made of.
        let target =
            "/echo/bucket/a%2Fb%20c~d?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261206%2fus-east-1"
            + "%2Fs3%2Faws4_request&X-Amz-Date=20261206T120000Z&X-Amz-SignedHeaders=host;content-md5&empty="
            + "&plus=a+b&X-Amz-Signature=0f%3D%2B"
        let request = try HTTPRequest(method: .get, url: raw.url + target + "#fragment")
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
        let request = try HTTPRequest(method: .put, url: "HTTPS://Files.Example:8443?k=%2f#top")
        #expect(request.scheme == "HTTPS" && request.authority == "Files.Example:8443" && request.path == "/?k=%2f")
        #expect(try request.absoluteURL() == "HTTPS://Files.Example:8443/?k=%2f")
        let ipv6 = try HTTPRequest(method: .get, url: "http://[::1]:8080/v1/x")
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
                    try HTTPRequest(method: .get, url: raw.url + "/slow"), body: nil, timeout: .seconds(1),
                    maxResponseSize: 1 << 20)
            }
            let short = try HTTPRequest(method: .get, url: raw.url + "/short")
            await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await transport.send(short, body: nil, timeout: .seconds(10), maxResponseSize: 1 << 20)
            }
            await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await transport.download(short, timeout: .seconds(10)) { _ in }
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
                    try HTTPRequest(method: .get, url: raw.url + "/big/200000"), body: nil, timeout: .seconds(10),
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
                    try HTTPRequest(method: .get, url: raw.url + "/big/1000000"), timeout: .seconds(10)
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
                    try HTTPRequest(method: .get, url: raw.url + "/slow"), body: nil, timeout: .seconds(60),
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
