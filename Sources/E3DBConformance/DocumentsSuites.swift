import E3DBCanonicalJSON
import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
import Foundation

/// Vector suites for E3DBDocuments: `TestVectors/documents/*.json`, made by
/// `TestVectors/generators/e3db_documents.py` with Tozny's Python SDK (e3db 2.3.0), PyNaCl, rfc8785 and Node.
package enum DocumentsSuites {
    package static let all: [VectorSuite] = [recordFields, records, signedDocuments, tfsp1, notes, jsVariants]

    static func suite<T: IdentifiedVector>(
        _ name: String, file: String, _ make: @escaping @Sendable (T) throws -> Void
    ) -> VectorSuite {
        KeysSuites.suite(name, file: file, make)
    }

    static func pairs(_ list: [[String]]) throws -> RecordData {
        try RecordData(
            list.map { pair -> (String, String) in
                guard pair.count == 2 else { throw VectorFormatError("a data pair has \(pair.count) elements") }
                return (pair[0], pair[1])
            })
    }

    // MARK: record fields

    struct FieldTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let accessKey: String, field: String, value: String?
        let dataKey: String?, dataKeyNonce: String?, fieldNonce: String?
        let error: String?, errorPart: String?, lenientResult: String?
    }

    package static let recordFields = suite("documents/record_fields", file: "documents/record_fields.json") {
        (t: FieldTest) in
        let ak = try AccessKey(rawRepresentation: Hex.decode(t.accessKey))
        if t.result == .valid {
            let value = t.value ?? ""
            try requireEqual(try FieldCipher.decrypt(t.field, accessKey: ak), value, "decrypted value")
            try requireEqual(try FieldCipher.decrypt(t.field, accessKey: ak, decoding: .lenient), value, "lenient")
            if let dk = t.dataKey, let edkN = t.dataKeyNonce, let efN = t.fieldNonce {
                let mine = FieldCipher.encrypt(
                    value, accessKey: ak, dataKey: try SecretBox.Key(rawRepresentation: Hex.decode(dk)),
                    dataKeyNonce: try SecretBox.Nonce(rawRepresentation: Hex.decode(edkN)),
                    fieldNonce: try SecretBox.Nonce(rawRepresentation: Hex.decode(efN)))
                try requireEqual(mine, t.field, "field encrypted with the vector's data key and nonces")
            }
            try requireEqual(
                try FieldCipher.decrypt(FieldCipher.encrypt(value, accessKey: ak), accessKey: ak), value, "round trip")
        } else {
            try requireE3DBError(t.error, part: t.errorPart) { _ = try FieldCipher.decrypt(t.field, accessKey: ak) }
            if t.lenientResult == "valid" {
                try requireEqual(
                    try FieldCipher.decrypt(t.field, accessKey: ak, decoding: .lenient), t.value ?? "",
                    "lenient decrypt")
            }
        }
    }

    // MARK: records

    struct RecordTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let order: String, accessKey: String, writerSigningPublicKey: String, writerSigningKey: String
        let type: String, writerId: String, userId: String, plain: [[String]], data: [[String]]
        let signedMessage: String?, recSig: String?, encryptedDocument: String
        let error: String?, errorPart: String?, errorField: String?
    }

    package static let records = suite("documents/records", file: "documents/records.json") { (t: RecordTest) in
        let ak = try AccessKey(rawRepresentation: Hex.decode(t.accessKey))
        let order: KeyOrder = t.order == "javaScript" ? .javaScript : .utf16
        let verifying = try Ed25519.PublicKey(base64URLEncoded: t.writerSigningPublicKey)
        let decrypt = { () throws -> DecryptedDocument in
            let doc = try EncryptedDocument(jsonData: Data(t.encryptedDocument.utf8))
            return try doc.decrypt(accessKey: ak, verifyingKey: verifying, order: order)
        }
        guard t.result == .valid else {
            try requireE3DBError(t.error, part: t.errorPart, field: t.errorField) { _ = try decrypt() }
            return
        }
        let data = try pairs(t.data)
        let plain = try pairs(t.plain)
        let decrypted = try decrypt()
        try requireEqual(decrypted.data, data, "decrypted data")
        try requireEqual(decrypted.meta.plain, plain, "plain")
        try requireEqual(decrypted.meta.type, t.type, "type")
        try requireEqual(decrypted.meta.writerID.lowercasedString, t.writerId, "writer_id")
        guard let message = t.signedMessage, let recSig = t.recSig else { return }
        // Known-answer signature: Ed25519 is deterministic, so ours must match byte for byte.
        let signer = try Ed25519.PrivateKey(base64URLEncoded: t.writerSigningKey)
        let meta = ClientMeta(
            writerID: try uuid(t.writerId), userID: try uuid(t.userId), type: t.type, plain: plain)
        try requireEqual(
            String(decoding: RecordSignature.message(meta: meta, data: data, order: order), as: UTF8.self), message,
            "signed message")
        try requireEqual(RecordSignature.sign(meta: meta, data: data, with: signer, order: order), recSig, "rec_sig")
        // Our own encryption of the same record decrypts and carries the same signature.
        let mine = EncryptedDocument.encrypt(
            type: t.type, data: data, plain: plain, writerID: meta.writerID, userID: meta.userID, accessKey: ak,
            signingKey: signer, order: order)
        try requireEqual(mine.recordSignature, recSig, "rec_sig of our encryption")
        let reparsed = try EncryptedDocument(jsonData: mine.jsonData())
        try requireEqual(
            try reparsed.decrypt(accessKey: ak, verifyingKey: verifying, order: order).data, data, "own round trip")
    }

    static func uuid(_ s: String) throws -> UUID {
        guard let id = UUID(uuidString: s) else { throw VectorFormatError("not a UUID: \(s)") }
        return id
    }

    // MARK: signed documents

    struct SignedTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let signingKey: String, publicKey: String, document: String, canonical: String, sig: String
        let signedDocument: String, error: String?, errorPart: String?, errorField: String?
    }

    package static let signedDocuments = suite("documents/signed_documents", file: "documents/signed_documents.json") {
        (t: SignedTest) in
        let key = try Ed25519.PublicKey(base64URLEncoded: t.publicKey)
        guard t.result == .valid else {
            try requireE3DBError(t.error, part: t.errorPart, field: t.errorField) {
                try SignedDocument<JSONValue>(jsonData: Data(t.signedDocument.utf8)).verify(with: key)
            }
            return
        }
        let parsed = try SignedDocument<JSONValue>(jsonData: Data(t.signedDocument.utf8))
        try parsed.verify(with: key)
        try requireEqual(parsed.document.canonicalString(), t.canonical, "canonical document")
        let signer = try Ed25519.PrivateKey(base64URLEncoded: t.signingKey)
        let document = try CanonicalJSON.parse(t.document)
        let mine = SignedDocument(signing: document, with: signer)
        try requireEqual(mine.signature, t.sig, "signature (deterministic Ed25519)")
        try requireEqual(try SignedDocument<JSONValue>(jsonData: mine.jsonData()).signature, t.sig, "re-parsed")
        if t.comment.contains("nesting") || t.comment.contains("three levels") {
            // The inner document is itself a signed document: parse it as the nested type and verify both layers.
            let nested = try SignedDocument<SignedDocument<JSONValue>>(jsonData: Data(t.signedDocument.utf8))
            try nested.verify(with: key)
            try nested.document.verify(with: key)
        }
    }

    // MARK: TFSP1

    struct TFSP1Test: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let signingKey: String, publicKey: String, key: String, value: String?, salt: String?, signed: String
        let error: String?, errorPart: String?, legacyResult: String?
    }

    package static let tfsp1 = suite("documents/tfsp1", file: "documents/tfsp1.json") { (t: TFSP1Test) in
        let pk = try Ed25519.PublicKey(base64URLEncoded: t.publicKey)
        guard t.result == .valid else {
            try requireE3DBError(t.error, part: t.errorPart) {
                _ = try TFSP1.verify(key: t.key, signed: t.signed, publicKey: pk, expectedSalt: t.salt)
            }
            if t.legacyResult == "valid" {
                let v = try TFSP1.verify(key: t.key, signed: t.signed, publicKey: pk, allowUnsigned: true)
                try requireEqual(v.value, t.value ?? "", "legacy value")
                try requireEqual(v.isSigned, false, "legacy value is unsigned")
            }
            return
        }
        let salt = t.salt ?? ""
        let v = try TFSP1.verify(key: t.key, signed: t.signed, publicKey: pk, expectedSalt: salt)
        try requireEqual(v.value, t.value ?? "", "value")
        try requireEqual(v.salt, salt, "salt")
        let sk = try Ed25519.PrivateKey(base64URLEncoded: t.signingKey)
        try requireEqual(
            TFSP1.sign(key: t.key, value: t.value ?? "", salt: salt, signingKey: sk), t.signed, "signed field")
    }

    // MARK: notes

    struct NoteTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let readerSecretKey: String, note: String, expectedData: [[String]]?
        let error: String?, errorPart: String?, errorField: String?, legacyResult: String?, legacyData: [[String]]?
    }

    package static let notes = suite("documents/notes", file: "documents/notes.json") { (t: NoteTest) in
        let reader = try Box.PrivateKey(base64URLEncoded: t.readerSecretKey)
        guard t.result == .valid else {
            try requireE3DBError(t.error, part: t.errorPart, field: t.errorField) {
                _ = try EncryptedNote(jsonData: Data(t.note.utf8)).decrypt(readerKey: reader)
            }
            if t.legacyResult == "valid", let legacy = t.legacyData {
                let data = try EncryptedNote(jsonData: Data(t.note.utf8))
                    .decrypt(readerKey: reader, options: .init(allowUnsignedFields: true))
                try requireEqual(data, try pairs(legacy), "legacy note data")
            }
            return
        }
        let note = try EncryptedNote(jsonData: Data(t.note.utf8))
        let data = try note.decrypt(readerKey: reader, options: .init(expectedWriterSigningKey: note.writerSigningKey))
        try requireEqual(data, try pairs(t.expectedData ?? []), "note data")
        let again = try EncryptedNote(jsonData: note.jsonData())
        try requireEqual(try again.decrypt(readerKey: reader), data, "re-serialized note")
    }

    // MARK: js-sdk variants

    struct JSVariantTest: IdentifiedVector {
        let tcId: Int, comment: String, result: VectorResult
        let kind: String, variants: [String]
        let accessKey: String?, writerSigningPublicKey: String?, encryptedDocument: String?, expectedStatus: String?
        let jsMessage: String?
        let readerSecretKey: String?, note: String?, data: [[String]]?
        let error: String?, errorPart: String?, errorField: String?
    }

    static func required<T>(_ value: T?, _ name: String) throws -> T {
        guard let value else { throw VectorFormatError("the case has no \(name)") }
        return value
    }

    /// `TestVectors/documents/js_variants.json`: records signed over js-sdk's insertion order or `meta ‖ null`,
    /// unsigned Python records, and legacy NoteInfo-signed notes, each accepted only with its option.
    package static let jsVariants = suite("documents/js_variants", file: "documents/js_variants.json") {
        (t: JSVariantTest) in
        switch t.kind {
        case "record":
            let ak = try AccessKey(rawRepresentation: Hex.decode(try required(t.accessKey, "accessKey")))
            let key = try Ed25519.PublicKey(
                base64URLEncoded: try required(t.writerSigningPublicKey, "writerSigningPublicKey"))
            var verification = RecordVerification()
            for v in t.variants {
                switch v {
                case "javaScriptInsertionOrder": verification.variants.insert(.javaScriptInsertionOrder)
                case "fileRecordNullData": verification.variants.insert(.fileRecordNullData)
                case "verifyIfPresent": verification.policy = .verifyIfPresent
                default: throw VectorFormatError("unknown variant \(v)")
                }
            }
            let doc = try EncryptedDocument(jsonData: Data(try required(t.encryptedDocument, "encryptedDocument").utf8))
            guard t.result == .valid else {
                try requireE3DBError(t.error, part: t.errorPart, field: t.errorField) {
                    _ = try doc.decrypt(accessKey: ak, verifyingKey: key, verification: verification)
                }
                return
            }
            let plain = try doc.decrypt(accessKey: ak, verifyingKey: key, verification: verification)
            try requireEqual(plain.signatureStatus?.rawValue, t.expectedStatus, "rec_sig status")
            if let message = t.jsMessage {
                let ours =
                    plain.signatureStatus == .verifiedNullData
                    ? doc.meta.canonicalBytes(order: .javaScriptInsertion) + Array("null".utf8)
                    : RecordSignature.message(meta: doc.meta, data: plain.data, order: .javaScriptInsertion)
                try requireEqual(String(decoding: ours, as: UTF8.self), message, "js-sdk message")
            }
        case "note":
            let reader = try Box.PrivateKey(base64URLEncoded: try required(t.readerSecretKey, "readerSecretKey"))
            let note = try EncryptedNote(jsonData: Data(try required(t.note, "note").utf8))
            let options = NoteDecryptionOptions(allowLegacyNoteSignature: t.variants.contains("legacyNoteSignature"))
            guard t.result == .valid else {
                try requireE3DBError(t.error, part: t.errorPart, field: t.errorField) {
                    _ = try note.decrypt(readerKey: reader, options: options)
                }
                return
            }
            let data = try note.decrypt(readerKey: reader, options: options)
            try requireEqual(data, try pairs(try required(t.data, "data")), "note data")
            if let message = t.jsMessage {
                try requireEqual(
                    String(decoding: LegacyNoteSignature.message(data: data, note: note), as: UTF8.self), message,
                    "NoteInfo message")
            }
        default:
            throw VectorFormatError("unknown kind \(t.kind)")
        }
    }
}
