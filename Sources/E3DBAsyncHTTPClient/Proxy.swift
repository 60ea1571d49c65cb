public import E3DBPrimitives
public import Foundation

/// An HTTP proxy that the transport reaches the server through with `CONNECT` (a tunnel, for `https` and `http`
/// URLs alike; TLS with the server runs inside it, end to end).
public struct HTTPProxy: Sendable, Hashable, CustomStringConvertible {
    /// The proxy's host name or address.
    public let host: String
    /// The proxy's port.
    public let port: Int
    /// `user:password` for the proxy's Basic authentication, from the proxy URL; never in ``description``.
    let credentials: String?

    /// A proxy at `host:port`, without authentication.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
        credentials = nil
    }

    /// A proxy from its URL as the `HTTPS_PROXY` family of variables give it: `http://[user:password@]host[:port]`,
    /// or `host[:port]` (port 1080 by default, as curl's).
    /// - Throws: `E3DBError` `.invalidParameter` for another scheme (`https://` proxies, `socks5://`) or a URL
    ///   without a host; the message never repeats the credentials.
    public init(url text: String) throws(E3DBError) {
        let withScheme = text.contains("://") ? text : "http://" + text
        guard let components = URLComponents(string: withScheme), let host = components.host, !host.isEmpty else {
            throw E3DBError(
                .invalidParameter, "the proxy is not a URL of the form http://host:port", context: .init(part: "proxy"))
        }
        guard components.scheme?.lowercased() == "http" else {
            throw E3DBError(
                .invalidParameter,
                "only http:// proxies are supported (HTTP CONNECT), not \(components.scheme ?? "")://",
                context: .init(part: "proxy"))
        }
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        port = components.port ?? 1080
        if let user = components.percentEncodedUser {
            let password = components.percentEncodedPassword ?? ""
            credentials = (user.removingPercentEncoding ?? user) + ":" + (password.removingPercentEncoding ?? password)
        } else {
            credentials = nil
        }
    }

    /// `host:port` (without the credentials).
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The proxy the environment names for `url`, as curl reads it: `https_proxy` or `HTTPS_PROXY` for an
    /// `https` URL (lower case first), only `http_proxy` for an `http` URL (never `HTTP_PROXY`: a CGI program gets
    /// the request's `Proxy:` header as `HTTP_PROXY`, "httpoxy"); an empty value is unset; and none when
    /// `no_proxy`/`NO_PROXY` covers the URL's host (``bypassesProxy(host:port:noProxy:)``).
    /// - Parameters:
    ///   - url: the server's URL.
    ///   - environment: the variables (the process's by default).
    /// - Returns: the proxy, or nil to connect directly.
    /// - Throws: `E3DBError` `.invalidParameter` when the variable is not a usable proxy URL.
    public static func fromEnvironment(
        for url: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    )
        throws(E3DBError) -> HTTPProxy?
    {
        func value(_ name: String, upperCase: Bool = true) -> String? {
            for key in upperCase ? [name.lowercased(), name.uppercased()] : [name.lowercased()] {
                if let v = environment[key]?.trimmingCharacters(in: .whitespaces), !v.isEmpty { return v }
            }
            return nil
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let host = components.host
        else { return nil }
        let named = scheme == "https" ? value("https_proxy") : value("http_proxy", upperCase: false)
        guard let proxy = named else { return nil }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        if let noProxy = value("no_proxy"), bypassesProxy(host: host, port: port, noProxy: noProxy) { return nil }
        do { return try HTTPProxy(url: proxy) } catch {
            throw E3DBError(.invalidParameter, "\(scheme)_proxy: \(error.message)", context: .init(part: "proxy"))
        }
    }

    /// Whether `NO_PROXY` (`noProxy`) exempts `host`: a comma- or space-separated list where `*` alone covers
    /// every host; a name covers itself and its subdomains (`example.com` and `.example.com` both cover
    /// `example.com` and `api.example.com`, not `badexample.com`); an IP address covers itself and an IPv4
    /// `a.b.c.d/n` covers its network; `name:port` covers only that port. Case-insensitive; a trailing dot and
    /// IPv6 brackets are ignored.
    public static func bypassesProxy(host: String, port: Int, noProxy: String) -> Bool {
        func normalized(_ s: Substring) -> String {
            var s = s.lowercased()
            if s.hasPrefix("["), let end = s.firstIndex(of: "]") { s = String(s[s.index(after: s.startIndex)..<end]) }
            while s.hasSuffix(".") { s.removeLast() }
            return s
        }
        let target = normalized(Substring(host))
        let targetIsAddress = IPv4(Substring(target)) != nil || target.contains(":")
        let entries = noProxy.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
        for raw in entries {
            if raw == "*" { return true }
            var entry = Substring(raw)
            // name:port (an IPv6 address has several colons; it takes a port only in brackets).
            if let colon = entry.lastIndex(of: ":"), entry.filter({ $0 == ":" }).count == 1 || entry.hasPrefix("[") {
                let portText = entry[entry.index(after: colon)...]
                if let entryPort = Int(portText), !entry.hasSuffix("]") {
                    guard entryPort == port else { continue }
                    entry = entry[..<colon]
                }
            }
            if let slash = entry.firstIndex(of: "/") {
                if let network = IPv4(entry[..<slash]), let bits = Int(entry[entry.index(after: slash)...]),
                    (0...32).contains(bits), let address = IPv4(Substring(target))
                {
                    let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << (32 - bits)
                    if network.value & mask == address.value & mask { return true }
                }
                continue
            }
            var name = normalized(entry)
            while name.hasPrefix(".") { name.removeFirst() }
            guard !name.isEmpty else { continue }
            if target == name || (!targetIsAddress && target.hasSuffix("." + name)) { return true }
        }
        return false
    }

    /// A dotted-quad IPv4 address.
    private struct IPv4 {
        let value: UInt32
        init?(_ text: Substring) {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4 else { return nil }
            var v: UInt32 = 0
            for part in parts {
                guard let octet = UInt8(part) else { return nil }
                v = v << 8 | UInt32(octet)
            }
            value = v
        }
    }
}
