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
        #expect(code { _ = try doc.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .verifyIfPresent)) }
            == .invalidSignature)
        #expect(try doc.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .ignore)).signatureStatus
            == .notChecked)
        doc.recordSignature = "not base64!"
        #expect(code { _ = try doc.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .verifyIfPresent)) }
            == .invalidSignature)
        // No key: required or a present signature needs one; an unsigned record under verify-if-present does not.
        #expect(code { _ = try doc.decrypt(accessKey: ak, verifyingKey: nil) } == .missingKey)
        doc.recordSignature = nil
        #expect(try doc.decrypt(accessKey: ak, verifyingKey: nil, verification: .init(policy: .verifyIfPresent))
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
            type: "contact", data: data, writerID: #require(eve.clientID), accessKey: ak, signingKey: #require(eve.signingKey))
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
        #expect(code { _ = try reordered.decrypt(identity: alice, eakInfo: info, verification: .init(variants: .javaScriptInsertionOrder)) }
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
        let meta = ClientMeta(writerID: try #require(alice.clientID), userID: try #require(alice.clientID), type: "file")
        let sig = Base64URL.encode(key.signature(for: meta.canonicalBytes() + Array("null".utf8)))
        let doc = EncryptedDocument(meta: meta, data: RecordData(), recordSignature: sig)
        #expect(code { _ = try doc.decrypt(identity: alice, eakInfo: info) } == .invalidSignature)
        let ok = try doc.decrypt(identity: alice, eakInfo: info, verification: .init(variants: .fileRecordNullData))
        #expect(ok.signatureStatus == .verifiedNullData && ok.data.isEmpty)
        // With data, the null message would leave the data unsigned: refused.
        var withData = EncryptedDocument(meta: meta, data: FieldCipher.encrypt(["x": "y"], accessKey: ak), recordSignature: sig)
        #expect(code { _ = try withData.decrypt(identity: alice, eakInfo: info, verification: .init(variants: .fileRecordNullData)) }
            == .invalidSignature)
        withData.recordSignature = nil
        #expect(try withData.decrypt(identity: alice, eakInfo: info, verification: .init(policy: .verifyIfPresent)).data
            == ["x": "y"])
    }
}
