import E3DBCanonicalJSON
import E3DBClient
import E3DBDocuments
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Testing

@Suite("E3DBClient v1 query: user filter and resuming after an index")
struct ClientQueryTests {
    @Test(
        "users filters on user_id; afterIndex resumes where an earlier iteration stopped",
        arguments: ClientTransport.allCases)
    func usersAndResume(transport: ClientTransport) async throws {
        let server = try await ServerProcess.start()
        defer { server.stop() }
        let alice = try await server.register("alice", transport: transport)
        for i in 0..<5 { _ = try await alice.write(type: "item", data: ["n": "\(i)"]) }

        var mine: [String] = []
        for try await r in alice.query(RecordQuery(types: ["item"], users: [alice.clientID])) {
            mine.append(r.data["n"] ?? "")
        }
        #expect(mine == ["0", "1", "2", "3", "4"])
        var nobody = 0
        for try await _ in alice.query(RecordQuery(types: ["item"], users: [UUID()])) { nobody += 1 }
        #expect(nobody == 0)

        // Read the first page of two, then resume from its last index with a new query.
        var iterator = alice.query(RecordQuery(types: ["item"], pageSize: 2)).makeAsyncIterator()
        var first: [String] = []
        for _ in 0..<2 { first.append(try await iterator.next()?.data["n"] ?? "") }
        #expect(first == ["0", "1"])
        var rest: [String] = []
        for try await r in alice.query(RecordQuery(types: ["item"], pageSize: 2, afterIndex: iterator.lastIndex)) {
            rest.append(r.data["n"] ?? "")
        }
        #expect(rest == ["2", "3", "4"])
    }
}
