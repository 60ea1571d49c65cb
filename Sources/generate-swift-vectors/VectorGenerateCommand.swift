import ArgumentParser
import E3DBCommandLine
import E3DBConformance
import E3DBKit
import Foundation

/// `swift run generate-swift-vectors DIR`: writes Swift-made cases for the Python SDK to check
/// (`TestVectors/generators/check_swift_output.py DIR`). A development tool (a test-fixture writer), not part of a
/// product: `e3dbkit` does not ship it.
struct GenerateVectorsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate-swift-vectors",
        abstract: "Write Swift-made EAK, record, document, TFSP1, note and identity cases for the Python SDK to check.",
        discussion: """
            Writes eak.json, eakinfo.json, identity.json, record_fields.json, records.json, \
            signed_documents.json, tfsp1.json, notes.json, derivation.json and tsv1.json (Wycheproof-shaped) into \
            DIR. Inputs include the naughty strings of the committed vectors. Keys and nonces are random, so the \
            output differs on each run; check it with TestVectors/generators/check_swift_output.py DIR.
            """
    )

    @Argument(help: "The output directory (created if needed).")
    var directory: String

    @Option(help: "The TestVectors directory to take naughty-string inputs from (default: this checkout's).")
    var testVectors: String?

    func run() throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let locations = VectorLocations(
                testVectors: testVectors.map { URL(fileURLWithPath: $0, isDirectory: true) })
            try SwiftVectorWriter(directory: URL(fileURLWithPath: directory, isDirectory: true), locations: locations)
                .writeAll()
        } catch let error as E3DBError {
            throw CLIError(error, while: "generating vectors")
        } catch let error as CocoaError {
            throw CLIError("cannot create \(directory): \(error.localizedDescription)", exitCode: ExitStatus.failure)
        }
    }
}

/// The single exit path (``CommandLineMain``, shared with `e3dbkit`).
@main
enum GeneratorMain {
    static func main() async { await CommandLineMain.run(GenerateVectorsCommand.self) }
}

/// Builds the Swift → Python cases.
struct SwiftVectorWriter {
    let directory: URL
    let locations: VectorLocations

    struct NaughtyInput: Decodable {
        let value: String?
        let flags: [String]
    }

    func naughtyStrings() throws -> [String] {
        let file = try VectorFile<NaughtyInput>.load(locations.projectFile("documents/record_fields.json"))
        return file.tests.filter { $0.flags.contains("Naughty") }.compactMap(\.value)
    }

    func write(_ name: String, algorithm: String, _ tests: [JSONObject]) throws {
        var numbered: [JSONValue] = []
        for (i, t) in tests.enumerated() {
            var o: JSONObject = ["tcId": .number(Double(i + 1))]
            for m in t { o[m.key] = m.value }
            if o["flags"] == nil { o["flags"] = .array([]) }
            numbered.append(.object(o))
        }
        let file: JSONValue = .object([
            "algorithm": .string(algorithm), "source": .string("E3DBKit (Swift) generate-swift-vectors"),
            "generator": .string("generate-swift-vectors"), "numberOfTests": .number(Double(tests.count)),
            "tests": .array(numbered),
        ])
        try Self.replaceFile(directory.appendingPathComponent(name), with: CanonicalJSON.serializedBytes(file))
        try StandardOutput.line("wrote \(name): \(tests.count) tests")
    }

    /// Writes `bytes` to a new private (0600) temporary file beside `url`, then renames it over `url`: an existing
    /// symlink at `url` is replaced, never written through (the files hold test keys).
    static func replaceFile(_ url: URL, with bytes: [UInt8]) throws {
        try OutputFile.write(bytes, to: url.path, mode: 0o600, force: true)
    }

    static func pairs(_ data: RecordData) -> JSONValue {
        .array(data.members.map { .array([.string($0.key), .string($0.value)]) })
    }

