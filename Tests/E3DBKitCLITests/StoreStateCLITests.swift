import E3DBKit
import E3DBTestSupport
import Foundation
import GRDB
import Testing

/// `e3dbkit store` and the authenticated collection state: a deleted record row makes `verify` exit 2 naming the
/// collection; `stats` prints the write counter and `--min-write-counter` refuses an older copy.
@Suite("CLI: e3dbkit store collection state and write counter")
struct StoreStateCLITests {
    @Test("a deleted record row: verify exits 2 naming the collection; --min-write-counter above the counter exits 2")
    func deletedRowAndCounter() async throws {
        let dir = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let passphrase = dir.appendingPathComponent("pass").path
        try Data("correct horse battery\n".utf8).write(to: URL(fileURLWithPath: passphrase))
        let store = dir.appendingPathComponent("store").path
        func run(_ command: String, _ arguments: [String], stdin: Data? = nil) async throws -> CLIRunner.Result {
            try await CLIRunner.run(
                ["store", command, "--store", store, "--passphrase-file", passphrase] + arguments, stdin: stdin)
        }
        // A plain file, so that the test edits it with SQL (CollectionStateTests edits encrypted files too).
        #expect(try await run("init", ["--kdf", "interactive", "--plain-database"]).status == 0)
        let lines = (0..<3).map { "{\"n\":\"\($0)\"}" }.joined(separator: "\n")
        let put = try await run(
            "put", ["--collection", "notes", "--type", "note", "--ndjson", "-"], stdin: Data(lines.utf8))
        #expect(put.status == 0, "\(put.stderr)")
        let stats = try await run("stats", [])
        #expect(stats.status == 0, "\(stats.stderr)")
        guard case .number(let counter) = try CanonicalJSON.parse(stats.stdout)["write_counter"] ?? .null else {
            Issue.record("no write_counter in \(stats.stdoutText)")
            return
        }
        #expect(counter >= 2)
        #expect(try await run("verify", ["--min-write-counter", String(Int(counter))]).status == 0)

        try await DatabaseQueue(path: store + "/store.sqlite").write { db in
            try db.execute(sql: "DELETE FROM records WHERE seq = (SELECT MIN(seq) FROM records)")
        }
        let verified = try await run("verify", [])
        #expect(verified.status == 2, "\(verified.stderr)")
        #expect(verified.stderr.contains("notes: storeTampered"), "\(verified.stderr)")

        let refused = try await run("stats", ["--min-write-counter", String(Int(counter) + 1)])
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("write counter"), "\(refused.stderr)")
    }
}
