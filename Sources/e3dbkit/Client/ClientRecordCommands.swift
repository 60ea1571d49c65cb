import ArgumentParser
import E3DBClient
import E3DBCommandLine
import E3DBKit
import Foundation

struct ClientWriteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "write", abstract: "Encrypt and write a record; prints it, decrypted, as {\"meta\":…,\"data\":…}.")

    @OptionGroup var config: ClientConfigOptions

    @Option(help: "The record type.")
    var type: String

    @Option(help: "A file holding a JSON object of strings for meta.plain ('-' for stdin).")
    var plain: String?

    @Argument(help: "A file holding the data as a JSON object of strings ('-' for stdin).")
    var data: String = "-"

    func run() async throws {
        let client = try config.client()
        let values = try DocumentCLI.recordData(data, what: "data")
        let plainValues = try plain.map { try DocumentCLI.recordData($0, what: "plain") } ?? RecordData()
        try await printRecord("writing a \(type) record") {
            try await client.write(type: type, data: values, plain: plainValues)
        }
    }
}

struct ClientReadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "read",
        abstract: "Read and decrypt a record; prints {\"data\":…,\"meta\":…,\"signature_status\":…}.")

    @OptionGroup var config: ClientConfigOptions

    @OptionGroup var unsigned: AllowUnsignedFlag

    @Option(help: "Only this field (repeatable).")
    var field: [String] = []

    @Argument(help: "The record id.")
    var recordID: String

    func run() async throws {
        let id = try parseUUID(recordID, what: "RECORD_ID")
        let client = try config.client(allowUnsigned: unsigned.allowUnsigned)
        try await printRecord("reading record \(id.lowercasedString)") {
            try await client.read(id, fields: field.isEmpty ? nil : field)
        }
    }
}

struct ClientQueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "Query records; prints one {\"data\":…,\"meta\":…,\"signature_status\":…} line per record (NDJSON).")

    @OptionGroup var config: ClientConfigOptions

    @OptionGroup var unsigned: AllowUnsignedFlag

    @Option(help: "Only this record type (repeatable).")
    var type: [String] = []

    @Option(help: "Only this writer (repeatable; records it shared with you included).")
    var writer: [String] = []

    @Flag(
        help: ArgumentHelp(
            "Decrypt, verify and print the data (otherwise metadata only, data {}).",
            discussion: "Off by default, unlike the library's RecordQuery: see docs/client.md, 'Trust'."))
    var includeData = false

    @Flag(help: "Every record you may read, not only your own.")
    var allWriters = false

    @Option(help: "Only records about this user id (repeatable).")
    var user: [String] = []

    @Option(help: "Only this record id (repeatable).")
    var recordID: [String] = []

    @Option(
        help: ArgumentHelp(
            "A file holding a plain metadata filter as JSON ('-' for stdin).",
            discussion: "{\"eq\":{\"name\":N,\"value\":V}}, {\"and\":[…]}, {\"or\":[…]}, {\"not\":…}, or a flat "
                + "object of strings, read as the AND of its equalities (as the Go SDK's map)."))
    var plain: String?

    @Option(help: "Start after this index (the last_index of an earlier page; 0, the default, from the start).")
    var after: Int64 = 0

    @Option(help: "Records per request to the server (default 100); every page is read either way.")
    var pageSize = 100

    func validate() throws {
        if after < 0 { throw ValidationError("--after must not be negative") }
        if !(1...1000).contains(pageSize) {
            throw ValidationError("--page-size must be from 1 to 1000")
        }
    }

    func run() async throws {
        let writers = try writer.map { try parseUUID($0, what: "--writer") }
        let users = try user.map { try parseUUID($0, what: "--user") }
        let recordIDs = try recordID.map { try parseUUID($0, what: "--record-id") }
        var plainFilter: API.PlainQuery?
        if let plain {
            let data = try CLIIO.readAll(plain, what: "plain filter")
            do { plainFilter = try API.decodeChecked(API.PlainQuery.self, from: data) } catch {
                throw CLIError(
                    "the plain filter \(CLIInput.display(plain)) is not a filter: \(error)",
                    exitCode: ExitStatus.dataError)
            }
        }
        let client = try config.client(allowUnsigned: unsigned.allowUnsigned)
        let query = RecordQuery(
            types: type, writers: writers, users: users, recordIDs: recordIDs, includeAllWriters: allWriters,
            includeData: includeData, plain: plainFilter, pageSize: pageSize, afterIndex: after)
        try await libraryCall("querying") {
            for try await record in client.query(query) { try StandardOutput.line(recordLine(record)) }
        }
    }
}

