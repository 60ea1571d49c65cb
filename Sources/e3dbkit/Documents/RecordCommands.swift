import ArgumentParser
import E3DBCommandLine
import E3DBKit
import Foundation

/// `e3dbkit record …`: offline record encryption and decryption.
struct RecordCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Encrypt and decrypt E3DB records (EncryptedDocument JSON with rec_sig).",
        subcommands: [RecordEncryptCommand.self, RecordDecryptCommand.self]
    )
}

/// `e3dbkit record encrypt`.
struct RecordEncryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Encrypt and sign a record; prints the EncryptedDocument JSON (canonical, lowercase UUIDs).",
        discussion: """
            DATA is a JSON object of strings. The access key comes from the writer's own EAKInfo (see \
            'e3dbkit eak wrap'); the identity's signing key makes rec_sig. With --ndjson every input line is one \
            such object (--type and --plain apply to all) and every output line is what a single encrypt prints; \
            a line that fails becomes {"error":{"category":…,"code":…,"line":N,"message":…}} and a line on \
            stderr. Exit codes: 0 success (every line); otherwise that of the first failure (65 malformed input, \
            2 verification, 64 invalid argument, 1 I/O).
            """
    )

    @Option(help: "The record type.")
    var type: String

    @Option(help: "The writer's identity JSON file.")
    var identity: String

    @Option(help: "The writer's EAKInfo JSON file.")
    var eakInfo: String

    @Option(help: "A file holding a JSON object of strings for meta.plain ('-' for stdin).")
    var plain: String?

    @Option(help: "Key order of the signed message: utf16 (default) or js (js-sdk).")
    var order: OrderOption = .utf16

    @OptionGroup var batch: RecordBatchFlags

    @Argument(help: "The data JSON file, or with --ndjson the NDJSON file ('-' for stdin).")
    var data: String = "-"

    func run() throws {
        try libraryCall("encrypting the record") {
            let me = try DocumentCLI.identity(identity)
            let info = try DocumentCLI.eakInfo(eakInfo)
            if batch.ndjson {
                let plainValues = try plain.map { try DocumentCLI.recordData($0, what: "plain") } ?? RecordData()
                let encryptor = try RecordLineEncryptor(
                    type: type, plain: plainValues, identity: me, eakInfo: info, order: order.keyOrder)
                try RecordBatchCLI.run(encryptor, input: data, flags: batch, doing: "encrypting the record")
                return
            }
            let values = try DocumentCLI.recordData(data, what: "data")
            let plainValues = try plain.map { try DocumentCLI.recordData($0, what: "plain") } ?? RecordData()
            let doc = try EncryptedDocument.encrypt(
                type: type, data: values, plain: plainValues, identity: me, eakInfo: info, order: order.keyOrder)
            let text = doc.jsonData()
            try DocumentLimits.checkOutput(doc.signableJSON, byteCount: text.count, what: "record")
            try StandardOutput.line(text)
        }
    }
}

/// `--signature-policy` values.
enum SignaturePolicyOption: String, ExpressibleByArgument, CaseIterable {
    case required
    case verifyIfPresent = "verify-if-present"
    case ignore

    var policy: SignaturePolicy {
        switch self {
        case .required: .required
        case .verifyIfPresent: .verifyIfPresent
        case .ignore: .ignore
        }
    }
}

/// How `record decrypt` treats rec_sig and the writer (shared by the single-record and batch modes).
struct RecordDecryptOptions: ParsableArguments {
    @Option(
        parsing: .unconditional, help: "The writer's Ed25519 public key (default: signer_signing_key of the EAKInfo).")
    var verifyingKey: String?

    @Option(help: "Key order of the signed message: utf16 (default) or js (js-sdk Signable).")
    var order: OrderOption = .utf16

    @Option(
        help: ArgumentHelp(
            """
            What to do with rec_sig: required (default), verify-if-present (unsigned records are accepted, a \
            rec_sig that does not verify is still rejected) or ignore (not checked).
            """,
            valueName: "policy"))
    var signaturePolicy: SignaturePolicyOption?

