import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

/// `e3dbkit store … --identity FILE` and `store identity add|remove|list`.
@Suite("CLI: e3dbkit store with E3DB client identities")
struct StoreIdentityCLITests {
    let dir: URL
    let store: String

    init() throws {
        dir = try CLIRunner.temporaryDirectory()
        store = dir.appendingPathComponent("store").path
    }

    func identity(_ name: String) async throws -> String {
        let path = dir.appendingPathComponent("\(name).json").path
        let made = try await CLIRunner.run(["keygen", "--out", path, "--client-id", UUID().uuidString])
        #expect(made.status == 0, "\(made.stderr)")
        return path
    }

    func member(_ path: String, _ name: String) throws -> String {
        guard
            case .string(let text) = try CanonicalJSON.parse(Data(contentsOf: URL(fileURLWithPath: path)))[name]
                ?? .null
        else {
            throw E3DBError(.invalidParameter, "\(path) has no \(name)")
        }
        return text
    }

    /// `e3dbkit store COMMAND --store S KEYSOURCE… ARGS…`.
    func store(_ command: [String], _ keySource: [String], _ arguments: [String] = [], stdin: Data? = nil) async throws
        -> CLIRunner.Result
    {
        try await CLIRunner.run(["store"] + command + ["--store", store] + keySource + arguments, stdin: stdin)
    }

    @Test("init for an identity, enroll and remove others, passwd beside identities, wrong identity exits 77")
    func identities() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let alice = try await identity("alice")
        let bob = try await identity("bob")
        let stranger = try await identity("stranger")
        let pass = dir.appendingPathComponent("pass").path
        try Data("a passphrase\n".utf8).write(to: URL(fileURLWithPath: pass))
        let asAlice = ["--identity", alice]
        let asBob = ["--identity", bob]
        let withPass = ["--passphrase-file", pass]

        let created = try await store(["init"], asAlice)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(try CanonicalJSON.parse(created.stdout)["kdf"] == .string("identity"))
        let data = dir.appendingPathComponent("d.json").path
        try Data(#"{"secret":"IDENTITY-PLAINTEXT-VALUE"}"#.utf8).write(to: URL(fileURLWithPath: data))
        let put = try await store(["put"], asAlice, ["--collection", "c", data])
        #expect(put.status == 0, "\(put.stderr)")
        guard case .string(let id) = try CanonicalJSON.parse(put.stdout)["id"] ?? .null else {
            Issue.record("no id")
            return
        }
        let got = try await store(["get"], asAlice, ["--collection", "c", id])
        #expect(try CanonicalJSON.parse(got.stdout)["data"] == .object(["secret": "IDENTITY-PLAINTEXT-VALUE"]))

        // Not enrolled, or no passphrase yet: 77. Two key sources: 64.
        #expect(try await store(["stats"], ["--identity", stranger]).status == 77)
        #expect(try await store(["stats"], withPass).status == 77)
        #expect(try await store(["stats"], asAlice + withPass).status == 64)
        let notJSON = dir.appendingPathComponent("broken.json").path
        try Data("{\"private_key\":".utf8).write(to: URL(fileURLWithPath: notJSON))
        #expect(try await store(["stats"], ["--identity", notJSON]).status == 65)

        let added = try await store(["identity", "add"], asAlice, ["--client", bob])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(try CanonicalJSON.parse(added.stdout)["client_id"] == .string(try member(bob, "client_id")))
        #expect(try CanonicalJSON.parse(added.stdout)["public_key"] == .string(try member(bob, "public_key")))
        let listed = try await store(["identity", "list"], asBob)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdoutText.split(separator: "\n").count == 2)
        #expect(listed.stdoutText.contains(try member(alice, "public_key")))
        #expect(
            try await store(
                ["identity", "add"], asBob, ["--client", alice, "--public-key", try member(alice, "public_key")]
            ).status == 64)

        #expect(try await store(["identity", "remove"], asBob, ["--client", alice]).status == 0)
        #expect(try await store(["get"], asAlice, ["--collection", "c", id]).status == 77)
        let last = try await store(["identity", "remove"], asBob, ["--public-key", try member(bob, "public_key")])
        #expect(last.status == 64)
        #expect(last.stderr.contains("only way"))

        // A passphrase added beside the identity; identities keep working.
        #expect(
            try await store(["passwd"], asBob, ["--new-passphrase-file", pass, "--kdf", "interactive"]).status == 0)
        #expect(try await store(["stats"], withPass).status == 0)
        #expect(try await store(["stats"], asBob).status == 0)
        let byKey = try await store(["identity", "add"], withPass, ["--public-key", try member(alice, "public_key")])
        #expect(byKey.status == 0, "\(byKey.stderr)")
        #expect(try CanonicalJSON.parse(byKey.stdout)["client_id"] == .null)
        #expect(try await store(["stats"], asAlice).status == 0)

        // Export for a reader, then import with --identity alone: it opens the store and is the reader.
        let exportDir = dir.appendingPathComponent("export").path
        let exported = try await store(
            ["export"], asBob, ["--collection", "c", "--reader-identity", alice, "--out", exportDir])
        #expect(exported.status == 0, "\(exported.stderr)")
        let imported = try await store(["import"], asAlice, ["--collection", "copy", exportDir])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdoutText.split(separator: "\n").count == 1)
        let withReader = try await store(
            ["import"], withPass, ["--reader-identity", alice, "--collection", "copy2", exportDir])
        #expect(withReader.status == 0, "\(withReader.stderr)")
        #expect(try await store(["import"], withPass, ["--collection", "copy3", exportDir]).status == 64)

        // Neither the value nor a private key is in any file of the store.
        let privateKeys = try [alice, bob].map { try member($0, "private_key") }
        let storeDir = URL(fileURLWithPath: store)
        for name in try FileManager.default.contentsOfDirectory(atPath: store) {
            let contents = try Data(contentsOf: storeDir.appendingPathComponent(name))
            #expect(contents.range(of: Data("IDENTITY-PLAINTEXT-VALUE".utf8)) == nil, "value in \(name)")
            for key in privateKeys {
                #expect(contents.range(of: Data(key.utf8)) == nil, "a private key in \(name)")
                #expect(contents.range(of: try Base64URL.decode(key)) == nil, "a private key in \(name)")
            }
        }
    }
}
