import ArgumentParser
import E3DBCommandLine
import E3DBKit
import Foundation

/// Shared input helpers for the key, record, note and signing commands.
enum DocumentCLI {
    /// Reads an identity JSON file (a secret) into a ``ClientIdentity``.
    static func identity(_ path: String) throws -> ClientIdentity {
        let secret = try CLIIO.readSecret(path, what: "identity")
        do {
            return try unsafe secret.withUnsafeBytes { (raw) throws(E3DBError) in
                try unsafe ClientIdentity(configJSON: raw)
            }
        } catch {
            throw CLIError(error, while: "reading identity \(path)")
        }
    }

    /// Reads an EAKInfo JSON file.
    static func eakInfo(_ path: String, lenient: Bool = false) throws -> EAKInfo {
        do {
            return try EAKInfo(jsonData: CLIIO.readAll(path, what: "EAKInfo"), decoding: lenient ? .lenient : .strict)
        } catch let error as E3DBError {
            throw CLIError(error, while: "reading EAKInfo \(path)")
        }
    }

    /// Reads a JSON object of strings (record data or plain).
    static func recordData(_ path: String, what: String) throws -> RecordData {
        let value: JSONValue
        do {
            value = try CanonicalJSON.parse(CLIIO.readAll(path, what: what))
        } catch let error as CanonicalJSONError {
            throw CLIError("\(what) \(path) is not valid JSON: \(error)", exitCode: ExitStatus.dataError)
        }
        do {
            return try RecordData(jsonValue: value, what: what)
        } catch {
            throw CLIError(error, while: "reading \(what) \(path)")
        }
    }

    static func boxPublicKey(_ text: String, what: String) throws -> Box.PublicKey {
        do { return try Box.PublicKey(base64URLEncoded: text) } catch { throw CLIError(error, while: what) }
    }

    static func signingPublicKey(_ text: String, what: String) throws -> Ed25519.PublicKey {
        do { return try Ed25519.PublicKey(base64URLEncoded: text) } catch { throw CLIError(error, while: what) }
    }

    /// Reads an access key file: base64url (43 characters, surrounding whitespace ignored) straight into wiped
    /// storage. The message on failure never shows a byte of the file.
    static func accessKey(_ path: String) throws -> AccessKey {
        let bytes = try keyFile(path, what: "access key file", key: "access key")
        do { return try AccessKey(bytes) } catch { throw CLIError(error, while: "reading \(path)") }
    }

    /// Reads a file holding a 32-byte key as base64url into wiped storage; the error names the file, never a byte.
    static func keyFile(_ path: String, what: String, key: String) throws -> SecureBytes {
        let secret = try CLIIO.readSecret(path, what: what)
        let decoded: SecureBytes
        do {
            decoded = try unsafe secret.withUnsafeBytes { (raw) throws(E3DBError) in
                try unsafe Base64URL.decodeSecret(utf8: raw.assumingMemoryBound(to: UInt8.self))
            }
        } catch {
            throw CLIError(
                "the \(what) \(CLIInput.display(path)) does not hold a 32-byte \(key) in base64url (\(error.code))",
                exitCode: ExitStatus.dataError)
        }
        guard decoded.count == 32 else {
            throw CLIError(
                "the \(what) \(CLIInput.display(path)) does not hold a 32-byte \(key) in base64url (invalidKeyLength)",
                exitCode: ExitStatus.dataError)
        }
        return decoded
    }

    static func output(_ text: String) throws { try StandardOutput.line(text) }
}

/// `eak wrap --shape` values.
enum ShapeOption: String, ExpressibleByArgument, CaseIterable {
    case api
    case java
}

/// Key order option shared by the signing commands.
enum OrderOption: String, ExpressibleByArgument, CaseIterable {
    case utf16
    case js
    var keyOrder: KeyOrder { self == .js ? .javaScript : .utf16 }
}

/// `e3dbkit keygen`: a new client identity.
struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Create a client identity (Curve25519 and Ed25519 key pairs) as credential JSON.",
        discussion: """
            Writes the JSON credential file the js-sdk, Go and Python SDKs read (client_id, public_key, \
            private_key, public_signing_key, private_signing_key, version). The file is created with mode 0600 \
            and is never overwritten unless --force is given. Use '-' to write to stdout.
            """
    )

    @Option(name: .shortAndLong, help: "Output file ('-' for stdout).")
    var out: String

    @Option(help: "The client ID (a UUID) to record in the file.")
    var clientID: String?

    @Flag(help: "Overwrite an existing file.")
    var force = false

    func run() throws {
        var id: UUID?
        if let clientID {
            guard let parsed = UUID(uuidString: clientID) else {
                throw CLIError("--client-id is not a UUID", exitCode: ExitStatus.usage)
            }
            id = parsed
        }
        let identity = ClientIdentity.generate(clientID: id)
        try CLIIO.writeSecret(identity.configJSON(), to: out, overwrite: force)
    }
}

