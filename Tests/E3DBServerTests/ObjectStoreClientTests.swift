import AsyncHTTPClient
import E3DBAsyncHTTPClient
import E3DBClient
import E3DBKit
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import NIOHTTP1
import Synchronization
import Testing

@testable import E3DBServer

/// A transport whose file uploads are handed to `misuse` with the presigned URL and the encrypted body instead of
/// being sent: the test does with the URL what a misbehaving client would, then the client commits.
private struct MisusingUploadTransport: E3DBTransport {
    let inner: any E3DBTransport = AsyncHTTPClientTransport()
    let misuse: @Sendable (_ url: String, _ body: Data, _ md5: String) async throws -> Void

    func send(_ request: HTTPRequest, body: Data?, timeout: Duration, maxResponseSize: Int) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.send(request, body: body, timeout: timeout, maxResponseSize: maxResponseSize)
    }

    func upload(_ request: HTTPRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> (Data, HTTPResponse)
    {
        let md5 = HTTPField.Name("Content-MD5").flatMap { request.headerFields[$0] } ?? ""
        try await misuse(try request.absoluteURL(), try Data(contentsOf: URL(fileURLWithPath: bodyPath)), md5)
        return (Data(), HTTPResponse(status: .ok))
    }

    func download(_ request: HTTPRequest, timeout: Duration, receive: (Data) async throws -> Void) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.download(request, timeout: timeout, receive: receive)
    }
}

@Suite("A server on the object store: e3dbkit client's --file-origin, and presigned URLs misused")
struct ObjectStoreClientTests {
    static let bucket = "e3db"

    /// A server on SeaweedFS (bucket `e3db`, prefix `bodies`), for `body`.
    static func withServer(_ body: (SeaweedFS, ServerProcess) async throws -> Void) async throws {
        try await SeaweedFS.with(bucket: bucket) { s3 in
            let server = try await ServerProcess.start(
                extraArguments: ["--s3-endpoint", s3.endpoint, "--s3-bucket", bucket, "--s3-prefix", "bodies"],
                environment: ["AWS_ACCESS_KEY_ID": s3.accessKey, "AWS_SECRET_ACCESS_KEY": s3.secretKey])
            defer { server.stop() }
            try await body(s3, server)
        }
    }

    @Test("client file put|get: the bucket's URLs refused by default, allowed by --file-origin or E3DBKIT_FILE_ORIGINS")
    func fileOrigins() async throws {
        try await Self.withServer { s3, server in try await fileOrigins(s3, server) }
    }

    private func fileOrigins(_ s3: SeaweedFS, _ server: ServerProcess) async throws {
        let scratch = try Scratch()
        let token = scratch.path("token")
        try Data(server.token.utf8).write(to: URL(fileURLWithPath: token))
        let config = scratch.path("alice.json")
        let registered = try await CLIRunner.run([
            "client", "register", "--api-url", server.url, "--token-file", token, "--name", "alice", "--out", config,
        ])
        #expect(registered.status == 0, "\(registered.stderr)")
        let input = try scratch.file("in", count: (2 << 20) + 12345)
        let clean: Set<String> = ["E3DBKIT_FILE_ORIGINS"]

        // The API's origin is the only default: the presigned PUT is refused before anything is sent to it.
        let refused = try await CLIRunner.run(
            ["client", "file", "put", "--config", config, "--type", "blob", input], removingEnvironment: clean)
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("file_url is on \(s3.endpoint)"), "\(refused.stderr)")
        #expect(refused.stderr.contains("--file-origin ORIGIN or E3DBKIT_FILE_ORIGINS"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("X-Amz-Signature"))

        // Allowed with --file-origin (repeatable; a trailing slash is the same origin).
        let put = try await CLIRunner.run(
            [
                "client", "file", "put", "--config", config, "--type", "blob", "--file-origin", "https://cdn.example",
                "--file-origin", s3.endpoint + "/", input,
            ], removingEnvironment: clean)
        #expect(put.status == 0, "\(put.stderr)")
        let meta = (try JSONSerialization.jsonObject(with: put.stdout) as? [String: Any])?["meta"] as? [String: Any]
        let id = try #require(meta?["record_id"] as? String)
        #expect(try await s3.signed("HEAD", path: "/\(Self.bucket)/bodies/\(id)") == 200)

