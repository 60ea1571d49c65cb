public import E3DBPrimitives

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// TSV1 request signing, the `Authorization` header of E3DB/TozID requests (spec §8.1):
///
/// ```
/// header = "TSV1-ED25519-BLAKE2B; " b64u(pk) "; " unixSeconds "; " nonce "; uid:" clientID
/// toSign = path "; " query "; " METHOD "; " header
/// Authorization = header "; " b64u(Ed25519(BLAKE2b-256(utf8(toSign))))      // the raw 32-byte digest is signed
/// ```
public enum TSV1 {
    /// `TSV1-ED25519-BLAKE2B`.
    public static let method = "TSV1-ED25519-BLAKE2B"

    /// The `Authorization` header value.
    /// - Parameters:
    ///   - path: the request path as sent (percent-encoding kept).
    ///   - query: the canonical query (see ``canonicalQuery(_:)``), empty for none.
    ///   - httpMethod: the HTTP method, e.g. `GET`.
    ///   - timestamp: Unix seconds.
    ///   - nonce: a fresh random UUID per request (lowercase is written as given).
    ///   - clientID: the client ID; written as given (lowercase it: old Swift's uppercase `uid:` differs).
    ///   - signingKey: the client's Ed25519 key.
    /// - Returns: the header value.
    /// - Throws: `E3DBError` from BLAKE2b if the request cannot be hashed (no header is signed over an empty
    ///   digest then).
    public static func authorization(
        path: String,
        query: String,
        method httpMethod: String,
        timestamp: Int64,
        nonce: String,
        clientID: String,
        signingKey: Ed25519.PrivateKey
    ) throws(E3DBError) -> String {
        let header = "\(method); \(signingKey.publicKey.base64URLEncoded); \(timestamp); \(nonce); uid:\(clientID)"
        let toSign = "\(path); \(query); \(httpMethod); \(header)"
        let digest = try BLAKE2b.hash(data: Data(toSign.utf8), outputByteCount: 32)
        return header + "; " + Base64URL.encode(signingKey.signature(for: digest))
    }

    /// The header value for a request at the current time with a random nonce.
    /// - Parameters:
    ///   - path: the request path.
    ///   - query: the raw query string (canonicalized here with ``canonicalQuery(_:)``).
    ///   - httpMethod: the HTTP method.
    ///   - clientID: the client ID.
    ///   - signingKey: the client's Ed25519 key.
    /// - Returns: the header value.
    /// - Throws: `E3DBError` from BLAKE2b if the request cannot be hashed.
    public static func authorization(
        path: String, query: String, method httpMethod: String, clientID: UUID, signingKey: Ed25519.PrivateKey
    ) throws(E3DBError) -> String {
        try authorization(
            path: path, query: canonicalQuery(query), method: httpMethod,
            timestamp: Int64(Date().timeIntervalSince1970), nonce: UUID().lowercasedString,
            clientID: clientID.lowercasedString, signingKey: signingKey)
    }

    /// Canonicalizes a query string as the Python SDK does: split on `&`, percent- and `+`-decode names and
    /// values, sort the pairs (name, then value), and re-encode them (`quote_plus`: unreserved characters
    /// literal, space as `+`). For simple ASCII queries all SDKs agree with this form.
    /// - Parameter query: the raw query, without `?`.
    /// - Returns: the canonical query.
    public static func canonicalQuery(_ query: String) -> String {
        guard !query.isEmpty else { return "" }
        var pairs: [([UInt8], [UInt8])] = []
        for piece in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = decode(parts[0])
            let value = parts.count > 1 ? decode(parts[1]) : []
            pairs.append((name, value))
        }
        pairs.sort { a, b in
            let ka = String(decoding: a.0, as: UTF8.self).unicodeScalars.map(\.value)
            let kb = String(decoding: b.0, as: UTF8.self).unicodeScalars.map(\.value)
            if ka != kb { return ka.lexicographicallyPrecedes(kb) }
            let va = String(decoding: a.1, as: UTF8.self).unicodeScalars.map(\.value)
            let vb = String(decoding: b.1, as: UTF8.self).unicodeScalars.map(\.value)
            return va.lexicographicallyPrecedes(vb)
        }
        return pairs.map { encode($0.0) + "=" + encode($0.1) }.joined(separator: "&")
    }

    private static func decode(_ text: Substring) -> [UInt8] {
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if c == UInt8(ascii: "%"), i + 2 < bytes.count, let h = Hex.value(of: bytes[i + 1]),
                let l = Hex.value(of: bytes[i + 2])
            {
                out.append(h << 4 | l)
                i += 2
            } else {
                out.append(c)
            }
            i += 1
        }
        return out
    }

    private static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        for b in bytes {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"),
                UInt8(ascii: "~"):
                out.append(b)
            case UInt8(ascii: " "): out.append(UInt8(ascii: "+"))
            default:
                out.append(UInt8(ascii: "%"))
                Hex.append(b, to: &out, uppercase: true)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
