import E3DBAPI
import E3DBPrimitives
import Foundation

/// The access key of an S3-compatible store. The secret is kept in wiped memory and never printed: `description`
/// names the access key id only.
public struct S3Credentials: Sendable, CustomStringConvertible {
    /// The access key id (not secret: it is in every signed URL).
    public let accessKeyID: String
    /// `"AWS4" + secret access key`, the first key of SigV4's derivation.
    let signingSeed: SecureBytes

    /// Keeps `secretAccessKey` in wiped memory (the `String` itself is the caller's).
    public init(accessKeyID: String, secretAccessKey: String) {
        self.accessKeyID = accessKeyID
        self.signingSeed = SecureBytes(copying: Array("AWS4".utf8) + Array(secretAccessKey.utf8))
    }

    public var description: String { "S3Credentials(\(accessKeyID), secret redacted)" }
}

/// AWS Signature Version 4 for S3 (service `s3`), as AWS documents it in "Authenticating Requests (AWS Signature
/// Version 4)": presigned URLs (query authentication) and the `Authorization` header. Stateless: every node with
/// the same credentials, region and a synchronized clock signs the same URL.
struct SigV4Signer: Sendable {
    let credentials: S3Credentials
    let region: String

    static let algorithm = "AWS4-HMAC-SHA256"
    /// The payload hash of a presigned URL: the body is not part of the signature (its MD5 and length may be).
    static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// SHA-256 of the empty body, the payload hash of a header-signed request without one.
    static let emptyPayload = Hex.encode(Hashes.sha256(Data()))

    /// A request to sign: `path` is the URI path as sent, before encoding (`/bucket/key`); `headers` are the
    /// headers to sign besides `host` (names in any case).
    struct Request {
        var method: String
        var host: String
        var path: String
        var query: [(String, String)] = []
        var headers: [(String, String)] = []
    }

    /// The query string of a presigned URL for `request`, valid for `expires` seconds (1 to 604800) from `now`
    /// (Unix seconds): the request's own query items, the `X-Amz-*` parameters and `X-Amz-Signature`, encoded.
    func presignedQuery(_ request: Request, now: Int64, expires: Int64) -> String {
        let time = Self.timestamp(now)
        var request = request
        let signedHeaders = Self.canonicalHeaders(request).names
        request.query += [
            ("X-Amz-Algorithm", Self.algorithm),
            ("X-Amz-Credential", "\(credentials.accessKeyID)/\(scope(day: time.day))"),
            ("X-Amz-Date", time.stamp),
            ("X-Amz-Expires", String(expires)),
            ("X-Amz-SignedHeaders", signedHeaders),
        ]
        let query = Self.canonicalQuery(request.query)
        let signature = sign(request, query: query, payloadHash: Self.unsignedPayload, time: time)
        return query + "&X-Amz-Signature=" + signature
    }

    /// The headers to send with `request` signed in the `Authorization` header: `host`, `x-amz-date`,
    /// `x-amz-content-sha256` (`payloadHash`), the request's own headers, and `Authorization`.
    func authorizationHeaders(_ request: Request, payloadHash: String = emptyPayload, now: Int64) -> [(String, String)]
    {
        let time = Self.timestamp(now)
        var request = request
        request.headers += [("x-amz-content-sha256", payloadHash), ("x-amz-date", time.stamp)]
        let signedHeaders = Self.canonicalHeaders(request).names
        let signature = sign(
            request, query: Self.canonicalQuery(request.query), payloadHash: payloadHash, time: time)
        let authorization =
            "\(Self.algorithm) Credential=\(credentials.accessKeyID)/\(scope(day: time.day)),"
            + "SignedHeaders=\(signedHeaders),Signature=\(signature)"
        return [("host", request.host)] + request.headers + [("Authorization", authorization)]
    }

    private func scope(day: String) -> String { "\(day)/\(region)/s3/aws4_request" }

    /// The lower-hex signature of the canonical request (steps 6 to 9 of the derivation).
    private func sign(_ request: Request, query: String, payloadHash: String, time: (stamp: String, day: String))
        -> String
    {
        let headers = Self.canonicalHeaders(request)
        let canonicalRequest = [
            request.method, Self.encode(request.path, keepingSlash: true), query, headers.block, headers.names,
            payloadHash,
        ].joined(separator: "\n")
        let stringToSign = [
            Self.algorithm, time.stamp, scope(day: time.day), Hex.encode(Hashes.sha256(Data(canonicalRequest.utf8))),
        ].joined(separator: "\n")
        var key = Hashes.hmacSHA256(key: credentials.signingSeed, message: Data(time.day.utf8))
        for part in [region, "s3", "aws4_request"] { key = Hashes.hmacSHA256(key: key, message: Data(part.utf8)) }
        return Hex.encode(Hashes.hmacSHA256(key: key, message: Data(stringToSign.utf8)))
    }

    /// The signed headers (`host` and the request's, lowercased, values trimmed with inner runs of spaces
    /// collapsed, sorted by name): the `name:value\n` block and the `;`-joined names.
    private static func canonicalHeaders(_ request: Request) -> (block: String, names: String) {
        let headers: [(name: String, value: String)] = [("host", request.host)] + request.headers
        let canonical: [(name: String, value: String)] = headers.map { header in
            let value = header.value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            return (header.name.lowercased(), value)
        }
        let all = canonical.sorted { a, b in a.name < b.name }
        let block = all.map { header in header.name + ":" + header.value + "\n" }.joined()
        return (block, all.map(\.name).joined(separator: ";"))
    }

    /// `key=value` pairs, each RFC 3986 encoded, sorted by encoded key (then value), joined with `&`.
    private static func canonicalQuery(_ items: [(String, String)]) -> String {
        let encoded: [(key: String, value: String)] = items.map { key, value in
            (encode(key, keepingSlash: false), encode(value, keepingSlash: false))
        }
        let sorted = encoded.sorted { a, b in a.key == b.key ? a.value < b.value : a.key < b.key }
        return sorted.map { pair in pair.key + "=" + pair.value }.joined(separator: "&")
    }

    private static let unreserved = Set(
        Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~".utf8))

    /// RFC 3986 encoding as SigV4 wants it: only `A-Z a-z 0-9 - _ . ~` (and `/` in a path) stay literal, every
    /// other UTF-8 byte becomes upper-case `%XX`.
    static func encode(_ text: String, keepingSlash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            if unreserved.contains(byte) || (keepingSlash && byte == UInt8(ascii: "/")) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%" + Hex.encode([byte], uppercase: true)
            }
        }
        return out
    }

    /// `yyyyMMdd'T'HHmmss'Z'` and `yyyyMMdd` in UTC for Unix seconds `now`: the wire timestamp's calendar
    /// (``APITimestamp/format(micros:)``) without its separators and fraction.
    static func timestamp(_ now: Int64) -> (stamp: String, day: String) {
        let compact = APITimestamp.format(micros: now * 1_000_000).prefix(19).filter { $0 != "-" && $0 != ":" }
        return (compact + "Z", String(compact.prefix(8)))
    }
}
