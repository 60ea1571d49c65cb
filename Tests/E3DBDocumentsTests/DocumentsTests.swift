import E3DBCanonicalJSON
import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
import Foundation
import Testing

@Suite("E3DBDocuments")
struct DocumentsTests {
    let writer = ClientIdentity.generate(clientID: UUID())
    let reader = ClientIdentity.generate(clientID: UUID())

    @Test("encrypt for myself, share locally, the reader decrypts and verifies")
    func shareAndDecrypt() throws {
        let (_, mine) = try EAKInfo.makeWriterKey(for: writer)
        let data = try RecordData([
            ("é", "precomposed"), ("e\u{301}", "decomposed"), ("", ""), ("\u{FEFF}bom", "\u{FEFF}v"),
        ])
        let doc = try EncryptedDocument.encrypt(
            type: "t", data: data, plain: ["p": "q"], identity: writer, eakInfo: mine)
        let shared = try mine.share(with: reader.publicKey, as: writer)
        let transport = try EncryptedDocument(jsonData: doc.jsonData())
        let decrypted = try transport.decrypt(identity: reader, eakInfo: shared)
        #expect(decrypted.data == data)
        #expect(decrypted.data.count == 4)
        #expect(decrypted.data["\u{FEFF}bom"] == "\u{FEFF}v")
        #expect(decrypted.meta.plain == ["p": "q"])
    }

    @Test("transport JSON is canonical with lowercase UUIDs")
    func transportJSON() throws {
        let id = UUID()
        let doc = EncryptedDocument.encrypt(
            type: "t", data: ["b": "1", "a": "2"], writerID: id, accessKey: AccessKey(),
            signingKey: Ed25519.PrivateKey())
        let text = String(decoding: doc.jsonData(), as: UTF8.self)
        #expect(text.hasPrefix("{\"data\":{\"a\":"))
        #expect(text.contains("\"writer_id\":\"\(id.uuidString.lowercased())\""))
        #expect(!text.contains(id.uuidString))
        #expect(text == doc.canonicalString())
    }

    @Test("decryption returns nothing when the signature fails")
    func signatureFirst() throws {
        let ak = AccessKey()
        let key = Ed25519.PrivateKey()
        var doc = EncryptedDocument.encrypt(
            type: "t", data: ["a": "secret"], writerID: UUID(), accessKey: ak, signingKey: key)
        doc.meta.type = "u"
        #expect(throws: E3DBError(.invalidSignature)) {
            try doc.decrypt(accessKey: ak, verifyingKey: key.publicKey)
        }
        #expect(throws: E3DBError(.invalidSignature)) {
            try doc.decrypt(accessKey: ak, verifyingKey: Ed25519.PrivateKey().publicKey)
        }
    }

    @Test("an EAKInfo without a signer key needs an explicit verifying key")
    func missingSigner() throws {
        var (_, info) = try EAKInfo.makeWriterKey(for: writer)
        let doc = try EncryptedDocument.encrypt(type: "t", data: ["a": "b"], identity: writer, eakInfo: info)
        info.signerSigningKey = nil
        #expect(throws: E3DBError(.missingKey)) { try doc.decrypt(identity: writer, eakInfo: info) }
        let ok = try doc.decrypt(identity: writer, eakInfo: info, verifyingKey: writer.publicSigningKey)
        #expect(ok.data["a"] == "b")
    }

    @Test("field errors name the field and the part")
    func fieldErrorContext() throws {
        let ak = AccessKey()
        let key = Ed25519.PrivateKey()
        var doc = EncryptedDocument.encrypt(
            type: "t", data: ["k": "v"], writerID: UUID(), accessKey: ak, signingKey: key)
        doc.data["k"] = "a.b.c"
        do {
            _ = try doc.decrypt(accessKey: ak, verifyingKey: key.publicKey)
            Issue.record("expected an error")
        } catch {
            #expect(error.code == .invalidField)
            #expect(error.context.field == "k")
        }
    }

    @Test("RecordData keeps keys distinct by code units and rejects duplicates")
    func recordData() throws {
        #expect(throws: E3DBError(.invalidDocument)) { try RecordData([("a", "1"), ("a", "2")]) }
        let d = try RecordData([("é", "1"), ("e\u{301}", "2")])
        #expect(d.count == 2)
        #expect(d["é"] == "1" && d["e\u{301}"] == "2")
        // A Swift dictionary cannot hold both keys: that is why RecordData exists.
        let swift: [String: String] = Dictionary(d.members.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
        #expect(swift.count == 1)
    }

    @Test("SignedDocument nests and verifies each layer")
    func nestedSigned() throws {
        let key = Ed25519.PrivateKey()
        let inner = SignedDocument(signing: JSONValue.string("hello"), with: key)
        let outer = SignedDocument(signing: inner, with: key)
        let parsed = try SignedDocument<SignedDocument<JSONValue>>(jsonData: outer.jsonData())
        try parsed.verify(with: key.publicKey)
        try parsed.document.verify(with: key.publicKey)
        #expect(parsed.document.document == .string("hello"))
    }

    @Test("notes: strict by default, legacy option, writer key check")
    func notes() throws {
        let note = try EncryptedNote.encrypt(
            data: ["secret": "data"], recipientEncryptionKey: reader.publicKey,
            recipientSigningKey: reader.publicSigningKey, writerBoxKey: writer.boxKey,
            writerSigningKey: try writer.requireSigningKey())
        #expect(try note.decrypt(readerKey: reader.boxKey)["secret"] == "data")
        #expect(throws: E3DBError(.writerKeyMismatch)) {
            try note.decrypt(
                readerKey: reader.boxKey, options: .init(expectedWriterSigningKey: reader.publicSigningKey))
        }
        var unsigned = note
        unsigned.signature = "plain"
        #expect(throws: E3DBError(.unsignedField)) { try unsigned.decrypt(readerKey: reader.boxKey) }
        let legacy = try unsigned.decrypt(readerKey: reader.boxKey, options: .init(allowUnsignedFields: true))
        #expect(legacy["secret"] == "data")
        // Salts are lowercase.
        let salt = note.signature.split(separator: ";")[1]
        #expect(salt == salt.lowercased())
    }

    @Test("no input crashes: truncations of a valid field and document", arguments: [0, 1, 5, 33, 64, 65, 97, 98, 130])
    func truncations(_ n: Int) throws {
        let ak = AccessKey()
        let key = Ed25519.PrivateKey()
        let field = FieldCipher.encrypt("value", accessKey: ak)
        #expect(throws: E3DBError.self) { try FieldCipher.decrypt(String(field.prefix(n)), accessKey: ak) }
        let doc = EncryptedDocument.encrypt(
            type: "t", data: ["a": "b"], writerID: UUID(), accessKey: ak, signingKey: key)
        let bytes = doc.jsonData()
        #expect(throws: E3DBError.self) {
            try EncryptedDocument(jsonData: bytes.prefix(min(n, bytes.count - 1))).decrypt(
                accessKey: ak, verifyingKey: key.publicKey)
        }
    }
}

