import E3DBAPI
public import E3DBPrimitives
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
public import Logging
import NIOCore
import NIOSSL

extension E3DBError.Code {
    /// An administrative command names a client that is not registered (`context.item` is the id as given, at most
    /// 40 characters).
    public static let unknownClient = Self("unknownClient", category: .invalidArgument)
    /// The TLS certificate or key cannot be loaded, or only one of them is configured.
    public static let invalidTLSConfiguration = Self("invalidTLSConfiguration", category: .invalidArgument)
}

/// The E3DB-compatible API server and its administration (`e3dbkit-server`).
public enum E3DBServer {
    /// Opens the configured backend: PostgreSQL when `postgresURL` is set, else SQLite in the data directory.
    /// - Parameters:
    ///   - configuration: the data directory and the optional PostgreSQL URL.
    ///   - logger: where the backend logs.
    /// - Returns: the storage, not yet migrated.
    /// - Throws: a storage failure (`E3DBError`, `isStorageFailure`) when the backend cannot be opened.
    public static func openStorage(_ configuration: ServerConfiguration, logger: Logger) throws -> any ServerStorage {
        if let url = configuration.postgresURL {
            return try PostgresStorage(
                url: url, maximumConnections: configuration.postgresPoolSize,
                operationTimeout: .seconds(configuration.postgresCallTimeout),
                statementTimeout: .seconds(configuration.postgresStatementTimeout),
                idleInTransactionTimeout: .seconds(configuration.postgresIdleInTransactionTimeout), logger: logger)
        }
        return try SQLiteStorage(directory: configuration.dataDirectory)
    }

    /// Opens the configured backend for an administrative command: without migrating (only `migrate` and `run`
    /// migrate), refusing a schema older or newer than this build's.
    /// - Throws: `E3DBError` `.storageSchemaTooOld` (telling the operator to run `e3dbkit-server migrate`),
    ///   `.storageSchemaTooNew`, or another storage failure.
    static func openForAdministration(_ configuration: ServerConfiguration, logger: Logger) async throws
        -> any ServerStorage
    {
        let storage = try openStorage(configuration, logger: logger)
        do {
            try await storage.checkSchema()
        } catch {
            try? await storage.close()
            throw error
        }
        return storage
    }

    /// Runs the versioned migrations of the configured backend.
    /// - Parameters:
    ///   - configuration: the data directory and the optional PostgreSQL URL.
    ///   - logger: where the backend logs.
    /// - Throws: a storage failure (`E3DBError`, `isStorageFailure`) when the backend cannot be opened or migrated.
    public static func migrate(_ configuration: ServerConfiguration, logger: Logger) async throws {
        let storage = try openStorage(configuration, logger: logger)
        try await storage.migrate()
        try await storage.close()
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
        let storage = try await openForAdministration(configuration, logger: logger)
        let token = Hex.encode(SecureRandom.bytes(count: 32))
        try await storage.createRegistrationToken(
            hash: Hashes.sha256(Data(token.utf8)), uses: uses,
            created: APITimestamp.nowMicros())
        try await storage.close()
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
        let storage = try await openForAdministration(configuration, logger: logger)
        guard let id = ClientID(clientID), try await storage.client(id: id) != nil else {
            try await storage.close()
            throw Self.unknownClient(clientID)
        }
        try await storage.setBackupClientID(id)
        try await storage.close()
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
        let storage = try await openForAdministration(configuration, logger: logger)
        var found = false
        if let id = ClientID(clientID) { found = try await storage.setClientEnabled(id: id, enabled) }
        try await storage.close()
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
        let storage = try await openForAdministration(configuration, logger: logger)
        let stats = try await storage.statistics()
        try await storage.close()
        return stats
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
        // The bucket is checked first: a store that cannot be used stops the start with a message naming why.
        let bucket = configuration.objectStore.map { S3FileBodyStore(options: $0) }
        var adjusted = configuration
        if let bucket {
            try await bucket.checkBucket()
            adjusted.maxFileSize = min(configuration.maxFileSize, S3FileBodyStore.maxBodySize)
        }
        let configuration = adjusted
        let storage = try openStorage(configuration, logger: logger)
        do {
            try await storage.migrate()
            // PostgreSQL: this node's clock against the database's (a warning above 1 s, a refusal above the maximum).
            try await ClockCheck.read(storage, now: APITimestamp.nowMicros)?.verify(
                maximumSkew: configuration.maximumClockSkew, logger: logger)
        } catch {
            try? await storage.close()
            throw error
        }
        let files: any FileBodyStore =
            try bucket ?? LocalFileBodyStore(directory: configuration.dataDirectory.appendingPathComponent("files"))
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
        let app = Application(
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
        do {
            // The maintenance passes run beside the server and stop with it.
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await service.maintainUntilCancelled() }
                defer { group.cancelAll() }
                try await app.runService()
            }
        } catch {
            try? await storage.close()
            throw error
        }
        try await storage.close()
    }
}

extension E3DBServer {
    static func unknownClient(_ id: String) -> E3DBError {
        E3DBError(
            .unknownClient, "no registered client has the id \(id.prefix(40))",
            context: .init(item: String(id.prefix(40))))
    }
}
