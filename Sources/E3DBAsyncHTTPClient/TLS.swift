import AsyncHTTPClient
import E3DBClient
public import E3DBPrimitives
public import Foundation
import NIOCore
import NIOPosix
import NIOSSL

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

/// How ``AsyncHTTPClientTransport`` trusts the server: the CAs to trust (the system's by default) and, optionally,
/// the server public keys to accept.
///
/// - Note: `URLSessionTransport` (the `E3DBURLSession` product) takes no such options: with Foundation's
///   URLSession on Linux (FoundationNetworking) neither can be implemented: it has no
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
                + "\(messageHost(of: url)) is reached over http://: use its https:// URL "
                + "or drop the CA file and pins", context: .init(part: "tls"))
    }

    /// NIOSSL's client configuration: full verification (chain and host name) against these CAs.
    var nioConfiguration: TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if !certificateAuthorities.isEmpty { configuration.trustRoots = .certificates(certificateAuthorities) }
        return configuration
    }
}

/// What ``AsyncHTTPClientTransport`` throws for an error of AsyncHTTPClient, NIO or NIOSSL in the exchange with
/// `url`'s host (`withTransportFailures` passes `E3DBError`s and cancellation on before): a TLS code for a TLS
/// failure (untrusted certificate, host name mismatch, a failed handshake), which the client never retries;
/// `.invalidParameter` for a request AsyncHTTPClient refuses to send (an invalid URL, no host, another scheme, a
/// header name or value it does not accept), never retried either; `.transportFailed` for the rest. Messages name
/// what failed and the host, never a header value, key or token; `cause` is NIO's or AsyncHTTPClient's error where
/// it holds none.
/// - Parameters:
///   - error: what AsyncHTTPClient, NIO or the forwarder threw.
///   - url: the request's URL (its host goes in the message).
func transportFailure(_ error: any Error, url: String) -> E3DBError {
    let host = messageHost(of: url)
    if let failure = tlsFailure(error, host: host) { return failure }
    let (sendable, detail, cause) = exchangeFailure(error)
    guard sendable else {
        return E3DBError(
            .invalidParameter, "the request to \(host) cannot be sent (\(detail))",
            cause: cause)
    }
    return E3DBError(.transportFailed, "the exchange with \(host) failed (\(detail))", cause: cause)
}

/// A TLS failure as `E3DBError` (untrusted certificate, host name mismatch, a failed handshake), nil for another
/// error.
func tlsFailure(_ error: any Error, host: String) -> E3DBError? {
    func failure(_ code: E3DBError.Code, _ what: String) -> E3DBError {
        E3DBError(code, "TLS with \(host) failed: \(what)", context: .init(part: "tls"), cause: error)
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

/// What a failed exchange was: whether the request could be sent at all (false for one AsyncHTTPClient refuses
/// before sending: it would never succeed); the detail for the message (the system call and its `errno` text,
/// AsyncHTTPClient's short description, which has no header values, the address NIO could not connect to; the
/// type's name for any other error); and the error as `cause` when it holds no secret (NIO's system call and
/// connection errors, the AsyncHTTPClient errors that carry nothing of the request; not the others, which can hold
/// header values, a token among them).
func exchangeFailure(_ error: any Error) -> (sendable: Bool, detail: String, cause: (any Error)?) {
    switch error {
    case let error as IOError: return (true, "IOError: \(error.description)", error)
    case let error as NIOConnectionError:
        let first = error.connectionErrors.first.map { " (\($0.error))" } ?? ""
        return (true, "could not connect to \(error.host):\(error.port)\(first)", error)
    case is ChannelError: return (true, "\(type(of: error))", error)
    case let error as HTTPClientError:
        let detail = "HTTPClientError: \(error.shortDescription)"
        if unsendable.contains(error.shortDescription) { return (false, detail, nil) }
        return (true, detail, plainHTTPClientErrors.contains(error) ? error : nil)
    default: return (true, "\(type(of: error))", nil)
    }
}

/// The AsyncHTTPClient errors of a request it will not send, by their short descriptions (stable, without the
/// values some of them carry).
private let unsendable: Set<String> = [
    "Invalid URL", "Empty host", "Empty scheme", "Unsupported scheme", "Missing socket path",
    "Invalid header field names", "Invalid header field values", "Trace request with body",
]

/// The AsyncHTTPClient errors that carry nothing of the request.
private let plainHTTPClientErrors: [HTTPClientError] = [
    .connectTimeout, .readTimeout, .writeTimeout, .deadlineExceeded, .remoteConnectionClosed, .cancelled,
    .alreadyShutdown, .bodyLengthMismatch, .getConnectionFromPoolTimeout, .tlsHandshakeTimeout,
    .proxyAuthenticationRequired, .invalidProxyResponse, .httpProxyHandshakeTimeout, .uncleanShutdown,
    .requestStreamCancelled,
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
