public import E3DBCanonicalJSON
import E3DBKeys
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How a record's `rec_sig` is treated when the record is decrypted.
///
/// Records written online by the Python and Go SDKs, and most records stored by the E3DB service, carry no
/// `rec_sig` (spec §4.5): only offline encryption in the old Swift and Java SDKs, and js-sdk with
/// `config.version > 1`, sign records. The default is strict.
public enum SignaturePolicy: String, Sendable, Hashable, CaseIterable {
    /// `rec_sig` must be present and verify (the default). A record without one fails with `.missingSignature`.
    case required = "required"
    /// An unsigned record is accepted; a record that has a `rec_sig` must verify, or it is rejected.
    case verifyIfPresent = "verify-if-present"
    /// `rec_sig` is neither required nor checked, even when present. The fields are still authenticated by their
    /// own encryption (XSalsa20-Poly1305 under the access key), but nothing binds them to `meta` or to each other.
    case ignore = "ignore"
}

/// Signed messages that other SDKs produce besides the canonical one, accepted only when asked for.
public struct RecordSignatureVariants: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    /// A variant set from its raw value.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// js-sdk's `RecordInfo`: `plain` and `data` unsorted, in the order of the record's JSON (array-index keys
    /// first), as `KeyOrder.javaScriptInsertion` writes them. Tried after the canonical order.
    public static let javaScriptInsertionOrder = RecordSignatureVariants(rawValue: 1 << 0)
    /// js-sdk file records (`writeFile`, `updateFileRecord`): the message is `canonical(meta) ‖ "null"`, so
    /// the data map is not signed. Accepted only for records whose `data` is empty.
    public static let fileRecordNullData = RecordSignatureVariants(rawValue: 1 << 1)
}

/// What happened to a record's `rec_sig` during decryption.
public enum RecordSignatureStatus: String, Sendable, Hashable, CaseIterable {
    /// `rec_sig` verified over the canonical message, in the requested key order.
    case verified = "verified"
    /// `rec_sig` verified over js-sdk's insertion-order message (``RecordSignatureVariants/javaScriptInsertionOrder``).
    case verifiedInsertionOrder = "verified-insertion-order"
    /// `rec_sig` verified over js-sdk's file-record message `meta ‖ null`
    /// (``RecordSignatureVariants/fileRecordNullData``).
    case verifiedNullData = "verified-null-data"
    /// The record has no `rec_sig`; accepted under ``SignaturePolicy/verifyIfPresent``.
    case absent = "absent"
    /// `rec_sig` was not checked (``SignaturePolicy/ignore``).
    case notChecked = "not-checked"
}

/// How ``EncryptedDocument`` decryption treats `rec_sig` and the writer: the policy, the key order, the
/// accepted js-sdk variants and the writer check (D3). The defaults are strict.
public struct RecordVerification: Sendable, Hashable {
    /// Whether `rec_sig` is required, checked when present, or ignored.
    public var policy: SignaturePolicy
    /// The key order of the canonical message (`KeyOrder.utf16`, or `KeyOrder.javaScript` for js-sdk `Signable`).
    public var order: KeyOrder
    /// Other messages accepted in addition to the canonical one.
    public var variants: RecordSignatureVariants
    /// When decrypting with an EAKInfo that names a `signer_id`, require `meta.writer_id` to equal it (default
    /// true). Without this, a record signed by anyone whose EAKInfo the reader holds could claim any writer.
    public var requireWriterIsSigner: Bool

    /// Options.
    /// - Parameters:
    ///   - policy: default ``SignaturePolicy/required``.
    ///   - order: default `KeyOrder.utf16`.
    ///   - variants: default none.
    ///   - requireWriterIsSigner: default true.
    public init(
        policy: SignaturePolicy = .required, order: KeyOrder = .utf16, variants: RecordSignatureVariants = [],
        requireWriterIsSigner: Bool = true
    ) {
        self.policy = policy
        self.order = order
        self.variants = variants
        self.requireWriterIsSigner = requireWriterIsSigner
    }

    /// The strict defaults: `rec_sig` required, canonical UTF-16 order, writer must be the signer.
    public static let strict = RecordVerification()

    /// Checks `signature` over the plaintext `meta` and `data` under these options.
    /// - Parameters:
    ///   - signature: `rec_sig`, or nil when the record has none.
    ///   - meta: the metadata.
    ///   - data: the plaintext data, in the record's member order.
    ///   - key: the writer's signing key (needed unless the policy is ``SignaturePolicy/ignore`` or the record
    ///     is unsigned).
    /// - Returns: what was verified.
    /// - Throws: `E3DBError` `.missingSignature`, `.missingKey` (field `signer_signing_key`) or
    ///   `.invalidSignature` (part `rec_sig`).
    public func check(
        _ signature: String?, meta: ClientMeta, data: RecordData, key: Ed25519.PublicKey?
    ) throws(E3DBError) -> RecordSignatureStatus {
        try check(signature, meta: meta, data: data, key: key) {
            RecordSignature.message(meta: meta, data: data, order: order)
        }
    }

    /// ``check(_:meta:data:key:)`` with the canonical message (in ``order``) supplied by the caller, who may
    /// already hold its bytes; the variants are still derived from `meta` and `data`.
    func check(
        _ signature: String?, meta: ClientMeta, data: RecordData, key: Ed25519.PublicKey?,
        canonicalMessage: () -> [UInt8]
    ) throws(E3DBError) -> RecordSignatureStatus {
        if policy == .ignore { return .notChecked }
        guard let signature else {
            if policy == .verifyIfPresent { return .absent }
            throw E3DBError(
                .missingSignature,
                "the record has no rec_sig and the signature policy requires one (allow unsigned records to read it)",
                context: .init(part: "rec_sig"))
        }
        guard let key else {
            throw E3DBError(
                .missingKey, "no writer signing key is known to verify rec_sig; pass the writer's key",
                context: .init(field: "signer_signing_key"))
        }
        let raw: Data
        do {
            raw = try Base64URL.decode(signature)
        } catch {
            throw E3DBError(
                .invalidSignature, "the record signature (rec_sig) is not base64url", context: .init(part: "rec_sig"))
        }
        guard raw.count == Ed25519.signatureByteCount else {
            throw E3DBError(
                .invalidSignature, "the record signature (rec_sig) is \(raw.count) bytes, not 64",
                context: .init(part: "rec_sig"))
        }
        if key.isValidSignature(raw, for: canonicalMessage()) {
            return .verified
        }
        if variants.contains(.javaScriptInsertionOrder),
            key.isValidSignature(raw, for: RecordSignature.message(meta: meta, data: data, order: .javaScriptInsertion))
        {
            return .verifiedInsertionOrder
        }
        if variants.contains(.fileRecordNullData), data.isEmpty {
            for candidate in [order, .javaScriptInsertion] {
                if key.isValidSignature(raw, for: meta.canonicalBytes(order: candidate) + Array("null".utf8)) {
                    return .verifiedNullData
                }
            }
        }
        throw E3DBError(
            .invalidSignature, "the record signature (rec_sig) does not verify", context: .init(part: "rec_sig"))
    }
}
