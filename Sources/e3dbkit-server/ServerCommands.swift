import ArgumentParser
import E3DBCommandLine
import E3DBPrimitives
import E3DBServer
import Foundation
import Logging

/// `e3dbkit-server …`: the E3DB-compatible API server, an executable of its own that links no module that can
/// decrypt (E3DBServer, E3DBAPI, E3DBPrimitives), and its administrative commands.
struct ServerCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "e3dbkit-server",
        abstract: "A self-hostable E3DB API server (SQLite in a data directory, or PostgreSQL).",
        discussion: """
            The server stores what E3DB clients send (ciphertext, plaintext metadata, encrypted access keys, \
            policies, encrypted file bodies) and never sees a plaintext value or a private key. See docs/server.md. \
            Exit codes: 0 success; 1 a failure (the backend refused or is unreachable, an output that cannot be \
            written); 2 files migrate found bodies that are not what the database declares; 64 a usage error.
            """,
        version: "0.1.0",
        subcommands: [
            ServerRunCommand.self, ServerTokenCommand.self, ServerClientCommand.self, ServerBackupClientCommand.self,
            ServerMigrateCommand.self, ServerStatsCommand.self, ServerFilesCommand.self,
        ]
    )
}

/// Where the server keeps its state.
struct ServerStorageOptions: ParsableArguments {
    @Option(help: "The data directory: server.sqlite (SQLite backend) and files/ (file bodies, both backends).")
    var data: String

    @Option(
        help:
            "A PostgreSQL URL (postgres://user:password@host:port/db, TLS as libpq: ?sslmode=verify-full&sslrootcert=FILE) for the PostgreSQL backend; or set E3DBKIT_POSTGRES_URL."
    )
    var postgres: String?

    @Option(
        help:
            "PostgreSQL connections this process may open; nodes × this plus admin commands must fit max_connections minus the reserved slots."
    )
    var postgresPoolSize: Int = 20

    @Option(help: "PostgreSQL statement_timeout of every session, seconds (0: none).")
    var postgresStatementTimeout: Int = 25

    @Option(help: "PostgreSQL idle_in_transaction_session_timeout of every session, seconds (0: none).")
    var postgresIdleTransactionTimeout: Int = 5

    @Option(
        help:
            "Seconds one PostgreSQL call may take, waiting for a connection included, before it fails (503); while the database is unreachable a request waits this long."
    )
    var postgresCallTimeout: Int = 30

    func validate() throws {
        guard (1...10_000).contains(postgresPoolSize) else {
            throw ValidationError("--postgres-pool-size must be 1...10000")
        }
        guard (0...86_400).contains(postgresStatementTimeout) else {
            throw ValidationError("--postgres-statement-timeout must be 0...86400")
        }
        guard (0...86_400).contains(postgresIdleTransactionTimeout) else {
            throw ValidationError("--postgres-idle-transaction-timeout must be 0...86400")
        }
        guard (1...3600).contains(postgresCallTimeout) else {
            throw ValidationError("--postgres-call-timeout must be 1...3600")
        }
    }

    func configuration() -> ServerConfiguration {
        var c = ServerConfiguration(dataDirectory: URL(fileURLWithPath: data, isDirectory: true))
        c.postgresURL =
            postgres ?? ProcessInfo.processInfo.environment["E3DBKIT_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
        c.postgresPoolSize = postgresPoolSize
        c.postgresStatementTimeout = postgresStatementTimeout
        c.postgresIdleInTransactionTimeout = postgresIdleTransactionTimeout
        c.postgresCallTimeout = postgresCallTimeout
        return c
    }
}

/// An S3-compatible bucket for file bodies instead of `DIR/files`; credentials from the environment only.
struct ServerObjectStoreOptions: ParsableArguments {
    @Option(
        help:
            "Keep file bodies in an S3-compatible bucket (path-style) at this URL, http(s)://host[:port], which the server calls; credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."
    )
    var s3Endpoint: String?

