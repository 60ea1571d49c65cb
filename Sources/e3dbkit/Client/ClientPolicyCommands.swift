import ArgumentParser
import E3DBClient
import E3DBCommandLine
import E3DBKit
import Foundation

// The client commands for authorizers, the sharing listings, client lookup and access keys: one command per
// library call, printing the API's JSON (sorted keys) as one line, or one line per element for listings (NDJSON).

/// `e3dbkit client authorizer …`: who may share your records on your behalf.
struct ClientAuthorizerCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "authorizer",
        abstract: "Let another client share your records on your behalf: add, remove, list.",
        subcommands: [
            ClientAuthorizerAddCommand.self, ClientAuthorizerRemoveCommand.self, ClientAuthorizerListCommand.self,
        ]
    )
}

/// `--authorizer` of the authorizer commands.
struct AuthorizerOption: ParsableArguments {
    @OptionGroup var config: ClientConfigOptions

    @Option(help: "The authorizer's client id.")
    var authorizer: String
}

struct ClientAuthorizerAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Let an authorizer share your records of a type; prints the authorizer's key fingerprint.",
        discussion: """
            Your access key for the type is wrapped for the authorizer's public key (pinned on first use, as for \
            'client share'): compare "authorizer_fingerprint" with that client's 'client whoami' over another \
            channel. Adding again is not an error.
            """)

    @OptionGroup var options: AuthorizerOption

    @Option(help: "The record type.")
    var type: String

    func run() async throws {
        let authorizer = try parseUUID(options.authorizer, what: "--authorizer")
        let client = try options.config.client()
        let info = try await libraryCall("adding authorizer \(authorizer.lowercasedString) for \(type)") {
            let info = try await client.clientInfo(authorizer)
            try await client.addAuthorizer(authorizer, type: type)
            return info
        }
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "authorized": .string(type), "authorizer": .string(authorizer.lowercasedString),
                    "authorizer_fingerprint": .string(KnownKeys.fingerprint(base64URL: info.publicKey.curve25519)),
                ])))
    }
}

struct ClientAuthorizerRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Stop an authorizer sharing your records of a type (--type) or of every type (--all-types).",
        discussion: "The authorizer keeps what it already read; readers it shared with keep their access until revoked."
    )

    @OptionGroup var options: AuthorizerOption

    @Option(help: "The record type.")
    var type: String?

    @Flag(help: "Every record type at once.")
    var allTypes = false

    func validate() throws {
        guard (type != nil) != allTypes else {
            throw ValidationError("give exactly one of --type and --all-types")
        }
    }

    func run() async throws {
        let authorizer = try parseUUID(options.authorizer, what: "--authorizer")
        let client = try options.config.client()
        let id = JSONValue.string(authorizer.lowercasedString)
        if let type {
            try await libraryCall("removing authorizer \(authorizer.lowercasedString) for \(type)") {
                try await client.removeAuthorizer(authorizer, type: type)
            }
            try StandardOutput.line(CanonicalJSON.serialize(.object(["authorizer": id, "removed": .string(type)])))
        } else {
            try await libraryCall("removing authorizer \(authorizer.lowercasedString)") {
                try await client.removeAuthorizer(authorizer)
            }
            try StandardOutput.line(CanonicalJSON.serialize(.object(["authorizer": id, "removed_all_types": true])))
        }
    }
}

struct ClientAuthorizerListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "The authorizers you added; prints one {\"authorizer_id\":…,\"record_type\":…,…} line each (NDJSON).")

    @OptionGroup var config: ClientConfigOptions

    func run() async throws {
        let client = try config.client()
        try printLines(try await libraryCall("listing authorizers") { try await client.authorizers() })
    }
}

struct ClientAuthorizedByCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authorized-by",
        abstract: "The writers that made you their authorizer; one {\"authorized_by\":…,\"record_type\":…,…} line each."
    )

    @OptionGroup var config: ClientConfigOptions

    func run() async throws {
        let client = try config.client()
        try printLines(try await libraryCall("listing who authorized you") { try await client.authorizedBy() })
    }
}

/// `e3dbkit client sharing …`: the policy listings.
struct ClientSharingCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "sharing",
        abstract: "Who shares with you (incoming) and whom you share with (outgoing).",
        subcommands: [ClientSharingIncomingCommand.self, ClientSharingOutgoingCommand.self]
    )
}

