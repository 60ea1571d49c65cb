// Fuzz target FuzzDocuments: E3DBDocuments parsers, decryptors and verifiers with fixed keys. Byte 0 picks the surface.
//
// 0: a record field string `edk.edkN.ef.efN`, decrypted strictly and leniently: every failure is a typed
//    E3DBError; strict success implies lenient success with the same value.
// 1: round trip: the input as a field value is encrypted and decrypted back unchanged (any UTF-8 repaired text).
// 2: EncryptedDocument JSON: an accepted document re-serializes to JSON that parses to an equal document, and
//    decrypting it with fixed keys under every signature policy and variant fails with a typed error or returns
//    data whose status matches the policy; the policies are ordered (strict success implies success everywhere,
//    failure under `ignore` implies failure everywhere), and an unsigned document never verifies strictly.
// 3: SignedDocument<EncryptedDocument> JSON: accepted documents round-trip; verification with a fixed key is a
//    typed failure or success, never a crash.
// 4: EncryptedNote JSON: accepted notes round-trip through JSON; decryption with a fixed reader key fails with a
//    typed error (strict and legacy-tolerant options).
// 5: TFSP1: `verify` of arbitrary text under a fixed key fails with a typed error or returns; signing the input
//    as a value and verifying returns it with the salt used.
// 6: js-sdk insertion order: the input split into fields becomes a record signed over its insertion-order
//    message; it verifies with the variant (as insertion order, or canonical when both orders agree) and its
//    canonical JSON text keeps the order that was signed only when it is the sorted one.
import E3DBCanonicalJSON
import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzDocuments invariant violated: \(message())") }
}

private struct Keys {
    let access: AccessKey
    let box: Box.PrivateKey
    let signing: Ed25519.PrivateKey
}

// Built per input: LeakSanitizer cannot trace `Data` held in globals (see FuzzSealedBoxes).
private func makeKeys() -> Keys {
    do {
        return Keys(
            access: try AccessKey(rawRepresentation: [UInt8](repeating: 0x11, count: 32)),
            box: try Box.PrivateKey(rawRepresentation: [UInt8](repeating: 0x22, count: 32)),
            signing: try Ed25519.PrivateKey(seed: SecureBytes(copying: [UInt8](repeating: 0x33, count: 32))))
    } catch {
        fatalError("\(error)")
    }
}

