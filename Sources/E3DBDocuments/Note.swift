public import E3DBCanonicalJSON
public import E3DBKeys
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Options for ``EncryptedNote/decrypt(readerKey:options:)``.
public struct NoteDecryptionOptions: Sendable, Hashable {
    /// Accept fields (and a note signature) that are not TFSP1-signed, as js-sdk and Python do for legacy
    /// notes. Default false: every field must be signed.
    public var allowUnsignedFields: Bool
    /// When set, the note's `writer_signing_key` must equal this key.
    public var expectedWriterSigningKey: Ed25519.PublicKey?
    /// When set, the decrypted note must hold exactly these field names (compared by code units), or decryption
    /// fails with `.unexpectedFields`. TFSP1 signs each field on its own and nothing signs the set of fields, so
    /// anyone who can edit the note body can remove fields without breaking a signature (D1); this is how a
    /// reader that knows what to expect detects it.
    public var expectedFields: [String]?
    /// Accept js-sdk's legacy note signature: a bare base64url Ed25519 signature (not TFSP1) over the canonical
    /// js-sdk `NoteInfo` (`{"data":{…},"note_keys":{…}}`, spec §4.5), with unsigned fields. It binds every field
    /// and the note keys. Default false.
    public var allowLegacyNoteSignature: Bool

    /// Options; the defaults are strict.
    public init(
        allowUnsignedFields: Bool = false, expectedWriterSigningKey: Ed25519.PublicKey? = nil,
        expectedFields: [String]? = nil, allowLegacyNoteSignature: Bool = false
    ) {
        self.allowUnsignedFields = allowUnsignedFields
        self.expectedWriterSigningKey = expectedWriterSigningKey
        self.expectedFields = expectedFields
        self.allowLegacyNoteSignature = allowLegacyNoteSignature
    }
}

/// An encrypted note (spec §7.2): an access key wrapped for the recipient, fields TFSP1-signed under the note's
/// object salt and then encrypted as record fields, and a `signature` field that signs the object salt.
///
/// Other members of the note body (`id_string`, `max_views`, `expiration`, `eacp`, `type`, `plain`, …) are kept
/// in ``otherMembers`` and written back unchanged.
public struct EncryptedNote: Sendable, Hashable {
    /// Encrypted fields: key → `edk.edkN.ef.efN` of the signed value.
    public var data: RecordData
    /// The TFSP1 note signature whose plaintext is the object salt.
    public var signature: String
    /// `"Sodium"` (Python writes `"sodium"`).
    public var mode: String
    /// The recipient's Ed25519 key, as given by the writer (base64url).
    public var recipientSigningKey: String?
    /// The writer's Ed25519 public key, which verifies the field signatures.
    public var writerSigningKey: Ed25519.PublicKey
    /// The writer's Curve25519 public key, the authorizer of the EAK.
    public var writerEncryptionKey: Box.PublicKey
    /// The access key wrapped for the recipient.
    public var encryptedAccessKey: EncryptedAccessKey
    /// Other body members, preserved.
    public var otherMembers: JSONObject

    /// Encrypts and signs a note.
    /// - Parameters:
    ///   - data: the plaintext fields.
    ///   - recipientEncryptionKey: the recipient's Curve25519 public key.
    ///   - recipientSigningKey: the recipient's Ed25519 public key (recorded in the note).
    ///   - writerBoxKey: the writer's Curve25519 private key.
    ///   - writerSigningKey: the writer's Ed25519 private key.
    ///   - objectSalt: the object salt (default: a new lowercase UUID).
    ///   - signatureSalt: the salt of the `signature` field (default: a new lowercase UUID).
    /// - Returns: the note.
    /// - Throws: `E3DBError` `.authenticationFailed` when the recipient key is a low-order point.
    public static func encrypt(
        data: RecordData,
        recipientEncryptionKey: Box.PublicKey,
        recipientSigningKey: Ed25519.PublicKey?,
        writerBoxKey: Box.PrivateKey,
        writerSigningKey: Ed25519.PrivateKey,
        objectSalt: String = TFSP1.makeSalt(),
        signatureSalt: String = TFSP1.makeSalt()
    ) throws(E3DBError) -> EncryptedNote {
        let ak = AccessKey()
        let eak = try EncryptedAccessKey.wrap(ak, for: recipientEncryptionKey, by: writerBoxKey)
        let signature = TFSP1.sign(
            key: "signature", value: objectSalt, salt: signatureSalt, signingKey: writerSigningKey)
        var encrypted = RecordData()
        for (key, value) in data {
            let signed = TFSP1.sign(key: key, value: value, salt: objectSalt, signingKey: writerSigningKey)
            encrypted.insert(key: key, value: FieldCipher.encrypt(signed, accessKey: ak))
        }
        return EncryptedNote(
            data: encrypted, signature: signature, mode: "Sodium",
            recipientSigningKey: recipientSigningKey?.base64URLEncoded, writerSigningKey: writerSigningKey.publicKey,
            writerEncryptionKey: writerBoxKey.publicKey, encryptedAccessKey: eak, otherMembers: JSONObject())
    }