    @Option(help: "The bucket of --s3-endpoint (it must exist).")
    var s3Bucket: String?

    @Option(help: "The region signed into requests to --s3-endpoint.")
    var s3Region: String = "us-east-1"

    @Option(help: "The URL clients are sent for file bodies, http(s)://host[:port] (default: --s3-endpoint).")
    var s3PublicEndpoint: String?

    @Option(help: "A key prefix in the bucket: bodies are PREFIX/<record id>.")
    var s3Prefix: String = ""

    func validate() throws {
        guard s3Endpoint != nil else {
            guard s3Bucket == nil, s3PublicEndpoint == nil, s3Prefix.isEmpty, s3Region == "us-east-1" else {
                throw ValidationError(
                    "--s3-bucket, --s3-region, --s3-public-endpoint and --s3-prefix need --s3-endpoint")
            }
            return
        }
        guard s3Bucket != nil else { throw ValidationError("--s3-endpoint needs --s3-bucket") }
    }

    /// The bucket's options, nil without `--s3-endpoint`.
    func options() throws -> S3Options? {
        guard let s3Endpoint, let s3Bucket else { return nil }
        let environment = ProcessInfo.processInfo.environment
        guard let accessKey = environment["AWS_ACCESS_KEY_ID"], !accessKey.isEmpty,
            let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty
        else {
            throw CLIError("--s3-endpoint needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
        }
        do {
            return try S3Options(
                endpoint: s3Endpoint, publicEndpoint: s3PublicEndpoint, bucket: s3Bucket, region: s3Region,
                prefix: s3Prefix, credentials: S3Credentials(accessKeyID: accessKey, secretAccessKey: secret))
        } catch let error as E3DBError {
            throw CLIError(error.message)
        }
    }
}

struct ServerFilesCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "files", abstract: "File bodies.", subcommands: [ServerFilesMigrateCommand.self])
}

struct ServerFilesMigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Move the local file bodies (DIR/files) into the S3-compatible bucket of --s3-endpoint.",
        discussion: """
            Run it with every node stopped, then start the nodes with the same --s3-… options. Only bodies the \
            database names (a file record, or an uploaded pending file) are moved, each with its declared length \
            and Content-MD5 (the store refuses another body), verified by HEAD, and removed locally only then. \
            Resumable: a body already in the bucket is not sent again; a key holding something else is \
            overwritten with the local body. Names that are not a body, symbolic links and unreferenced bodies \
            are left in place and reported. Progress on standard error (a line a second, or every 100 bodies), \
            the counts as JSON on standard output. Exit codes: 0 every body moved or already there; 1 the store \
            or the database failed, or a body could not be read or removed (run it again to resume); 2 a local \
            body is not the one the database declares (left in place).
            """)

    @OptionGroup var storage: ServerStorageOptions

    @OptionGroup var objectStore: ServerObjectStoreOptions

    @Flag(help: "Keep the local copies once the bucket holds them (a later run without it removes them).")
    var keepLocal = false

    func validate() throws {
        try objectStore.validate()
        guard objectStore.s3Endpoint != nil else { throw ValidationError("files migrate needs --s3-endpoint") }
    }

    func run() async throws {
        var configuration = storage.configuration()
        configuration.objectStore = try objectStore.options()
        var last = ContinuousClock.now
        var printed = -1
        func line(_ p: FileBodyMigration.Progress) -> String {
            "files migrate: \(p.done)/\(p.total) entries, \(ByteSize.text(Int(p.doneBytes))) of "
                + "\(ByteSize.text(Int(p.totalBytes))); uploaded \(p.uploaded) (\(ByteSize.text(Int(p.uploadedBytes))), "
                + "\(p.replaced) replacing another object), already in the bucket \(p.alreadyStored), left in place "
                + "\(p.unreferenced + p.notBodies), failed \(p.failed)"
        }
        let result = try await serverAdmin("moving file bodies") {
            try await E3DBServer.migrateFileBodies(
                configuration, keepLocal: keepLocal, logger: serverLogger(level: .warning)
            ) { event in
                switch event {
                case .problem(let message): StandardError.line("files migrate: " + message)
                case .progress(let p):
                    guard p.done - printed >= 100 || ContinuousClock.now - last >= .seconds(1) else { return }
                    StandardError.line(line(p))
                    printed = p.done
                    last = .now
                }
            }
        }
        StandardError.line(line(result) + (keepLocal ? " (local copies kept)" : ""))
        try StandardOutput.line(
            "{\"entries\":\(result.total),\"uploaded\":\(result.uploaded),\"replaced\":\(result.replaced),"
                + "\"already_stored\":\(result.alreadyStored),\"uploaded_bytes\":\(result.uploadedBytes),"
                + "\"unreferenced\":\(result.unreferenced),\"not_bodies\":\(result.notBodies),"
                + "\"failed\":\(result.failed),\"damaged\":\(result.damaged)}")
        if result.failed > 0 {
            throw CLIError(
                "files migrate: \(result.failed) bodies were not moved (see above)",
                exitCode: result.damaged == result.failed ? ExitStatus.authentication : ExitStatus.failure)
        }
    }
}

