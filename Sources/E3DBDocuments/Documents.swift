public import E3DBCanonicalJSON
public import E3DBKeys
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A value that can be rebuilt from its JSON form (used to parse nested ``SignedDocument`` values).
public protocol DocumentJSONDecodable: Signable, Sendable {
    /// Rebuilds the value from its JSON form.
    /// - Throws: `E3DBError` `.invalidDocument` naming the bad member.
    init(documentJSON: JSONValue) throws(E3DBError)
}

extension JSONValue: DocumentJSONDecodable {
    /// The value itself.
    public init(documentJSON: JSONValue) throws(E3DBError) { self = documentJSON }
}

/// Parses JSON text into a value, mapping parser errors to `.invalidDocument`.
func parseDocumentJSON(_ bytes: some DataProtocol, code: E3DBError.Code = .invalidDocument) throws(E3DBError)
    -> JSONValue
{
    do {
        return try CanonicalJSON.parse(Array(bytes))
    } catch {
        throw E3DBError(
            code, "the document is not valid JSON: \(error.message)", context: .init(offset: error.offset))
    }
}

/// The record metadata that is signed: writer, user, record type and the plaintext `plain` map (spec §4.5).
///
/// Its canonical form is `{"plain":{…},"type":"…","user_id":"<uuid>","writer_id":"<uuid>"}` with lowercase
/// UUIDs; a missing or null `plain` is `{}`. Server-assigned members (`record_id`, timestamps, `version`,
/// `file_meta`) are not part of it and are ignored when parsing.
public struct ClientMeta: Sendable, Hashable, DocumentJSONDecodable {
    /// The writer.
    public var writerID: UUID
    /// The user the record is about (normally the writer).
    public var userID: UUID
    /// The record type (plaintext).
    public var type: String
    /// Plaintext, searchable metadata.
    public var plain: RecordData

    /// Metadata from its parts.
    public init(writerID: UUID, userID: UUID, type: String, plain: RecordData = RecordData()) {
        self.writerID = writerID
        self.userID = userID
        self.type = type
        self.plain = plain
    }

    /// The canonical (signing and transport) form.
    public var signableJSON: JSONValue {
        .object([
            "plain": plain.signableJSON,
            "type": .string(type),
            "user_id": .string(userID.lowercasedString),
            "writer_id": .string(writerID.lowercasedString),
        ])
    }

    /// Parses the `meta` object.
    /// - Throws: `E3DBError` `.invalidDocument` naming `meta`, `writer_id`, `user_id`, `type` or a `plain` key.
    public init(documentJSON value: JSONValue) throws(E3DBError) {
        guard case .object(let o) = value else {
            throw E3DBError(.invalidDocument, "\"meta\" is not a JSON object", context: .init(field: "meta"))
        }
        func uuid(_ name: String) throws(E3DBError) -> UUID {
            guard case .string(let s)? = o[name] else {
                throw E3DBError(
                    .invalidDocument, "meta.\(name) is missing or not a string", context: .init(field: name))
            }
            guard let id = UUID(uuidString: s) else {
                throw E3DBError(.invalidDocument, "meta.\(name) is not a UUID", context: .init(field: name))
            }
            return id
        }
        self.writerID = try uuid("writer_id")
        self.userID = try uuid("user_id")
        guard case .string(let t)? = o["type"] else {
            throw E3DBError(.invalidDocument, "meta.type is missing or not a string", context: .init(field: "type"))
        }
        self.type = t
        switch o["plain"] {
        case nil, .null?: self.plain = RecordData()
        case let p?: self.plain = try RecordData(jsonValue: p, what: "plain")
        }
    }
}

/// A decrypted record: metadata and plaintext data, returned only after every field decrypted and `rec_sig`
/// passed the ``RecordVerification`` in force (``signatureStatus`` says what was checked).
public struct DecryptedDocument: Sendable, Hashable, Signable {
    /// The metadata.
    public var meta: ClientMeta
    /// The plaintext data.
    public var data: RecordData
    /// What decryption established about `rec_sig`; nil for a document built from its parts. Not part of the
    /// document's JSON, equality or hash.
    public var signatureStatus: RecordSignatureStatus?