@Suite("E3DBDocuments robustness")
struct RobustnessTests {
    /// A deterministic generator so a failure can be reproduced.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("random byte mutations of documents, EAKInfo and notes give typed errors or verified results")
    func mutations() throws {
        var rng = SplitMix(state: 0xE3DB)
        let writer = ClientIdentity.generate(clientID: UUID())
        let (_, info) = try EAKInfo.makeWriterKey(for: writer)
        let doc = try EncryptedDocument.encrypt(
            type: "t", data: ["name": "Zoë 😀", "empty": ""], plain: ["p": "q"], identity: writer, eakInfo: info)
        let note = try EncryptedNote.encrypt(
            data: ["k": "v"], recipientEncryptionKey: writer.publicKey, recipientSigningKey: nil,
            writerBoxKey: writer.boxKey, writerSigningKey: try writer.requireSigningKey())
        let inputs: [(Data, (Data) throws -> Void)] = [
            (doc.jsonData(), { _ = try EncryptedDocument(jsonData: $0).decrypt(identity: writer, eakInfo: info) }),
            (info.jsonData(), { _ = try EAKInfo(jsonData: $0).unwrap(with: writer.boxKey) }),
            (note.jsonData(), { _ = try EncryptedNote(jsonData: $0).decrypt(readerKey: writer.boxKey) }),
        ]
        var rejected = 0
        for (original, attempt) in inputs {
            for _ in 0..<400 {
                var bytes = original
                let count = Int.random(in: 1...3, using: &rng)
                for _ in 0..<count {
                    let i = Int.random(in: 0..<bytes.count, using: &rng)
                    bytes[i] = UInt8.random(in: 0...255, using: &rng)
                }
                do {
                    try attempt(bytes)
                } catch is E3DBError {
                    rejected += 1
                } catch {
                    Issue.record("untyped error \(error)")
                }
            }
        }
        // Almost every mutation must be caught (a few land in insignificant places such as JSON whitespace-free
        // positions that keep the meaning, e.g. a changed ignored member).
        #expect(rejected > 1100)
    }
}