        // The download: refused without, byte-exact with E3DBKIT_FILE_ORIGINS (comma-separated, blanks ignored).
        let out = scratch.path("out")
        let denied = try await CLIRunner.run(
            ["client", "file", "get", "--config", config, id, out], removingEnvironment: clean)
        #expect(denied.status == 2 && denied.stderr.contains("--file-origin"), "\(denied.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
        let get = try await CLIRunner.run(
            ["client", "file", "get", "--config", config, "--verify-checksum", id, out],
            environment: ["E3DBKIT_FILE_ORIGINS": "https://cdn.example, \(s3.endpoint)"])
        #expect(get.status == 0, "\(get.stderr)")
        #expect(FileManager.default.contentsEqual(atPath: input, andPath: out))

        // Not an origin: a usage error naming it and where it came from.
        for (arguments, environment, source) in [
            (["--file-origin", s3.endpoint + "/bucket"], [String: String](), "--file-origin"),
            (["--file-origin", "s3.example:9000"], [:], "--file-origin"),
            ([], ["E3DBKIT_FILE_ORIGINS": "ftp://files.example"], "E3DBKIT_FILE_ORIGINS"),
            ([], ["E3DBKIT_FILE_ORIGINS": "https://user@files.example"], "E3DBKIT_FILE_ORIGINS"),
        ] {
            let bad = try await CLIRunner.run(
                ["client", "file", "get", "--config", config, "--force", id, out] + arguments,
                environment: environment)
            #expect(bad.status == 64, "\(arguments) \(environment): \(bad.stderr)")
            #expect(bad.stderr.contains("\(source): ") && bad.stderr.contains("is not an origin"), "\(bad.stderr)")
        }
        let help = try await CLIRunner.run(["client", "file", "get", "--help"])
        #expect(help.stdoutText.contains("--file-origin") && help.stdoutText.contains("E3DBKIT_FILE_ORIGINS"))
    }

    @Test("presigned URLs misused: another size or MD5, an expired URL, a URL for another id; commits refused")
    func misuse() async throws {
        try await Self.withServer { s3, server in try await misuse(s3, server) }
    }

    private func misuse(_ s3: SeaweedFS, _ server: ServerProcess) async throws {
        let scratch = try Scratch()
        let input = try scratch.file("in", count: 200_000)
        let identity = try await E3DBClient.register(
            token: server.token, name: "alice", apiURL: server.url, transport: AsyncHTTPClientTransport())
        let honest = try E3DBClient(
            identity: identity, transport: AsyncHTTPClientTransport(), fileOrigins: [s3.endpoint])
        let store = S3FileBodyStore(
            options: try S3Options(
                endpoint: s3.endpoint, bucket: Self.bucket, prefix: "bodies", credentials: s3.credentials))
        @Sendable func key(_ url: String) -> String {
            URLComponents(string: url)?.path.split(separator: "/").last.map(String.init) ?? ""
        }
        func client(_ misuse: @escaping @Sendable (String, Data, String) async throws -> Void) throws -> E3DBClient {
            try E3DBClient(
                identity: identity, transport: MisusingUploadTransport(misuse: misuse), fileOrigins: [s3.endpoint])
        }
        /// The commit's refusal: its status and message.
        func refusedCommit(_ client: E3DBClient) async -> (status: Int?, message: String) {
            do {
                _ = try await client.writeFile(type: "blob", path: input)
                return (nil, "the commit was accepted")
            } catch let error as E3DBError {
                return (error.context.actual, error.message)
            } catch {
                return (nil, "\(error)")
            }
        }
        let statuses = Mutex<[String: UInt]>([:])
        let keys = Mutex<[String]>([])

        // Another size (one byte more, or less) or another MD5 under the signed one: the store refuses each, nothing
        // is stored, and the commit is 400.
        let sizes = try client { url, body, md5 in
            keys.withLock { $0.append(key(url)) }
            var other = body
            other[other.count / 2] ^= 1
            let results: [String: UInt] = [
                "longer": try await send(.PUT, url, body: body + [0], headers: [("Content-MD5", md5)]).status,
                "shorter": try await send(.PUT, url, body: body.dropLast(), headers: [("Content-MD5", md5)]).status,
                "other MD5, declared header": try await send(.PUT, url, body: other, headers: [("Content-MD5", md5)])
                    .status,
                "other MD5, its own header": try await send(
                    .PUT, url, body: other, headers: [("Content-MD5", Hashes.md5(other).base64EncodedString())]
                ).status,
                "no Content-MD5": try await send(.PUT, url, body: other).status,
            ]
            statuses.withLock { $0 = results }
        }
        let badBody = await refusedCommit(sizes)
        #expect(badBody.status == 400 && badBody.message.contains("has not been uploaded"), "\(badBody)")
        #expect(
            statuses.withLock { $0 }
                == [
                    "longer": 403, "shorter": 403, "other MD5, declared header": 400, "other MD5, its own header": 403,
                    "no Content-MD5": 403,
                ], "\(statuses.withLock { $0 })")
        let badKey = try #require(keys.withLock { $0.last })
        #expect(try await s3.signed("HEAD", path: "/\(Self.bucket)/bodies/\(badKey)") == 404)

        // An expired URL: what the server signs for this pending file, signed 20 minutes ago for 60 s (the server
        // signs for an hour; the store compares X-Amz-Date + X-Amz-Expires with its clock).
        let expired = try client { url, body, md5 in
            let id = try #require(RecordID(key(url)))
            let now = Int64(Date().timeIntervalSince1970)
            let md5Bytes = try #require(Data(base64Encoded: md5))
            let old = try #require(
                store.uploadURL(id: id, size: Int64(body.count), md5: md5Bytes, now: now - 1200, expires: now - 1140))
            let fresh = try #require(
                store.uploadURL(id: id, size: Int64(body.count), md5: md5Bytes, now: now, expires: now + 60))
            #expect(fresh.hasPrefix(url.prefix { $0 != "?" }), "the test signs the server's key")
            let status = try await send(.PUT, old, body: body, headers: [("Content-MD5", md5)]).status
            statuses.withLock { $0 = ["expired": status] }
        }
        let late = await refusedCommit(expired)
        #expect(statuses.withLock { $0 } == ["expired": 403])
        #expect(late.status == 400 && late.message.contains("has not been uploaded"), "\(late)")

        // A URL signed for one id, aimed at another key (an existing file's): 403, and that file is unchanged. The
        // URL then still uploads its own body, and that commit succeeds.
        let victim = try #require(try await honest.writeFile(type: "blob", path: input).id)
        let victimKey = victim.uuidString.lowercased()
        let retargeted = try client { url, body, md5 in
            let aimed = url.replacingOccurrences(of: key(url), with: victimKey)
            var other = body
            other[0] ^= 1
            let status = try await send(
                .PUT, aimed, body: other, headers: [("Content-MD5", Hashes.md5(other).base64EncodedString())]
            ).status
            let own = try await send(.PUT, url, body: body, headers: [("Content-MD5", md5)]).status
            statuses.withLock { $0 = ["other key": status, "own key": own] }
        }
        let committed = try await retargeted.writeFile(type: "blob", path: input)
        #expect(statuses.withLock { $0 } == ["other key": 403, "own key": 200])
        #expect(committed.id != nil && committed.id != victim)
        let out = scratch.path("victim")
        _ = try await honest.readFile(victim, to: out, verifyChecksum: true)
        #expect(FileManager.default.contentsEqual(atPath: input, andPath: out))
    }
}