struct ClientUpdateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Replace a record's data if its version is still VERSION; prints the updated record.")

    @OptionGroup var config: ClientConfigOptions

    @OptionGroup var unsigned: AllowUnsignedFlag

    @Option(help: "The version the update is based on (409, exit 1, when someone updated it first).")
    var version: String

    @Option(help: "A file holding a JSON object of strings for meta.plain ('-' for stdin).")
    var plain: String?

    @Argument(help: "The record id.")
    var recordID: String

    @Argument(help: "A file holding the new data as a JSON object of strings ('-' for stdin).")
    var data: String = "-"

    func run() async throws {
        let id = try parseUUID(recordID, what: "RECORD_ID")
        let client = try config.client(allowUnsigned: unsigned.allowUnsigned)
        let values = try DocumentCLI.recordData(data, what: "data")
        let plainValues = try plain.map { try DocumentCLI.recordData($0, what: "plain") }
        try await printRecord("updating record \(id.lowercasedString)") {
            var current = try await client.read(id)
            current.meta.version = version
            current.data = values
            if let plainValues { current.meta.plain = plainValues }
            return try await client.update(current)
        }
    }
}

struct ClientDeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete a record if its version is still VERSION; prints {\"deleted\":ID}.")

    @OptionGroup var config: ClientConfigOptions

    @Option(help: "The record's current version.")
    var version: String

    @Argument(help: "The record id.")
    var recordID: String

    func run() async throws {
        let id = try parseUUID(recordID, what: "RECORD_ID")
        let client = try config.client()
        try await libraryCall("deleting record \(id.lowercasedString)") {
            try await client.delete(id, version: version)
        }
        try printDeleted(id)
    }
}

/// `--type` and `--reader` of share and revoke.
struct ShareOptions: ParsableArguments {
    @OptionGroup var config: ClientConfigOptions

    @Option(help: "The record type.")
    var type: String

    @Option(help: "The reader's client id.")
    var reader: String

    @Option(
        help: ArgumentHelp(
            "As an authorizer of this writer ('client authorizer add'), its records instead of yours.",
            valueName: "writer-id"))
    var onBehalfOf: String?

    /// The writer of --on-behalf-of, or nil for your own records.
    func writer() throws -> UUID? { try onBehalfOf.map { try parseUUID($0, what: "--on-behalf-of") } }

    /// What share and revoke print: the type under `verb`, the reader, and the writer acted for.
    func output(_ verb: String, reader: UUID, writer: UUID?) -> [String: JSONValue] {
        var out: [String: JSONValue] = [verb: .string(type), "reader": .string(reader.lowercasedString)]
        if let writer { out["on_behalf_of"] = .string(writer.lowercasedString) }
        return out
    }
}

struct ClientShareCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Share your records of a type with a reader; prints the reader's key fingerprint.",
        discussion: """
            The access key is wrapped for the public key the server gives for the reader, pinned on first use. \
            Compare "reader_fingerprint" with the reader's own (e3dbkit client whoami prints it) over another \
            channel: a server that substituted its own key would read what is shared. A fingerprint is the first \
            16 bytes of the SHA-256 of the raw Curve25519 key, in hex, in groups of four digits.
            """)

    @OptionGroup var options: ShareOptions

    func run() async throws {
        let reader = try parseUUID(options.reader, what: "--reader")
        let writer = try options.writer()
        let client = try options.config.client()
        let info = try await libraryCall("sharing \(options.type)") {
            let info = try await client.clientInfo(reader)
            if let writer {
                try await client.share(onBehalfOf: writer, type: options.type, with: reader)
            } else {
                try await client.share(type: options.type, with: reader)
            }
            return info
        }
        var out = options.output("shared", reader: reader, writer: writer)
        out["reader_fingerprint"] = .string(KnownKeys.fingerprint(base64URL: info.publicKey.curve25519))
        try StandardOutput.line(CanonicalJSON.serialize(.object(JSONObject(out))))
    }
}

struct ClientRevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "Stop sharing your records of a type with a reader.")

    @OptionGroup var options: ShareOptions

    func run() async throws {
        let reader = try parseUUID(options.reader, what: "--reader")
        let writer = try options.writer()
        let client = try options.config.client()
        try await libraryCall("revoking \(options.type)") {
            if let writer {
                try await client.revoke(onBehalfOf: writer, type: options.type, from: reader)
            } else {
                try await client.revoke(type: options.type, from: reader)
            }
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(.object(JSONObject(options.output("revoked", reader: reader, writer: writer)))))
    }
}
