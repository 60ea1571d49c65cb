import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import Testing

/// The `e3dbkit client` commands that reach the rest of the library (authorizers, sharing on behalf, the sharing
/// listings, search v2, client lookup, access keys, the v1 query filters), each against `e3dbkit-server run` as a
/// real process; and the command line around them (`client --help`, a closed pipe, a URL without a scheme).
@Suite("e3dbkit client: authorizers, on-behalf sharing, listings, search, info, keys, query filters")
struct ClientCommandsCLITests {
    /// A server, a directory, and clients registered through `client register`.
    struct Setup {
        let server: ServerProcess
        let dir: URL
        let token: String

        static func start() async throws -> Setup {
            let server = try await ServerProcess.start()
            let dir = try CLIRunner.temporaryDirectory()
            let token = dir.appendingPathComponent("token").path
            try Data(server.token.utf8).write(to: URL(fileURLWithPath: token))
            return Setup(server: server, dir: dir, token: token)
        }

        func stop() {
            server.stop()
            try? FileManager.default.removeItem(at: dir)
        }

        /// Registers `name`; returns its credential file and client id.
        func register(_ name: String) async throws -> (config: String, id: String) {
            let config = dir.appendingPathComponent("\(name).json").path
            let r = try await run([
                "register", "--api-url", server.url, "--token-file", token, "--name", name, "--out", config,
            ])
            #expect(r.status == 0, "\(r.stderr)")
            return (config, try #require(json(r)["client_id"] as? String))
        }

        /// `client write` of `data` as `type`; returns the record id.
        func write(_ config: String, type: String, _ data: String, plain: String? = nil) async throws -> String {
            let path = try file(data)
            var extra: [String] = []
            if let plain { extra = ["--plain", try file(plain)] }
            let r = try await run(["write", "--config", config, "--type", type] + extra + [path])
            #expect(r.status == 0, "\(r.stderr)")
            return try #require((json(r)["meta"] as? [String: Any])?["record_id"] as? String)
        }

        /// A new file in the directory holding `text`.
        func file(_ text: String) throws -> String {
            let path = dir.appendingPathComponent(UUID().uuidString).path
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    static func run(_ arguments: [String], stdin: Data? = nil) async throws -> CLIRunner.Result {
        try await CLIRunner.run(["client"] + arguments, stdin: stdin)
    }

    func run(_ arguments: [String]) async throws -> CLIRunner.Result { try await Self.run(arguments) }

    /// The first line of standard output as a JSON object.
    static func json(_ result: CLIRunner.Result) -> [String: Any] {
        lines(result).first ?? [:]
    }

    /// Every line of standard output as a JSON object (NDJSON).
    static func lines(_ result: CLIRunner.Result) -> [[String: Any]] {
        result.stdout.split(separator: UInt8(ascii: "\n")).map {
            (try? JSONSerialization.jsonObject(with: Data($0))) as? [String: Any] ?? [:]
        }
    }

    @Test("authorizer add, list, remove (one type and every type) and authorized-by")
    func authorizers() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let (writer, helper) = (try await s.register("writer"), try await s.register("helper"))
        for type in ["doc", "memo"] {
            let added = try await run([
                "authorizer", "add", "--config", writer.config, "--authorizer", helper.id, "--type", type,
            ])
            let fingerprint = Self.json(try await run(["whoami", "--config", helper.config]))["public_key_fingerprint"]
            #expect(added.status == 0, "\(added.stderr)")
            #expect(
                Self.json(added)["authorized"] as? String == type
                    && Self.json(added)["authorizer"] as? String == helper.id)
            #expect(Self.json(added)["authorizer_fingerprint"] as? String == fingerprint as? String)
        }
        let listed = try await run(["authorizer", "list", "--config", writer.config])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(Set(Self.lines(listed).compactMap { $0["record_type"] as? String }) == ["doc", "memo"])
        #expect(Self.lines(listed).allSatisfy { $0["authorizer_id"] as? String == helper.id })
        let by = try await run(["authorized-by", "--config", helper.config])
        #expect(Set(Self.lines(by).compactMap { $0["record_type"] as? String }) == ["doc", "memo"])
        #expect(Self.lines(by).allSatisfy { $0["authorized_by"] as? String == writer.id })

        let one = try await run([
            "authorizer", "remove", "--config", writer.config, "--authorizer", helper.id, "--type", "doc",
        ])
        #expect(one.status == 0 && Self.json(one)["removed"] as? String == "doc", "\(one.stderr)")
        let afterOne = try await run(["authorized-by", "--config", helper.config])
        #expect(Self.lines(afterOne).compactMap { $0["record_type"] as? String } == ["memo"])
        let all = try await run([
            "authorizer", "remove", "--config", writer.config, "--authorizer", helper.id, "--all-types",
        ])
        #expect(all.status == 0 && Self.json(all)["removed_all_types"] as? Bool == true, "\(all.stderr)")
        let none = try await run(["authorizer", "list", "--config", writer.config])
        #expect(none.status == 0 && none.stdout.isEmpty, "\(none.stdoutText)")

        for bad in [["--type", "doc", "--all-types"], []] {
            let usage = try await run(
                ["authorizer", "remove", "--config", writer.config, "--authorizer", helper.id] + bad)
            #expect(usage.status == 64, "\(bad): \(usage.stderr)")
        }
        let notUUID = try await run([
            "authorizer", "add", "--config", writer.config, "--authorizer", "x", "--type", "t",
        ])
        #expect(notUUID.status == 64 && notUUID.stderr.contains("--authorizer"), "\(notUUID.stderr)")
    }

