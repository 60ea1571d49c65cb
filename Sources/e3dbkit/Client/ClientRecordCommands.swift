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

    @Flag(help: "Decrypt and print the data (otherwise metadata only, data {}).")
    var includeData = false

    @Flag(help: "Every record you may read, not only your own.")
    var allWriters = false

    func run() async throws {
        let client = try config.client(allowUnsigned: unsigned.allowUnsigned)
        let writers = try writer.map { try parseUUID($0, what: "--writer") }
        let query = RecordQuery(types: type, writers: writers, includeAllWriters: allWriters, includeData: includeData)
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
            if let plainValues {
                var map: [String: String] = [:]
                for (k, v) in plainValues { map[k] = v }
                current.meta.plain = map
            }
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
        let client = try options.config.client()
        let info = try await libraryCall("sharing \(options.type)") {
            let info = try await client.clientInfo(reader)
            try await client.share(type: options.type, with: reader)
            return info
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "shared": .string(options.type), "reader": .string(reader.lowercasedString),
                    "reader_fingerprint": .string(KnownKeys.fingerprint(base64URL: info.publicKey.curve25519)),
                ])))
    }
}

struct ClientRevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "Stop sharing your records of a type with a reader.")

    @OptionGroup var options: ShareOptions

    func run() async throws {
        let reader = try parseUUID(options.reader, what: "--reader")
        let client = try options.config.client()
        try await libraryCall("revoking \(options.type)") { try await client.revoke(type: options.type, from: reader) }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "revoked": .string(options.type), "reader": .string(reader.lowercasedString),
                ])))
    }
}