    /// A document from its parts.
    public init(meta: ClientMeta, data: RecordData) {
        self.meta = meta
        self.data = data
    }

    /// Equal metadata and data.
    public static func == (a: DecryptedDocument, b: DecryptedDocument) -> Bool { a.meta == b.meta && a.data == b.data }

    /// Hashes the metadata and data.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(meta)
        hasher.combine(data)
    }

    /// `{"data":{…},"meta":{…}}`.
    public var signableJSON: JSONValue { .object(["data": data.signableJSON, "meta": meta.signableJSON]) }
}

/// The record signature (`rec_sig`, DocInfo): Ed25519 over `canonical(meta) || canonical(data)`, the
/// plaintext data, two JSON texts back to back (spec §4.5).
public enum RecordSignature {
    /// The signed message.
    /// - Parameters:
    ///   - meta: the metadata.
    ///   - data: the plaintext data.
    ///   - order: `KeyOrder.utf16` (Java, old Swift, default) or `KeyOrder.javaScript` (js-sdk).
    /// - Returns: the UTF-8 message bytes.
    public static func message(meta: ClientMeta, data: RecordData, order: KeyOrder = .utf16) -> [UInt8] {
        meta.canonicalBytes(order: order) + data.canonicalBytes(order: order)
    }

    /// Signs a record.
    /// - Returns: `b64u(signature)` (86 characters).
    public static func sign(
        meta: ClientMeta, data: RecordData, with key: Ed25519.PrivateKey, order: KeyOrder = .utf16
    ) -> String {
        Base64URL.encode(key.signature(for: message(meta: meta, data: data, order: order)))
    }

    /// Verifies a record signature over the canonical message in `order`.
    /// - Throws: `E3DBError` `.invalidSignature` (part `rec_sig`) when the signature is malformed or wrong.
    public static func verify(
        _ signature: String, meta: ClientMeta, data: RecordData, with key: Ed25519.PublicKey, order: KeyOrder = .utf16
    ) throws(E3DBError) {
        _ = try RecordVerification(order: order).check(signature, meta: meta, data: data, key: key)
    }
}

/// An encrypted record: `{"data":{key: "edk.edkN.ef.efN"},"meta":{…},"rec_sig":"…"}`
/// (Swift `EncryptedDocument`, Java `LocalEncryptedRecord`, js-sdk `Record`). `rec_sig` is absent from records
/// written online by the Python and Go SDKs; see ``SignaturePolicy``.
///
/// ``jsonData()`` writes the canonical form (sorted members, lowercase UUIDs, no whitespace), which is also
/// the best transport form: js-sdk re-derives signatures from the JSON it receives.
public struct EncryptedDocument: Sendable, Hashable, DocumentJSONDecodable {
    /// The metadata (plaintext).
    public var meta: ClientMeta
    /// The encrypted fields: key → `edk.edkN.ef.efN`.
    public var data: RecordData
    /// `b64u` of the Ed25519 record signature, or nil for an unsigned record.
    public var recordSignature: String?

    /// A document from its parts.
    public init(meta: ClientMeta, data: RecordData, recordSignature: String?) {
        self.meta = meta
        self.data = data
        self.recordSignature = recordSignature
    }

    /// The canonical form, `{"data":…,"meta":…,"rec_sig":…}` (without `rec_sig` when unsigned).
    public var signableJSON: JSONValue {
        var object: JSONObject = ["data": data.signableJSON, "meta": meta.signableJSON]
        if let recordSignature { object["rec_sig"] = .string(recordSignature) }
        return .object(object)
    }

    /// Parses an encrypted document. A missing or `null` `rec_sig` makes an unsigned record.
    /// - Throws: `E3DBError` `.invalidDocument` naming `data`, `meta`, `rec_sig` or the bad member.
    public init(documentJSON value: JSONValue) throws(E3DBError) {
        guard case .object(let o) = value else {
            throw E3DBError(.invalidDocument, "an encrypted document is a JSON object")
        }
        guard let d = o["data"] else {
            throw E3DBError(.invalidDocument, "\"data\" is missing", context: .init(field: "data"))
        }
        guard let m = o["meta"] else {
            throw E3DBError(.invalidDocument, "\"meta\" is missing", context: .init(field: "meta"))
        }
        switch o["rec_sig"] {
        case nil, .null?: self.recordSignature = nil
        case .string(let sig)?: self.recordSignature = sig
        case _?: throw E3DBError(.invalidDocument, "\"rec_sig\" is not a string", context: .init(field: "rec_sig"))
        }
        self.data = try RecordData(jsonValue: d, what: "data")
        self.meta = try ClientMeta(documentJSON: m)
    }

