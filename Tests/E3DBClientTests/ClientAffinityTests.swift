import E3DBAsyncHTTPClient
import E3DBCanonicalJSON
import E3DBClient
import E3DBDocuments
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Testing

@Suite("E3DBClient on the transport's event loop")
struct ClientAffinityTests {
    @Test("a task that prefers the transport's executor runs, and resumes after each request, on its event loop")
    func requestsResumeOnTheLoop() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("alice")
        let executor = try #require(AsyncHTTPClientTransport().preferredTaskExecutor as? EventLoopTaskExecutor)
        try await withTaskExecutorPreference(executor) {
            #expect(executor.isCurrent)
            let written = try await alice.write(type: "note", data: ["body": "on the loop"])
            #expect(executor.isCurrent)
            let read = try await alice.read(try #require(written.id))
            #expect(executor.isCurrent)
            #expect(read.data == written.data)
            #expect(read.data["body"] == "on the loop")
            #expect(read.signatureStatus == .verified)
        }
        #expect(!executor.isCurrent)
    }

    @Test("withTransportAffinity runs a loop of writes and reads")
    func affinityWrapper() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("alice")
        let names = try await alice.withTransportAffinity {
            var names: [String] = []
            for i in 0..<20 {
                let r = try await alice.write(type: "contact", data: ["name": "n\(i)"])
                names.append(try await alice.read(try #require(r.id)).data["name"] ?? "")
            }
            return names
        }
        #expect(names == (0..<20).map { "n\($0)" })
    }

    @Test("one client's 32 concurrent writes, their reads, and a file upload and download")
    func concurrentWritersAndFiles() async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("alice")
        let ids = try await withThrowingTaskGroup(of: UUID?.self) { group in
            for i in 0..<32 { group.addTask { try await alice.write(type: "item", data: ["n": "\(i)"]).id } }
            var ids: [UUID] = []
            for try await id in group { if let id { ids.append(id) } }
            return ids
        }
        #expect(ids.count == 32)
        var seen = Set<String>()
        for id in ids { seen.insert(try await alice.read(id).data["n"] ?? "") }
        #expect(seen == Set((0..<32).map { "\($0)" }))

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("loop-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let bytes = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try bytes.write(to: dir.appendingPathComponent("in"))
        let file = try await alice.writeFile(type: "blob", path: dir.appendingPathComponent("in").path)
        _ = try await alice.readFile(try #require(file.id), to: dir.appendingPathComponent("out").path)
        #expect(try Data(contentsOf: dir.appendingPathComponent("out")) == bytes)
    }
}