func fuzzDocuments(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let rest = Data(bytes.dropFirst())
    let text = String(decoding: rest, as: UTF8.self)
    let keys = makeKeys()
    switch mode % 7 {
    case 0:
        let strict = try? FieldCipher.decrypt(text, accessKey: keys.access)
        let lenient = try? FieldCipher.decrypt(text, accessKey: keys.access, decoding: .lenient)
        if let strict { require(lenient == strict, "strict decrypted but lenient differs") }
    case 1:
        let field = FieldCipher.encrypt(text, accessKey: keys.access)
        require((try? FieldCipher.decrypt(field, accessKey: keys.access)) == text, "field round trip")
    case 2:
        guard let document = try? EncryptedDocument(jsonData: rest) else { return 0 }
        require(
            (try? EncryptedDocument(jsonData: document.jsonData())) == document, "EncryptedDocument JSON round trip")
        let policies: [RecordVerification] = [
            .strict, .init(policy: .verifyIfPresent), .init(policy: .ignore),
            .init(variants: [.javaScriptInsertionOrder, .fileRecordNullData]),
            .init(order: .javaScript, variants: .javaScriptInsertionOrder),
        ]
        var outcomes: [Result<DecryptedDocument, E3DBError>] = []
        for verification in policies {
            do {
                outcomes.append(
                    .success(
                        try document.decrypt(
                            accessKey: keys.access, verifyingKey: keys.signing.publicKey, verification: verification)))
            } catch {
                outcomes.append(.failure(error))
            }
        }
        if case .success(let strict) = outcomes[0] {
            require(strict.signatureStatus == .verified, "strict success without a verified signature")
            for outcome in outcomes {
                if case .failure(let error) = outcome {
                    require(false, "strict succeeded, another policy failed: \(error.code)")
                }
            }
        }
        if case .failure = outcomes[2] {
            for outcome in outcomes {
                if case .success = outcome { require(false, "ignore failed but another policy succeeded") }
            }
        }
        if case .success(let ignored) = outcomes[2] { require(ignored.signatureStatus == .notChecked, "ignore status") }
        if document.recordSignature == nil {
            if case .failure(let error) = outcomes[0] {
                require(error.code != .invalidSignature, "an unsigned document failed with invalidSignature")
            } else {
                require(false, "an unsigned document verified strictly")
            }
            if case .success(let lenient) = outcomes[1] { require(lenient.signatureStatus == .absent, "absent status") }
        }
    case 3:
        guard let signed = try? SignedDocument<EncryptedDocument>(jsonData: rest) else { return 0 }
        let again = try? SignedDocument<EncryptedDocument>(jsonData: signed.jsonData())
        require(again?.document == signed.document && again?.signature == signed.signature, "SignedDocument round trip")
        do {
            try signed.verify(with: keys.signing.publicKey)
        } catch {
            _ = error.code
        }
    case 4:
        guard let note = try? EncryptedNote(jsonData: rest) else { return 0 }
        require((try? EncryptedNote(jsonData: note.jsonData())) == note, "EncryptedNote JSON round trip")
        let keysOfNote = note.data.keys
        for options in [
            NoteDecryptionOptions(), NoteDecryptionOptions(allowUnsignedFields: true),
            NoteDecryptionOptions(allowLegacyNoteSignature: true),
            NoteDecryptionOptions(allowUnsignedFields: true, expectedFields: keysOfNote.dropLast().map { $0 }),
        ] {
            do {
                _ = try note.decrypt(readerKey: keys.box, options: options)
            } catch {
                _ = error.code
            }
        }
    case 6:
        var pairs: [(String, String)] = []
        for (i, part) in text.split(separator: "\u{0}", omittingEmptySubsequences: false).enumerated() {
            pairs.append((String(part), "value \(i)"))
        }
        guard let data = try? RecordData(pairs) else { return 0 }
        let writer = UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))
        let meta = ClientMeta(writerID: writer, userID: writer, type: "fuzz", plain: data)
        let message = RecordSignature.message(meta: meta, data: data, order: .javaScriptInsertion)
        let document = EncryptedDocument(
            meta: meta, data: FieldCipher.encrypt(data, accessKey: keys.access),
            recordSignature: Base64URL.encode(keys.signing.signature(for: message)))
        let sameAsSorted = message == RecordSignature.message(meta: meta, data: data)
        do {
            let plain = try document.decrypt(
                accessKey: keys.access, verifyingKey: keys.signing.publicKey,
                verification: .init(variants: .javaScriptInsertionOrder))
            require(plain.data == data, "insertion-order record decrypted to other data")
            require(plain.signatureStatus == (sameAsSorted ? .verified : .verifiedInsertionOrder), "insertion status")
        } catch {
            require(false, "an insertion-order record did not verify with the variant: \(error.code)")
        }
        let strict = try? document.decrypt(accessKey: keys.access, verifyingKey: keys.signing.publicKey)
        require((strict != nil) == sameAsSorted, "strict verification of an insertion-order record")
    default:
        do {
            _ = try TFSP1.verify(key: "k", signed: text, publicKey: keys.signing.publicKey)
        } catch {
            _ = error.code
        }
        let salt = "c720777d-fe43-4ded-bf90-90d2726f113e"
        let signed = TFSP1.sign(key: "k", value: text, salt: salt, signingKey: keys.signing)
        let verified = try? TFSP1.verify(
            key: "k", signed: signed, publicKey: keys.signing.publicKey, expectedSalt: salt)
        require(verified?.value == text && verified?.salt == salt, "TFSP1 sign/verify round trip")
    }
    return 0
}
