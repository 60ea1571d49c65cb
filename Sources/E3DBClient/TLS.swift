import AsyncHTTPClient
public import E3DBPrimitives
public import Foundation
import NIOCore
import NIOPosix
import NIOSSL

// TLS failures are told apart because each needs a different fix: a CA to trust (--ca-file), a certificate with
// the right name, a renewed certificate, a pin to update. None of them is retried.
extension E3DBError.Code {
    /// The server's certificate does not chain to a trusted CA (the system's, or the ones given with
    /// ``ClientTLSOptions``).
    public static let untrustedCertificate = Self("untrustedCertificate", category: .verification)
    /// The server's certificate has expired or is not valid yet.
    public static let certificateExpired = Self("certificateExpired", category: .verification)
    /// The server's certificate is not valid for the host name or address in the URL.
    public static let hostnameMismatch = Self("hostnameMismatch", category: .verification)
    /// The server's public key is none of the pinned ones (``PublicKeyPin``).
    public static let pinMismatch = Self("pinMismatch", category: .verification)
    /// The TLS handshake failed for another reason (the connection closed during it, the server does not speak
    /// TLS, no common protocol version or cipher).
    public static let tlsHandshakeFailed = Self("tlsHandshakeFailed", category: .io)
}

/// The SHA-256 of a server certificate's SubjectPublicKeyInfo (DER), as HPKP and curl's
/// `--pinnedpubkey sha256//…` write it: base64 of the 32 bytes.
///
/// Make one from the server's certificate with
/// `openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64`.
public struct PublicKeyPin: Sendable, Hashable, CustomStringConvertible {
    /// The 32 bytes of the SHA-256.
    public let sha256: Data

    /// A pin from its 32 bytes.
    /// - Throws: `E3DBError` `.invalidLength` for another length.
    public init(sha256: Data) throws(E3DBError) {
        guard sha256.count == 32 else {
            throw E3DBError(
                .invalidLength, "a public key pin is a SHA-256: 32 bytes, not \(sha256.count)",
                context: .init(part: "pin", expected: 32, actual: sha256.count))
        }
        self.sha256 = sha256
    }

    /// A pin from its base64 (standard alphabet, padded), with or without curl's `sha256//` prefix.
    /// - Throws: `E3DBError` `.invalidBase64` or `.invalidLength`.
    public init(base64 text: String) throws(E3DBError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let body = trimmed.hasPrefix("sha256//") ? String(trimmed.dropFirst("sha256//".count)) : trimmed
        guard let bytes = Data(base64Encoded: body) else {
            throw E3DBError(
                .invalidBase64, "a public key pin must be the base64 of a SHA-256 (44 characters)",
                context: .init(part: "pin"))
        }
        try self.init(sha256: bytes)
    }

    /// The pin of a DER SubjectPublicKeyInfo.
    init(subjectPublicKeyInfo der: [UInt8]) {
        sha256 = Hashes.sha256(der)
    }

    /// `sha256//` and the base64, as curl writes it.
    public var description: String { "sha256//" + sha256.base64EncodedString() }
}

/// How a transport trusts the server: the CAs to trust (the system's by default) and, optionally, the server
/// public keys to accept. A library-level value, so that every transport can take it; ``AsyncHTTPClientTransport``
/// implements all of it.
///
/// - Note: With Foundation's URLSession on Linux (FoundationNetworking) neither can be implemented: it has no
///   server-trust challenge for a session delegate to answer (`URLProtectionSpace.serverTrust` needs Apple's
///   Security framework), and libcurl's CA bundle is chosen from a fixed list of system paths (the
///   `URLSessionCertificateAuthorityInfoFile` variable is read on Android only). There, install the CA in the
///   system store (`update-ca-certificates`). On Apple platforms a delegate can evaluate the `SecTrust` against
///   these CAs and pins.
public struct ClientTLSOptions: Sendable, Hashable {
    /// The CA certificates to trust instead of the system's; empty: the system's.
    let certificateAuthorities: [NIOSSLCertificate]
    /// The accepted server keys; empty: any key a trusted certificate carries.
    public let pins: [PublicKeyPin]