    /// Parses JSON text.
    /// - Throws: `E3DBError` `.invalidDocument` (with `context.offset` for JSON syntax errors, including
    ///   duplicate keys).
    public init(jsonData: some DataProtocol) throws(E3DBError) {
        try self.init(documentJSON: parseDocumentJSON(jsonData))
    }

    /// The canonical JSON text.
    public func jsonData() -> Data { Data(canonicalBytes()) }

    /// Encrypts and signs a record (offline encryption): every value gets a fresh data key; all randomness for
    /// the record comes from one `SecureRandom` call.
    /// - Parameters:
    ///   - type: the record type.
    ///   - data: the plaintext data.
    ///   - plain: plaintext metadata (default empty).
    ///   - writerID: the writer.
    ///   - userID: the user (default: the writer).
    ///   - accessKey: the access key for `(writer, user, type)`.
    ///   - signingKey: the writer's Ed25519 key, which makes `rec_sig`.
    ///   - order: key order of the signed message (default `KeyOrder.utf16`; `KeyOrder.javaScript` for js-sdk).
    /// - Returns: the encrypted document.
    public static func encrypt(
        type: String,
        data: RecordData,
        plain: RecordData = RecordData(),
        writerID: UUID,
        userID: UUID? = nil,
        accessKey: AccessKey,
        signingKey: Ed25519.PrivateKey,
        order: KeyOrder = .utf16
    ) -> EncryptedDocument {
        let meta = ClientMeta(writerID: writerID, userID: userID ?? writerID, type: type, plain: plain)
        let encrypted = FieldCipher.encrypt(data, accessKey: accessKey)
        let sig = RecordSignature.sign(meta: meta, data: data, with: signingKey, order: order)
        return EncryptedDocument(meta: meta, data: encrypted, recordSignature: sig)
    }

    /// Encrypts and signs a record for an identity, using the access key of its own EAKInfo.
    /// - Parameters:
    ///   - type: the record type.
    ///   - data: the plaintext data.
    ///   - plain: plaintext metadata.
    ///   - identity: the writer (needs a client ID and a signing key).
    ///   - eakInfo: the writer's EAKInfo for this record type.
    ///   - order: key order of the signed message.
    /// - Returns: the encrypted document.
    /// - Throws: `E3DBError` `.missingKey` (no client ID or signing key), `.authenticationFailed` (part `eak`).
    public static func encrypt(
        type: String,
        data: RecordData,
        plain: RecordData = RecordData(),
        identity: ClientIdentity,
        eakInfo: EAKInfo,
        order: KeyOrder = .utf16
    ) throws(E3DBError) -> EncryptedDocument {
        let id = try identity.requireClientID()
        let signingKey = try identity.requireSigningKey()
        let ak = try eakInfo.unwrap(with: identity.boxKey)
        return encrypt(
            type: type, data: data, plain: plain, writerID: id, accessKey: ak, signingKey: signingKey, order: order)
    }

    /// Decrypts every field, then checks `rec_sig` over the plaintext as `verification` says; returns data only
    /// if every check passed.
    /// - Parameters:
    ///   - accessKey: the access key.
    ///   - verifyingKey: the writer's Ed25519 public key (not needed for unsigned records under
    ///     ``SignaturePolicy/verifyIfPresent`` or for ``SignaturePolicy/ignore``).
    ///   - verification: signature policy, key order and accepted variants (default: strict).
    ///   - decoding: base64url strictness for the fields.
    /// - Returns: the decrypted document; its ``DecryptedDocument/signatureStatus`` says what was verified.
    /// - Throws: `E3DBError` from `FieldCipher.decrypt(_:accessKey:decoding:name:)` with `context.field` set to
    ///   the record key, `.missingSignature`, `.missingKey` or `.invalidSignature` (part `rec_sig`).
    public func decrypt(
        accessKey: AccessKey,
        verifyingKey: Ed25519.PublicKey?,
        verification: RecordVerification = .strict,
        decoding: Base64Decoding = .strict
    ) throws(E3DBError) -> DecryptedDocument {
        let plaintext = try FieldCipher.decrypt(data, accessKey: accessKey, decoding: decoding)
        let status = try verification.check(recordSignature, meta: meta, data: plaintext, key: verifyingKey)
        var document = DecryptedDocument(meta: meta, data: plaintext)
        document.signatureStatus = status
        return document
    }

