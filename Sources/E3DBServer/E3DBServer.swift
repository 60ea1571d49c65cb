import E3DBAPI
public import E3DBPrimitives
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
public import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import UnixSignals

extension E3DBError.Code {
    /// An administrative command names a client that is not registered (`context.item` is the id as given, at most
    /// 40 characters).
    public static let unknownClient = Self("unknownClient", category: .invalidArgument)
    /// The TLS certificate or key cannot be loaded, or only one of them is configured.
    public static let invalidTLSConfiguration = Self("invalidTLSConfiguration", category: .invalidArgument)
}

/// The E3DB-compatible API server and its administration (`e3dbkit-server`).
public enum E3DBServer {
    /// Runs `body` with the configured backend for an administrative command (`ServerStorage.running`):
    /// without migrating (only `migrate` and `run` migrate), refusing a schema older or newer than this build's.
    /// - Throws: `E3DBError` `.storageSchemaTooOld` (telling the operator to run `e3dbkit-server migrate`),
    ///   `.storageSchemaTooNew`, another storage failure, or what `body` throws.
    static func withAdministration<T>(
        _ configuration: ServerConfiguration, logger: Logger, _ body: (any ServerStorage) async throws -> T
    ) async throws -> T {
        let storage = try StorageBackend.open(configuration, logger: logger).storage
        return try await storage.running {
            try await storage.checkSchema()
            return try await body(storage)
        }
    }

    /// Runs the versioned migrations of the configured backend.
    /// - Parameters:
    ///   - configuration: the data directory and the optional PostgreSQL URL.
    ///   - logger: where the backend logs.
    /// - Throws: a storage failure (`E3DBError`, `isStorageFailure`) when the backend cannot be opened or migrated.
    public static func migrate(_ configuration: ServerConfiguration, logger: Logger) async throws {
        let storage = try StorageBackend.open(configuration, logger: logger).storage
        try await storage.running { try await storage.migrate() }
    }

    /// Creates a registration token and returns it (only its SHA-256 is stored).
    /// - Parameters:
    ///   - configuration: the data directory and the optional PostgreSQL URL.
    ///   - uses: how many registrations it allows; `nil` for unlimited.
    ///   - logger: where the backend logs.
    /// - Returns: the token (64 hex characters), shown once.
    /// - Throws: a storage failure (`E3DBError`, `isStorageFailure`) when the backend fails.
    public static func createRegistrationToken(_ configuration: ServerConfiguration, uses: Int?, logger: Logger)
        async throws -> String
    {
        let token = Hex.encode(SecureRandom.bytes(count: 32))
        try await withAdministration(configuration, logger: logger) { storage in
            try await storage.createRegistrationToken(
                hash: Hashes.sha256(Data(token.utf8)), uses: uses,
                created: APITimestamp.nowMicros())
        }
        return token
    }

    /// Makes a registered client the account's backup client: its id is sent in `X-Backup-Client` on every
    /// registration, and clients registered with `backup` share their credentials with it (spec api §3.2). The
    /// operator holds its private key.
    /// - Parameters:
    ///   - configuration: the data directory and the optional PostgreSQL URL.
    ///   - clientID: the registered client's id (any case).
    ///   - logger: where the backend logs.
    /// - Throws: `E3DBError` `.unknownClient` when the client is not registered, a storage failure (`E3DBError`, `isStorageFailure`) when the backend
    ///   fails.
    public static func setBackupClient(_ configuration: ServerConfiguration, clientID: String, logger: Logger)
        async throws
    {
        try await withAdministration(configuration, logger: logger) { storage in
            guard let id = ClientID(clientID), try await storage.client(id: id) != nil else {
                throw Self.unknownClient(clientID)
            }
            try await storage.setBackupClientID(id)
        }
    }

    /// Enables or disables a registered client. A disabled client's Bearer tokens, token requests and TSV1
    /// requests are refused (401); a running server notices within its token cache's second.
    /// - Parameters:
    ///   - configuration: the data directory and the optional PostgreSQL URL.
    ///   - clientID: the registered client's id (any case).
    ///   - enabled: the new state.
    ///   - logger: where the backend logs.
    /// - Throws: `E3DBError` `.unknownClient` when the client is not registered, a storage failure (`E3DBError`, `isStorageFailure`) when the backend
    ///   fails.
    public static func setClientEnabled(
        _ configuration: ServerConfiguration, clientID: String, enabled: Bool,
        logger: Logger
    ) async throws {
        let found = try await withAdministration(configuration, logger: logger) { storage in
            guard let id = ClientID(clientID) else { return false }
            return try await storage.setClientEnabled(id: id, enabled)
        }
        guard found else {
            throw Self.unknownClient(clientID)
        }
    }

    /// Row counts of the configured backend.
    /// - Parameters:
    ///   - configuration: the data directory and the optional PostgreSQL URL.
    ///   - logger: where the backend logs.
    /// - Returns: rows per table.
    /// - Throws: a storage failure (`E3DBError`, `isStorageFailure`) when the backend fails.
    public static func statistics(_ configuration: ServerConfiguration, logger: Logger) async throws -> [String: Int] {
        try await withAdministration(configuration, logger: logger) { storage in try await storage.statistics() }
    }