    /// The system's CAs, no pins.
    public init() {
        certificateAuthorities = []
        pins = []
    }

    /// Trust the CA certificates in `certificateAuthoritiesPEM` (one or more PEM `CERTIFICATE` blocks) instead of
    /// the system's, as curl's `--cacert` does; and, with `pins`, accept only a server whose certificate's key is
    /// one of them (checked after the usual verification, which still applies).
    /// - Parameters:
    ///   - certificateAuthoritiesPEM: PEM certificates; nil: the system's CAs.
    ///   - pins: the accepted server keys; empty: any.
    /// - Throws: `E3DBError` `.invalidParameter` when the PEM holds no certificate or one that does not parse.
    public init(certificateAuthoritiesPEM: Data? = nil, pins: [PublicKeyPin] = []) throws(E3DBError) {
        if let pem = certificateAuthoritiesPEM {
            let text = String(decoding: pem, as: UTF8.self)
            guard text.contains("-----BEGIN CERTIFICATE-----") else {
                throw E3DBError(
                    .invalidParameter, "the CA file holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    context: .init(part: "ca"))
            }
            do {
                certificateAuthorities = try NIOSSLCertificate.fromPEMBytes(Array(pem))
            } catch {
                throw E3DBError(
                    .invalidParameter, "a certificate in the CA file does not parse", context: .init(part: "ca"))
            }
            guard !certificateAuthorities.isEmpty else {
                throw E3DBError(.invalidParameter, "the CA file holds no certificate", context: .init(part: "ca"))
            }
        } else {
            certificateAuthorities = []
        }
        self.pins = pins
    }

    /// Refuses these options for a URL they cannot apply to: CAs and pins are TLS settings, and an `http://` URL
    /// has no TLS, so they would be silently ignored.
    /// - Parameter url: the URL a request goes to.
    /// - Throws: `E3DBError` `.invalidParameter` for an `http://` URL when CAs or pins are set.
    public func check(for url: String) throws(E3DBError) {
        guard !certificateAuthorities.isEmpty || !pins.isEmpty,
            URLComponents(string: url)?.scheme?.lowercased() == "http"
        else { return }
        throw E3DBError(
            .invalidParameter,
            "CA certificates and public key pins apply to https:// URLs only, and "
                + "\(URLComponents(string: url)?.host ?? "the server") is reached over http://: use its https:// URL "
                + "or drop the CA file and pins", context: .init(part: "tls"))
    }

    /// NIOSSL's client configuration: full verification (chain and host name) against these CAs.
    var nioConfiguration: TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if !certificateAuthorities.isEmpty { configuration.trustRoots = .certificates(certificateAuthorities) }
        return configuration
    }
}

