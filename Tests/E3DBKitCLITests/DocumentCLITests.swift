import E3DBConformance
import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

/// A scratch directory removed at the end of a test.
final class ScratchDirectory {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-docs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    func write(_ name: String, _ text: String) throws -> String {
        try Data(text.utf8).write(to: url.appendingPathComponent(name))
        return path(name)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
}

@Suite("e3dbkit keys, records, signing and notes")
struct DocumentCLITests {
    func run(_ args: [String], stdin: Data = Data()) async throws -> CLIRunner.Result {
        try await CLIRunner.run(args, stdin: stdin)
    }

    func keygen(_ dir: ScratchDirectory, _ name: String) async throws -> (path: String, identity: ClientIdentity) {
        let path = dir.path(name)
        let r = try await run(["keygen", "--out", path, "--client-id", UUID().uuidString])
        #expect(r.status == 0, "\(r.stderr)")
        return (path, try ClientIdentity(configJSON: Data(contentsOf: URL(fileURLWithPath: path))))
    }

    @Test("keygen writes a 0600 identity and refuses to overwrite without --force")
    func keygenFile() async throws {
        let dir = try ScratchDirectory()
        let (path, identity) = try await keygen(dir, "id.json")
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(identity.signingKey != nil && identity.clientID != nil)
        let again = try await run(["keygen", "--out", path])
        #expect(again.status != 0)
        #expect(again.stderr.contains("--force"))
        #expect(try await run(["keygen", "--out", path, "--force"]).status == 0)
        #expect(try await run(["keygen", "--out", dir.path("x"), "--client-id", "nope"]).status == 64)
    }

    @Test("eak wrap, share, unwrap; record encrypt/decrypt; tampering exits 2")
    func recordRoundTrip() async throws {
        let dir = try ScratchDirectory()
        let (writerPath, _) = try await keygen(dir, "writer.json")
        let (readerPath, reader) = try await keygen(dir, "reader.json")
        let wrap = try await run(["eak", "wrap", "--identity", writerPath])
        #expect(wrap.status == 0, "\(wrap.stderr)")
        let writerEAK = try dir.write("writer-eak.json", String(decoding: wrap.stdout, as: UTF8.self))
        let share = try await run([
            "eak", "share", "--identity", writerPath, "--reader-public-key",
            reader.publicKey.base64URLEncoded, writerEAK,
        ])
        #expect(share.status == 0, "\(share.stderr)")
        let readerEAK = try dir.write("reader-eak.json", String(decoding: share.stdout, as: UTF8.self))
        let data = try dir.write("data.json", "{\"name\":\"Zoë 😀\",\"e\\u0301\":\"1\",\"é\":\"2\"}")
        let plain = try dir.write("plain.json", "{\"p\":\"q\"}")
        let enc = try await run([
            "record", "encrypt", "--type", "t", "--identity", writerPath, "--eak-info", writerEAK,
            "--plain", plain, data,
        ])
        #expect(enc.status == 0, "\(enc.stderr)")
        let docPath = try dir.write("doc.json", String(decoding: enc.stdout, as: UTF8.self))
        let dec = try await run(["record", "decrypt", "--identity", readerPath, "--eak-info", readerEAK, docPath])
        #expect(dec.status == 0, "\(dec.stderr)")
        let out = String(decoding: dec.stdout, as: UTF8.self)
        #expect(out.contains("\"name\":\"Zoë 😀\"") && out.contains("\"e\u{301}\":\"1\"") && out.contains("\"é\":\"2\""))
        // The access keys agree.
        let a = try await run(["eak", "unwrap", "--identity", writerPath, writerEAK])
        let b = try await run(["eak", "unwrap", "--identity", readerPath, readerEAK])
        #expect(a.status == 0 && a.stdout == b.stdout && a.stdout.count == 44)
        // The writer cannot open the reader's EAK: exit 2.
        #expect(try await run(["eak", "unwrap", "--identity", writerPath, readerEAK]).status == 2)
        // Tampered meta: signature failure, exit 2, nothing on stdout.
        let tampered = try dir.write(
            "bad.json",
            String(decoding: enc.stdout, as: UTF8.self).replacingOccurrences(
                of: "\"type\":\"t\"", with: "\"type\":\"u\""))
        let bad = try await run(["record", "decrypt", "--identity", readerPath, "--eak-info", readerEAK, tampered])
        #expect(bad.status == 2)
        #expect(bad.stdout.isEmpty)
        #expect(bad.stderr.contains("rec_sig"))
        // Malformed document: 65.
        let junk = try dir.write("junk.json", "{\"data\":")
        #expect(
            try await run(["record", "decrypt", "--identity", readerPath, "--eak-info", readerEAK, junk]).status == 65)
    }

