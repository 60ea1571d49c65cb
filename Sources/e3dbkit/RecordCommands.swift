import ArgumentParser
import E3DBKit
import Foundation

/// `e3dbkit record …`: offline record encryption and decryption.
struct RecordCommand: ParsableCommand {
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
            'e3dbkit eak wrap'); the identity's signing key makes rec_sig.
            """
    )

    @Option(help: "The record type.")
    var type: String

    @Option(help: "The writer's identity JSON file.")
    var identity: String

    @Option(help: "The writer's EAKInfo JSON file.")
    var eakInfo: String

    @Option(help: "A JSON object of strings for meta.plain.")
    var plain: String?

    @Option(help: "Key order of the signed message: utf16 (default) or js (js-sdk).")
    var order: OrderOption = .utf16

    @Argument(help: "The data JSON file ('-' for stdin).")
    var data: String = "-"

    func run() throws {
        try DocumentCLI.run("encrypting the record") {
            let me = try DocumentCLI.identity(identity)
            let info = try DocumentCLI.eakInfo(eakInfo)
            let values = try DocumentCLI.recordData(data, what: "data")
            let plainValues = try plain.map { try DocumentCLI.recordData($0, what: "plain") } ?? RecordData()
            let doc = try EncryptedDocument.encrypt(
                type: type, data: values, plain: plainValues, identity: me, eakInfo: info, order: order.keyOrder)
            FileHandle.standardOutput.write(doc.jsonData())
            FileHandle.standardOutput.write(Data("\n".utf8))
        }
    }
}

/// `e3dbkit record decrypt`.
struct RecordDecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt a record and verify rec_sig; prints {\"data\":…,\"meta\":…}.",
        discussion: """
            Nothing is printed unless every field decrypts and the signature verifies. Exit codes: 0 success; \
            2 a field, the EAK or the signature failed to verify; 65 malformed input.
            """
    )

    @Option(help: "The reader's identity JSON file.")
    var identity: String

    @Option(help: "The reader's EAKInfo JSON file.")
    var eakInfo: String

    @Option(help: "The writer's Ed25519 public key (default: signer_signing_key of the EAKInfo).")
    var verifyingKey: String?

    @Option(help: "Key order of the signed message: utf16 (default) or js (js-sdk).")
    var order: OrderOption = .utf16

    @Flag(help: "Accept padded or standard-alphabet base64 in fields.")
    var lenient = false

    @Argument(help: "The EncryptedDocument JSON file ('-' for stdin).")
    var document: String = "-"

    func run() throws {
        try DocumentCLI.run("decrypting the record") {
            let me = try DocumentCLI.identity(identity)
            let info = try DocumentCLI.eakInfo(eakInfo, lenient: lenient)
            let key = try verifyingKey.map { try DocumentCLI.signingPublicKey($0, what: "reading --verifying-key") }
            let doc = try EncryptedDocument(jsonData: CLIIO.readAll(document))
            let plain = try doc.decrypt(
                identity: me, eakInfo: info, verifyingKey: key, order: order.keyOrder,
                decoding: lenient ? .lenient : .strict)
            DocumentCLI.output(plain.canonicalString())
        }
    }
}
