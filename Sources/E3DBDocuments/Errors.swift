public import E3DBPrimitives

extension E3DBError.Code {
    /// A record field is not `edk.edkN.ef.efN` (exactly four `.`-separated parts).
    public static let invalidField = Self("invalidField", category: .malformedInput)
    /// A decrypted value is not valid UTF-8 (part `ef`).
    public static let invalidUTF8 = Self("invalidUTF8", category: .malformedInput)
    /// A document's JSON is malformed; `context.field` names the member when known.
    public static let invalidDocument = Self("invalidDocument", category: .malformedInput)
    /// A note's JSON is malformed; `context.field` names the member when known.
    public static let invalidNote = Self("invalidNote", category: .malformedInput)
    /// A value is not TFSP1-signed where a signature is required (`context.field` names the note field).
    public static let unsignedField = Self("unsignedField", category: .verification)
    /// A TFSP1 header is malformed (`context.part` is `length` for a bad length field).
    public static let invalidSignedField = Self("invalidSignedField", category: .verification)
    /// A TFSP1 salt differs from the expected (note object) salt.
    public static let saltMismatch = Self("saltMismatch", category: .verification)
    /// A note was written with a signing key other than the expected writer key.
    public static let writerKeyMismatch = Self("writerKeyMismatch", category: .verification)
}

extension E3DBError.Code {
    /// A record has no `rec_sig` although the signature policy requires one (``SignaturePolicy/required``).
    public static let missingSignature = Self("missingSignature", category: .verification)
    /// A record's `meta.writer_id` is not the `signer_id` of the EAKInfo whose signing key verifies it.
    public static let writerSignerMismatch = Self("writerSignerMismatch", category: .verification)
    /// A decrypted note does not hold exactly the fields the caller expected (fields removed or added).
    public static let unexpectedFields = Self("unexpectedFields", category: .verification)
}

extension E3DBError.Code {
    /// An NDJSON line is longer than the batch's maximum line length (``NDJSONLineSplitter``); the rest of the
    /// line is skipped without being stored.
    public static let lineTooLong = Self("lineTooLong", category: .malformedInput)
    /// An NDJSON line is blank (empty or only spaces, tabs and `\r`). Blank lines are accepted only at the end
    /// of the input.
    public static let blankLine = Self("blankLine", category: .malformedInput)
}