/// A logger writing structured lines to standard error.
func serverLogger(level: Logger.Level) -> Logger {
    var logger = Logger(label: "e3dbkit.server") { label in
        MetadataWhenLogging(StreamLogHandler.standardError(label: label, metadataProvider: nil))
    }
    logger.logLevel = level
    return logger
}

/// swift-log's `StreamLogHandler` writing the lines, with the metadata kept here and handed to it only when a line
/// is written. `StreamLogHandler` formats all its metadata into text each time one item is set, and Hummingbird sets
/// one per request (`hb.request.id`): that was a string built, and a dictionary copied, per request for lines that
/// the log level then drops. The lines are the same: the handler's base metadata, the global metadata provider's,
/// then the line's own, each overriding the one before, as `StreamLogHandler` merges them.
struct MetadataWhenLogging: LogHandler {
    private var lines: StreamLogHandler
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider

    init(_ lines: StreamLogHandler) { self.lines = lines }

    var logLevel: Logger.Level {
        get { lines.logLevel }
        set { lines.logLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        var merged = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty {
            merged.merge(provided) { _, provided in provided }
        }
        if let explicit = event.metadata, !explicit.isEmpty {
            merged.merge(explicit) { _, explicit in explicit }
        }
        event.metadata = merged
        lines.log(event: event)
    }
}

/// `--log-level` values.
enum LogLevelOption: String, ExpressibleByArgument, CaseIterable {
    case trace, debug, info, notice, warning, error, critical
    var level: Logger.Level { Logger.Level(rawValue: rawValue) ?? .info }
}

/// Runs an administrative call, turning backend failures into the CLI's exit codes.
func serverAdmin<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
    do { return try await body() } catch let error as E3DBError where error.code.isStorageFailure {
        throw CLIError("\(what) failed: \(error.message)")
    }
}

