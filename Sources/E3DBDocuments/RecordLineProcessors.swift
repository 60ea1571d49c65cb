public import E3DBCanonicalJSON
public import E3DBKeys
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// What the batch mode does to each line: encrypt a record's data, or decrypt and verify a record.

/// Turns one NDJSON input line into one output line; used by ``RecordBatch``, possibly from several threads at
/// once.
public protocol RecordLineProcessor: Sendable {
    /// Processes one line.
    /// - Parameter line: the line's bytes, without terminator.
    /// - Returns: the output line, without terminator (it must not contain `\n`).
    /// - Throws: `E3DBError` for this line only; the batch reports it and goes on (unless fail-fast).
    func process(line: [UInt8]) throws(E3DBError) -> [UInt8]
}

/// `e3dbkit record encrypt --ndjson`: each line is a record's data, a JSON object of strings (the input of
/// single `record encrypt`); the output is the record's canonical `EncryptedDocument` JSON (what single
/// `record encrypt` prints). Type, `plain`, writer and keys are the same for every line.
///
/// The access key is unwrapped and the identity checked once, when the encryptor is made.
public struct RecordLineEncryptor: RecordLineProcessor {
    /// The record type.
    public let type: String
    /// `meta.plain` of every record.
    public let plain: RecordData
    /// Key order of the signed message.
    public let order: KeyOrder
    private let accessKey: AccessKey
    private let signingKey: Ed25519.PrivateKey
    /// The metadata is the same for every line: its canonical forms (for the output and the signed message)
    /// and value count are computed once.
    private let metaOutput: [UInt8]
    private let metaSigned: [UInt8]
    private let metaValueCount: Int
    /// Keys and nonces for all lines: OS-seeded ChaCha20 output, one system call per 64 KiB (`RandomReservoir`).
    private let randomness = RandomReservoir()

    /// An encryptor for `identity`, with the access key of its own EAKInfo.
    /// - Parameters:
    ///   - type: the record type.
    ///   - plain: plaintext metadata of every record (default empty).
    ///   - identity: the writer (needs a client ID and a signing key).
    ///   - eakInfo: the writer's EAKInfo for this record type.
    ///   - order: key order of the signed message (default `KeyOrder.utf16`).
    /// - Throws: `E3DBError` `.missingKey` (no client ID or signing key), `.authenticationFailed` (part `eak`).
    public init(
        type: String, plain: RecordData = RecordData(), identity: ClientIdentity, eakInfo: EAKInfo,
        order: KeyOrder = .utf16
    ) throws(E3DBError) {
        self.type = type
        self.plain = plain
        self.order = order
        let writerID = try identity.requireClientID()
        self.signingKey = try identity.requireSigningKey()
        self.accessKey = try eakInfo.unwrap(with: identity.boxKey)
        let meta = ClientMeta(writerID: writerID, userID: writerID, type: type, plain: plain)
        self.metaOutput = meta.canonicalBytes()
        self.metaSigned = meta.canonicalBytes(order: order)
        self.metaValueCount = meta.signableJSON.valueCount
    }

