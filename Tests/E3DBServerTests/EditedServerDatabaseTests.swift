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

    @Test("stored plain or data that is not a JSON object of strings: reads answer well-formed JSON or a refusal")
    func invalidJSONText() async throws {
        let server = try await ServerProcess.start()
        let a = try await server.register("a")
        let record = try #require(try await a.write(type: "t", data: ["k": "v"], plain: ["p": "q"]).id)
        await server.stopped(removingData: false)
        let template = server.data
        defer { try? FileManager.default.removeItem(at: template) }

        let columns = try SQLiteEdits.columns(of: template.appendingPathComponent("server.sqlite").path)
            .filter { $0.table == "records" && ["plain", "data"].contains($0.name) }
        #expect(columns.count == 2, "\(columns)")
        var failures: [String] = []
        for column in columns {
            for literal in SQLiteEdits.invalidJSONTexts {
                let name = "\(column) = \(literal)"
                let copy = template.deletingLastPathComponent().appendingPathComponent("edited-\(UUID().uuidString)")
                try FileManager.default.copyItem(at: template, to: copy)
                let edited = try SQLiteEdits.edit(
                    copy.appendingPathComponent("server.sqlite").path, column, literal: literal)
                #expect(edited, "\(name): no row changed")
                let moved = try await ServerProcess.start(data: copy)
                defer { moved.stop() }
                let api = RawAPI(url: moved.url)
                let bearer = try await Self.bearer(a.identity, api)
                let reads = [
                    ("read", try await api.send("GET", "/v1/storage/records/\(record)", bearer: bearer)),
                    (
                        "search",
                        try await api.send(
                            "POST", "/v1/storage/search", bearer: bearer, json: #"{"include_data":true}"#)
                    ),
                ]
                for (what, reply) in reads {
                    if let problem = Self.problem(reply, record: what == "read") {
                        failures.append("\(name), \(what): \(problem): \(reply.status) \(reply.text.prefix(300))")
                    }
                }
                // The client library reads it as well: a refusal it reports, never a record of other fields.
                let client = try E3DBClient(
                    identity: a.identity, apiURL: moved.url, transport: AsyncHTTPClientTransport())
                if let read = try? await client.read(record) {
                    failures.append("\(name): the client read a record with \(read.data.count) fields")
                }
                #expect(moved.process.isRunning, "\(name): the server ended")
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test("stored plain with a repeated name: a read, a v1 search (by the first value and by none), a v2 search: 503")
    func repeatedNameInStoredPlain() async throws {
        let server = try await ServerProcess.start()
        let a = try await server.register("a")
        let record = try #require(try await a.write(type: "t", data: ["k": "v"], plain: ["role": "user"]).id)
        await server.stopped(removingData: false)
        let data = server.data
        defer { try? FileManager.default.removeItem(at: data) }
        let column = try #require(
            try SQLiteEdits.columns(of: data.appendingPathComponent("server.sqlite").path)
                .first { $0.table == "records" && $0.name == "plain" })
        // Spliced as it is, the first value would match a search for role=user while the SDKs show admin.
        let edited = try SQLiteEdits.edit(
            data.appendingPathComponent("server.sqlite").path, column,
            literal: #"'{"role":"user","role":"admin"}'"#)
        #expect(edited)
        let moved = try await ServerProcess.start(data: data)
        defer { moved.stop() }
        let api = RawAPI(url: moved.url)
        let bearer = try await Self.bearer(a.identity, api)
        let replies = [
            ("read", try await api.send("GET", "/v1/storage/records/\(record)", bearer: bearer)),
            (
                "search role=user",
                try await api.send(
                    "POST", "/v1/storage/search", bearer: bearer,
                    json: #"{"include_data":true,"plain":{"eq":{"name":"role","value":"user"}}}"#)
            ),
            ("search", try await api.send("POST", "/v1/storage/search", bearer: bearer, json: #"{}"#)),
            ("v2 search", try await api.send("POST", "/v2/search", bearer: bearer, json: #"{"include_data":true}"#)),
        ]
        for (what, reply) in replies {
            #expect(reply.status == 503, "\(what): \(reply.status) \(reply.text.prefix(300))")
            let message = reply.json?["error"] as? String ?? ""
            #expect(!message.contains("admin"), "\(what): \(message)")
        }
        #expect(moved.process.isRunning)
    }

    @Test("a stored note body that is not one JSON object without views: a read is 503 naming the note, never a note")
    func editedNoteBody() async throws {
        let server = try await ServerProcess.start()
        let writer = NoteKeyPairs.generate()
        let reader = NoteKeyPairs.generate()
        let note = try await E3DBClient.writeAnonymousNote(
            ["pin": "1234"], recipientEncryptionKey: reader.publicKey, recipientSigningKey: reader.publicSigningKey,
            writer: writer, apiURL: server.url, transport: AsyncHTTPClientTransport())
        let id = try #require(note.noteID.flatMap(UUID.init(uuidString:)))
        // A max_views the strict parser could not read back exactly is refused before it is sent (the server
        // refuses it too: StoredNoteTests.tooManyValues).
        await #expect(throws: E3DBError(.invalidParameter)) {
            _ = try await E3DBClient.writeAnonymousNote(
                ["pin": "1234"], recipientEncryptionKey: reader.publicKey,
                recipientSigningKey: reader.publicSigningKey, writer: writer, apiURL: server.url,
                options: NoteOptions(maxViews: (1 << 53) + 1), transport: AsyncHTTPClientTransport())
        }
        await server.stopped(removingData: false)
        let template = server.data
        defer { try? FileManager.default.removeItem(at: template) }
        let column = try #require(
            try SQLiteEdits.columns(of: template.appendingPathComponent("server.sqlite").path)
                .first { $0.table == "notes" && $0.name == "body" })
        let edits = [
            "'oops'", "'[]'", #"'{"data":'"#,
            // A views member of its own: spliced as it is, the response would carry two.
            "json_set(body, '$.views', 0)",
            // A repeated member: JSONDecoder took the last one.
            #"substr(body, 1, length(body) - 1) || ',"data":{}}'"#,
        ]
        for literal in edits {
            let copy = template.deletingLastPathComponent().appendingPathComponent("edited-\(UUID().uuidString)")
            try FileManager.default.copyItem(at: template, to: copy)
            #expect(try SQLiteEdits.edit(copy.appendingPathComponent("server.sqlite").path, column, literal: literal))
            let log = copy.appendingPathExtension("log")
            defer { try? FileManager.default.removeItem(at: log) }
            let moved = try await ServerProcess.start(data: copy, log: log)
            defer { moved.stop() }
            do {
                let read = try await E3DBClient.readAnonymousNote(
                    id: id, reader: reader, apiURL: moved.url, transport: AsyncHTTPClientTransport())
                Issue.record("\(literal): a note was read with \(read.data.count) fields")
            } catch let error as E3DBError {
                #expect(error.message.contains("HTTP 503"), "\(literal): \(error)")
            }
            // The answer is the generic 503; the server's log names the column and the note.
            let logged = String(decoding: try Data(contentsOf: log), as: UTF8.self)
            #expect(logged.contains("notes.body of stored note \(id.lowercasedString)"), "\(literal): \(logged)")
            #expect(moved.process.isRunning, "\(literal): the server ended")
        }
    }

    /// A bearer token for `identity` from the server `api` talks to.
    static func bearer(_ identity: ClientIdentity, _ api: RawAPI) async throws -> String {
        let key = try #require(identity.apiKeyID)
        let secret = try #require(identity.apiSecret).withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let basic = "Basic " + Data("\(key):\(secret)".utf8).base64EncodedString()
        let issued = try await api.send(
            "POST", "/v1/auth/token",
            headers: [("Authorization", basic), ("Content-Type", "application/x-www-form-urlencoded")],
            body: Data("grant_type=client_credentials".utf8))
        return try #require(issued.json?["access_token"] as? String, "\(issued.text)")
    }

    /// What is wrong with an answer to a read of a record whose stored JSON text was edited: nil when it is a
    /// refusal (4xx or 503, with an `error` member) or well-formed JSON with only the members a record has.
    static func problem(_ reply: RawAPI.Reply, record: Bool) -> String? {
        guard let parsed = try? JSONSerialization.jsonObject(with: reply.body) else { return "not JSON" }
        if reply.status == 500 { return "500" }
        if reply.status != 200 {
            return (parsed as? [String: Any])?["error"] is String ? nil : "a refusal without an error member"
        }
        guard record else { return nil }
        guard let object = parsed as? [String: Any], let meta = object["meta"] as? [String: Any] else {
            return "not a record"
        }
        let metaKeys: Set = [
            "record_id", "writer_id", "user_id", "type", "plain", "created", "last_modified", "version",
        ]
        guard Set(object.keys).isSubset(of: ["meta", "data"]), Set(meta.keys).isSubset(of: metaKeys) else {
            return "members the record does not have"
        }
        guard object["data"] is [String: String], meta["plain"] is [String: String] else {
            return "data or plain is not an object of strings"
        }
        return nil
    }
}