    static func flip(_ s: String, at index: Int) -> String {
        var chars = Array(s)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        if let i = alphabet.firstIndex(of: chars[index]) { chars[index] = alphabet[i ^ 0x20] }
        return String(chars)
    }

    func writeAll() throws {
        let naughty = try naughtyStrings()
        let writerID = UUID()
        let writer = ClientIdentity.generate(clientID: writerID)
        let reader = ClientIdentity.generate(clientID: UUID())
        let signer = try writer.requireSigningKey()

        // EAKs and EAKInfo.
        var eaks: [JSONObject] = []
        var infos: [JSONObject] = []
        for i in 0..<8 {
            let ak = AccessKey()
            let eak = try EncryptedAccessKey.wrap(ak, for: reader.publicKey, by: writer.boxKey)
            let akHex = unsafe JSONValue.string(ak.withUnsafeBytes { unsafe Hex.encode($0) })
            eaks.append([
                "comment": .string("Swift wrap #\(i)"), "result": "valid",
                "readerSecretKey": .string(reader.boxKey.base64URLEncoded),
                "authorizerPublicKey": .string(writer.publicKey.base64URLEncoded), "eak": .string(eak.stringValue),
                "accessKey": akHex,
            ])
            if i == 0 {
                eaks.append([
                    "comment": "Swift wrap, ciphertext changed", "result": "invalid",
                    "readerSecretKey": .string(reader.boxKey.base64URLEncoded),
                    "authorizerPublicKey": .string(writer.publicKey.base64URLEncoded),
                    "eak": .string(Self.flip(eak.stringValue, at: 5)),
                ])
                let (_, mine) = try EAKInfo.makeWriterKey(for: writer)
                let shared = try mine.share(with: reader.publicKey, as: writer)
                let sharedAK = try shared.unwrap(with: reader.boxKey)
                unsafe infos.append([
                    "comment": "Swift local sharing (EAKInfo API shape)", "result": "valid",
                    "readerSecretKey": .string(reader.boxKey.base64URLEncoded),
                    "json": .string(String(decoding: shared.jsonData(), as: UTF8.self)),
                    "accessKey": .string(sharedAK.withUnsafeBytes { unsafe Hex.encode($0) }),
                ])
                unsafe infos.append([
                    "comment": "Swift writer key (EAKInfo for itself)", "result": "valid",
                    "readerSecretKey": .string(writer.boxKey.base64URLEncoded),
                    "json": .string(String(decoding: mine.jsonData(), as: UTF8.self)),
                    "accessKey": .string(
                        try mine.unwrap(with: writer.boxKey).withUnsafeBytes { unsafe Hex.encode($0) }),
                ])
            }
        }
        try write("eak.json", algorithm: "E3DB EAK", eaks)
        try write("eakinfo.json", algorithm: "E3DB EAKInfo", infos)
        try write(
            "identity.json", algorithm: "E3DB client credential JSON",
            [
                [
                    "comment": "e3dbkit keygen output", "result": "valid",
                    "json": .string(String(decoding: writer.configJSON(), as: UTF8.self)),
                ]
            ])

        // Record fields.
        let ak = AccessKey()
        let akHex = unsafe JSONValue.string(ak.withUnsafeBytes { unsafe Hex.encode($0) })
        var fields: [JSONObject] = []
        let extras = ["", "\u{FEFF}leading BOM", "é", "e\u{301}", String(repeating: "x", count: 100_000), "a\u{0}b"]
        for value in extras + naughty {
            fields.append([
                "comment": "Swift field", "result": "valid", "accessKey": akHex, "value": .string(value),
                "field": .string(FieldCipher.encrypt(value, accessKey: ak)),
            ])
        }
        let one = FieldCipher.encrypt("value", accessKey: ak)
        for (index, part) in [(5, "edk"), (70, "edkN"), (100, "ef")] {
            fields.append([
                "comment": .string("Swift field with \(part) changed"), "result": "invalid", "accessKey": akHex,
                "field": .string(Self.flip(one, at: index)),
            ])
        }
        try write("record_fields.json", algorithm: "E3DB record field", fields)

        // Records with rec_sig.
        var records: [JSONObject] = []
        func record(_ comment: String, _ data: RecordData, plain: RecordData = RecordData(), order: KeyOrder = .utf16) {
            let doc = EncryptedDocument.encrypt(
                type: "swift", data: data, plain: plain, writerID: writerID, accessKey: ak, signingKey: signer,
                order: order)
            records.append([
                "comment": .string(comment), "result": "valid", "accessKey": akHex,
                "order": .string(order == .javaScript ? "javaScript" : "utf16"),
                "writerSigningPublicKey": .string(signer.publicKey.base64URLEncoded),
                "encryptedDocument": .string(String(decoding: doc.jsonData(), as: UTF8.self)),
                "data": Self.pairs(data), "plain": Self.pairs(plain),
            ])
        }
        record(
            "Swift record (spec A.4 data)", ["quote": "say \"hi\"\n", "name": "Zoë 😀"], plain: ["b": "2", "a": "1/2"])
        record("Swift record, empty", RecordData())
        record("Swift record, canonically equivalent keys", try RecordData([("é", "1"), ("e\u{301}", "2")]))
        record("Swift record, js-sdk order", ["10": "a", "9": "b", "x": "c"], plain: ["2": "p"], order: .javaScript)
        for start in stride(from: 0, to: naughty.count, by: 40) {
            let part = Array(naughty[start..<min(start + 40, naughty.count)])
            record(
                "Swift record, naughty values \(start)...",
                try RecordData(part.enumerated().map { (String(format: "k%03d", start + $0.offset), $0.element) }))
            var seen = Set<[UInt8]>()
            var keyed: [(String, String)] = []
            for s in part where seen.insert(Array(s.utf8)).inserted { keyed.append((s, String(s.reversed()))) }
            record("Swift record, naughty keys \(start)...", try RecordData(keyed))
        }
        if var last = records.first, case .string(let text)? = last["encryptedDocument"] {
            var doc = try EncryptedDocument(jsonData: Data(text.utf8))
            doc.meta.type = "changed"
            last["comment"] = "Swift record with meta.type changed after signing"
            last["result"] = "invalid"
            last["encryptedDocument"] = .string(String(decoding: doc.jsonData(), as: UTF8.self))
            records.append(last)
        }
        try write("records.json", algorithm: "E3DB record with rec_sig", records)

        // Signed documents.
        var signed: [JSONObject] = []
        func sign(_ comment: String, _ doc: JSONValue) {
            let s = SignedDocument(signing: doc, with: signer)
            signed.append([
                "comment": .string(comment), "result": "valid", "publicKey": .string(signer.publicKey.base64URLEncoded),
                "signedDocument": .string(String(decoding: s.jsonData(), as: UTF8.self)),
            ])
        }
        sign("Swift string map", ["b": "2", "a": "1"])
        sign("Swift nested values", ["z": [true, false, nil, "x", 42], "a": ["y": ["x": "w"]]])
        for start in stride(from: 0, to: naughty.count, by: 60) {
            var o = JSONObject()
            for s in naughty[start..<min(start + 60, naughty.count)] { o[s] = .string(s) }
            sign("Swift naughty keys and values \(start)...", .object(o))
        }
        let inner = SignedDocument(signing: JSONValue.string("inner"), with: signer)
        sign("Swift nested SignedDocument", inner.signableJSON)
        try write("signed_documents.json", algorithm: "E3DB SignedDocument", signed)

        // TFSP1.
        var tfsp1: [JSONObject] = []
        for (i, s) in naughty.enumerated() where i % 5 == 0 {
            let salt = TFSP1.makeSalt()
            tfsp1.append([
                "comment": .string("Swift TFSP1 naughty \(i)"), "result": "valid",
                "publicKey": .string(signer.publicKey.base64URLEncoded),
                "key": .string(s), "value": .string(s), "salt": .string(salt),
                "signed": .string(TFSP1.sign(key: s, value: s, salt: salt, signingKey: signer)),
            ])
        }
        try write("tfsp1.json", algorithm: "TFSP1", tfsp1)

        // Notes.
        var notes: [JSONObject] = []
        func note(_ comment: String, _ data: RecordData) throws {
            let n = try EncryptedNote.encrypt(
                data: data, recipientEncryptionKey: reader.publicKey, recipientSigningKey: reader.publicSigningKey,
                writerBoxKey: writer.boxKey, writerSigningKey: signer)
            notes.append([
                "comment": .string(comment), "result": "valid",
                "readerSecretKey": .string(reader.boxKey.base64URLEncoded),
                "note": .string(String(decoding: n.jsonData(), as: UTF8.self)), "expectedData": Self.pairs(data),
            ])
        }
        try note("Swift note", ["secret": "data", "other": "ünïcode 😀"])
        try note("Swift note, empty value", ["empty": ""])
        for start in stride(from: 0, to: naughty.count, by: 100) {
            var seen = Set<[UInt8]>()
            var keyed: [(String, String)] = []
            for s in naughty[start..<min(start + 100, naughty.count)] where seen.insert(Array(s.utf8)).inserted {
                keyed.append((s, s))
            }
            try note("Swift note, naughty \(start)...", try RecordData(keyed))
        }
        try write("notes.json", algorithm: "E3DB note", notes)

        // Identity derivation and TSV1.
        var derivations: [JSONObject] = []
        for (user, password, realm) in [
            ("FRED", "correcthorsebatterystaple", "IntegrationTest"), ("Ünïcode", "pässwörd 😀", "Realm"),
        ] {
            for kind in NoteCredentials.Kind.allCases {
                let c = try NoteCredentials.derive(username: user, password: password, realm: realm, kind: kind)
                derivations.append([
                    "comment": .string("Swift derivation (\(kind.rawValue))"), "result": "valid",
                    "username": .string(user), "password": .string(password), "realm": .string(realm),
                    "type": .string(kind.rawValue), "noteName": .string(c.noteName),
                    "boxPublicKey": .string(c.boxKey.publicKey.base64URLEncoded),
                    "boxSecretKey": .string(c.boxKey.base64URLEncoded),
                    "signingPublicKey": .string(c.signingKey.publicKey.base64URLEncoded),
                    "signingSecretKey": .string(c.signingKey.base64URLEncoded),
                ])
            }
        }
        try write("derivation.json", algorithm: "E3DB identity derivation", derivations)
        var tsv1: [JSONObject] = []
        for (path, query, method) in [
            ("/v1/storage/records", "", "POST"), ("/x/y%2Fz", "foo=quux&bar=baz", "GET"),
            ("/v2/search", "z=1&a=2&a=1", "PUT"),
        ] {
            let nonce = UUID().lowercasedString
            let ts = Int64(Date().timeIntervalSince1970)
            tsv1.append([
                "comment": "Swift TSV1", "result": "valid", "signingKey": .string(signer.base64URLEncoded),
                "path": .string(path), "query": .string(TSV1.canonicalQuery(query)), "rawQuery": .string(query),
                "method": .string(method), "timestamp": .number(Double(ts)), "nonce": .string(nonce),
                "clientId": .string(writerID.lowercasedString),
                "authorization": .string(
                    try TSV1.authorization(
                        path: path, query: TSV1.canonicalQuery(query), method: method, timestamp: ts, nonce: nonce,
                        clientID: writerID.lowercasedString, signingKey: signer)),
            ])
        }
        try write("tsv1.json", algorithm: "TSV1", tsv1)
    }
}
