import ArgumentParser
import E3DBClient
import E3DBCommandLine
import E3DBKit
import Foundation

/// `e3dbkit client …`: the E3DB client against any E3DB API server.
struct ClientCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "client",
        abstract: "Talk to an E3DB API server: "
            + subcommandList.map { $0.configuration.commandName ?? "" }.joined(separator: ", ") + ".",
        discussion: """
            --config takes a credential file (the JSON the other SDKs read and write) or a profile name, read from \
            ~/.tozny/<profile>/e3db.json as the Go CLI keeps them; without --config, the profile named by \
            E3DB_PROFILE, else ~/.tozny/e3db.json. Every command prints JSON on standard output.

            Other clients' public keys are pinned on first use in a file beside the credentials (e3db.json's is \
            e3db.known-keys.json); a key the server later gives otherwise is refused (exit 2) with both \
            fingerprints, until --accept-new-key CLIENT_ID=FINGERPRINT accepts it (the new key's fingerprint, \
            checked with that client over another channel). read and query require rec_sig, verified \
            against the writer's registered signing key, and print "signature_status"; --allow-unsigned accepts \
            unsigned records, as the Python and Go SDKs write them.

            TLS and proxies, on every command: --ca-file PEM (or E3DBKIT_CA_FILE) trusts a private CA instead of \
            the system's; --pin-sha256 BASE64 (repeatable) accepts only a server key with that SHA-256 of its \
            SubjectPublicKeyInfo (both for https URLs only; with an http URL they are refused). \
            HTTPS_PROXY/https_proxy (https URLs) and http_proxy (http URLs; never HTTP_PROXY) name \
            an http:// proxy, used with CONNECT; NO_PROXY lists hosts to reach directly (names cover their \
            subdomains, addresses and IPv4 CIDR ranges, name:port, * for all).
            """,
        subcommands: subcommandList
    )

    /// Every subcommand, in the order `--help` lists them; the abstract names them from this list.
    static let subcommandList: [any ParsableCommand.Type] = [
        ClientRegisterCommand.self, ClientWhoamiCommand.self, ClientInfoCommand.self, ClientWriteCommand.self,
        ClientReadCommand.self, ClientQueryCommand.self, ClientSearchCommand.self, ClientUpdateCommand.self,
        ClientDeleteCommand.self, ClientShareCommand.self, ClientRevokeCommand.self, ClientSharingCommand.self,
        ClientAuthorizerCommand.self, ClientAuthorizedByCommand.self, ClientKeyCommand.self, ClientFileCommand.self,
        ClientNoteCommand.self,
    ]
}

/// Where the client's credentials come from.
struct ClientConfigOptions: ParsableArguments {
    @Option(help: "A credential file, or a profile name (~/.tozny/<profile>/e3db.json).")
    var config: String?

    @Option(
        help: ArgumentHelp(
            "Accept and pin a changed key of this client id if its fingerprint is this one (repeatable).",
            discussion: "FINGERPRINT is the one that client's `client whoami` prints (public_key_fingerprint, or "
                + "public_signing_key_fingerprint when its signing key changed), checked with it over another channel. "
                + "Every key that changed must be matched; a changed key is otherwise refused.",
            valueName: "client-id=fingerprint"))
    var acceptNewKey: [String] = []

    @OptionGroup var connection: ClientConnectionOptions

    /// The credential file's path.
    var path: String {
        let home =
            ProcessInfo.processInfo.environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? FileManager.default.homeDirectoryForCurrentUser.path
        let name = config ?? ProcessInfo.processInfo.environment["E3DB_PROFILE"].flatMap { $0.isEmpty ? nil : $0 }
        guard let name else { return home + "/.tozny/e3db.json" }
        if name.contains("/") || name.hasSuffix(".json") || name == "-" || FileManager.default.fileExists(atPath: name)
        {
            return name
        }
        return home + "/.tozny/\(name)/e3db.json"
    }