    init(
        data: RecordData, signature: String, mode: String, recipientSigningKey: String?,
        writerSigningKey: Ed25519.PublicKey, writerEncryptionKey: Box.PublicKey, encryptedAccessKey: EncryptedAccessKey,
        otherMembers: JSONObject
    ) {
        self.data = data
        self.signature = signature
        self.mode = mode
        self.recipientSigningKey = recipientSigningKey
        self.writerSigningKey = writerSigningKey
        self.writerEncryptionKey = writerEncryptionKey
        self.encryptedAccessKey = encryptedAccessKey
        self.otherMembers = otherMembers
    }

    /// Decrypts and verifies a note: unwraps the access key, verifies the `signature` field and takes the object
    /// salt from it, then decrypts each field and verifies it under that salt.
    /// - Parameters:
    ///   - readerKey: the recipient's Curve25519 private key.
    ///   - options: strictness (default: every field signed).
    /// - Returns: the plaintext fields.
    /// - Throws: `E3DBError` `.writerKeyMismatch`; `.authenticationFailed` (part `eak`, or `edk`/`ef` with the
    ///   field); `.unsignedField`, `.invalidSignedField`, `.saltMismatch`, `.invalidSignature` with
    ///   `context.field` naming the note field (`signature` for the note signature); `.unexpectedFields`.
    public func decrypt(readerKey: Box.PrivateKey, options: NoteDecryptionOptions = .init()) throws(E3DBError)
        -> RecordData
    {
        if let expected = options.expectedWriterSigningKey, expected != writerSigningKey {
            throw E3DBError(
                .writerKeyMismatch, "the note was signed by another writer key",
                context: .init(field: "writer_signing_key"))
        }
        let ak = try encryptedAccessKey.unwrap(reader: readerKey, authorizer: writerEncryptionKey)
        let plaintext: RecordData
        if options.allowLegacyNoteSignature && LegacyNoteSignature.isLegacy(signature) {
            plaintext = try decryptLegacy(accessKey: ak)
        } else {
            plaintext = try decryptSigned(accessKey: ak, options: options)
        }
        if let expected = options.expectedFields { try Self.check(plaintext, hasExactly: expected) }
        return plaintext
    }

    /// Fails unless `data` holds exactly the names in `expected`.
    static func check(_ data: RecordData, hasExactly expected: [String]) throws(E3DBError) {
        let wanted = Set(expected.map { Array($0.utf8) })
        let present = Set(data.keys.map { Array($0.utf8) })
        guard wanted != present else { return }
        func names(_ set: Set<[UInt8]>) -> String {
            set.map { "\"" + String(decoding: $0, as: UTF8.self) + "\"" }.sorted().joined(separator: ", ")
        }
        var parts: [String] = []
        let missing = wanted.subtracting(present)
        let extra = present.subtracting(wanted)
        if !missing.isEmpty { parts.append("missing \(names(missing))") }
        if !extra.isEmpty { parts.append("unexpected \(names(extra))") }
        throw E3DBError(
            .unexpectedFields, "the note does not hold the expected fields: " + parts.joined(separator: "; "),
            context: .init(field: missing.first.map { String(decoding: $0, as: UTF8.self) }))
    }

    /// js-sdk legacy notes: plaintext fields, one signature over the `NoteInfo`.
    func decryptLegacy(accessKey ak: AccessKey) throws(E3DBError) -> RecordData {
        var plaintext = RecordData()
        for (key, field) in data {
            plaintext.insert(key: key, value: try FieldCipher.decrypt(field, accessKey: ak, name: key))
        }
        let message = LegacyNoteSignature.message(data: plaintext, note: self)
        let raw: Data
        do {
            raw = try Base64URL.decode(signature)
        } catch {
            throw E3DBError(
                .invalidSignature, "the legacy note signature is not base64url", context: .init(field: "signature"))
        }
        guard raw.count == Ed25519.signatureByteCount, writerSigningKey.isValidSignature(raw, for: message) else {
            throw E3DBError(
                .invalidSignature, "the legacy note signature (NoteInfo) does not verify",
                context: .init(field: "signature"))
        }
        return plaintext
    }

    /// TFSP1 notes: the `signature` field gives the object salt, every field is verified under it.
    func decryptSigned(accessKey ak: AccessKey, options: NoteDecryptionOptions) throws(E3DBError) -> RecordData {
        let objectSalt: String?
        do {
            let verified = try TFSP1.verify(
                key: "signature", signed: signature, publicKey: writerSigningKey,
                allowUnsigned: options.allowUnsignedFields)
            objectSalt = verified.isSigned ? verified.value : nil
        } catch {
            throw error.naming(field: "signature")
        }
        var plaintext = RecordData()
        for (key, field) in data {
            let signed = try FieldCipher.decrypt(field, accessKey: ak, name: key)
            do {
                let verified = try TFSP1.verify(
                    key: key, signed: signed, publicKey: writerSigningKey, expectedSalt: objectSalt,
                    allowUnsigned: options.allowUnsignedFields)
                plaintext.insert(key: key, value: verified.value)
            } catch {
                throw error.naming(field: key)
            }
        }
        return plaintext
    }

