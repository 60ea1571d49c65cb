import ArgumentParser
import E3DBCommandLine
import E3DBKit
import E3DBStore
import Foundation

/// `e3dbkit store identity …`: the E3DB client identities enrolled to open a store.
struct StoreIdentityCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "identity",
        abstract: "Enroll, remove and list the E3DB client identities that open a store.",
        discussion: """
            An enrolled identity holds the store's master key wrapped for its Curve25519 public key (an EAK whose \\
            authorizer is the store's own key pair); its private key then opens the store with --identity FILE. \\
            The passphrase or key, and other identities, keep working. Removing an identity does not change the \\
            master key. See docs/store.md.
            """,
        subcommands: [StoreIdentityAddCommand.self, StoreIdentityRemoveCommand.self, StoreIdentityListCommand.self]
    )
}

/// The identity an `add` or `remove` is about: a client identity file (only its public part is used) or a key.
struct EnrolledIdentityOptions: ParsableArguments {
    @Option(
        name: .customLong("client"), help: "The client's identity JSON file (its public key and client_id are used).")
    var clientIdentity: String?

    @Option(parsing: .unconditional, help: "The client's Curve25519 public key, base64url (instead of --client).")
    var publicKey: String?

    func validate() throws {
        if (clientIdentity == nil) == (publicKey == nil) {
            throw ValidationError("pass exactly one of --client and --public-key")
        }
    }

    /// The public key and, from an identity file, the client id.
    func resolve() throws -> (publicKey: Box.PublicKey, clientID: UUID?) {
        if let publicKey { return (try DocumentCLI.boxPublicKey(publicKey, what: "reading --public-key"), nil) }
        let identity = try DocumentCLI.identity(clientIdentity ?? "")
        return (identity.publicKey, identity.clientID)
    }
}

/// One identity as printed by the identity commands.
func identityJSON(_ identity: StoreIdentity) -> JSONValue {
    .object([
        "client_id": identity.clientID.map { .string($0.lowercasedString) } ?? .null,
        "public_key": .string(identity.publicKey.base64URLEncoded),
    ])
}

struct StoreIdentityAddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Enroll an identity; prints {\"client_id\":…,\"public_key\":…}.")

    @OptionGroup var keys: StoreKeyOptions
    @OptionGroup var enrolled: EnrolledIdentityOptions

    @Option(help: "The client id to record with --public-key.")
    var clientID: String?

    func run() throws {
        var (publicKey, clientID) = try enrolled.resolve()
        if let text = self.clientID {
            guard let id = UUID(uuidString: text) else {
                throw CLIError("\(text) is not a client id (a UUID)", exitCode: ExitStatus.usage)
            }
            clientID = id
        }
        let store = try keys.open()
        let identity = try libraryCall("enrolling an identity in \(keys.store)") {
            try store.addIdentity(publicKey: publicKey, clientID: clientID)
        }
        try StandardOutput.line(CanonicalJSON.serialize(identityJSON(identity)))
    }
}

struct StoreIdentityRemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove an identity's enrollment (refused for the last way to open a store without a passphrase).")

    @OptionGroup var keys: StoreKeyOptions
    @OptionGroup var enrolled: EnrolledIdentityOptions

    func run() throws {
        let publicKey = try enrolled.resolve().publicKey
        let store = try keys.open()
        try libraryCall("removing an identity from \(keys.store)") { try store.removeIdentity(publicKey: publicKey) }
    }
}

struct StoreIdentityListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Print the enrolled identities as NDJSON ({\"client_id\":…,\"public_key\":…}).")

    @OptionGroup var keys: StoreKeyOptions

    func run() throws {
        let store = try keys.open()
        let identities = try libraryCall("listing the identities of \(keys.store)") { try store.identities() }
        for identity in identities { try StandardOutput.line(CanonicalJSON.serialize(identityJSON(identity))) }
    }
}