    /// The known-keys file beside the credential file: `NAME.json` keeps them in `NAME.known-keys.json`.
    var knownKeysPath: String? {
        let credentials = path
        if credentials == "-" { return nil }
        return (credentials.hasSuffix(".json") ? String(credentials.dropLast(5)) : credentials) + ".known-keys.json"
    }

    /// The client for these credentials; `allowUnsigned` accepts records without rec_sig; `fileOrigins` are the
    /// origins besides the API's that file bodies may go to and come from (checked by ``FileOriginOptions``).
    func client(allowUnsigned: Bool = false, fileOrigins: Set<String> = []) throws -> E3DBClient {
        let identity = try DocumentCLI.identity(path)
        var accepted: [UUID: Set<String>] = [:]
        for text in acceptNewKey {
            let (id, fingerprint) = try parseAcceptedKey(text)
            accepted[id, default: []].insert(fingerprint)
        }
        var keys = KnownKeys(acceptingChangesOf: accepted)
        if let knownKeysPath {
            do { keys = try KnownKeys(path: knownKeysPath, acceptingChangesOf: accepted) } catch {
                throw CLIError(error, while: "reading the known keys beside \(CLIInput.display(path))")
            }
        }
        let transport = try connection.transport(for: identity.apiURL ?? ClientIdentity.defaultAPIURL)
        do {
            return try E3DBClient(
                identity: identity, transport: transport,
                verification: RecordVerification(
                    policy: allowUnsigned ? .verifyIfPresent : .required), knownKeys: keys, fileOrigins: fileOrigins)
        } catch {
            throw CLIError(error, while: "reading the credentials in \(CLIInput.display(path))")
        }
    }
}

/// `--allow-unsigned` of the commands that read records.
struct AllowUnsignedFlag: ParsableArguments {
    @Flag(
        help: ArgumentHelp(
            "Accept records without rec_sig, as the Python and Go SDKs write them (signature_status \"absent\").",
            discussion: "Without it an unsigned record is refused (exit 2): e3dbkit signs every record it writes, and "
                + "a server could remove rec_sig to change plain or mix fields. A rec_sig that is present must verify "
                + "either way."))
    var allowUnsigned = false
}

/// The record commands' one scaffold after parsing: runs the client call (a library error becomes the one-line
/// error naming `doing`) and prints the record it returns as one line (``recordLine(_:)``).
func printRecord(_ doing: String, _ call: () async throws -> ClientRecord) async throws {
    try StandardOutput.line(recordLine(try await libraryCall(doing, call)))
}

/// `{"deleted":"ID"}`, what the delete commands print.
func printDeleted(_ id: UUID) throws {
    try StandardOutput.line("{\"deleted\":\"\(id.lowercasedString)\"}")
}

/// `{"data":…,"meta":…,"signature_status":…}` of a record (data as a JSON object of strings), one line.
func recordLine(_ record: ClientRecord) throws -> String { try jsonLine(recordValue(record)) }

/// A record as the client commands print it: `meta` and `data` as the record writer writes them
/// (`API.Record.jsonData()`, read back as a `JSONValue` so names distinct by code units stay apart), and
/// `signature_status`, what was verified of rec_sig: verified, absent (accepted with --allow-unsigned) or
/// not-checked (metadata only, file records).
func recordValue(_ record: ClientRecord) throws -> JSONValue {
    let written = API.Record(meta: record.meta, data: record.data).jsonData()
    guard case .object(var object) = try? CanonicalJSON.parse(written) else {
        // A file size beyond 2^53 is the one member the strict parser would not read back exactly.
        throw E3DBError(.invalidParameter, "the record \(record.meta.recordID ?? "") cannot be printed as JSON")
    }
    object["signature_status"] = .string((record.signatureStatus ?? .notChecked).rawValue)
    return .object(object)
}

/// `value` as one line of JSON with sorted keys, as every client command prints it.
func jsonLine(_ value: some Encodable) throws -> String {
    String(decoding: try JSONEncoders.sorted().encode(value), as: UTF8.self)
}