/// `e3dbkit eak …`: wrap, unwrap and share access keys.
struct EAKCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "eak",
        abstract: "Wrap, unwrap and re-share E3DB access keys (EAKInfo JSON).",
        subcommands: [EAKWrapCommand.self, EAKUnwrapCommand.self, EAKShareCommand.self]
    )
}

/// `e3dbkit eak wrap`: wraps an access key (new or from a file) for a reader and prints its EAKInfo.
struct EAKWrapCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wrap",
        abstract: "Wrap an access key for a reader (default: for yourself) and print the EAKInfo JSON.",
        discussion: """
            Without --access-key a new random access key is created (a writer key). The identity is the \
            authorizer and, when it has a signing key, the signer. The access key file holds the 43-character \
            base64url key; it is read from a file or stdin, never from the command line.
            """
    )

    @Option(help: "The authorizer's identity JSON file ('-' for stdin).")
    var identity: String

    @Option(help: "A file holding the base64url access key to wrap (default: a new random key).")
    var accessKey: String?

    @Option(
        parsing: .unconditional,
        help: "The reader's Curve25519 public key, base64url (default: the identity's own key).")
    var readerPublicKey: String?

    @Option(help: "EAKInfo shape to write: api (default) or java.")
    var shape: ShapeOption = .api

    func run() throws {
        try libraryCall("wrapping the access key") {
            let me = try DocumentCLI.identity(identity)
            let id = try me.requireClientID()
            let ak: AccessKey
            if let accessKey {
                ak = try DocumentCLI.accessKey(accessKey)
            } else {
                ak = AccessKey()
            }
            let reader = try readerPublicKey.map {
                try DocumentCLI.boxPublicKey($0, what: "reading --reader-public-key")
            }
            let eak = try EncryptedAccessKey.wrap(ak, for: reader ?? me.publicKey, by: me.boxKey)
            let info = EAKInfo(
                eak: eak, authorizerID: id, authorizerPublicKey: me.publicKey,
                signerID: me.signingKey == nil ? nil : id, signerSigningKey: me.publicSigningKey)
            try StandardOutput.line(info.jsonData(shape: shape == .java ? .javaFlat : .api))
        }
    }
}

/// `e3dbkit eak unwrap`: prints the access key of an EAKInfo (a secret) to a 0600 file or stdout.
struct EAKUnwrapCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unwrap",
        abstract: "Unwrap an EAKInfo and write the base64url access key.",
        discussion: "Exit codes: 0 success; 2 the EAK does not open with this identity; 65 malformed input."
    )

    @Option(help: "The reader's identity JSON file.")
    var identity: String

    @Argument(help: "The EAKInfo JSON file ('-' for stdin).")
    var eakInfo: String = "-"

    @Option(name: .shortAndLong, help: "Output file for the access key (mode 0600; '-' for stdout).")
    var out: String = "-"

    @Flag(help: "Replace an existing output file (or symlink).")
    var force = false

    @Flag(help: "Accept padded or standard-alphabet base64 in the EAK.")
    var lenient = false

    func run() throws {
        try libraryCall("unwrapping the access key") {
            let me = try DocumentCLI.identity(identity)
            let info = try DocumentCLI.eakInfo(eakInfo, lenient: lenient)
            let ak = try info.unwrap(with: me.boxKey)
            try CLIIO.writeSecret(Data((ak.base64URLEncoded + "\n").utf8), to: out, overwrite: force)
        }
    }
}

/// `e3dbkit eak share`: re-wraps an EAKInfo's access key for another reader.
struct EAKShareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Re-wrap the access key of an EAKInfo you can open for another reader (local sharing).",
        discussion: "Exit codes: 0 success; 2 the EAK does not open with this identity; 65 malformed input."
    )

    @Option(help: "Your identity JSON file (you must be the reader of the EAKInfo).")
    var identity: String

    @Option(parsing: .unconditional, help: "The new reader's Curve25519 public key, base64url.")
    var readerPublicKey: String

    @Argument(help: "The EAKInfo JSON file ('-' for stdin).")
    var eakInfo: String = "-"

    func run() throws {
        try libraryCall("sharing the access key") {
            let me = try DocumentCLI.identity(identity)
            let info = try DocumentCLI.eakInfo(eakInfo)
            let reader = try DocumentCLI.boxPublicKey(readerPublicKey, what: "reading --reader-public-key")
            try StandardOutput.line(try info.share(with: reader, as: me).jsonData())
        }
    }
}