struct ServerRunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Serve the E3DB API until SIGTERM or SIGINT (in-flight requests finish first).",
        discussion: "Prints 'listening on http://HOST:PORT' on standard error once it accepts connections.")

    @OptionGroup var storage: ServerStorageOptions

    @Option(help: "The interface to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "The TCP port (0 picks a free one).")
    var port: Int = 8000

    @Option(
        help:
            "The externally reachable base URL used in file upload and download URLs (default: from the request's Host)."
    )
    var publicURL: String?

    @Option(help: "Largest JSON request body in bytes.")
    var maxBodySize: Int = 16 << 20

    @Option(help: "Largest note body from an anonymous writer (TSV1 without a verified uid), in bytes.")
    var maxAnonymousNoteSize: Int = 64 << 10

    @Option(
        help:
            "Request body bytes registered clients may hold in memory at once, each at most twice --max-body-size; unauthenticated requests a sixteenth (503 past a share)."
    )
    var maxBodyBytesInFlight: Int = 256 << 20

    @Option(help: "Open connections one client address (an IPv6 /64) may hold.")
    var maxConnectionsPerAddress: Int = 256

    @Option(
        help:
            "The work one search may do, in steps (about 4 bytes of scanned or compared text, or a matcher step); more is refused with 400."
    )
    var searchBudget: Int = 50_000_000

    @Option(help: "Searches that may run at once (default: one less than the cores, at least 1).")
    var concurrentSearches: Int?

    @Option(help: "Seconds a pending file may wait for its commit before it and its body are removed.")
    var pendingFileLifetime: Int64 = 86_400

    @Option(help: "Seconds a request body may take to arrive (408 past it).")
    var bodyTimeout: Int = 60

    @Option(help: "A PEM certificate chain: serve HTTPS (with --tls-key).")
    var tlsCert: String?

    @Option(help: "The PEM private key of --tls-cert.")
    var tlsKey: String?

    @Flag(help: "Serve Prometheus metrics at GET /metrics (unauthenticated: expose it only to the scraper).")
    var metrics = false

    @Option(help: "Lifetime of bearer tokens in seconds.")
    var tokenLifetime: Int = 3600

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: LogLevelOption = .info

    @OptionGroup var objectStore: ServerObjectStoreOptions

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard (1...86_400).contains(tokenLifetime) else { throw ValidationError("--token-lifetime must be 1...86400") }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        guard maxBodySize >= 1 << 20 else { throw ValidationError("--max-body-size must be at least 1048576") }
        guard maxAnonymousNoteSize >= 1024 else {
            throw ValidationError("--max-anonymous-note-size must be at least 1024")
        }
        guard maxBodyBytesInFlight >= maxBodySize else {
            throw ValidationError("--max-body-bytes-in-flight must be at least --max-body-size")
        }
        guard maxConnectionsPerAddress >= 1 else {
            throw ValidationError("--max-connections-per-address must be at least 1")
        }
        guard searchBudget >= 1000 else { throw ValidationError("--search-budget must be at least 1000") }
        guard (concurrentSearches ?? 1) >= 1 else { throw ValidationError("--concurrent-searches must be at least 1") }
        guard (7200...315_360_000).contains(pendingFileLifetime) else {
            throw ValidationError(
                "--pending-file-lifetime must be 7200 (twice an upload URL's hour) to 315360000 (ten years)")
        }
        guard (1...3600).contains(bodyTimeout) else { throw ValidationError("--body-timeout must be 1...3600") }
        try objectStore.validate()
    }

    func run() async throws {
        var configuration = storage.configuration()
        configuration.host = host
        configuration.port = port
        configuration.publicURL = publicURL
        configuration.maxBodySize = maxBodySize
        configuration.maxAnonymousNoteSize = maxAnonymousNoteSize
        configuration.maxBodyBytesInFlight = maxBodyBytesInFlight
        configuration.maxConnectionsPerAddress = maxConnectionsPerAddress
        configuration.searchBudget = searchBudget
        if let concurrentSearches { configuration.concurrentSearches = concurrentSearches }
        configuration.pendingFileLifetime = pendingFileLifetime
        configuration.bodyTimeout = bodyTimeout
        configuration.tokenLifetime = tokenLifetime
        configuration.metricsEnabled = metrics
        configuration.tlsCertificatePath = tlsCert
        configuration.tlsKeyPath = tlsKey
        configuration.objectStore = try objectStore.options()
        let logger = serverLogger(level: logLevel.level)
        try await serverAdmin("starting the server") {
            try await E3DBServer.run(configuration, logger: logger) { host, port in
                StandardError.line("listening on \(tlsCert == nil ? "http" : "https")://\(host):\(port)")
            }
        }
    }
}

