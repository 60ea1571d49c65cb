import ArgumentParser
import E3DBClient
import E3DBCommandLine
import E3DBKit
import Foundation

struct ClientNoteCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "note", abstract: "Notes (TFSP1-signed, TSV1-authenticated): write, read, replace, delete.",
        discussion: """
            With --anonymous-keys FILE, write and read need no registered client: FILE holds the Curve25519 and \
            Ed25519 key pairs as JSON (public_key, private_key, public_signing_key, private_signing_key; the \
            output of `e3dbkit keygen` or a credential file), the requests are TSV1-signed with an empty uid as \
            the Python SDK's anonymous notes are, and the server comes from --api-url or the file's api_url.
            """,
        subcommands: [
            ClientNoteWriteCommand.self, ClientNoteReadCommand.self, ClientNoteReplaceCommand.self,
            ClientNoteDeleteCommand.self,
        ])
}

/// A note as printed: the server's members (ids, views) and, for a read, the decrypted fields.
func noteLine(_ note: API.Note, data: RecordData?) throws -> String {
    var object: JSONObject = [
        "note_id": note.noteID.map(JSONValue.string) ?? .null,
        "id_string": .string(note.idString ?? ""),
        "views": note.views.map { .number(Double($0)) } ?? .null,
        "max_views": note.maxViews.map { .number(Double($0)) } ?? .null,
        "created_at": note.createdAt.map(JSONValue.string) ?? .null,
        "expiration": note.expires == true ? note.expiration.map(JSONValue.string) ?? .null : .null,
    ]
    if let data { object["data"] = .object(data.jsonObject) }
    return try jsonLine(object)
}

/// Anonymous mode: key pairs from a file (never argv) and the server's URL.
struct AnonymousNoteOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "A JSON file with the key pairs to use instead of a registered client (see `client note --help`).",
            valueName: "file"))
    var anonymousKeys: String?

    @Option(help: "The server's base URL (anonymous mode; default: the key file's api_url).")
    var apiURL: String?

    /// The key pairs and the server, or nil when not anonymous (`config`: the --config given, refused here).
    func load(refusing config: String?) throws -> (keys: NoteKeyPairs, apiURL: String)? {
        guard let anonymousKeys else {
            if apiURL != nil { throw CLIError("--api-url goes with --anonymous-keys", exitCode: ExitStatus.usage) }
            return nil
        }
        if config != nil {
            throw CLIError("--config and --anonymous-keys exclude each other", exitCode: ExitStatus.usage)
        }
        let identity = try DocumentCLI.identity(anonymousKeys)
        guard let url = apiURL ?? identity.apiURL else {
            throw CLIError("anonymous mode needs --api-url (or an api_url in the key file)", exitCode: ExitStatus.usage)
        }
        do { return (try NoteKeyPairs(identity), url) } catch {
            throw CLIError(error, while: "reading the key pairs in \(CLIInput.display(anonymousKeys))")
        }
    }
}

/// Who a note is for: a registered client looked up on the server, or public keys given directly.
struct NoteRecipientOptions: ParsableArguments {
    @Option(help: "The recipient's client id (its public keys are looked up on the server).")
    var recipient: String?

    @Option(parsing: .unconditional, help: "The recipient's Curve25519 public key, base64url (instead of --recipient).")
    var recipientPublicKey: String?

    @Option(
        parsing: .unconditional, help: "The recipient's Ed25519 public key, base64url (with --recipient-public-key).")
    var recipientSigningKey: String?

    func validate() throws {
        guard (recipient == nil) != (recipientPublicKey == nil && recipientSigningKey == nil) else {
            throw ValidationError("give either --recipient or --recipient-public-key and --recipient-signing-key")
        }
        if recipient == nil, recipientPublicKey == nil || recipientSigningKey == nil {
            throw ValidationError("--recipient-public-key and --recipient-signing-key go together")
        }
    }

    /// The recipient's public keys (looked up through `client` for --recipient).
    func keys(_ client: E3DBClient?) async throws -> (Box.PublicKey, Ed25519.PublicKey) {
        if let publicKey = recipientPublicKey, let signingKey = recipientSigningKey {
            return (
                try DocumentCLI.boxPublicKey(publicKey, what: "reading --recipient-public-key"),
                try DocumentCLI.signingPublicKey(signingKey, what: "reading --recipient-signing-key")
            )
        }
        let recipientID = try parseUUID(recipient ?? "", what: "--recipient")
        guard let client else {
            throw CLIError(
                "anonymous mode takes the recipient's public keys, not --recipient", exitCode: ExitStatus.usage)
        }
        return try await libraryCall("looking up the recipient") {
            let info = try await client.clientInfo(recipientID)
            guard let signing = info.signingKey else {
                throw E3DBError(
                    .missingKey, "the recipient has no signing key, so it cannot read notes",
                    context: .init(field: "signing_key"))
            }
            return (
                try Box.PublicKey(base64URLEncoded: info.publicKey.curve25519),
                try Ed25519.PublicKey(base64URLEncoded: signing.ed25519)
            )
        }
    }
}

/// `--max-views` and `--expiration` of a note write or replace.
struct NoteLimitOptions: ParsableArguments {
    @Option(help: "Reads before the server deletes the note (default unlimited; -1 also means unlimited).")
    var maxViews: Int?

    @Option(help: "When the server stops serving the note, RFC 3339 UTC (e.g. 2030-01-01T00:00:00Z).")
    var expiration: String?

