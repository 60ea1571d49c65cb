import E3DBPrimitives
import NIOSSL
internal import PostgresNIO

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What a PostgreSQL URL says about reaching the server, as libpq reads it: the endpoint, the credentials, and TLS
/// (`sslmode`, `sslrootcert`); plus the settings every session starts with. One value builds both the pool's
/// configuration and the single connection ``PostgresStorage/checkConnection()`` opens, so that both connect alike.
struct PostgresConnectionSettings: Sendable {
    /// libpq's `sslmode` values.
    enum SSLMode: String, Sendable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    var host: String
    var port: Int
    var user: String
    var password: String?
    var database: String?
    var sslMode: SSLMode
    /// The CAs of `sslrootcert` (`nil`: the system's trusted CAs).
    var rootCertificates: [NIOSSLCertificate]?
    /// Startup parameters of every session (`statement_timeout`, …), in milliseconds where they are durations.
    var startupParameters: [(String, String)] = []
    /// The URL without its password (`postgres://user@host:port/database`), for logs and errors.
    var redactedURL: String

    /// Reads `url`: `postgres://user:password@host:port/database?sslmode=…&sslrootcert=FILE`.
    /// - Throws: `E3DBError` `.invalidStorageConfiguration` naming the problem (never the password).
    init(url: String) throws {
        func malformed(_ why: String) -> E3DBError {
            E3DBError(
                .invalidStorageConfiguration,
                "the PostgreSQL URL is not usable: \(why) (expected postgres://user:password@host:port/database)")
        }
        guard let parts = URLComponents(string: url) else { throw malformed("it does not parse as a URL") }
        guard let scheme = parts.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            throw malformed("the scheme must be postgres or postgresql")
        }
        guard var host = parts.host, !host.isEmpty else { throw malformed("it has no host") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard let user = parts.user, !user.isEmpty else { throw malformed("it has no user name") }
        let port = parts.port ?? 5432
        guard (1...65535).contains(port) else { throw malformed("the port is out of range") }
        var database = parts.path
        if database.hasPrefix("/") { database.removeFirst() }
        guard !database.contains("/") else { throw malformed("the database name contains '/'") }
        var mode: SSLMode?
        var rootFile: String?
        for item in parts.queryItems ?? [] {
            let value = item.value ?? ""
            switch item.name {
            case "sslmode":
                guard mode == nil else { throw malformed("sslmode is given twice") }
                guard let known = SSLMode(rawValue: value) else {
                    throw malformed(
                        "sslmode=\(value) is not one of disable, allow, prefer, require, verify-ca, verify-full")
                }
                mode = known
            case "sslrootcert":
                guard rootFile == nil else { throw malformed("sslrootcert is given twice") }
                guard !value.isEmpty else { throw malformed("sslrootcert is empty") }
                rootFile = value
            case let name: throw malformed("unknown parameter '\(name)'")
            }
        }
        self.host = host
        self.port = port
        self.user = user
        self.password = parts.password
        self.database = database.isEmpty ? nil : database
        // As libpq: prefer by default; require with a root certificate file verifies the chain (verify-ca).
        var sslMode = mode ?? .prefer
        if sslMode == .require, let rootFile, rootFile != "system" { sslMode = .verifyCA }
        self.sslMode = sslMode
        if let rootFile, rootFile != "system" {
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMFile(rootFile)
            } catch {
                throw malformed("sslrootcert \(rootFile) cannot be read as PEM certificates")
            }
            guard !certificates.isEmpty else { throw malformed("sslrootcert \(rootFile) holds no certificate") }
            rootCertificates = certificates
        }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        redactedURL = "postgres://\(user)@\(shownHost):\(port)/\(database.isEmpty ? user : database)"
    }

    /// The TLS client configuration of ``sslMode`` (`nil` for `disable`): no verification for `allow`, `prefer` and
    /// `require`; the chain against the CAs for `verify-ca`; the chain and the host name (or IP address) for
    /// `verify-full`.
    var tlsConfiguration: TLSConfiguration? {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch sslMode {
        case .disable: return nil
        case .allow, .prefer, .require: tls.certificateVerification = .none
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let rootCertificates { tls.trustRoots = .certificates(rootCertificates) }
        return tls
    }

    /// Whether a connection must be encrypted (`require`, `verify-ca`, `verify-full`).
    var requiresTLS: Bool { [.require, .verifyCA, .verifyFull].contains(sslMode) }

    /// The pool's configuration with at most `maximumConnections` connections.
    func clientConfiguration(maximumConnections: Int) -> PostgresClient.Configuration {
        let tls: PostgresClient.Configuration.TLS
        switch (tlsConfiguration, requiresTLS) {
        case (nil, _): tls = .disable
        case (let configuration?, true): tls = .require(configuration)
        case (let configuration?, false): tls = .prefer(configuration)
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.maximumConnections = max(1, maximumConnections)
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }

    /// The configuration of one connection outside the pool, connecting as the pool's do.
    /// - Throws: NIOSSL's error when the TLS context cannot be made.
    func connectionConfiguration(connectTimeout: Duration) throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS
        switch (tlsConfiguration, requiresTLS) {
        case (nil, _): tls = .disable
        case (let configuration?, true): tls = .require(try NIOSSLContext(configuration: configuration))
        case (let configuration?, false): tls = .prefer(try NIOSSLContext(configuration: configuration))
        }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = .milliseconds(Int64(connectTimeout.milliseconds))
        configuration.options.additionalStartupParameters = startupParameters
        return configuration
    }
}

extension Duration {
    /// Whole milliseconds, rounded down.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