    /// Parses a note body (the JSON the API returns or ``jsonData()`` writes).
    /// - Throws: `E3DBError` `.invalidNote` naming the bad member (`data`, `signature`, `writer_signing_key`,
    ///   `writer_encryption_key`, `encrypted_access_key`).
    public init(jsonData: some DataProtocol) throws(E3DBError) {
        let value = try parseDocumentJSON(jsonData, code: .invalidNote)
        guard case .object(var o) = value else { throw E3DBError(.invalidNote, "a note is a JSON object") }
        func bad(_ field: String, _ why: String) -> E3DBError {
            E3DBError(.invalidNote, "note member \"\(field)\" \(why)", context: .init(field: field))
        }
        func string(_ field: String) throws(E3DBError) -> String {
            guard case .string(let s)? = o[field] else { throw bad(field, "is missing or not a string") }
            return s
        }
        guard let d = o["data"], case .object = d else { throw bad("data", "is missing or not an object") }
        do {
            self.data = try RecordData(jsonValue: d, what: "data")
        } catch {
            throw E3DBError(.invalidNote, error.message, context: error.context)
        }
        self.signature = try string("signature")
        func optionalString(_ field: String) throws(E3DBError) -> String? {
            switch o[field] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            case _?: throw bad(field, "is not a string")
            }
        }
        self.mode = try optionalString("mode") ?? "Sodium"
        self.recipientSigningKey = try optionalString("recipient_signing_key")
        do {
            self.writerSigningKey = try Ed25519.PublicKey(base64URLEncoded: string("writer_signing_key"))
        } catch {
            throw bad("writer_signing_key", "is not a base64url Ed25519 public key (\(error.message))")
        }
        do {
            self.writerEncryptionKey = try Box.PublicKey(base64URLEncoded: string("writer_encryption_key"))
        } catch {
            throw bad("writer_encryption_key", "is not a base64url Curve25519 public key (\(error.message))")
        }
        let eakText = try string("encrypted_access_key")
        do {
            self.encryptedAccessKey = try EncryptedAccessKey(eakText)
        } catch {
            throw E3DBError(
                .invalidNote, "note member \"encrypted_access_key\" is malformed: \(error.message)",
                context: .init(field: "encrypted_access_key", part: error.context.part))
        }
        for known in [
            "data", "signature", "mode", "recipient_signing_key", "writer_signing_key",
            "writer_encryption_key", "encrypted_access_key",
        ] {
            o[known] = nil
        }
        self.otherMembers = o
    }

    /// The note body as canonical JSON (sorted members, no whitespace).
    public func jsonData() -> Data {
        var o = otherMembers
        o["data"] = data.signableJSON
        o["signature"] = .string(signature)
        o["mode"] = .string(mode)
        if let recipientSigningKey { o["recipient_signing_key"] = .string(recipientSigningKey) }
        o["writer_signing_key"] = .string(writerSigningKey.base64URLEncoded)
        o["writer_encryption_key"] = .string(writerEncryptionKey.base64URLEncoded)
        o["encrypted_access_key"] = .string(encryptedAccessKey.stringValue)
        return Data(CanonicalJSON.serializedBytes(.object(o)))
    }
}

/// js-sdk's legacy note signature (spec §4.5): Ed25519 over the canonical js-sdk `NoteInfo`,
/// `{"data":{<plaintext fields>},"note_keys":{"encrypted_access_key","mode","recipient_signing_key",
/// "writer_encryption_key","writer_signing_key"}}`, with members in js-sdk `Signable` order
/// (`KeyOrder.javaScript`) and absent keys left out. Notes from before TFSP1 carry it as a bare base64url
/// `signature`.
public enum LegacyNoteSignature {
    /// True when `signature` is a bare base64url string (what js-sdk checks before verifying a `NoteInfo`).
    public static func isLegacy(_ signature: String) -> Bool {
        !signature.isEmpty
            && signature.utf8.allSatisfy { b in
                (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D
                    || b == 0x5F
            }
    }

    /// The signed message for a note's plaintext fields and its keys.
    /// - Parameters:
    ///   - data: the plaintext fields.
    ///   - note: the note whose keys are signed.
    /// - Returns: the UTF-8 bytes that are signed.
    public static func message(data: RecordData, note: EncryptedNote) -> [UInt8] {
        var keys: JSONObject = [
            "encrypted_access_key": .string(note.encryptedAccessKey.stringValue),
            "mode": .string(note.mode),
            "writer_encryption_key": .string(note.writerEncryptionKey.base64URLEncoded),
            "writer_signing_key": .string(note.writerSigningKey.base64URLEncoded),
        ]
        if let recipient = note.recipientSigningKey { keys["recipient_signing_key"] = .string(recipient) }
        return CanonicalJSON.serializedBytes(
            .object(["data": data.signableJSON, "note_keys": .object(keys)]), order: .javaScript)
    }
}