    /// Decrypts every field and verifies `rec_sig` (required) in key order `order`.
    /// - Parameters:
    ///   - accessKey: the access key.
    ///   - verifyingKey: the writer's Ed25519 public key.
    ///   - order: key order of the signed message.
    ///   - decoding: base64url strictness for the fields.
    /// - Returns: the decrypted document.
    /// - Throws: the errors of ``decrypt(accessKey:verifyingKey:verification:decoding:)``.
    public func decrypt(
        accessKey: AccessKey,
        verifyingKey: Ed25519.PublicKey,
        order: KeyOrder,
        decoding: Base64Decoding = .strict
    ) throws(E3DBError) -> DecryptedDocument {
        try decrypt(
            accessKey: accessKey, verifyingKey: verifyingKey, verification: RecordVerification(order: order),
            decoding: decoding)
    }

    /// Decrypts with a reader identity and the EAKInfo; the signer key of the EAKInfo verifies `rec_sig`.
    ///
    /// When the EAKInfo names a `signer_id` and `verification.requireWriterIsSigner` is set (the default),
    /// `meta.writer_id` must equal it: otherwise anyone whose EAKInfo the reader holds could sign a record that
    /// claims another writer. An authorizer (`authorizer_id`) may differ from the writer.
    /// - Parameters:
    ///   - identity: the reader.
    ///   - eakInfo: the reader's EAKInfo for this record type.
    ///   - verifyingKey: overrides the EAKInfo's `signer_signing_key`.
    ///   - verification: signature policy, key order, variants and the writer check (default: strict).
    ///   - decoding: base64url strictness.
    /// - Returns: the decrypted document.
    /// - Throws: `E3DBError` `.writerSignerMismatch`, `.missingKey` when a signature must be checked and no signer
    ///   key is known, `.authenticationFailed` (part `eak`) and the errors of
    ///   ``decrypt(accessKey:verifyingKey:verification:decoding:)``.
    public func decrypt(
        identity: ClientIdentity,
        eakInfo: EAKInfo,
        verifyingKey: Ed25519.PublicKey? = nil,
        verification: RecordVerification = .strict,
        decoding: Base64Decoding = .strict
    ) throws(E3DBError) -> DecryptedDocument {
        if verification.requireWriterIsSigner, let signer = eakInfo.signerID {
            try checkWriter(isSigner: signer)
        }
        let ak = try eakInfo.unwrap(with: identity.boxKey)
        return try decrypt(
            accessKey: ak, verifyingKey: verifyingKey ?? eakInfo.signerSigningKey, verification: verification,
            decoding: decoding)
    }

    /// Throws `.writerSignerMismatch` unless `meta.writer_id` is `signer`.
    func checkWriter(isSigner signer: UUID) throws(E3DBError) {
        guard signer != meta.writerID else { return }
        throw E3DBError(
            .writerSignerMismatch,
            "meta.writer_id \(meta.writerID.lowercasedString) is not the EAKInfo's signer_id \(signer.lowercasedString)",
            context: .init(field: "writer_id"))
    }

