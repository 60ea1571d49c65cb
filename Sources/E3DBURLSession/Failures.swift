import E3DBClient
import E3DBPrimitives
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionTransport {
    /// Runs one exchange of `request`: everything it throws is `E3DBError` (``failure(_:url:)``).
    func mappingFailures<T>(of request: URLRequest, _ body: () async throws -> T) async throws -> T {
        let url = request.url?.absoluteString ?? ""
        return try await withTransportFailures(mapping: { Self.failure($0, url: url) }, body)
    }

    /// What this transport throws for an error of URLSession in the exchange with `url`'s host
    /// (`withTransportFailures` passes `E3DBError`s and the calling task's cancellation on before, and the
    /// transport's own deadline is `URLError.timedOut`):
    /// - URLSession's TLS verdicts (Apple platforms) as TLS codes: an untrusted certificate, an expired or not yet
    ///   valid one (`.certificateExpired`), a failed handshake;
    /// - `.cancelled` and `.userCancelledAuthentication` as `.tlsHandshakeFailed`: the session's delegate cancelled
    ///   an authentication challenge, which is how a pinning delegate refuses a server;
    /// - on Linux, where swift-corelibs-foundation reports libcurl's TLS failures as `URLError.unknown`, libcurl's
    ///   own text (which names the host, never the URL) decides the TLS code and goes in the message;
    /// - `.transportFailed` for the rest, with the `URLError` code and its name in the message.
    ///
    /// The cause is a `URLError` of the same code without its user info, which holds the request's URL (a
    /// presigned file URL carries a signature).
    static func failure(_ error: any Error, url: String) -> E3DBError {
        let host = messageHost(of: url)
        guard let error = error as? URLError else {
            return E3DBError(.transportFailed, "the exchange with \(host) failed (\(type(of: error)))")
        }
        let code = error.code
        let cause = URLError(code)
        func tls(_ e3db: E3DBError.Code, _ what: String) -> E3DBError {
            E3DBError(e3db, "TLS with \(host) failed: \(what)", context: .init(part: "tls"), cause: cause)
        }
        switch code {
        case .serverCertificateUntrusted, .serverCertificateHasUnknownRoot:
            return tls(
                .untrustedCertificate,
                "the server's certificate is not trusted (URLError \(code.rawValue)): it is not signed by a trusted CA")
        case .serverCertificateHasBadDate, .serverCertificateNotYetValid:
            return tls(
                .certificateExpired,
                "the server's certificate has expired or is not valid yet (URLError \(code.rawValue))")
        case .secureConnectionFailed, .clientCertificateRejected, .clientCertificateRequired:
            return tls(.tlsHandshakeFailed, "the TLS handshake failed (URLError \(code.rawValue))")
        case .cancelled, .userCancelledAuthentication:
            return tls(
                .tlsHandshakeFailed,
                "the session's delegate refused the server: it cancelled the authentication challenge (URLError "
                    + "\(code.rawValue)), as a pinning delegate does for a key it does not pin")
        case .unknown:
            guard let text = libcurlText(error, url: url) else { break }
            if let verdict = libcurlTLSVerdict(text) { return tls(verdict, text) }
            return E3DBError(.transportFailed, "the exchange with \(host) failed (\(text))", cause: cause)
        default:
            break
        }
        let name = urlErrorNames[code].map { ": \($0)" } ?? ""
        return E3DBError(
            .transportFailed, "the exchange with \(host) failed (URLError \(code.rawValue)\(name))", cause: cause)
    }

    /// libcurl's description of a failure, as swift-corelibs-foundation keeps it (the localized description of an
    /// unknown error), at most 200 characters; nil when there is none, or when it holds the request's path or
    /// query (libcurl's messages name a host and port, but what they quote is not ours to vouch for).
    static func libcurlText(_ error: URLError, url: String) -> String? {
        guard let text = error.userInfo[NSLocalizedDescriptionKey] as? String, !text.isEmpty else { return nil }
        let components = URLComponents(string: url)
        let path = components?.percentEncodedPath ?? ""
        let query = components?.percentEncodedQuery ?? ""
        guard !text.contains(url), path.count < 2 || !text.contains(path), query.isEmpty || !text.contains(query)
        else { return nil }
        return String(text.prefix(200))
    }

    /// The TLS code for libcurl's text of a TLS failure ("SSL certificate problem: certificate has expired",
    /// "SSL: no alternative certificate subject name matches target host name …", "OpenSSL SSL_connect: …"),
    /// nil for any other failure.
    static func libcurlTLSVerdict(_ text: String) -> E3DBError.Code? {
        let text = text.lowercased()
        guard text.contains("ssl") || text.contains("tls") || text.contains("certificate") else { return nil }
        if text.contains("expired") || text.contains("not yet valid") { return .certificateExpired }
        if text.contains("host name") || text.contains("hostname") { return .hostnameMismatch }
        if text.contains("certificate problem") || text.contains("certificate verif") { return .untrustedCertificate }
        return .tlsHandshakeFailed
    }
}

/// The URLSession failures a transport meets most, by name (URLError's descriptions differ between platforms).
private let urlErrorNames: [URLError.Code: String] = [
    .timedOut: "timed out", .cannotConnectToHost: "cannot connect to the host",
    .cannotFindHost: "cannot find the host", .networkConnectionLost: "the connection was lost",
    .notConnectedToInternet: "not connected to the network", .badURL: "bad URL",
    .unsupportedURL: "unsupported URL", .badServerResponse: "bad server response",
    .dnsLookupFailed: "DNS lookup failed",
]