    @Test("share and revoke --on-behalf-of: an authorizer shares the writer's records with a reader")
    func onBehalfOf() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let (writer, helper, reader) = (
            try await s.register("writer"), try await s.register("helper"), try await s.register("reader")
        )
        let id = try await s.write(writer.config, type: "doc", #"{"body":"on behalf"}"#)
        let share = [
            "share", "--config", helper.config, "--type", "doc", "--reader", reader.id, "--on-behalf-of", writer.id,
        ]
        let refused = try await run(share)
        #expect(refused.status != 0 && refused.stdout.isEmpty, "\(refused.stderr)")
        #expect(
            try await run(["authorizer", "add", "--config", writer.config, "--authorizer", helper.id, "--type", "doc"])
                .status == 0)
        let shared = try await run(share)
        #expect(shared.status == 0, "\(shared.stderr)")
        #expect(
            Self.json(shared)["on_behalf_of"] as? String == writer.id && Self.json(shared)["shared"] as? String == "doc"
        )
        let read = try await run(["read", "--config", reader.config, id])
        #expect(
            read.status == 0 && (Self.json(read)["data"] as? [String: String])?["body"] == "on behalf", "\(read.stderr)"
        )
        let revoked = try await run([
            "revoke", "--config", helper.config, "--type", "doc", "--reader", reader.id, "--on-behalf-of", writer.id,
        ])
        #expect(revoked.status == 0 && Self.json(revoked)["on_behalf_of"] as? String == writer.id, "\(revoked.stderr)")
        let gone = try await run(["read", "--config", reader.config, id])
        #expect(gone.status == 1 && gone.stderr.contains("404"), "\(gone.stderr)")
    }

    @Test("sharing incoming and outgoing list the policies of both sides")
    func sharingListings() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let (writer, reader) = (try await s.register("writer"), try await s.register("reader"))
        let empty = try await run(["sharing", "incoming", "--config", reader.config])
        #expect(empty.status == 0 && empty.stdout.isEmpty, "\(empty.stderr)")
        _ = try await s.write(writer.config, type: "doc", #"{"a":"b"}"#)
        #expect(
            try await run(["share", "--config", writer.config, "--type", "doc", "--reader", reader.id]).status == 0)
        let incoming = try await run(["sharing", "incoming", "--config", reader.config])
        #expect(incoming.status == 0, "\(incoming.stderr)")
        #expect(
            Self.lines(incoming).map { [$0["writer_id"], $0["writer_name"], $0["record_type"]] as? [String] }
                == [[writer.id, "writer", "doc"]], "\(incoming.stdoutText)")
        let outgoing = try await run(["sharing", "outgoing", "--config", writer.config])
        #expect(
            Self.lines(outgoing).map { [$0["reader_id"], $0["reader_name"], $0["record_type"]] as? [String] }
                == [[reader.id, "reader", "doc"]], "\(outgoing.stdoutText)")
        #expect(
            try await run(["revoke", "--config", writer.config, "--type", "doc", "--reader", reader.id]).status == 0)
        let after = try await run(["sharing", "outgoing", "--config", writer.config])
        #expect(after.status == 0 && after.stdout.isEmpty, "\(after.stdoutText)")
    }

    @Test("search: terms, strategies, data, pages through next_token, a whole request body")
    func search() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let alice = try await s.register("alice")
        for word in ["veryveryfuzzy", "toznywebsite", "other", "another", "third"] {
            _ = try await s.write(alice.config, type: "word", #"{"w":"\#(word)"}"#, plain: #"{"word":"\#(word)"}"#)
        }
        let base = ["search", "--config", alice.config]
        let regexp = try await run(base + ["--strategy", "REGEXP", "--value", "tozny.*", "--include-data"])
        #expect(regexp.status == 0, "\(regexp.stderr)")
        let records = Self.json(regexp)["records"] as? [[String: Any]] ?? []
        #expect(records.map { ($0["data"] as? [String: String])?["w"] } == ["toznywebsite"], "\(regexp.stdoutText)")
        #expect(records.first?["signature_status"] as? String == "verified")

        let first = try await run(base + ["--type", "word", "--limit", "2"])
        #expect(Self.json(first)["total_results"] as? Int == 5 && Self.json(first)["next_token"] as? Int == 2)
        #expect((Self.json(first)["records"] as? [Any])?.count == 2, "\(first.stdoutText)")
        let rest = try await run(base + ["--type", "word", "--limit", "10", "--next-token", "2"])
        #expect((Self.json(rest)["records"] as? [Any])?.count == 3 && Self.json(rest)["next_token"] is NSNull)

        let tagged = try await run(base + ["--tag", "word=other"])
        #expect((Self.json(tagged)["records"] as? [[String: Any]])?.count == 1, "\(tagged.stdoutText)")
        let excluded = try await run(base + ["--type", "word", "--exclude-type", "word"])
        #expect((Self.json(excluded)["records"] as? [Any])?.isEmpty == true, "\(excluded.stdoutText)")

        let body = try s.file(#"{"match":[{"strategy":"FUZZY","terms":{"values":["veryveryfunny"]}}]}"#)
        let fuzzy = try await run(base + ["--request", body, "--include-data"])
        #expect(
            (Self.json(fuzzy)["records"] as? [[String: Any]])?.map { ($0["data"] as? [String: String])?["w"] }
                == ["veryveryfuzzy"], "\(fuzzy.stderr)")
        let both = try await run(base + ["--request", body, "--type", "word"])
        #expect(both.status == 64, "\(both.stderr)")
        let malformed = try await run(base + ["--request", try s.file("[1]")])
        #expect(malformed.status == 65, "\(malformed.stderr)")
    }

    @Test("info prints a client's keys and fingerprints, the ones its whoami prints")
    func info() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let (alice, bob) = (try await s.register("alice"), try await s.register("bob"))
        let info = try await run(["info", "--config", alice.config, bob.id])
        #expect(info.status == 0, "\(info.stderr)")
        let whoami = Self.json(try await run(["whoami", "--config", bob.config]))
        let shown = Self.json(info)
        #expect(shown["client_id"] as? String == bob.id)
        #expect((shown["public_key"] as? [String: String])?["curve25519"] == whoami["public_key"] as? String)
        #expect((shown["signing_key"] as? [String: String])?["ed25519"] == whoami["public_signing_key"] as? String)
        #expect(shown["public_key_fingerprint"] as? String == whoami["public_key_fingerprint"] as? String)
        #expect(
            shown["public_signing_key_fingerprint"] as? String == whoami["public_signing_key_fingerprint"] as? String)
        let unknown = try await run(["info", "--config", alice.config, UUID().uuidString])
        #expect(unknown.status == 1 && unknown.stderr.contains("404"), "\(unknown.stderr)")
    }

    @Test("key writer and key reader print EAKInfo that record encrypt and decrypt take")
    func accessKeys() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let (writer, reader) = (try await s.register("writer"), try await s.register("reader"))
        let writerKey = try await run(["key", "writer", "--config", writer.config, "--type", "doc"])
        #expect(writerKey.status == 0, "\(writerKey.stderr)")
        let eak = try s.file(writerKey.stdoutText)
        let encrypted = try await CLIRunner.run(
            [
                "record", "encrypt", "--type", "doc", "--identity", writer.config, "--eak-info", eak,
                try s.file(#"{"k":"v"}"#),
            ])
        #expect(encrypted.status == 0, "\(encrypted.stderr)")
        let document = try s.file(encrypted.stdoutText)
        let decrypted = try await CLIRunner.run([
            "record", "decrypt", "--identity", writer.config, "--eak-info", eak, document,
        ])
        #expect(decrypted.status == 0 && decrypted.stdoutText.contains(#""k":"v""#), "\(decrypted.stderr)")

        let none = try await run(["key", "reader", "--config", reader.config, "--writer", writer.id, "--type", "doc"])
        #expect(none.status == 1 && none.stderr.contains("no access key"), "\(none.stderr)")
        // The same key through the server: a record written there, shared, and its reader key opens the document.
        _ = try await s.write(writer.config, type: "doc", #"{"x":"y"}"#)
        #expect(
            try await run(["share", "--config", writer.config, "--type", "doc", "--reader", reader.id]).status == 0)
        let readerKey = try await run([
            "key", "reader", "--config", reader.config, "--writer", writer.id, "--type", "doc",
        ])
        #expect(readerKey.status == 0, "\(readerKey.stderr)")
        let opened = try await CLIRunner.run([
            "record", "decrypt", "--identity", reader.config, "--eak-info", try s.file(readerKey.stdoutText),
            "--verifying-key",
            Self.json(try await run(["whoami", "--config", writer.config]))["public_signing_key"] as? String ?? "",
            document,
        ])
        #expect(opened.status == 0 && opened.stdoutText.contains(#""k":"v""#), "\(opened.stderr)")
    }

    @Test("query --user, --record-id, --after, --page-size and --plain, as the library's query takes them")
    func queryFilters() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let alice = try await s.register("alice")
        var ids: [String] = []
        for n in 0..<5 {
            ids.append(try await s.write(alice.config, type: "n", #"{"n":"\#(n)"}"#, plain: #"{"parity":"\#(n % 2)"}"#))
        }
        let base = ["query", "--config", alice.config]
        func recordIDs(_ r: CLIRunner.Result) -> [String] {
            Self.lines(r).compactMap { ($0["meta"] as? [String: Any])?["record_id"] as? String }
        }
        let paged = try await run(base + ["--page-size", "2"])
        #expect(paged.status == 0 && recordIDs(paged) == ids, "\(paged.stderr)")
        let picked = try await run(base + ["--record-id", ids[1], "--record-id", ids[3]])
        #expect(recordIDs(picked) == [ids[1], ids[3]], "\(picked.stderr)")
        let mine = try await run(base + ["--user", alice.id])
        #expect(recordIDs(mine) == ids)
        let others = try await run(base + ["--user", UUID().uuidString.lowercased()])
        #expect(others.status == 0 && others.stdout.isEmpty)
        let even = try await run(
            base + ["--plain", try s.file(#"{"eq":{"name":"parity","value":"0"}}"#), "--include-data"])
        #expect(recordIDs(even) == [ids[0], ids[2], ids[4]], "\(even.stderr)")
        let flat = try await run(base + ["--plain", try s.file(#"{"parity":"1"}"#)])
        #expect(recordIDs(flat) == [ids[1], ids[3]], "\(flat.stderr)")
        // --after takes a last_index: the server's indexes grow with each write, so after a large one nothing is left.
        let after = try await run(base + ["--after", "1000000"])
        #expect(after.status == 0 && after.stdout.isEmpty, "\(after.stderr)")
        let all = try await run(base + ["--after", "0"])
        #expect(recordIDs(all) == ids)
        for bad in [["--page-size", "0"], ["--after", "-1"], ["--user", "x"]] {
            #expect(try await run(base + bad).status == 64, "\(bad)")
        }
        #expect(try await run(base + ["--plain", try s.file("[]")]).status == 65)
    }

    @Test("client --help names every subcommand, from the command configuration")
    func helpListsEverySubcommand() async throws {
        let help = try await Self.run(["--help"])
        #expect(help.status == 0, "\(help.stderr)")
        let text = help.stdoutText
        // The SUBCOMMANDS section ArgumentParser prints from the configuration (up to its first blank line): the
        // first word of each entry.
        let section = try #require(text.range(of: "SUBCOMMANDS:\n")).upperBound
        let entries = text[section...].split(separator: "\n", omittingEmptySubsequences: false)
            .prefix { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
        let names = entries.compactMap { line -> String? in
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let word = line.split(separator: " ").first else {
                return nil
            }
            return String(word)
        }
        for expected in [
            "register", "whoami", "info", "write", "read", "query", "search", "update", "delete", "share", "revoke",
            "sharing", "authorizer", "authorized-by", "key", "file", "note",
        ] {
            #expect(names.contains(expected), "\(expected) missing in: \(names)")
        }
        // The overview (wrapped up to its first blank line) names the same list, in the same order.
        let overview = text.split(separator: "\n", omittingEmptySubsequences: false)
            .prefix { !$0.isEmpty }.joined(separator: " ")
        #expect(overview.hasSuffix(": " + names.joined(separator: ", ") + "."), "\(overview) vs \(names)")
    }

    @Test("a closed pipe ends quietly with 141; a server URL without a scheme is a usage error that says so")
    func closedPipeAndSchemelessURL() async throws {
        let s = try await Setup.start()
        defer { s.stop() }
        let alice = try await s.register("alice")
        for n in 0..<3 { _ = try await s.write(alice.config, type: "t", #"{"n":"\#(n)"}"#) }
        let closed = try await CLIRunner.run(
            ["client", "query", "--config", alice.config], standardOutput: try ChildProcess.brokenPipe())
        #expect(!closed.uncaughtSignal && closed.status == 141 && closed.stderr.isEmpty, "\(closed.stderr)")

        let schemeless = s.server.url.replacingOccurrences(of: "http://", with: "")
        let r = try await run([
            "register", "--api-url", schemeless, "--token-file", s.token, "--name", "x",
            "--out", s.dir.appendingPathComponent("x.json").path,
        ])
        #expect(r.status == 64 && r.stderr.contains("http://") && r.stderr.contains(schemeless), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: s.dir.appendingPathComponent("x.json").path))
    }
}
