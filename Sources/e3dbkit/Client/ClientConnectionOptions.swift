import ArgumentParser
import E3DBAsyncHTTPClient
import E3DBClient
import E3DBCommandLine
import E3DBKit
import Foundation

/// How `e3dbkit client` reaches the server: the CAs it trusts, the server keys it accepts, and the proxy
/// (`HTTPS_PROXY`, `http_proxy`, `NO_PROXY`).
struct ClientConnectionOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "A PEM file of the CA certificates to trust instead of the system's (default: $E3DBKIT_CA_FILE).",
            valueName: "pem"))
    var caFile: String?

    @Option(
        name: .customLong("pin-sha256"),
        help: ArgumentHelp(
            "Accept only a server whose certificate's public key has this SHA-256 (base64 of the SubjectPublicKeyInfo, "
                + "as curl's --pinnedpubkey sha256//…; repeatable).",
            valueName: "base64"))
    var pins: [String] = []

    /// The transport to `apiURL`: the CAs from --ca-file or `E3DBKIT_CA_FILE` (https URLs only), the pins, and the
    /// proxy the environment names for that URL.
    /// - Throws: a usage error (exit 64) for a URL that is not `http://` or `https://` with a host (such as
    ///   `127.0.0.1:8000`), and for --ca-file or --pin-sha256 with an `http://` URL.
    func transport(for apiURL: String) throws -> AsyncHTTPClientTransport {
        let components = URLComponents(string: apiURL)
        guard let scheme = components?.scheme?.lowercased(), scheme == "http" || scheme == "https",
            components?.host?.isEmpty == false
        else {
            let shown = String(String(reflecting: apiURL).prefix(200))
            throw CLIError(
                "the server URL \(shown) needs a scheme and a host: http://HOST[:PORT] or https://HOST[:PORT] "
                    + "(for example http://127.0.0.1:8000)", exitCode: ExitStatus.usage)
        }
        let environment = ProcessInfo.processInfo.environment
        // E3DBKIT_CA_FILE is a default for https URLs (as curl's CURL_CA_BUNDLE); --ca-file and --pin-sha256 with
        // an http URL are refused (ClientTLSOptions.check).
        let https = scheme == "https"
        let path = caFile ?? (https ? environment["E3DBKIT_CA_FILE"].flatMap { $0.isEmpty ? nil : $0 } : nil)
        do {
            let parsedPins = try pins.map { text throws(E3DBError) in try PublicKeyPin(base64: text) }
            let pem = try path.map { try CLIInput.read($0, what: "CA file") }
            let tls = try ClientTLSOptions(certificateAuthoritiesPEM: pem, pins: parsedPins)
            try tls.check(for: apiURL)
            let proxy = try HTTPProxy.fromEnvironment(for: apiURL, environment: environment)
            return AsyncHTTPClientTransport(tls: tls, proxy: proxy)
        } catch let error as E3DBError {
            throw CLIError(error, while: "setting up the connection to \(apiURL)")
        }
    }
}
