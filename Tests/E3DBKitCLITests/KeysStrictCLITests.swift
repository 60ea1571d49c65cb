import E3DBConformance
import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

/// The review's D4, D12 and D14 reproductions through the built binary, and a group-wrapped EAKInfo unwrapped by
/// `eak unwrap`.
@Suite("e3dbkit strict identity and EAKInfo input")
struct KeysStrictCLITests {
    func run(_ args: [String]) async throws -> CLIRunner.Result { try await CLIRunner.run(args) }

    func identityFile(_ dir: ScratchDirectory, _ name: String, _ identity: ClientIdentity) throws -> String {
        try dir.write(name, String(decoding: identity.configJSON(), as: UTF8.self))
    }

    /// `text` (a one-line JSON object) with `member` added before the closing brace.
    func adding(_ member: String, to text: Data) -> String {
        String(String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).dropLast()) + ","
            + member + "}"
    }

    @Test("D14: duplicate private_key, object public_key, boolean private_signing_key exit 65 naming the member")
    func identityInputs() async throws {
        let dir = try ScratchDirectory()
        let alice = ClientIdentity.generate(clientID: UUID())
        let bob = ClientIdentity.generate(clientID: UUID())
        let inputs: [(String, String)] = [
            ("private_key", adding("\"private_key\":\"\(bob.boxKey.base64URLEncoded)\"", to: alice.configJSON())),
            (
                "public_key",
                String(decoding: alice.configJSON(), as: UTF8.self).replacingOccurrences(
                    of: "\"public_key\":\"\(alice.publicKey.base64URLEncoded)\"",
                    with: "\"public_key\":{\"curve25519\":\"\(bob.publicKey.base64URLEncoded)\"}")
            ),
            (
                "private_signing_key",
                String(decoding: alice.configJSON(), as: UTF8.self).replacingOccurrences(
                    of: "\"private_signing_key\":\"\(alice.signingKey!.base64URLEncoded)\"",
                    with: "\"private_signing_key\":true")
            ),
        ]
        for (index, (member, text)) in inputs.enumerated() {
            #expect(text.contains(member))
            let path = try dir.write("id\(index).json", text)
            let r = try await run(["eak", "wrap", "--identity", path])
            #expect(r.status == 65, "\(member): \(r.stderr)")
            #expect(r.stdout.isEmpty)
            #expect(r.stderr.contains("\"\(member)\""), "\(r.stderr)")
        }
    }

    @Test("D4: an EAKInfo with a duplicated signer_signing_key exits 65")
    func duplicateSigner() async throws {
        let dir = try ScratchDirectory()
        let alice = ClientIdentity.generate(clientID: UUID())
        let eve = ClientIdentity.generate(clientID: UUID())
        let alicePath = try identityFile(dir, "alice.json", alice)
        let (_, info) = try EAKInfo.makeWriterKey(for: alice)
        let text = adding(
            "\"signer_signing_key\":{\"ed25519\":\"\(eve.publicSigningKey!.base64URLEncoded)\"}", to: info.jsonData())
        let path = try dir.write("dup.json", text)
        let r = try await run(["eak", "unwrap", "--identity", alicePath, path])
        #expect(r.status == 65, "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("signer_signing_key"))
    }

    @Test("D12: an access key file of raw bytes is refused without showing a byte of it")
    func rawAccessKey() async throws {
        let dir = try ScratchDirectory()
        let alicePath = try identityFile(dir, "alice.json", ClientIdentity.generate(clientID: UUID()))
        let raw = Data(repeating: UInt8(ascii: "A"), count: 20) + Data([0xDE, 0xAD]) + Data(repeating: 0x7E, count: 10)
        let keyPath = dir.path("ak_raw")
        try raw.write(to: URL(fileURLWithPath: keyPath))
        let r = try await run(["eak", "wrap", "--identity", alicePath, "--access-key", keyPath])
        #expect(r.status != 0)
        #expect(r.stdout.isEmpty)
        let shown = r.stderr.lowercased()
        #expect(!shown.contains("0xde") && !shown.contains("~") && !shown.contains("\u{07AD}"), "\(r.stderr)")
    }

    @Test("eak unwrap follows group access key wrappers (PyNaCl vector)")
    func groupWrappers() async throws {
        struct Case: Decodable {
            let comment: String, result: String, json: String, readerSecretKey: String, accessKey: String?
        }
        struct File: Decodable { let tests: [Case] }
        let url = VectorLocations.default.projectFile("keys/group_wrappers.json")
        let file = try JSONDecoder().decode(File.self, from: Data(contentsOf: url))
        let dir = try ScratchDirectory()
        var checked = 0
        for (index, t) in file.tests.enumerated() where t.result == "valid" {
            let reader = ClientIdentity(
                clientID: UUID(), boxKey: try Box.PrivateKey(base64URLEncoded: t.readerSecretKey), signingKey: nil)
            let readerPath = try identityFile(dir, "reader\(index).json", reader)
            let infoPath = try dir.write("info\(index).json", t.json)
            let r = try await run(["eak", "unwrap", "--identity", readerPath, infoPath])
            #expect(r.status == 0, "\(t.comment): \(r.stderr)")
            let printed = r.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try Base64URL.decode(printed) == Hex.decode(t.accessKey ?? ""), "\(t.comment)")
            checked += 1
        }
        #expect(checked >= 5)
    }
}