    /// Runs the server until SIGTERM or SIGINT (in-flight requests finish first).
    /// - Parameters:
    ///   - configuration: where to listen and what to store where.
    ///   - logger: structured logs (never a secret, a token or a ciphertext).
    ///   - onListening: called with the bound host and port once the server accepts connections.
    /// - Throws: `E3DBError` `.invalidTLSConfiguration` for TLS files that do not load, a storage failure (`E3DBError`, `isStorageFailure`) when the
    ///   backend cannot be opened, `.clockSkew` when (PostgreSQL) this machine's clock and the database's differ by
    ///   more than `maximumClockSkew`, or the server's start-up error.
    public static func run(
        _ configuration: ServerConfiguration, logger: Logger,
        onListening: @escaping @Sendable (String, Int) -> Void
    ) async throws {
        // The file store is checked first: one that cannot be used (a bucket that is missing or refuses the
        // credentials) stops the start with a message naming why.
        let files = try FileBodyBackend.open(configuration).store
        try await files.check()
        let storage = try StorageBackend.open(configuration, logger: logger).storage
        // The storage's background work (the PostgreSQL pool, SQLite's checkpoints) is a service listed before the
        // server, so that a graceful shutdown (SIGTERM, SIGINT) stops the server first (in-flight requests finish)
        // and closes the storage after it; the server is built inside its own service, once the storage (running)
        // has been migrated and has given the server secret.
        let server = ServerService(
            storage: storage, files: files, configuration: configuration, logger: logger, onListening: onListening)
        let group = ServiceGroup(
            configuration: .init(
                services: [StorageService(storage: storage), server], gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
    }
}

/// The HTTP server with the maintenance passes, as a ServiceLifecycle service beside the storage's
/// (`StorageService`): migrates the storage, then builds and runs Hummingbird's application until the group shuts
/// down gracefully (the application's own service group follows the enclosing one).
private struct ServerService: Service {
    let storage: any ServerStorage
    let files: any FileBodyStore
    let configuration: ServerConfiguration
    let logger: Logger
    let onListening: @Sendable (String, Int) -> Void

    func run() async throws {
        let (configuration, logger, onListening) = (self.configuration, self.logger, self.onListening)
        try await storage.migrate()
        // PostgreSQL: this node's clock against the database's (a warning above 1 s, a refusal above the maximum).
        try await ClockCheck.read(storage, now: APITimestamp.nowMicros)?.verify(
            maximumSkew: configuration.maximumClockSkew, logger: logger)
        let service = E3DBService(
            storage: storage, files: files, configuration: configuration,
            secret: try await storage.serverSecret(), logger: logger,
            metrics: configuration.metricsEnabled ? ServerMetrics.bootstrap() : nil)
        let responder = service.router().buildResponder()
        let http1Configuration = HTTP1Channel.Configuration(
            additionalChannelHandlers: [ExpectContinueHandler()], idleTimeout: .seconds(120))
        let connections = AddressConnections(limit: configuration.maxConnectionsPerAddress)
        let http1 = HTTPServerBuilder { responder in
            E3DBChildChannel(
                base: HTTP1Channel(responder: responder, configuration: http1Configuration),
                connections: connections)
        }
        let server: HTTPServerBuilder
        switch (configuration.tlsCertificatePath, configuration.tlsKeyPath) {
        case (nil, nil):
            server = http1
        case (let cert?, let key?):
            let tls: TLSConfiguration
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(cert).map { NIOSSLCertificateSource.certificate($0) }
                let privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
                tls = TLSConfiguration.makeServerConfiguration(
                    certificateChain: chain, privateKey: .privateKey(privateKey))
            } catch {
                throw E3DBError(.invalidTLSConfiguration, "cannot load the TLS certificate or key (PEM files expected)")
            }
            server = HTTPServerBuilder { responder in
                E3DBChildChannel(
                    base: try TLSChannel(
                        HTTP1Channel(responder: responder, configuration: http1Configuration), tlsConfiguration: tls),
                    connections: connections)
            }
        default:
            throw E3DBError(.invalidTLSConfiguration, "TLS needs both a certificate and a key")
        }
        var app = Application(
            responder: responder,
            server: server,
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port),
                serverName: nil),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? configuration.port
                onListening(configuration.host, port)
            },
            logger: logger)
        // The maintenance passes run beside the server, under the application, and stop after it.
        app.addServices(MaintenanceService(service: service))
        try await app.run()
    }
}

/// ``E3DBService/maintainUntilCancelled()`` as a service: until the group shuts down gracefully or is cancelled.
private struct MaintenanceService: Service {
    let service: E3DBService

    func run() async throws {
        await cancelWhenGracefulShutdown { await service.maintainUntilCancelled() }
    }
}

extension E3DBServer {
    static func unknownClient(_ id: String) -> E3DBError {
        E3DBError(
            .unknownClient, "no registered client has the id \(id.prefix(40))",
            context: .init(item: String(id.prefix(40))))
    }
}
