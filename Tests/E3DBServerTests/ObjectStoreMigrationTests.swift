import E3DBAsyncHTTPClient
import E3DBClient
import E3DBKit
import E3DBPrimitives
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import NIOCore
import Testing

@testable import E3DBServer

@Suite("e3dbkit-server files migrate: local bodies into the bucket, resumable, verified, then removed")
struct ObjectStoreMigrationTests {
    @Test("a local deployment moves to the bucket: interrupted and resumed, skips, replaces, leaves non-bodies")
    func migrate() async throws {
        try await SeaweedFS.with(bucket: "e3db") { s3 in try await migrate(s3) }
    }

    private func migrate(_ s3: SeaweedFS) async throws {
        let keys = ["AWS_ACCESS_KEY_ID": s3.accessKey, "AWS_SECRET_ACCESS_KEY": s3.secretKey]
        let flags = ["--s3-endpoint", s3.endpoint, "--s3-bucket", "e3db", "--s3-prefix", "bodies"]
        let bucket = S3FileBodyStore(
            options: try S3Options(endpoint: s3.endpoint, bucket: "e3db", prefix: "bodies", credentials: s3.credentials)
        )

        // A node on the local store holds files: three small ones and eight of 6 MiB (enough for a run to be
        // killed half-way).
        let local = try await ServerProcess.start()
        let transport = AsyncHTTPClientTransport()
        let identity = try await E3DBClient.register(
            token: local.token, name: "alice", apiURL: local.url, transport: transport)
        let alice = try E3DBClient(identity: identity, transport: transport)
        let scratch = try Scratch()
        var inputs: [UUID: String] = [:]
        for (n, size) in ([1, 70_000, 300_000] + Array(repeating: 6 << 20, count: 8)).enumerated() {
            let input = try scratch.file("in\(n)", count: size)
            inputs[try #require(try await alice.writeFile(type: "blob", path: input).id)] = input
        }
        await local.stopped(removingData: false)
        let data = local.data
        defer { try? FileManager.default.removeItem(at: data) }
        let files = data.appendingPathComponent("files")
        func bodiesLeft() -> Set<String> {
            Set(((try? FileManager.default.contentsOfDirectory(atPath: files.path)) ?? []))
                .intersection(inputs.keys.map { $0.uuidString.lowercased() })
        }
        #expect(bodiesLeft().count == inputs.count)

        // Entries that are not bodies to move: a symbolic link named as an id (to a file outside), a file of
        // another name, and a body that no record names.
        let outside = try scratch.file("outside", count: 1000)
        let linkID = RecordID.random()
        try FileManager.default.createSymbolicLink(
            atPath: files.appendingPathComponent(linkID.text).path, withDestinationPath: outside)
        try Data("not a body".utf8).write(to: files.appendingPathComponent("notes.txt"))
        let orphan = RecordID.random()
        try Data(count: 10).write(to: files.appendingPathComponent(orphan.text))

        let migrate = ["files", "migrate", "--data", data.path] + flags

        // Interrupted: killed once the first body left the directory, with others still to move.
        let first = try RunningProcess(ServerProcess.binary, migrate, reading: nil, environment: keys)
        var interrupted = false
        for _ in 0..<30_000 where first.isRunning {
            if bodiesLeft().count < inputs.count {
                first.signal(SIGKILL)
                interrupted = true
                break
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        _ = try await first.exit()
        #expect(interrupted && first.uncaughtSignal, "the first run ended before it could be killed")
        let remaining = bodiesLeft()
        #expect(!remaining.isEmpty && remaining.count < inputs.count, "\(remaining.count) left")

        // A key holding another body than its record's (another length): replaced by the local body.
        let victimName = try #require(remaining.sorted().last)
        let victim = try #require(RecordID(victimName))
        let junk = Data("another object under the key".utf8)
        let chunks = AsyncThrowingStream<ByteBuffer, any Error> {
            $0.yield(ByteBuffer(bytes: junk))
            $0.finish()
        }
        try await bucket.put(id: victim, chunks: chunks, size: Int64(junk.count), md5: Hashes.md5(junk))

        // Resumed, keeping the local copies: what is left is uploaded (or found there, when the killed run had
        // uploaded it but not yet removed it); the victim replaced.
        let second = try await ChildProcess.run(ServerProcess.binary, migrate + ["--keep-local"], environment: keys)
        #expect(second.status == 0, "\(second.stderr)")
        let counts = try JSONSerialization.jsonObject(with: second.stdout) as? [String: Int] ?? [:]
        #expect(counts["replaced"] == 1, "\(second.stdoutText)")
        #expect(
            (counts["uploaded"] ?? 0) + (counts["replaced"] ?? 0) + (counts["already_stored"] ?? 0)
                == remaining.count, "\(second.stdoutText)")
        #expect(counts["not_bodies"] == 2 && counts["unreferenced"] == 1 && counts["failed"] == 0)
        #expect(second.stderr.contains("is a symbolic link: not followed"), "\(second.stderr)")
        #expect(second.stderr.contains("(local copies kept)"))
        #expect(bodiesLeft() == remaining)

        // A second pass skips every body (the bucket holds them) and removes the local copies.
        let third = try await ChildProcess.run(ServerProcess.binary, migrate, environment: keys)
        #expect(third.status == 0, "\(third.stderr)")
        let again = try JSONSerialization.jsonObject(with: third.stdout) as? [String: Int] ?? [:]
        #expect(again["already_stored"] == remaining.count && again["uploaded"] == 0, "\(third.stdoutText)")
        #expect(bodiesLeft().isEmpty)

        // What is not a body stayed as it was, and never reached the bucket.
        let link = files.appendingPathComponent(linkID.text).path
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == outside)
        #expect(FileManager.default.fileExists(atPath: files.appendingPathComponent("notes.txt").path))
        #expect(FileManager.default.fileExists(atPath: files.appendingPathComponent(orphan.text).path))
        #expect(try await s3.signed("HEAD", path: "/e3db/bodies/\(linkID.text)") == 404)
        #expect(try await s3.signed("HEAD", path: "/e3db/bodies/\(orphan.text)") == 404)

        // A node on the bucket serves every old file through presigned GETs, byte-exact.
        let node = try await ServerProcess.start(data: data, extraArguments: flags, environment: keys)
        defer { node.stop(removingData: false) }
        let moved = try E3DBClient(
            identity: identity, apiURL: node.url, transport: transport, fileOrigins: [s3.endpoint])
        for (id, input) in inputs {
            let out = scratch.path("out-\(id.uuidString)")
            _ = try await moved.readFile(id, to: out, verifyChecksum: true)
            #expect(FileManager.default.contentsEqual(atPath: input, andPath: out), "\(id)")
            try FileManager.default.removeItem(atPath: out)
        }
    }

    @Test("files migrate: usage errors (no --s3-endpoint, no credentials) and a local body not the declared one")
    func refusals() async throws {
        try await SeaweedFS.with(bucket: "e3db") { s3 in try await refusals(s3) }
    }

    private func refusals(_ s3: SeaweedFS) async throws {
        let keys = ["AWS_ACCESS_KEY_ID": s3.accessKey, "AWS_SECRET_ACCESS_KEY": s3.secretKey]
        let local = try await ServerProcess.start()
        let transport = AsyncHTTPClientTransport()
        let alice = try E3DBClient(
            identity: try await E3DBClient.register(
                token: local.token, name: "alice", apiURL: local.url, transport: transport),
            transport: transport)
        let scratch = try Scratch()
        let sameSize = try #require(
            try await alice.writeFile(type: "blob", path: try scratch.file("a", count: 5000)).id)
        let shorter = try #require(try await alice.writeFile(type: "blob", path: try scratch.file("b", count: 5000)).id)
        await local.stopped(removingData: false)
        defer { try? FileManager.default.removeItem(at: local.data) }
        let files = local.data.appendingPathComponent("files")

        let noEndpoint = try await ChildProcess.run(
            ServerProcess.binary, ["files", "migrate", "--data", local.data.path], environment: keys)
        #expect(noEndpoint.status == 64 && noEndpoint.stderr.contains("needs --s3-endpoint"), "\(noEndpoint.stderr)")
        let migrate = [
            "files", "migrate", "--data", local.data.path, "--s3-endpoint", s3.endpoint, "--s3-bucket", "e3db",
        ]
        let noKeys = try await ChildProcess.run(
            ServerProcess.binary, migrate, removingEnvironment: ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])
        #expect(noKeys.status == 1 && noKeys.stderr.contains("AWS_ACCESS_KEY_ID"), "\(noKeys.stderr)")
        let closed = try await ChildProcess.run(
            ServerProcess.binary,
            [
                "files", "migrate", "--data", local.data.path, "--s3-endpoint", "http://127.0.0.1:1",
                "--s3-bucket", "e3db",
            ], environment: keys)
        #expect(closed.status == 1 && closed.stderr.contains("cannot be reached"), "\(closed.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: files.path).count == 3)  // two bodies and tmp/

        // One body with a flipped byte (the store refuses its MD5), one cut short: both left in place, exit 2.
        let flipped = files.appendingPathComponent(sameSize.uuidString.lowercased())
        var bytes = try Data(contentsOf: flipped)
        bytes[100] ^= 1
        try bytes.write(to: flipped)
        let cut = files.appendingPathComponent(shorter.uuidString.lowercased())
        try Data(try Data(contentsOf: cut).prefix(4000)).write(to: cut)
        let damaged = try await ChildProcess.run(ServerProcess.binary, migrate, environment: keys)
        #expect(damaged.status == 2, "\(damaged.stderr)")
        #expect(damaged.stderr.contains("is not its declared body (its MD5 differs)"), "\(damaged.stderr)")
        #expect(damaged.stderr.contains("not the declared"), "\(damaged.stderr)")
        #expect(!damaged.stderr.contains(s3.secretKey))
        #expect(
            FileManager.default.fileExists(atPath: flipped.path) && FileManager.default.fileExists(atPath: cut.path))
        #expect(try await s3.signed("HEAD", path: "/e3db/\(sameSize.uuidString.lowercased())") == 404)
        #expect(try await s3.signed("HEAD", path: "/e3db/\(shorter.uuidString.lowercased())") == 404)
    }
}
