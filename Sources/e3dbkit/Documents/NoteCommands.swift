import ArgumentParser
import E3DBCommandLine
import E3DBKit
import Foundation

/// `e3dbkit note …`: encrypted, TFSP1-signed notes.
struct NoteCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "note",
        abstract: "Encrypt and decrypt E3DB notes (TFSP1-signed fields).",
        subcommands: [NoteEncryptCommand.self, NoteDecryptCommand.self]
    )
}

/// `e3dbkit note encrypt`.
struct NoteEncryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encrypt",
        abstract: "Encrypt and sign a note for a recipient; prints the note JSON."
    )

    @Option(help: "The writer's identity JSON file.")
    var identity: String

    @Option(parsing: .unconditional, help: "The recipient's Curve25519 public key, base64url.")
    var recipientPublicKey: String

    @Option(parsing: .unconditional, help: "The recipient's Ed25519 public key, base64url (recorded in the note).")
    var recipientSigningKey: String?

    @Argument(help: "The data JSON file, an object of strings ('-' for stdin).")
    var data: String = "-"

    func run() throws {
        try libraryCall("encrypting the note") {
            let me = try DocumentCLI.identity(identity)
            let recipient = try DocumentCLI.boxPublicKey(recipientPublicKey, what: "reading --recipient-public-key")
            let signing = try recipientSigningKey.map {
                try DocumentCLI.signingPublicKey($0, what: "reading --recipient-signing-key")
            }
            let note = try EncryptedNote.encrypt(
                data: DocumentCLI.recordData(data, what: "data"), recipientEncryptionKey: recipient,
                recipientSigningKey: signing, writerBoxKey: me.boxKey, writerSigningKey: me.requireSigningKey())
            let text = note.jsonData()
            try DocumentLimits.checkOutput(
                byteCount: text.count, valueCount: note.data.count + note.otherMembers.count + 8, what: "note")
            try StandardOutput.line(text)
        }
    }
}

/// `e3dbkit note decrypt`.
struct NoteDecryptCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decrypt",
        abstract: "Decrypt a note and verify every field; prints the data as JSON.",
        discussion: """
            Strict by default: every field and the note signature must be TFSP1-signed. TFSP1 signs fields one \
            by one, so a note whose fields were removed still verifies: name the fields you expect with \
            --expect-field (repeat it) to detect that. Exit codes: 0 success; 2 a signature or decryption failed, \
            a field is unsigned, or the fields differ from --expect-field; 65 malformed input.
            """
    )

    @Option(help: "The recipient's identity JSON file.")
    var identity: String

    @Option(parsing: .unconditional, help: "Require the note to be signed by this Ed25519 public key, base64url.")
    var writerSigningKey: String?

    @Flag(help: "Accept unsigned legacy fields (as js-sdk and Python do).")
    var allowUnsigned = false

    @Flag(help: "Accept js-sdk's legacy note signature (a bare Ed25519 signature over NoteInfo, unsigned fields).")
    var allowLegacySignature = false

    @Option(
        help: ArgumentHelp(
            "A field the note must hold; repeat for each. The note must hold exactly these.",
            valueName: "name"))
    var expectField: [String] = []

    @Argument(help: "The note JSON file ('-' for stdin).")
    var note: String = "-"

    func run() throws {
        try libraryCall("decrypting the note") {
            let me = try DocumentCLI.identity(identity)
            let expected = try writerSigningKey.map {
                try DocumentCLI.signingPublicKey($0, what: "reading --writer-signing-key")
            }
            let parsed = try EncryptedNote(jsonData: CLIIO.readAll(note, what: "note"))
            let data = try parsed.decrypt(
                readerKey: me.boxKey,
                options: .init(
                    allowUnsignedFields: allowUnsigned, expectedWriterSigningKey: expected,
                    expectedFields: expectField.isEmpty ? nil : expectField,
                    allowLegacyNoteSignature: allowLegacySignature))
            try DocumentCLI.output(data.canonicalString())
        }
    }
}