struct ClientSharingIncomingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "incoming",
        abstract: "Writers sharing with you; one {\"record_type\":…,\"writer_id\":…,\"writer_name\":…} line each.")

    @OptionGroup var config: ClientConfigOptions

    func run() async throws {
        let client = try config.client()
        try printLines(try await libraryCall("listing incoming sharing") { try await client.incomingSharing() })
    }
}

struct ClientSharingOutgoingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outgoing",
        abstract: "Readers you share with; one {\"reader_id\":…,\"reader_name\":…,\"record_type\":…} line each.")

    @OptionGroup var config: ClientConfigOptions

    func run() async throws {
        let client = try config.client()
        try printLines(try await libraryCall("listing outgoing sharing") { try await client.outgoingSharing() })
    }
}

struct ClientInfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Look up a client: its public keys as the server gives them, and their fingerprints.",
        discussion: """
            The keys are checked against the ones pinned beside your credentials (refused, exit 2, when they \
            changed); compare "public_key_fingerprint" with that client's 'client whoami' over another channel.
            """)

    @OptionGroup var config: ClientConfigOptions

    @Argument(help: "The client id.")
    var clientID: String

    func run() async throws {
        let id = try parseUUID(clientID, what: "CLIENT_ID")
        let client = try config.client()
        let info = try await libraryCall("looking up client \(id.lowercasedString)") { try await client.clientInfo(id) }
        struct Line: Encodable {
            let info: API.ClientInfo
            enum Keys: String, CodingKey {
                case publicKeyFingerprint = "public_key_fingerprint"
                case signingKeyFingerprint = "public_signing_key_fingerprint"
            }
            func encode(to encoder: any Encoder) throws {
                try info.encode(to: encoder)
                var c = encoder.container(keyedBy: Keys.self)
                try c.encode(KnownKeys.fingerprint(base64URL: info.publicKey.curve25519), forKey: .publicKeyFingerprint)
                if let signing = info.signingKey?.ed25519 {
                    try c.encode(KnownKeys.fingerprint(base64URL: signing), forKey: .signingKeyFingerprint)
                }
            }
        }
        try StandardOutput.line(jsonLine(Line(info: info)))
    }
}

/// `e3dbkit client key …`: the access keys the server holds for you, as EAKInfo.
struct ClientKeyCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Fetch an access key as EAKInfo JSON, for 'e3dbkit record encrypt|decrypt --eak-info'.",
        discussion: """
            The EAKInfo holds the access key wrapped for your public key (only your private key opens it), so it \
            may be stored. 'key writer' creates the type's key on first use, as 'client write' would.
            """,
        subcommands: [ClientKeyWriterCommand.self, ClientKeyReaderCommand.self]
    )
}

struct ClientKeyWriterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "writer", abstract: "Your writer key for a record type, as EAKInfo JSON.")

    @OptionGroup var config: ClientConfigOptions

    @Option(help: "The record type.")
    var type: String

    func run() async throws {
        let client = try config.client()
        let info = try await libraryCall("fetching the writer key for \(type)") {
            try await client.writerKey(type: type)
        }
        try StandardOutput.line(info.jsonData())
    }
}

struct ClientKeyReaderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reader",
        abstract: "The reader key for a writer's records of a type shared with you, as EAKInfo JSON.")

    @OptionGroup var config: ClientConfigOptions

    @Option(help: "The writer's client id.")
    var writer: String

    @Option(help: "The user the records are about (default: the writer).")
    var user: String?

    @Option(help: "The record type.")
    var type: String

    func run() async throws {
        let writerID = try parseUUID(writer, what: "--writer")
        let userID = try user.map { try parseUUID($0, what: "--user") }
        let client = try config.client()
        let info = try await libraryCall("fetching the reader key for \(type)") {
            try await client.readerKey(writer: writerID, user: userID, type: type)
        }
        try StandardOutput.line(info.jsonData())
    }
}

/// One JSON line per element (NDJSON), as the listings print them.
func printLines(_ elements: [some Encodable]) throws {
    for element in elements { try StandardOutput.line(jsonLine(element)) }
}