    /// Decrypts with a reader identity and the EAKInfo, `rec_sig` required in key order `order`.
    /// - Parameters:
    ///   - identity: the reader.
    ///   - eakInfo: the reader's EAKInfo for this record type.
    ///   - verifyingKey: overrides the EAKInfo's `signer_signing_key`.
    ///   - order: key order of the signed message.
    ///   - decoding: base64url strictness.
    /// - Returns: the decrypted document.
    /// - Throws: the errors of ``decrypt(identity:eakInfo:verifyingKey:verification:decoding:)``.
    public func decrypt(
        identity: ClientIdentity,
        eakInfo: EAKInfo,
        verifyingKey: Ed25519.PublicKey? = nil,
        order: KeyOrder,
        decoding: Base64Decoding = .strict
    ) throws(E3DBError) -> DecryptedDocument {
        try decrypt(
            identity: identity, eakInfo: eakInfo, verifyingKey: verifyingKey,
            verification: RecordVerification(order: order),
            decoding: decoding)
    }
}

/// A document with a detached Ed25519 signature over its canonical serialization:
/// `{"doc":<document>,"sig":"<b64u signature over canonical(document)>"}` (spec §4.5).
/// Nesting (`SignedDocument<SignedDocument<X>>`) signs the inner wrapper's canonical form.
public struct SignedDocument<Document: Signable & Sendable>: Sendable, Signable {
    /// The signed document.
    public var document: Document
    /// `b64u` of the signature over `canonical(document)`.
    public var signature: String

    /// A signed document from its parts (not verified).
    public init(document: Document, signature: String) {
        self.document = document
        self.signature = signature
    }

    /// Signs `document`.
    /// - Parameters:
    ///   - document: the document.
    ///   - key: the signing key.
    ///   - order: key order (default `KeyOrder.utf16`).
    public init(signing document: Document, with key: Ed25519.PrivateKey, order: KeyOrder = .utf16) {
        self.document = document
        self.signature = Base64URL.encode(key.signature(for: document.canonicalBytes(order: order)))
    }

    /// Verifies the signature.
    /// - Parameters:
    ///   - key: the signer's public key.
    ///   - order: key order used when signing.
    /// - Throws: `E3DBError` `.invalidSignature` (part `sig`).
    public func verify(with key: Ed25519.PublicKey, order: KeyOrder = .utf16) throws(E3DBError) {
        let raw: Data
        do {
            raw = try Base64URL.decode(signature)
        } catch {
            throw E3DBError(
                .invalidSignature, "the document signature (sig) is not base64url", context: .init(part: "sig"))
        }
        guard raw.count == Ed25519.signatureByteCount,
            key.isValidSignature(raw, for: document.canonicalBytes(order: order))
        else {
            throw E3DBError(
                .invalidSignature, "the document signature (sig) does not verify", context: .init(part: "sig"))
        }
    }

    /// `{"doc":…,"sig":…}`.
    public var signableJSON: JSONValue { .object(["doc": document.signableJSON, "sig": .string(signature)]) }

    /// The canonical JSON text.
    public func jsonData() -> Data { Data(canonicalBytes()) }
}

extension SignedDocument: DocumentJSONDecodable where Document: DocumentJSONDecodable {
    /// Parses `{"doc":…,"sig":…}` (not verified).
    /// - Throws: `E3DBError` `.invalidDocument` naming `doc` or `sig`, or the inner document's errors.
    public init(documentJSON value: JSONValue) throws(E3DBError) {
        guard case .object(let o) = value else {
            throw E3DBError(.invalidDocument, "a signed document is a JSON object")
        }
        guard let doc = o["doc"] else {
            throw E3DBError(.invalidDocument, "\"doc\" is missing", context: .init(field: "doc"))
        }
        guard case .string(let sig)? = o["sig"] else {
            throw E3DBError(.invalidDocument, "\"sig\" is missing or not a string", context: .init(field: "sig"))
        }
        self.document = try Document(documentJSON: doc)
        self.signature = sig
    }

    /// Parses JSON text (not verified).
    /// - Throws: `E3DBError` `.invalidDocument`.
    public init(jsonData: some DataProtocol) throws(E3DBError) {
        try self.init(documentJSON: parseDocumentJSON(jsonData))
    }
}

extension SignedDocument: Equatable where Document: Equatable {}
extension SignedDocument: Hashable where Document: Hashable {}

extension UUID: Signable {
    /// A UUID signs as its lowercase string, as every E3DB SDK writes it.
    public var signableJSON: JSONValue { .string(lowercasedString) }
}
