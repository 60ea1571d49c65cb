import E3DBAsyncHTTPClient
import E3DBClient
import E3DBKit
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Testing

/// The server's SQLite database edited by someone who can write the data directory (security review 3, issue 32):
/// every column of every table with rows given a value of the wrong type, a NULL or a blob (in turn), after its
/// constraints went through `writable_schema`. The server then starts on it and answers its clients' reads: it
/// either starts or exits with its own error, never by a signal, and once started it answers every request and
/// is still running (a row read through GRDB's typed subscripts used to trap).
@Suite("E3DBServer: an edited SQLite database never crashes the server")
struct EditedServerDatabaseTests {
    @Test("every column of server.sqlite edited: the server starts or refuses, never dies, and answers reads")
    func everyColumn() async throws {
        let server = try await ServerProcess.start()
        let a = try await server.register("a")
        let b = try await server.register("b")
        let record = try #require(try await a.write(type: "t", data: ["k": "v"]).id)
        try await a.share(type: "t", with: b.clientID)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("edited-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let body = scratch.appendingPathComponent("body.txt")
        try Data("a file".utf8).write(to: body)
        _ = try await a.writeFile(type: "f", path: body.path)
        _ = try await b.clientInfo(a.clientID)
        await server.stopped(removingData: false)
        let template = server.data
        defer { try? FileManager.default.removeItem(at: template) }

        let columns = try SQLiteEdits.columns(of: template.appendingPathComponent("server.sqlite").path)
        #expect(columns.count > 40, "\(columns)")
        var failures: [String] = []
        for (index, column) in columns.enumerated() {
            let variant = SQLiteEdits.Variant.allCases[index % 3]
            let copy = scratch.appendingPathComponent("data-\(index)")
            try FileManager.default.copyItem(at: template, to: copy)
            defer { try? FileManager.default.removeItem(at: copy) }
            guard try SQLiteEdits.edit(copy.appendingPathComponent("server.sqlite").path, column, variant) else {
                continue
            }
            let name = "\(column) \(variant.rawValue)"
            let process = try RunningProcess(
                ServerProcess.binary, ["run", "--port", "0", "--log-level", "warning", "--data", copy.path],
                reading: .standardError)
            let output = try await process.readOutput { bytes in
                String(decoding: bytes, as: UTF8.self).contains("listening on ")
            }
            let text = String(decoding: output, as: UTF8.self)
            guard let range = text.range(of: #"listening on (https?://\S+)"#, options: .regularExpression) else {
                let status = try await process.exit()
                if process.uncaughtSignal { failures.append("\(name): the server died by signal \(status) at start") }
                continue
            }
            let url = String(text[range].dropFirst("listening on ".count))
            // Each client reads what it could read before the edit (its credentials may no longer authenticate).
            for client in [a, b] {
                let moved = try E3DBClient(
                    identity: client.identity, apiURL: url, transport: AsyncHTTPClientTransport())
                _ = try? await moved.read(record)
                _ = try? await moved.clientInfo(a.clientID)
                _ = try? await moved.incomingSharing()
                var listed = moved.query(RecordQuery()).makeAsyncIterator()
                _ = try? await listed.next()
            }
            if !process.isRunning {
                let status = try await process.exit()
                failures.append("\(name): the server ended while answering (status \(status))")
                continue
            }
            process.signal(SIGTERM)
            let status = try await process.exit()
            if process.uncaughtSignal && status != SIGTERM { failures.append("\(name): died by signal \(status)") }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }
}