    /// Encrypts and signs one record.
    /// - Parameter line: a JSON object of strings.
    /// - Returns: the canonical `EncryptedDocument` JSON.
    /// - Throws: `E3DBError` `.invalidDocument` (not JSON, not an object of strings), `.documentTooLarge`.
    public func process(line: [UInt8]) throws(E3DBError) -> [UInt8] {
        let data = try RecordData(jsonValue: parseDocumentJSON(line), what: "data")
        // What EncryptedDocument.encrypt does, with the metadata's canonical bytes computed once:
        // rec_sig = sign(canonical(meta) || canonical(data)), fields under fresh data keys.
        let signature = Base64URL.encode(signingKey.signature(for: metaSigned + data.canonicalBytes(order: order)))
        // The canonical document {"data":…,"meta":…,"rec_sig":"…"}: members in sorted order. The encrypted fields
        // go straight into the output in UTF-16 key order (the canonical order); as base64url and dots they need
        // no escaping, and the signature is base64url too. The randomness for the whole record comes from one
        // call, as in FieldCipher.encrypt(_:accessKey:).
        let members = data.members
        let sorted = members.indices.sorted { members[$0].key.utf16.lexicographicallyPrecedes(members[$1].key.utf16) }
        var out: [UInt8] = []
        out.reserveCapacity(line.count * 5 + members.count * 150 + metaOutput.count + 128)
        out.append(contentsOf: #"{"data":{"#.utf8)
        let n = FieldCipher.randomByteCount
        let random = unsafe SecureBytes(count: n * members.count) { unsafe randomness.fill($0) }
        unsafe random.withUnsafeBytes { r in
            for (position, i) in sorted.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: CanonicalJSON.serializedBytes(.string(members[i].key)))
                out.append(contentsOf: #":""#.utf8)
                let slice = unsafe UnsafeRawBufferPointer(rebasing: r[(i * n)..<((i + 1) * n)])
                unsafe out.append(
                    contentsOf: FieldCipher.encrypt(members[i].value, accessKey: accessKey, randomness: slice).utf8)
                out.append(UInt8(ascii: "\""))
            }
        }
        out.append(contentsOf: #"},"meta":"#.utf8)
        out.append(contentsOf: metaOutput)
        out.append(contentsOf: #","rec_sig":""#.utf8)
        out.append(contentsOf: signature.utf8)
        out.append(contentsOf: #""}"#.utf8)
        // Values: the document, data and its members, meta and its members, rec_sig.
        try DocumentLimits.checkOutput(
            byteCount: out.count, valueCount: 3 + members.count + metaValueCount, what: "record")
        return out
    }
}

/// `e3dbkit record decrypt --ndjson`: each line is an `EncryptedDocument` JSON (as `record encrypt` writes it);
/// the output is `{"data":…,"meta":…,"verification":…}` exactly as single `record decrypt` prints it.
///
/// The access key is unwrapped and the verifying key chosen once, when the decryptor is made; every line then
/// goes through the same checks as ``EncryptedDocument/decrypt(identity:eakInfo:verifyingKey:verification:decoding:)``.
public struct RecordLineDecryptor: RecordLineProcessor {
    /// The signature policy and its options.
    public let verification: RecordVerification
    /// Base64url strictness for the fields.
    public let decoding: Base64Decoding
    private let accessKey: AccessKey
    private let verifyingKey: Ed25519.PublicKey?
    private let requiredWriter: UUID?

    /// A decryptor for `identity`.
    /// - Parameters:
    ///   - identity: the reader.
    ///   - eakInfo: the reader's EAKInfo for this record type.
    ///   - verifyingKey: overrides the EAKInfo's `signer_signing_key`.
    ///   - verification: signature policy, key order, variants and the writer check (default strict).
    ///   - decoding: base64url strictness (default strict).
    /// - Throws: `E3DBError` `.authenticationFailed` (part `eak`) when the EAK does not open.
    public init(
        identity: ClientIdentity, eakInfo: EAKInfo, verifyingKey: Ed25519.PublicKey? = nil,
        verification: RecordVerification = .strict, decoding: Base64Decoding = .strict
    ) throws(E3DBError) {
        self.verification = verification
        self.decoding = decoding
        self.accessKey = try eakInfo.unwrap(with: identity.boxKey)
        self.verifyingKey = verifyingKey ?? eakInfo.signerSigningKey
        self.requiredWriter = verification.requireWriterIsSigner ? eakInfo.signerID : nil
    }

    /// Decrypts and verifies one record.
    /// - Parameter line: an `EncryptedDocument` JSON.
    /// - Returns: the canonical JSON of ``outputJSON(_:policy:)``.
    /// - Throws: the errors of `EncryptedDocument.init(jsonData:)` and
    ///   ``EncryptedDocument/decrypt(identity:eakInfo:verifyingKey:verification:decoding:)``.
    public func process(line: [UInt8]) throws(E3DBError) -> [UInt8] {
        let document = try EncryptedDocument(jsonData: line)
        if let requiredWriter { try document.checkWriter(isSigner: requiredWriter) }
        // What EncryptedDocument.decrypt(accessKey:verifyingKey:verification:decoding:) does, serializing meta and
        // data once: in the default UTF-16 order the signed message is exactly the output's two members.
        let data = try FieldCipher.decrypt(document.data, accessKey: accessKey, decoding: decoding)
        let metaBytes = document.meta.canonicalBytes()
        let dataBytes = data.canonicalBytes()
        let status = try verification.check(
            document.recordSignature, meta: document.meta, data: data, key: verifyingKey
        ) {
            verification.order == .utf16
                ? metaBytes + dataBytes
                : RecordSignature.message(meta: document.meta, data: data, order: verification.order)
        }
        var plain = DecryptedDocument(meta: document.meta, data: data)
        plain.signatureStatus = status
        // outputJSON's canonical form, {"data":…,"meta":…,"verification":{…}}, written member by member.
        var out: [UInt8] = []
        out.reserveCapacity(line.count + 128)
        out.append(contentsOf: #"{"data":"#.utf8)
        out.append(contentsOf: dataBytes)
        out.append(contentsOf: #","meta":"#.utf8)
        out.append(contentsOf: metaBytes)
        out.append(contentsOf: #","verification":"#.utf8)
        out.append(contentsOf: CanonicalJSON.serializedBytes(Self.verificationJSON(plain, policy: verification.policy)))
        out.append(UInt8(ascii: "}"))
        return out
    }

    private static func verificationJSON(_ document: DecryptedDocument, policy: SignaturePolicy) -> JSONValue {
        var verification: JSONObject = ["policy": .string(policy.rawValue)]
        if let status = document.signatureStatus { verification["rec_sig"] = .string(status.rawValue) }
        return .object(verification)
    }

    /// `{"data":…,"meta":…,"verification":{"policy":…,"rec_sig":…}}`: a decrypted record and what was checked
    /// (the output of `e3dbkit record decrypt`, single and batch).
    public static func outputJSON(_ document: DecryptedDocument, policy: SignaturePolicy) -> JSONValue {
        .object([
            "data": document.data.signableJSON, "meta": document.meta.signableJSON,
            "verification": verificationJSON(document, policy: policy),
        ])
    }
}