    @Flag(
        help:
            "Accept records without rec_sig, as the Python and Go SDKs write them (--signature-policy verify-if-present)."
    )
    var allowUnsigned = false

    @Flag(help: "Also accept a rec_sig made by js-sdk over plain and data in their JSON order (unsorted).")
    var acceptInsertionOrder = false

    @Flag(help: "Also accept js-sdk file records, whose rec_sig signs meta followed by null (data must be empty).")
    var acceptNullData = false

    @Flag(help: "Do not require meta.writer_id to equal the EAKInfo's signer_id.")
    var allowWriterMismatch = false

    @Flag(help: "Accept padded or standard-alphabet base64 in fields.")
    var lenient = false

    func validate() throws {
        if allowUnsigned, let signaturePolicy, signaturePolicy != .verifyIfPresent {
            throw ValidationError("--allow-unsigned means --signature-policy verify-if-present; give one of them")
        }
    }

    /// The library options these flags select.
    var verification: RecordVerification {
        var variants: RecordSignatureVariants = []
        if acceptInsertionOrder { variants.insert(.javaScriptInsertionOrder) }
        if acceptNullData { variants.insert(.fileRecordNullData) }
        let policy = signaturePolicy?.policy ?? (allowUnsigned ? .verifyIfPresent : .required)
        return RecordVerification(
            policy: policy, order: order.keyOrder, variants: variants, requireWriterIsSigner: !allowWriterMismatch)
    }

}

/// `e3dbkit record decrypt`.
struct RecordDecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt a record and verify rec_sig; prints {\"data\":…,\"meta\":…,\"verification\":…}.",
        discussion: """
            Nothing is printed unless every field decrypts and rec_sig passes the signature policy. By default \
            rec_sig is required: records written by the Python and Go SDKs carry none, so read them with \
            --allow-unsigned. "verification" in the output names the policy and what happened to rec_sig \
            (verified, verified-insertion-order, verified-null-data, absent or not-checked). When the EAKInfo \
            names a signer_id, meta.writer_id must equal it unless --allow-writer-mismatch is given. \
            Exit codes: 0 success; 2 a field, the EAK or the signature failed to verify, rec_sig is missing \
            under the required policy, or the writer is not the signer; 65 malformed input. With --ndjson every \
            input line is one EncryptedDocument and every output line is what a single decrypt prints, or \
            {"error":{"category":…,"code":…,"line":N,"message":…}} for a line that fails (with a line on \
            stderr); the exit code is that of the first failure.
            """
    )

    @Option(help: "The reader's identity JSON file.")
    var identity: String

    @Option(help: "The reader's EAKInfo JSON file.")
    var eakInfo: String

    @OptionGroup var options: RecordDecryptOptions

    @OptionGroup var batch: RecordBatchFlags

    @Argument(help: "The EncryptedDocument JSON file, or with --ndjson the NDJSON file ('-' for stdin).")
    var document: String = "-"

    func run() throws {
        try libraryCall("decrypting the record") {
            let me = try DocumentCLI.identity(identity)
            let info = try DocumentCLI.eakInfo(eakInfo, lenient: options.lenient)
            let key = try options.verifyingKey.map {
                try DocumentCLI.signingPublicKey($0, what: "reading --verifying-key")
            }
            let verification = options.verification
            if batch.ndjson {
                let decryptor = try RecordLineDecryptor(
                    identity: me, eakInfo: info, verifyingKey: key, verification: verification,
                    decoding: options.lenient ? .lenient : .strict)
                try RecordBatchCLI.run(decryptor, input: document, flags: batch, doing: "decrypting the record")
                return
            }
            let doc = try EncryptedDocument(jsonData: CLIIO.readAll(document, what: "record"))
            let plain = try doc.decrypt(
                identity: me, eakInfo: info, verifyingKey: key, verification: verification,
                decoding: options.lenient ? .lenient : .strict)
            try DocumentCLI.output(
                CanonicalJSON.serialize(RecordLineDecryptor.outputJSON(plain, policy: verification.policy)))
        }
    }
}
