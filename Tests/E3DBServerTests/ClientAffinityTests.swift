import E3DBClient
import E3DBDocuments
import Foundation
import Testing

@Suite("E3DBClient on the transport's event loop")
struct ClientAffinityTests {
    @Test("a task that prefers the transport's executor runs, and resumes after each request, on its event loop")
    func requestsResumeOnTheLoop() async throws {
        let server = try ServerProcess()
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
        let server = try ServerProcess()
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
}
