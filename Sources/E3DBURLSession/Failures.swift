import E3DBClient
import E3DBPrimitives
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSessionTransport {
    /// Runs one exchange of `request`: everything it throws is `E3DBError` (``failure(_:url:)``).
    func mappingFailures<T>(of request: TransportRequest, _ body: () async throws -> T) async throws -> T {
        try await withTransportFailures(mapping: { Self.failure($0, url: request.url) }, body)
    }

    /// What this transport throws for an error of URLSession in the exchange with `url`'s host
    /// (`withTransportFailures` passes `E3DBError`s and cancellation on before): URLSession's TLS verdicts as TLS
    /// codes (Apple platforms; on Linux libcurl's arrive as an unknown error); `.transportFailed` for the rest, with
    /// the `URLError` code and its name in the message. The cause is a `URLError` of the same code without its user
    /// info, which holds the request's URL (a presigned file URL carries a signature).
    static func failure(_ error: any Error, url: String) -> E3DBError {
        let host = URLComponents(string: url)?.host ?? "the server"
        guard let error = error as? URLError else {
            return E3DBError(.transportFailed, "the exchange with \(host) failed (\(type(of: error)))")
        }
        let code = error.code
        let cause = URLError(code)
        func tls(_ e3db: E3DBError.Code, _ what: String) -> E3DBError {
            E3DBError(e3db, "TLS with \(host) failed: \(what)", context: .init(part: "tls"), cause: cause)
        }
        switch code {
        case .serverCertificateUntrusted, .serverCertificateHasUnknownRoot, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid:
            return tls(
                .untrustedCertificate,
                "the server's certificate is not trusted (URLError \(code.rawValue)): it is not signed by a "
                    + "trusted CA, or it has expired or is not valid yet")
        case .secureConnectionFailed, .clientCertificateRejected, .clientCertificateRequired:
            return tls(.tlsHandshakeFailed, "the TLS handshake failed (URLError \(code.rawValue))")
        default:
            let name = urlErrorNames[code].map { ": \($0)" } ?? ""
            return E3DBError(
                .transportFailed, "the exchange with \(host) failed (URLError \(code.rawValue)\(name))", cause: cause)
        }
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
