import E3DBAsyncHTTPClient
import E3DBClient
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
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
                    TransportRequest(method: "GET", url: "http://127.0.0.1:1/v1/healthz"), timeout: .seconds(10),
                    maxResponseSize: 1 << 20)
            }
            #expect(failure?.message.contains("127.0.0.1") == true, "\(kind): \(String(describing: failure))")
            #expect(failure?.cause != nil, "\(kind): \(String(describing: failure))")
        }
    }

    @Test("a refused request's presigned query and bearer token are in no error, message or cause")
    func secretsStayOut() async throws {
        let request = TransportRequest(
            method: "GET", url: "http://127.0.0.1:1/x?X-Amz-Signature=S3CRET",
            headers: [("Authorization", "Bearer S3CRET")])
        for kind in ClientTransport.allCases {
            let failure = await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await kind.make().send(request, timeout: .seconds(10), maxResponseSize: 1 << 20)
            }
            let error = try #require(failure, "\(kind)")
            #expect(!String(reflecting: error).contains("S3CRET"), "\(kind): \(String(reflecting: error))")
            #expect(!error.message.contains("S3CRET"), "\(kind): \(error.message)")
            let cause = try #require(error.cause, "\(kind)")
            #expect(!String(reflecting: cause).contains("S3CRET"), "\(kind): \(String(reflecting: cause))")
        }
    }

    @Test("AsyncHTTPClient: a header value it refuses (it carries the values) leaves no cause and no value")
    func invalidHeaderValue() async throws {
        let failure = await #expect(throws: E3DBError(.invalidParameter)) {
            _ = try await AsyncHTTPClientTransport().send(
                TransportRequest(
                    method: "GET", url: "http://127.0.0.1:1/x", headers: [("Authorization", "Bearer S3CRET\nX: y")]),
                timeout: .seconds(10), maxResponseSize: 1 << 20)
        }
        let error = try #require(failure)
        #expect(error.cause == nil, "\(String(reflecting: error.cause as Any))")
        #expect(!String(reflecting: error).contains("S3CRET"), "\(String(reflecting: error))")
    }

    @Test("a request that can never succeed is invalidParameter (never retried), quoting no URL or value")
    func unsendable() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        let requests = [
            TransportRequest(method: "GET", url: "http:///no-host?X-Amz-Signature=S3CRET"),
            TransportRequest(method: "GET", url: "no scheme S3CRET"),
            TransportRequest(method: "GET", url: raw.url + "/x", headers: [("Bad Name", "S3CRET")]),
            TransportRequest(method: "GET", url: raw.url + "/x", headers: [("Authorization", "Bearer S3CRET\r\nX: y")]),
            TransportRequest(method: "GET", url: raw.url + "/x", headers: [("X-Token", "S3CRET\u{0}")]),
        ]
        for kind in ClientTransport.allCases {
            let transport = kind.make()
            for request in requests {
                let failure = await #expect(throws: E3DBError(.invalidParameter), "\(kind): \(request.url)") {
                    _ = try await transport.send(request, timeout: .seconds(10), maxResponseSize: 1 << 20)
                }
                #expect(
                    !String(reflecting: failure as Any).contains("S3CRET"), "\(kind): \(String(describing: failure))")
                #expect(failure?.cause == nil, "\(kind): \(String(describing: failure?.cause))")
            }
            // Upload and download refuse the same way, before the body is opened or anything is sent.
            await #expect(throws: E3DBError(.invalidParameter), "\(kind)") {
                _ = try await transport.download(requests[2], timeout: .seconds(10)) { _ in }
            }
            await #expect(throws: E3DBError(.invalidParameter), "\(kind)") {
                _ = try await transport.upload(requests[0], bodyPath: "/dev/null", size: 0, timeout: .seconds(10))
            }
        }
    }

    @Test("the deadline and a body cut short of its Content-Length are transportFailed")
    func deadlineAndShortBody() async throws {
        let raw = try await RawHTTPServer()
        defer { raw.stop() }
        for kind in ClientTransport.allCases {
            let transport = kind.make()
            await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await transport.send(
                    TransportRequest(method: "GET", url: raw.url + "/slow"), timeout: .seconds(1),
                    maxResponseSize: 1 << 20)
            }
            let short = TransportRequest(method: "GET", url: raw.url + "/short")
            await #expect(throws: E3DBError(.transportFailed), "\(kind)") {
                _ = try await transport.send(short, timeout: .seconds(10), maxResponseSize: 1 << 20)
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
                    TransportRequest(method: "GET", url: raw.url + "/big/200000"), timeout: .seconds(10),
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
                    TransportRequest(method: "GET", url: raw.url + "/big/1000000"), timeout: .seconds(10)
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
                    TransportRequest(method: "GET", url: raw.url + "/slow"), timeout: .seconds(60),
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