    func validate() throws {
        if let maxViews, maxViews < -1 { throw ValidationError("--max-views must be positive, 0 or -1") }
    }

    /// `--expiration` as a date.
    func expirationDate() throws -> Date? {
        guard let expiration else { return nil }
        guard let micros = APITimestamp.parse(expiration) else {
            throw CLIError(
                "--expiration must be an RFC 3339 time such as 2030-01-01T00:00:00Z", exitCode: ExitStatus.usage)
        }
        return Date(timeIntervalSince1970: Double(micros) / 1e6)
    }
}

struct ClientNoteWriteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write", abstract: "Write a note for a recipient; prints its note_id.")

    @OptionGroup var config: ClientConfigOptions
    @OptionGroup var anonymous: AnonymousNoteOptions
    @OptionGroup var recipient: NoteRecipientOptions
    @OptionGroup var limits: NoteLimitOptions

    @Option(help: "A global name to read the note by (kept for registered writers only).")
    var name: String?

    @Argument(help: "A file holding the note's fields as a JSON object of strings ('-' for stdin).")
    var data: String = "-"

    func run() async throws {
        let values = try DocumentCLI.recordData(data, what: "data")
        let expiration = try limits.expirationDate()
        let note: API.Note
        if case (let keys, let url)? = try anonymous.load(refusing: config.config) {
            let (publicKey, signingKey) = try await recipient.keys(nil)
            note = try await libraryCall("writing an anonymous note") {
                try await E3DBClient.writeAnonymousNote(
                    values, recipientEncryptionKey: publicKey, recipientSigningKey: signingKey, writer: keys,
                    apiURL: url, options: NoteOptions(name: name, maxViews: limits.maxViews, expiration: expiration),
                    transport: try config.connection.transport(for: url))
            }
        } else {
            let client = try config.client()
            let (publicKey, signingKey) = try await recipient.keys(client)
            note = try await libraryCall("writing a note") {
                try await client.writeNote(
                    values, recipientEncryptionKey: publicKey, recipientSigningKey: signingKey,
                    name: name, maxViews: limits.maxViews, expiration: expiration)
            }
        }
        try StandardOutput.line(noteLine(note, data: nil))
    }
}

struct ClientNoteReadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read", abstract: "Read a note addressed to you, by --id or --name; prints its fields.")

    @OptionGroup var config: ClientConfigOptions
    @OptionGroup var anonymous: AnonymousNoteOptions

    @Option(help: "The note id.")
    var id: String?

    @Option(help: "The note's name.")
    var name: String?

    @Option(parsing: .unconditional, help: "Require the note to be signed by this Ed25519 public key, base64url.")
    var writerSigningKey: String?

    func validate() throws {
        guard (id == nil) != (name == nil) else { throw ValidationError("give exactly one of --id and --name") }
    }

    func run() async throws {
        let noteID = try id.map { try parseUUID($0, what: "--id") }
        let expected = try writerSigningKey.map {
            try DocumentCLI.signingPublicKey($0, what: "reading --writer-signing-key")
        }
        let options = NoteDecryptionOptions(expectedWriterSigningKey: expected)
        let read: ClientNote
        if case (let keys, let url)? = try anonymous.load(refusing: config.config) {
            read = try await libraryCall("reading a note anonymously") {
                try await E3DBClient.readAnonymousNote(
                    id: noteID, name: name, reader: keys, apiURL: url,
                    options: options,
                    transport: try config.connection.transport(for: url))
            }
        } else {
            let client = try config.client()
            read = try await libraryCall("reading a note") {
                try await client.readNote(id: noteID, name: name, options: options)
            }
        }
        try StandardOutput.line(noteLine(read.note, data: read.data))
    }
}

struct ClientNoteReplaceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replace",
        abstract: "Replace the note with a name you wrote (or create it): new fields, new note_id; prints it.",
        discussion: """
            The new note keeps the current one's --max-views and --expiration unless you give them (--max-views -1 \
            for unlimited reads) or pass --reset-limits; its views start again at 0.
            """)

    @OptionGroup var config: ClientConfigOptions
    @OptionGroup var recipient: NoteRecipientOptions
    @OptionGroup var limits: NoteLimitOptions

    @Flag(help: "Limits you do not give become unlimited reads and no expiry, instead of the current note's.")
    var resetLimits = false

    @Option(help: "The note's name.")
    var name: String

    @Argument(help: "A file holding the note's new fields as a JSON object of strings ('-' for stdin).")
    var data: String = "-"

    func run() async throws {
        let values = try DocumentCLI.recordData(data, what: "data")
        let expiration = try limits.expirationDate()
        let client = try config.client()
        let (publicKey, signingKey) = try await recipient.keys(client)
        let note = try await libraryCall("replacing note \(name.prefix(80))") {
            try await client.replaceNote(
                named: name, with: values, recipientEncryptionKey: publicKey,
                recipientSigningKey: signingKey, maxViews: limits.maxViews,
                expiration: expiration, resettingLimits: resetLimits)
        }
        try StandardOutput.line(noteLine(note, data: nil))
    }
}

struct ClientNoteDeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete a note you wrote.")

    @OptionGroup var config: ClientConfigOptions

    @Argument(help: "The note id.")
    var noteID: String

    func run() async throws {
        let id = try parseUUID(noteID, what: "NOTE_ID")
        let client = try config.client()
        try await libraryCall("deleting a note") { try await client.deleteNote(id) }
        try printDeleted(id)
    }
}
