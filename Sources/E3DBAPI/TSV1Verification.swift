public import E3DBPrimitives

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension E3DBError.Code {
    /// A TSV1 `Authorization` header is not six `"; "`-separated parts with the TSV1 method, a 32-byte key, a
    /// numeric timestamp and a 64-byte signature.
    public static let tsv1Malformed = Self("tsv1Malformed", category: .malformedInput)
    /// A TSV1 timestamp lies outside the accepted window around the verifier's clock.
    public static let tsv1Expired = Self("tsv1Expired", category: .verification)
    /// A TSV1 signature verifies over none of the canonical request forms the SDKs sign.
    public static let tsv1BadSignature = Self("tsv1BadSignature", category: .verification)
}

extension TSV1 {
    /// The longest nonce a verifier accepts, in UTF-8 bytes (the SDKs send a 36-character UUID): a server keeps
    /// every nonce for the window, so an unbounded one would let anyone fill its disk.
    public static let maxNonceBytes = 64

    /// A TSV1 header whose signature verified: what a server learns from it.
    public struct VerifiedRequest: Sendable, Equatable {
        /// The Ed25519 key that signed the request (the header is self-certifying).
        public let signingKey: Ed25519.PublicKey
        /// The `uid:` member, lowercased; `nil` when empty (anonymous note calls, identity login).
        public let clientID: String?
        /// The nonce, as sent; a server rejects a nonce it has seen inside the window.
        public let nonce: String
        /// The Unix-seconds timestamp.
        public let timestamp: Int64
    }

    /// Verifies a TSV1 `Authorization` header against the request as received (spec api §1.4).
    ///
    /// The SDKs canonicalize differently, so the signature is accepted when it verifies over any of: the raw
    /// path or its percent-decoded form, combined with the query re-encoded as Python and Go do
    /// (``canonicalQuery(_:)``) or with the raw `k=v` pairs sorted as js and old Swift do. The body is not
    /// signed. Nonce replay is the caller's check (it needs shared state).
    /// - Parameters:
    ///   - authorization: the header value.
    ///   - rawPath: the request path exactly as received (percent-encoding kept).
    ///   - rawQuery: the raw query without `?`, empty for none.
    ///   - httpMethod: the HTTP method.
    ///   - now: the verifier's clock, Unix seconds.
    ///   - window: the accepted clock difference in seconds either way (default 300).
    /// - Returns: the verified key, client id, nonce and timestamp.
    /// - Throws: `E3DBError` `.tsv1Malformed`, `.tsv1Expired` or `.tsv1BadSignature`.
    public static func verify(
        authorization: String, rawPath: String, rawQuery: String, method httpMethod: String, now: Int64,
        window: Int64 = 300
    ) throws(E3DBError) -> VerifiedRequest {
        let parts = authorization.components(separatedBy: "; ")
        // The scheme is case-insensitive (RFC 9110 §11.1); the header is signed as sent.
        guard parts.count == 6, parts[0].lowercased() == method.lowercased() else {
            throw E3DBError(
                .tsv1Malformed, "the TSV1 header must have 6 parts starting with \(method)",
                context: .init(expected: 6, actual: parts.count))
        }
        let key: Ed25519.PublicKey
        do { key = try Ed25519.PublicKey(base64URLEncoded: parts[1]) } catch {
            throw E3DBError(
                .tsv1Malformed, "the TSV1 signing key is not a base64url 32-byte key", context: .init(part: "key"))
        }
        guard let timestamp = Int64(parts[2]) else {
            throw E3DBError(.tsv1Malformed, "the TSV1 timestamp is not an integer", context: .init(part: "timestamp"))
        }
        // Byte-wise, not by Character: a uid that starts with a combining mark joins the ":" into one grapheme,
        // and `hasPrefix` / `dropFirst(4)` would then refuse the header or lose the mark.
        guard parts[4].utf8.starts(with: "uid:".utf8) else {
            throw E3DBError(
                .tsv1Malformed, "the TSV1 header's fifth part must start with uid:", context: .init(part: "uid"))
        }
        guard (1...maxNonceBytes).contains(parts[3].utf8.count) else {
            throw E3DBError(
                .tsv1Malformed, "the TSV1 nonce must be 1 to \(maxNonceBytes) bytes",
                context: .init(part: "nonce", expected: maxNonceBytes, actual: parts[3].utf8.count))
        }
        let signature: Data
        do { signature = try Base64URL.decode(parts[5]) } catch {
            throw E3DBError(.tsv1Malformed, "the TSV1 signature is not base64url", context: .init(part: "signature"))
        }
        guard signature.count == 64 else {
            throw E3DBError(
                .tsv1Malformed, "the TSV1 signature must be 64 bytes",
                context: .init(part: "signature", expected: 64, actual: signature.count))
        }
        // Overflow-safe: a timestamp near Int64.min or .max must be "expired", not a trap.
        let (difference, overflow) = now.subtractingReportingOverflow(timestamp)
        guard !overflow, window >= 0, difference.magnitude <= UInt64(window) else {
            throw E3DBError(
                .tsv1Expired, "the TSV1 timestamp is more than \(window) s from the server's clock",
                context: .init(part: "timestamp"))
        }
        let header = parts[0..<5].joined(separator: "; ")
        for path in pathForms(rawPath) {
            for query in queryForms(rawQuery) {
                let toSign = "\(path); \(query); \(httpMethod); \(header)"
                let digest = try BLAKE2b.hash(data: Data(toSign.utf8), outputByteCount: 32)
                if key.isValidSignature(signature, for: digest) {
                    let uid = String(decoding: parts[4].utf8.dropFirst(4), as: UTF8.self).lowercased()
                    return VerifiedRequest(
                        signingKey: key, clientID: uid.isEmpty ? nil : uid, nonce: parts[3], timestamp: timestamp)
                }
            }
        }
        throw E3DBError(.tsv1BadSignature, "the TSV1 signature does not verify over the request")
    }