/// `CLIENT_ID=FINGERPRINT` of `--accept-new-key`: a UUID and a fingerprint as ``KnownKeys/fingerprint(_:)`` prints
/// it (eight groups of four hex digits joined by `:`).
func parseAcceptedKey(_ text: String) throws -> (UUID, String) {
    let usage = CLIError(
        "--accept-new-key takes CLIENT_ID=FINGERPRINT (the fingerprint that client's whoami prints, "
            + "xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx)", exitCode: ExitStatus.usage)
    guard let equals = text.firstIndex(of: "=") else { throw usage }
    let id = try parseUUID(String(text[..<equals]), what: "--accept-new-key's CLIENT_ID")
    let fingerprint = text[text.index(after: equals)...].lowercased()
    let groups = fingerprint.split(separator: ":", omittingEmptySubsequences: false)
    guard groups.count == 8, groups.allSatisfy({ $0.count == 4 && $0.allSatisfy(\.isHexDigit) }) else { throw usage }
    return (id, fingerprint)
}

func parseUUID(_ text: String, what: String) throws -> UUID {
    guard let id = UUID(uuidString: text) else {
        throw CLIError("\(what) must be a UUID", exitCode: ExitStatus.usage)
    }
    return id
}

struct ClientRegisterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Register a new client and write its credentials (mode 0600); prints its public details.")

    @Option(help: "The server's base URL.")
    var apiURL: String

    @Option(help: "A file holding the registration token ('-' for stdin).")
    var tokenFile: String

    @Option(help: "The client's name.")
    var name: String

    @Option(help: "Where to write the credential file (refuses to replace one without --force).")
    var out: String

    @Flag(help: "Back the credentials up to the account's backup client, as the other SDKs' backup option does.")
    var backup = false

    @Flag(help: "Replace an existing credential file.")
    var force = false

    @OptionGroup var connection: ClientConnectionOptions

    func run() async throws {
        let transport = try connection.transport(for: apiURL)
        let tokenBytes = try CLIInput.readSecret(tokenFile, what: "registration token")
        let token = unsafe tokenBytes.withUnsafeBytes { unsafe String(decoding: $0, as: UTF8.self) }
        try OutputFile.refuseExisting(out, force: force)
        let identity = try await libraryCall("registering with \(apiURL)") {
            try await E3DBClient.register(
                token: token, name: name, apiURL: apiURL, backup: backup, transport: transport)
        }
        try OutputFile.write(identity.configJSON(), to: out, mode: 0o600, force: force)
        try StandardOutput.line(
            CanonicalJSON.serialize(
                .object([
                    "client_id": .string(identity.clientID?.lowercasedString ?? ""),
                    "public_key": .string(identity.publicKey.base64URLEncoded),
                    "public_signing_key": .string(identity.publicSigningKey?.base64URLEncoded ?? ""),
                    "api_url": .string(apiURL), "config": .string(out),
                ])))
    }
}

struct ClientWhoamiCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "whoami",
        abstract: "Print this client's id, public keys and their fingerprints (from the credentials; no server call).",
        discussion: """
            Give your "public_key_fingerprint" to whoever shares with you, over a channel other than the server: \
            "client share" prints the fingerprint of the key the server gave it as "reader_fingerprint".
            """)

    @OptionGroup var config: ClientConfigOptions

    func run() throws {
        let identity = try DocumentCLI.identity(config.path)
        var out: [String: JSONValue] = [
            "client_id": .string(identity.clientID?.lowercasedString ?? ""),
            "public_key": .string(identity.publicKey.base64URLEncoded),
            "public_key_fingerprint": .string(KnownKeys.fingerprint(identity.publicKey.rawRepresentation)),
        ]
        if let signing = identity.publicSigningKey {
            out["public_signing_key"] = .string(signing.base64URLEncoded)
            out["public_signing_key_fingerprint"] = .string(KnownKeys.fingerprint(signing.rawRepresentation))
        }
        try StandardOutput.line(CanonicalJSON.serialize(.object(JSONObject(out))))
    }
}