    @Test("record decrypt: signature policy options, the verification member, and the writer check")
    func signaturePolicies() async throws {
        let dir = try ScratchDirectory()
        let (writerPath, writer) = try await keygen(dir, "writer.json")
        let wrap = try await run(["eak", "wrap", "--identity", writerPath])
        let eak = try dir.write("eak.json", String(decoding: wrap.stdout, as: UTF8.self))
        let data = try dir.write("data.json", "{\"b\":\"2\",\"a\":\"1\"}")
        let enc = try await run(["record", "encrypt", "--type", "t", "--identity", writerPath, "--eak-info", eak, data])
        #expect(enc.status == 0, "\(enc.stderr)")
        let signed = try dir.write("signed.json", String(decoding: enc.stdout, as: UTF8.self))
        var object = try #require(CanonicalJSON.parse(Array(enc.stdout)).objectValue)
        object["rec_sig"] = nil
        let unsigned = try dir.write("unsigned.json", CanonicalJSON.serialize(.object(object)))
        let base = ["record", "decrypt", "--identity", writerPath, "--eak-info", eak]

        let strict = try await run(base + [signed])
        #expect(strict.status == 0, "\(strict.stderr)")
        #expect(
            String(decoding: strict.stdout, as: UTF8.self).contains(
                #""verification":{"policy":"required","rec_sig":"verified"}"#))
        let refused = try await run(base + [unsigned])
        #expect(refused.status == 2 && refused.stdout.isEmpty && refused.stderr.contains("--allow-unsigned") == false)
        #expect(refused.stderr.contains("rec_sig"))
        for flags in [["--allow-unsigned"], ["--signature-policy", "verify-if-present"]] {
            let r = try await run(base + flags + [unsigned])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(
                String(decoding: r.stdout, as: UTF8.self).contains(
                    #""data":{"a":"1","b":"2"}"#))
            #expect(
                String(decoding: r.stdout, as: UTF8.self).contains(
                    #""verification":{"policy":"verify-if-present","rec_sig":"absent"}"#))
        }
        let ignored = try await run(base + ["--signature-policy", "ignore", unsigned])
        #expect(String(decoding: ignored.stdout, as: UTF8.self).contains(#""rec_sig":"not-checked""#))
        #expect(try await run(base + ["--signature-policy", "bogus", unsigned]).status == 64)
        #expect(try await run(base + ["--signature-policy", "ignore", "--allow-unsigned", unsigned]).status == 64)
        // A present rec_sig that does not verify is still refused under --allow-unsigned.
        let tampered = try dir.write(
            "tampered.json",
            String(decoding: enc.stdout, as: UTF8.self)
                .replacingOccurrences(of: "\"type\":\"t\"", with: "\"type\":\"u\""))
        let bad = try await run(base + ["--allow-unsigned", tampered])
        #expect(bad.status == 2 && bad.stdout.isEmpty)

        // D3: a record that claims another writer than the EAKInfo's signer exits 2, unless allowed.
        var claimed = try #require(CanonicalJSON.parse(Array(enc.stdout)).objectValue)
        var meta = try #require(claimed["meta"]?.objectValue)
        meta["writer_id"] = .string(UUID().uuidString.lowercased())
        claimed["meta"] = .object(meta)
        claimed["rec_sig"] = nil
        let other = try dir.write("other-writer.json", CanonicalJSON.serialize(.object(claimed)))
        let mismatch = try await run(base + ["--allow-unsigned", other])
        #expect(mismatch.status == 2 && mismatch.stderr.contains("signer_id"), "\(mismatch.stderr)")
        #expect(try await run(base + ["--allow-unsigned", "--allow-writer-mismatch", other]).status == 0)
        _ = writer
    }

    @Test(
        "note decrypt --expect-field detects removed fields (D1); --allow-legacy-signature reads js-sdk NoteInfo notes")
    func noteFieldsAndLegacy() async throws {
        let dir = try ScratchDirectory()
        let (writerPath, writer) = try await keygen(dir, "w.json")
        let (readerPath, reader) = try await keygen(dir, "r.json")
        let enc = try await run(
            [
                "note", "encrypt", "--identity", writerPath, "--recipient-public-key",
                reader.publicKey.base64URLEncoded,
            ], stdin: Data("{\"a\":\"1\",\"secret\":\"2\"}".utf8))
        #expect(enc.status == 0, "\(enc.stderr)")
        var body = try #require(CanonicalJSON.parse(Array(enc.stdout)).objectValue)
        var fields = try #require(body["data"]?.objectValue)
        fields["secret"] = nil
        body["data"] = .object(fields)
        let stripped = try dir.write("stripped.json", CanonicalJSON.serialize(.object(body)))
        let full = try dir.write("full.json", String(decoding: enc.stdout, as: UTF8.self))
        let expect = ["--expect-field", "a", "--expect-field", "secret"]
        #expect(try await run(["note", "decrypt", "--identity", readerPath] + expect + [full]).status == 0)
        #expect(try await run(["note", "decrypt", "--identity", readerPath, stripped]).status == 0)
        let caught = try await run(["note", "decrypt", "--identity", readerPath] + expect + [stripped])
        #expect(caught.status == 2 && caught.stdout.isEmpty && caught.stderr.contains("missing \"secret\""))

        // A legacy note: plaintext fields and one signature over NoteInfo.
        var note = try EncryptedNote(jsonData: enc.stdout)
        let ak = try note.encryptedAccessKey.unwrap(reader: reader.boxKey, authorizer: writer.publicKey)
        let plain: RecordData = ["a": "1", "secret": "2"]
        note.data = FieldCipher.encrypt(plain, accessKey: ak)
        note.signature = Base64URL.encode(
            try #require(writer.signingKey).signature(
                for: LegacyNoteSignature.message(data: plain, note: note)))
        let legacy = try dir.write("legacy.json", String(decoding: note.jsonData(), as: UTF8.self))
        #expect(try await run(["note", "decrypt", "--identity", readerPath, legacy]).status == 2)
        let ok = try await run(["note", "decrypt", "--identity", readerPath, "--allow-legacy-signature", legacy])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(String(decoding: ok.stdout, as: UTF8.self) == "{\"a\":\"1\",\"secret\":\"2\"}\n")
    }

    @Test("D7: sign refuses to write what verify would refuse; the input at the limit still signs")
    func outputWithinReadLimits() async throws {
        let dir = try ScratchDirectory()
        let (idPath, identity) = try await keygen(dir, "id.json")
        let max = ParseLimits.default.maxValues
        // max - 1 numbers in an array: exactly max values, which parse; signing adds the wrapper and "sig".
        let atLimit = Data(("[" + Array(repeating: "0", count: max - 1).joined(separator: ",") + "]").utf8)
        let refused = try await run(["sign", "--identity", idPath], stdin: atLimit)
        #expect(refused.status == 65 && refused.stdout.isEmpty, "\(refused.stderr)")
        #expect(refused.stderr.contains("values, more than the \(max) that reading accepts"))
        let smaller = Data(("[" + Array(repeating: "0", count: max - 3).joined(separator: ",") + "]").utf8)
        let signed = try await run(["sign", "--identity", idPath], stdin: smaller)
        #expect(signed.status == 0, "\(signed.stderr)")
        let verified = try await run(
            ["verify", "--public-key=" + identity.publicSigningKey!.base64URLEncoded], stdin: signed.stdout)
        #expect(verified.status == 0, "\(verified.stderr)")
    }

    @Test("key options take base64url values that begin with '-'")
    func keysStartingWithDash() async throws {
        var key = Ed25519.PrivateKey()
        while !key.publicKey.base64URLEncoded.hasPrefix("-") { key = Ed25519.PrivateKey() }
        let doc = SignedDocument(signing: JSONValue.string("x"), with: key)
        let verify = try await run(["verify", "--public-key", key.publicKey.base64URLEncoded], stdin: doc.jsonData())
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(String(decoding: verify.stdout, as: UTF8.self) == "\"x\"\n")
    }

    @Test("sign and verify any JSON; nesting; wrong key exits 2")
    func signVerify() async throws {
        let dir = try ScratchDirectory()
        let (idPath, identity) = try await keygen(dir, "id.json")
        let signed = try await run(
            ["sign", "--identity", idPath], stdin: Data("{\"b\":[1,true,null],\"a\":\"x\"}".utf8))
        #expect(signed.status == 0, "\(signed.stderr)")
        let twice = try await run(["sign", "--identity", idPath], stdin: signed.stdout)
        let pk = identity.publicSigningKey!.base64URLEncoded
        let ok = try await run(["verify", "--public-key", pk, "--depth", "2"], stdin: twice.stdout)
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(String(decoding: ok.stdout, as: UTF8.self) == "{\"a\":\"x\",\"b\":[1,true,null]}\n")
        let other = Ed25519.PrivateKey().publicKey.base64URLEncoded
        #expect(try await run(["verify", "--public-key", other], stdin: signed.stdout).status == 2)
        // Deterministic: signing again gives the same bytes.
        #expect(
            try await run(["sign", "--identity", idPath], stdin: Data("{\"a\":\"x\",\"b\":[1,true,null]}".utf8)).stdout
                == signed.stdout)
    }

    @Test("note encrypt/decrypt, writer key check")
    func notes() async throws {
        let dir = try ScratchDirectory()
        let (writerPath, writer) = try await keygen(dir, "w.json")
        let (readerPath, reader) = try await keygen(dir, "r.json")
        let enc = try await run(
            [
                "note", "encrypt", "--identity", writerPath, "--recipient-public-key",
                reader.publicKey.base64URLEncoded,
            ], stdin: Data("{\"secret\":\"data\"}".utf8))
        #expect(enc.status == 0, "\(enc.stderr)")
        let dec = try await run(
            [
                "note", "decrypt", "--identity", readerPath, "--writer-signing-key",
                writer.publicSigningKey!.base64URLEncoded,
            ], stdin: enc.stdout)
        #expect(dec.status == 0, "\(dec.stderr)")
        #expect(String(decoding: dec.stdout, as: UTF8.self) == "{\"secret\":\"data\"}\n")
        let wrongWriter = try await run(
            [
                "note", "decrypt", "--identity", readerPath, "--writer-signing-key",
                reader.publicSigningKey!.base64URLEncoded,
            ], stdin: enc.stdout)
        #expect(wrongWriter.status == 2, "a note from another writer is a verification failure (D6)")
        #expect(try await run(["note", "decrypt", "--identity", writerPath], stdin: enc.stdout).status == 2)
    }
}

@Suite("Interop with Tozny's Python SDK")
struct PythonInteropTests {
    struct SetupFailure: Error, CustomStringConvertible { let description: String }

    /// The project's Python with the vector peers, created with scripts/python-env.sh; nil when python3 is absent.
    static func python() async throws -> String? {
        if let python = ChildProcess.projectPython { return python.path }
        let which = try? await ChildProcess.run(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "--version"])
        guard which?.status == 0 else { return nil }
        return try await ChildProcess.makeProjectPython().path
    }

    static func shell(_ executable: String, _ args: [String]) async throws -> (status: Int32, out: String, err: String)
    {
        let result = try await ChildProcess.run(URL(fileURLWithPath: executable), args)
        return (result.status, result.stdoutText, result.stderr)
    }

    @Test("Swift → Python: the Python SDK decrypts and verifies everything generate-swift-vectors writes")
    func swiftToPython() async throws {
        guard let python = try await Self.python() else {
            print("skipped: python3 is not installed, so the Python SDK cannot check Swift output")
            return
        }
        let dir = try ScratchDirectory()
        let gen = try await ChildProcess.run(CLIRunner.vectorGenerator, [dir.url.path])
        #expect(gen.status == 0, "\(gen.stderr)")
        let checker = VectorLocations.projectRoot.appendingPathComponent("TestVectors/generators/check_swift_output.py")
        let result = try await Self.shell(python, [checker.path, dir.url.path])
        #expect(result.status == 0, "\(result.out)\n\(result.err)")
        #expect(result.out.contains(" passed, 0 failed"), "\(result.out)")
    }

    @Test("Through the command line, both ways: EAKs, records (signed and unsigned), notes and credential files")
    func commandLineRoundTrips() async throws {
        guard let python = try await Self.python() else {
            print("skipped: python3 is not installed, so the Python SDK cannot exchange data with e3dbkit")
            return
        }
        let dir = try ScratchDirectory()
        let driver = VectorLocations.projectRoot.appendingPathComponent("Tests/E3DBKitCLITests/cli_interop.py")
        let result = try await Self.shell(python, [driver.path, CLIRunner.binary.path, dir.url.path])
        #expect(result.status == 0, "\(result.out)\n\(result.err)")
        #expect(result.out.contains(" passed, 0 failed"), "\(result.out)")
        #expect(!result.out.contains(" 0 passed"), "\(result.out)")
    }

    @Test("Python → Swift: regenerating the vectors is byte-identical and every suite passes on the fresh copy")
    func pythonToSwift() async throws {
        guard let python = try await Self.python() else {
            print("skipped: python3 is not installed, so the vectors cannot be regenerated")
            return
        }
        let dir = try ScratchDirectory()
        let generator = VectorLocations.projectRoot.appendingPathComponent("TestVectors/generators/e3db_documents.py")
        let result = try await Self.shell(python, [generator.path, dir.url.path])
        #expect(result.status == 0, "\(result.err)")
        let groupGenerator = VectorLocations.projectRoot.appendingPathComponent("TestVectors/generators/group_keys.py")
        let groupResult = try await Self.shell(python, [groupGenerator.path, dir.url.path])
        #expect(groupResult.status == 0, "\(groupResult.err)")
        for file in [
            "keys/eak.json", "keys/eakinfo.json", "keys/client_config.json", "keys/group_wrappers.json",
            "documents/record_fields.json",
            "documents/records.json", "documents/signed_documents.json", "documents/tfsp1.json", "documents/notes.json",
            "documents/js_variants.json",
            "identity/derivation.json", "identity/tsv1.json", "identity/pkce.json",
        ] {
            let fresh = try Data(contentsOf: dir.url.appendingPathComponent(file))
            let committed = try Data(contentsOf: VectorLocations.default.projectFile(file))
            #expect(fresh == committed, "\(file) differs from a fresh regeneration")
        }
        let locations = VectorLocations(testVectors: dir.url)
        var failures: [String] = []
        for suite in KeysSuites.all + DocumentsSuites.all + IdentitySuites.all {
            for c in try suite.cases(locations) {
                do { try c.check() } catch { failures.append("\(c): \(error)") }
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }
}