    /// The path as received and, when it differs, percent-decoded (old Swift signs `URL.path`): the path forms
    /// ``verify(authorization:rawPath:rawQuery:method:now:window:)`` accepts a signature over.
    /// - Parameter rawPath: the path as received.
    /// - Returns: one or two forms, the raw path first.
    public static func pathForms(_ rawPath: String) -> [String] {
        let decoded = percentDecoded(rawPath) ?? rawPath
        return decoded == rawPath ? [rawPath] : [rawPath, decoded]
    }

    /// Percent-decodes a path (`+` stays `+`); `nil` when an escape is malformed or the bytes are not UTF-8.
    public static func percentDecoded(_ text: String) -> String? {
        // Most text has no escape (every segment of every request path the server checks): no copy for it.
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let h = Hex.value(of: bytes[i + 1]), let l = Hex.value(of: bytes[i + 2])
                else { return nil }
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// The query re-encoded (Python, Go) and the raw pairs sorted (js, old Swift): the query forms
    /// ``verify(authorization:rawPath:rawQuery:method:now:window:)`` accepts a signature over.
    /// - Parameter rawQuery: the raw query without `?`.
    /// - Returns: one or two forms, the re-encoded one first.
    public static func queryForms(_ rawQuery: String) -> [String] {
        guard !rawQuery.isEmpty else { return [""] }
        let reencoded = canonicalQuery(rawQuery)
        let rawSorted = rawQuery.split(separator: "&", omittingEmptySubsequences: true).map(String.init)
            .sorted { a, b in
                let ka = a.split(separator: "=", maxSplits: 1).first.map(String.init) ?? a
                let kb = b.split(separator: "=", maxSplits: 1).first.map(String.init) ?? b
                return ka == kb ? a < b : ka < kb
            }.joined(separator: "&")
        return reencoded == rawSorted ? [reencoded] : [reencoded, rawSorted]
    }
}
