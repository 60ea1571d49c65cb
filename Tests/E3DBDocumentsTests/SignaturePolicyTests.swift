import E3DBCanonicalJSON
import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
import Foundation
import Testing

@Suite("Record signature policy, js-sdk variants and the writer check")
struct SignaturePolicyTests {
    let alice = ClientIdentity.generate(clientID: UUID())
    let data: RecordData = ["9": "nine", "name": "Zoë", "10": "ten", "a": "first"]
    let plain: RecordData = ["z": "1", "b": "2"]

    func writerKey() throws -> (AccessKey, EAKInfo) { try EAKInfo.makeWriterKey(for: alice) }

    func signed(_ ak: AccessKey) throws -> EncryptedDocument {
        try EncryptedDocument.encrypt(
            type: "contact", data: data, plain: plain, writerID: #require(alice.clientID), accessKey: ak,
            signingKey: #require(alice.signingKey))
    }

    func unsigned(_ ak: AccessKey) throws -> EncryptedDocument {
        var doc = try signed(ak)
        doc.recordSignature = nil
        return doc
    }

    func code(_ body: () throws -> Void) -> E3DBError.Code? {
        do {
            try body()
            return nil
        } catch let error as E3DBError {
            return error.code
        } catch {
            Issue.record("not an E3DBError: \(error)")
            return nil
        }
    }

    @Test("an unsigned record: required refuses it, verify-if-present and ignore read it and say so")
    func unsignedRecord() throws {
        let (ak, info) = try writerKey()
        let doc = try unsigned(ak)
        let text = doc.jsonData()
        #expect(!String(decoding: text, as: UTF8.self).contains("rec_sig"))
        let parsed = try EncryptedDocument(jsonData: text)
        #expect(parsed.recordSignature == nil)
        #expect(code { _ = try parsed.decrypt(identity: alice, eakInfo: info) } == .missingSignature)
        #expect(E3DBError.Code.missingSignature.category == .verification)
        let lenient = try parsed.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .verifyIfPresent))
        #expect(lenient.data == data && lenient.signatureStatus == .absent)
        let ignored = try parsed.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .ignore))
        #expect(ignored.data == data && ignored.signatureStatus == .notChecked)
        // "rec_sig": null is unsigned too; a non-string rec_sig is malformed.
        var object = try #require(CanonicalJSON.parse(Array(text)).objectValue)
        object["rec_sig"] = .null
        #expect(try EncryptedDocument(documentJSON: .object(object)).recordSignature == nil)
        object["rec_sig"] = .number(1)
        #expect(code { _ = try EncryptedDocument(documentJSON: .object(object)) } == .invalidDocument)
    }

    @Test("a rec_sig that does not verify is rejected under verify-if-present, not under ignore")
    func badSignature() throws {
        let (ak, info) = try writerKey()
        var doc = try signed(ak)
        let good = try doc.decrypt(identity: alice, eakInfo: info)
        #expect(good.signatureStatus == .verified && good.data == data)
        doc.meta.plain["z"] = "changed"
        #expect(
            code { _ = try doc.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .verifyIfPresent)) }
                == .invalidSignature)
        #expect(
            try doc.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .ignore)).signatureStatus
                == .notChecked)
        doc.recordSignature = "not base64!"
        #expect(
            code { _ = try doc.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .verifyIfPresent)) }
                == .invalidSignature)
        // No key: required or a present signature needs one; an unsigned record under verify-if-present does not.
        #expect(code { _ = try doc.decrypt(accessKey: ak, verifyingKey: nil) } == .missingKey)
        doc.recordSignature = nil
        #expect(
            try doc.decrypt(accessKey: ak, verifyingKey: nil, verification: .init(policy: .verifyIfPresent))
                .signatureStatus == .absent)
    }

    @Test("D3: meta.writer_id must be the EAKInfo's signer_id unless the check is turned off")
    func writerIsSigner() throws {
        let eve = ClientIdentity.generate(clientID: UUID())
        let bob = ClientIdentity.generate(clientID: UUID())
        // Eve makes her own access key, shares it with Bob, and signs a record that claims Alice wrote it.
        let (ak, eveInfo) = try EAKInfo.makeWriterKey(for: eve)
        let bobInfo = try eveInfo.share(with: bob.publicKey, as: eve)
        let forged = try EncryptedDocument.encrypt(
            type: "contact", data: data, writerID: #require(alice.clientID), accessKey: ak,
            signingKey: #require(eve.signingKey))
        var caught: E3DBError?
        do { _ = try forged.decrypt(identity: bob, eakInfo: bobInfo) } catch { caught = error }
        #expect(caught?.code == .writerSignerMismatch && caught?.context.field == "writer_id")
        #expect(caught?.code.category == .verification)
        let relaxed = try forged.decrypt(
            identity: bob, eakInfo: bobInfo, verification: .init(requireWriterIsSigner: false))
        #expect(relaxed.signatureStatus == .verified)
        // Eve's honest record (writer = signer) is fine; an EAKInfo without signer_id has nothing to check.
        let honest = try EncryptedDocument.encrypt(
            type: "contact", data: data, writerID: #require(eve.clientID), accessKey: ak,
            signingKey: #require(eve.signingKey))
        #expect(try honest.decrypt(identity: bob, eakInfo: bobInfo).data == data)
        var anonymous = bobInfo
        anonymous.signerID = nil
        #expect(try forged.decrypt(identity: bob, eakInfo: anonymous).signatureStatus == .verified)
    }

    @Test("js-sdk insertion order: accepted only when asked, after the canonical order")
    func insertionOrder() throws {
        let (ak, info) = try writerKey()
        var doc = try signed(ak)
        let key = try #require(alice.signingKey)
        let message = RecordSignature.message(meta: doc.meta, data: data, order: .javaScriptInsertion)
        let text = String(decoding: message, as: UTF8.self)
        #expect(text.hasSuffix(#"{"9":"nine","10":"ten","name":"Zoë","a":"first"}"#))
        #expect(text.hasPrefix(#"{"plain":{"z":"1","b":"2"},"type":"contact""#))
        doc.recordSignature = Base64URL.encode(key.signature(for: message))
        #expect(code { _ = try doc.decrypt(identity: alice, eakInfo: info) } == .invalidSignature)
        let ok = try doc.decrypt(
            identity: alice, eakInfo: info, verification: .init(variants: .javaScriptInsertionOrder))
        #expect(ok.signatureStatus == .verifiedInsertionOrder && ok.data == data)
        // The order is the record's own: the same fields in another order no longer verify.
        var reordered = doc
        reordered.data = try RecordData(doc.data.members.reversed().map { ($0.key, $0.value) })
        #expect(
            code {
                _ = try reordered.decrypt(
                    identity: alice, eakInfo: info, verification: .init(variants: .javaScriptInsertionOrder))
            }
                == .invalidSignature)
        // A canonically signed record still verifies as such with the variant enabled.
        let canonical = try signed(ak).decrypt(
            identity: alice, eakInfo: info, verification: .init(variants: .javaScriptInsertionOrder))
        #expect(canonical.signatureStatus == .verified)
    }

    @Test("js-sdk file records: meta ‖ null, only with the variant and only for empty data")
    func nullData() throws {
        let (ak, info) = try writerKey()
        let key = try #require(alice.signingKey)
        let meta = ClientMeta(
            writerID: try #require(alice.clientID), userID: try #require(alice.clientID), type: "file")
        let sig = Base64URL.encode(key.signature(for: meta.canonicalBytes() + Array("null".utf8)))
        let doc = EncryptedDocument(meta: meta, data: RecordData(), recordSignature: sig)
        #expect(code { _ = try doc.decrypt(identity: alice, eakInfo: info) } == .invalidSignature)
        let ok = try doc.decrypt(identity: alice, eakInfo: info, verification: .init(variants: .fileRecordNullData))
        #expect(ok.signatureStatus == .verifiedNullData && ok.data.isEmpty)
        // With data, the null message would leave the data unsigned: refused.
        var withData = EncryptedDocument(
            meta: meta, data: FieldCipher.encrypt(["x": "y"], accessKey: ak), recordSignature: sig)
        #expect(
            code {
                _ = try withData.decrypt(
                    identity: alice, eakInfo: info, verification: .init(variants: .fileRecordNullData))
            }
                == .invalidSignature)
        withData.recordSignature = nil
        #expect(
            try withData.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .verifyIfPresent)).data
                == ["x": "y"])
    }

    @Test("D1: a note with fields removed still verifies field by field; expectedFields detects it")
    func expectedNoteFields() throws {
        let bob = ClientIdentity.generate(clientID: UUID())
        let note = try EncryptedNote.encrypt(
            data: ["a": "1", "ab": "2", "secret": "3"], recipientEncryptionKey: bob.publicKey,
            recipientSigningKey: bob.publicSigningKey, writerBoxKey: alice.boxKey,
            writerSigningKey: #require(alice.signingKey))
        var stripped = note
        stripped.data["secret"] = nil
        // The format cannot see it (TFSP1 does not bind the set of fields) ...
        #expect(try stripped.decrypt(readerKey: bob.boxKey) == ["a": "1", "ab": "2"])
        // ... a reader that knows the fields can.
        let options = NoteDecryptionOptions(expectedFields: ["a", "ab", "secret"])
        #expect(try note.decrypt(readerKey: bob.boxKey, options: options).count == 3)
        var caught: E3DBError?
        do { _ = try stripped.decrypt(readerKey: bob.boxKey, options: options) } catch { caught = error }
        #expect(caught?.code == .unexpectedFields && caught?.context.field == "secret")
        #expect(caught?.message.contains("missing \"secret\"") == true)
        do { _ = try note.decrypt(readerKey: bob.boxKey, options: .init(expectedFields: ["a"])) } catch {
            caught = error
        }
        #expect(caught?.code == .unexpectedFields && caught?.message.contains("unexpected \"ab\", \"secret\"") == true)
        // Names compare by code units: "é" and "e\u{301}" are different fields.
        let accents = try EncryptedNote.encrypt(
            data: ["é": "x"], recipientEncryptionKey: bob.publicKey, recipientSigningKey: nil,
            writerBoxKey: alice.boxKey, writerSigningKey: #require(alice.signingKey))
        #expect(throws: E3DBError.self) {
            try accents.decrypt(readerKey: bob.boxKey, options: .init(expectedFields: ["e\u{301}"]))
        }
    }

    @Test("legacy NoteInfo notes: only with the option; the signature binds every field and key")
    func legacyNotes() throws {
        let bob = ClientIdentity.generate(clientID: UUID())
        let signingKey = try #require(alice.signingKey)
        var note = try EncryptedNote.encrypt(
            data: ["x": "placeholder"], recipientEncryptionKey: bob.publicKey, recipientSigningKey: nil,
            writerBoxKey: alice.boxKey, writerSigningKey: signingKey)
        let ak = try note.encryptedAccessKey.unwrap(reader: bob.boxKey, authorizer: alice.publicKey)
        let plain: RecordData = ["10": "ten", "9": "nine", "b": "bee"]
        note.data = FieldCipher.encrypt(plain, accessKey: ak)
        note.signature = Base64URL.encode(
            signingKey.signature(for: LegacyNoteSignature.message(data: plain, note: note)))
        #expect(LegacyNoteSignature.isLegacy(note.signature))
        let text = String(decoding: LegacyNoteSignature.message(data: plain, note: note), as: UTF8.self)
        #expect(text.hasPrefix(#"{"data":{"9":"nine","10":"ten","b":"bee"},"note_keys":{"encrypted_access_key":"#))
        #expect(throws: E3DBError.self) { try note.decrypt(readerKey: bob.boxKey) }
        let legacy = NoteDecryptionOptions(allowLegacyNoteSignature: true)
        #expect(try note.decrypt(readerKey: bob.boxKey, options: legacy) == plain)
        var tampered = note
        tampered.mode = "sodium"
        #expect(code { _ = try tampered.decrypt(readerKey: bob.boxKey, options: legacy) } == .invalidSignature)
        tampered = note
        tampered.data["b"] = nil
        #expect(code { _ = try tampered.decrypt(readerKey: bob.boxKey, options: legacy) } == .invalidSignature)
        // A TFSP1 note is still read the TFSP1 way with the option on.
        let modern = try EncryptedNote.encrypt(
            data: plain, recipientEncryptionKey: bob.publicKey, recipientSigningKey: nil, writerBoxKey: alice.boxKey,
            writerSigningKey: signingKey)
        #expect(!LegacyNoteSignature.isLegacy(modern.signature))
        #expect(try modern.decrypt(readerKey: bob.boxKey, options: legacy) == plain)
    }
}
