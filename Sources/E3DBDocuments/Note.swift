#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import E3DBCanonicalJSON
public import E3DBPrimitives
public import E3DBKeys

/// Options for ``EncryptedNote/decrypt(readerKey:options:)``.
public struct NoteDecryptionOptions: Sendable, Hashable {
    /// Accept fields (and a note signature) that are not TFSP1-signed, as js-sdk and Python do for legacy
    /// notes. Default false: every field must be signed.
    public var allowUnsignedFields: Bool
    /// When set, the note's `writer_signing_key` must equal this key.
    public var expectedWriterSigningKey: Ed25519.PublicKey?

    /// Options; the defaults are strict.
    public init(allowUnsignedFields: Bool = false, expectedWriterSigningKey: Ed25519.PublicKey? = nil) {
        self.allowUnsignedFields = allowUnsignedFields
        self.expectedWriterSigningKey = expectedWriterSigningKey
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
        let signature = TFSP1.sign(key: "signature", value: objectSalt, salt: signatureSalt, signingKey: writerSigningKey)
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
    ///   `context.field` naming the note field (`signature` for the note signature).
    public func decrypt(readerKey: Box.PrivateKey, options: NoteDecryptionOptions = .init()) throws(E3DBError) -> RecordData {
        if let expected = options.expectedWriterSigningKey, expected != writerSigningKey {
            throw E3DBError(
                .writerKeyMismatch, "the note was signed by another writer key", context: .init(field: "writer_signing_key"))
        }
        let ak = try encryptedAccessKey.unwrap(reader: readerKey, authorizer: writerEncryptionKey)
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
        self.mode = (try? string("mode")) ?? "Sodium"
        self.recipientSigningKey = try? string("recipient_signing_key")
        guard let wsk = try? Ed25519.PublicKey(base64URLEncoded: string("writer_signing_key")) else {
            throw bad("writer_signing_key", "is not a base64url Ed25519 public key")
        }
        self.writerSigningKey = wsk
        guard let wek = try? Box.PublicKey(base64URLEncoded: string("writer_encryption_key")) else {
            throw bad("writer_encryption_key", "is not a base64url Curve25519 public key")
        }
        self.writerEncryptionKey = wek
        let eakText = try string("encrypted_access_key")
        do {
            self.encryptedAccessKey = try EncryptedAccessKey(eakText)
        } catch {
            throw E3DBError(
                .invalidNote, "note member \"encrypted_access_key\" is malformed: \(error.message)",
                context: .init(field: "encrypted_access_key", part: error.context.part))
        }
        for known in ["data", "signature", "mode", "recipient_signing_key", "writer_signing_key",
            "writer_encryption_key", "encrypted_access_key"]
        {
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