struct ServerTokenCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Registration tokens.", subcommands: [ServerTokenCreateCommand.self])
}

struct ServerTokenCreateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a registration token and print it on standard output (only its hash is stored).")

    @OptionGroup var storage: ServerStorageOptions

    @Option(help: "How many registrations the token allows (default: unlimited).")
    var uses: Int?

    func validate() throws {
        if let uses, uses < 1 { throw ValidationError("--uses must be 1 or more") }
    }

    func run() async throws {
        let token = try await serverAdmin("creating a token") {
            try await E3DBServer.createRegistrationToken(
                storage.configuration(), uses: uses,
                logger: serverLogger(level: .warning))
        }
        try StandardOutput.line(token)
    }
}

struct ServerMigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Create or upgrade the server's schema (run also by `run`; the other commands do not migrate).")

    @OptionGroup var storage: ServerStorageOptions

    func run() async throws {
        try await serverAdmin("migrating") {
            try await E3DBServer.migrate(storage.configuration(), logger: serverLogger(level: .warning))
        }
        try StandardOutput.line(#"{"migrated":true}"#)
    }
}

struct ServerStatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats", abstract: "Print row counts as JSON.")

    @OptionGroup var storage: ServerStorageOptions

    func run() async throws {
        let stats = try await serverAdmin("reading statistics") {
            try await E3DBServer.statistics(storage.configuration(), logger: serverLogger(level: .warning))
        }
        let body = stats.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",")
        try StandardOutput.line("{\(body)}")
    }
}

struct ServerBackupClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup-client",
        abstract: "Make a registered client the account's backup client (sent as X-Backup-Client at registration).",
        discussion: """
            Clients registered with backup share their credentials with this client, as the other SDKs do with \
            Tozny's dashboard client; whoever holds its private key can recover them.
            """)

    @OptionGroup var storage: ServerStorageOptions

    @Option(help: "The registered client's id.")
    var clientID: String

    func run() async throws {
        try await serverAdmin("setting the backup client") {
            try await E3DBServer.setBackupClient(
                storage.configuration(), clientID: clientID,
                logger: serverLogger(level: .warning))
        }
        try StandardOutput.line("{\"backup_client\":\"\(clientID.lowercased())\"}")
    }
}

struct ServerClientCommand: SubcommandGroup {
    static let configuration = CommandConfiguration(
        commandName: "client", abstract: "Registered clients.",
        subcommands: [ServerClientDisableCommand.self, ServerClientEnableCommand.self])
}

/// `server client disable|enable`: one command shape for both.
protocol ServerClientSwitch: AsyncParsableCommand {
    var storage: ServerStorageOptions { get }
    var clientID: String { get }
    static var enabled: Bool { get }
}

extension ServerClientSwitch {
    func run() async throws {
        try await serverAdmin("\(Self.enabled ? "enabling" : "disabling") a client") {
            try await E3DBServer.setClientEnabled(
                storage.configuration(), clientID: clientID, enabled: Self.enabled,
                logger: serverLogger(level: .warning))
        }
        try StandardOutput.line("{\"client_id\":\"\(clientID.lowercased())\",\"enabled\":\(Self.enabled)}")
    }
}

struct ServerClientDisableCommand: ServerClientSwitch {
    static let configuration = CommandConfiguration(
        commandName: "disable",
        abstract: "Disable a registered client: its tokens, new tokens and TSV1 requests are refused (401).",
        discussion: "Servers sharing the database refuse it within a second (their token caches expire).")
    static let enabled = false

    @OptionGroup var storage: ServerStorageOptions

    @Option(help: "The registered client's id.")
    var clientID: String
}

struct ServerClientEnableCommand: ServerClientSwitch {
    static let configuration = CommandConfiguration(
        commandName: "enable", abstract: "Enable a disabled client again.")
    static let enabled = true

    @OptionGroup var storage: ServerStorageOptions

    @Option(help: "The registered client's id.")
    var clientID: String
}