/// A transport's failure that retrying will not fix, as `E3DBError`: an `E3DBError` the transport threw itself
/// (a pin mismatch, a configuration it cannot use) or a TLS failure (untrusted certificate, host name mismatch, a
/// failed handshake); nil for any other error. Messages name what failed and the host, never a key or token.
/// - Parameters:
///   - error: what the transport threw.
///   - operation: the operation, for the message and `context.part`.
///   - url: the request's URL (its host goes in the message).
func finalTransportFailure(_ error: any Error, operation: String, url: String) -> E3DBError? {
    if let error = error as? E3DBError { return error }
    let host = URLComponents(string: url)?.host ?? "the server"
    func failure(_ code: E3DBError.Code, _ what: String) -> E3DBError {
        E3DBError(code, "\(operation): TLS with \(host) failed: \(what)", context: .init(part: operation))
    }
    if let error = error as? URLError {
        // URLSession's TLS verdicts (Apple platforms; on Linux libcurl's arrive as an unknown error with its text).
        switch error.code {
        case .serverCertificateUntrusted, .serverCertificateHasUnknownRoot, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid:
            return failure(
                .untrustedCertificate,
                "the server's certificate is not trusted (URLError \(error.code.rawValue)): it is not signed by a "
                    + "trusted CA, or it has expired or is not valid yet")
        case .secureConnectionFailed, .clientCertificateRejected, .clientCertificateRequired:
            return failure(.tlsHandshakeFailed, "the TLS handshake failed (URLError \(error.code.rawValue))")
        default: return nil
        }
    }
    if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
        return failure(.hostnameMismatch, "the server's certificate is not valid for \(host) (host name mismatch)")
    }
    let reasons: [String]
    switch error {
    case NIOSSLError.handshakeFailed(let boring): reasons = boringSSLReasons(boring)
    case let boring as BoringSSLError: reasons = boringSSLReasons(boring)
    case NIOSSLError.uncleanShutdown: reasons = ["EOF during handshake"]
    case is NIOSSLError: reasons = ["\(error)"]
    default: return nil
    }
    if reasons.contains("CERTIFICATE_VERIFY_FAILED") {
        return failure(
            .untrustedCertificate,
            "the server's certificate is not trusted: it is not signed by a "
                + "trusted CA (give the server's CA with --ca-file), or it has expired or is not valid yet")
    }
    if reasons.contains(where: { $0.contains("EOF during handshake") }) {
        return failure(
            .tlsHandshakeFailed,
            "the connection closed during the TLS handshake (does the server speak "
                + "TLS on this port? did it reject this client's certificate or protocol version?)")
    }
    if reasons.contains("WRONG_VERSION_NUMBER") {
        return failure(.tlsHandshakeFailed, "the server did not answer with TLS (plain HTTP on an https URL?)")
    }
    return failure(.tlsHandshakeFailed, "the TLS handshake failed (\(reasons.joined(separator: ", ")))")
}

/// What a transport failure that retrying did not fix was, for its message: the system call and its `errno` text,
/// AsyncHTTPClient's short description (which has no header values: an invalid header value may be a token), the
/// address NIO could not connect to; the type's name for any other error, since another transport's error may
/// carry anything.
func transportFailureDetail(_ error: any Error) -> String {
    switch error {
    case let error as IOError: "IOError: \(error.description)"
    case let error as HTTPClientError: "HTTPClientError: \(error.shortDescription)"
    case let error as NIOConnectionError:
        "could not connect to \(error.host):\(error.port)"
            + (error.connectionErrors.first.map { " (\($0.error))" } ?? "")
    case let error as URLError: "URLError \(error.code.rawValue)" + (urlErrorNames[error.code].map { ": \($0)" } ?? "")
    default: "\(type(of: error))"
    }
}

/// The URLSession failures a transport meets most, by name (URLError's descriptions differ between platforms).
private let urlErrorNames: [URLError.Code: String] = [
    .timedOut: "timed out", .cannotConnectToHost: "cannot connect to the host",
    .cannotFindHost: "cannot find the host", .networkConnectionLost: "the connection was lost",
    .notConnectedToInternet: "not connected to the network", .badURL: "bad URL",
    .unsupportedURL: "unsupported URL", .badServerResponse: "bad server response",
    .cancelled: "cancelled", .dnsLookupFailed: "DNS lookup failed",
]

/// BoringSSL's reason names (`CERTIFICATE_VERIFY_FAILED`, …) from an error stack, or NIOSSL's synthetic
/// descriptions (`EOF during handshake`).
private func boringSSLReasons(_ error: BoringSSLError) -> [String] {
    switch error {
    case .sslError(let stack), .unknownError(let stack), .invalidSNIName(let stack), .failedToSetALPN(let stack):
        return stack.map { entry in
            // "Error: 268435581 error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at file:line",
            // or a synthetic "Error:  EOF during handshake".
            let text = "\(entry)"
            if let marker = text.range(of: "OPENSSL_internal:") {
                let rest = text[marker.upperBound...]
                return String(rest.prefix { $0 != " " })
            }
            return text.hasPrefix("Error:") ? text.dropFirst("Error:".count).trimmingCharacters(in: .whitespaces) : text
        }
    default:
        return ["\(error)"]
    }
}
