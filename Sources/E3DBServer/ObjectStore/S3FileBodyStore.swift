internal import AsyncHTTPClient
import E3DBPrimitives
public import Foundation
package import NIOCore
internal import NIOHTTP1

/// Where an S3-compatible object store is and how to reach it (path-style addressing: `ENDPOINT/BUCKET/KEY`).
public struct S3Options: Sendable {
    /// What this server calls (HEAD, DELETE, the start-up bucket check): `http(s)://host[:port]`.
    public var endpoint: URL
    /// What clients are sent in presigned URLs (the host they reach; signed into every URL).
    public var publicEndpoint: URL
    public var bucket: String
    public var region: String
    /// Keys are `PREFIX/<record id>` (no extension: some stores guess a content type from it); empty: `<id>`.
    public var prefix: String
    public var credentials: S3Credentials

    /// Checks the endpoints (`http` or `https`, a host, no path, query or user) and the bucket name.
    public init(
        endpoint: String, publicEndpoint: String? = nil, bucket: String, region: String = "us-east-1",
        prefix: String = "", credentials: S3Credentials
    ) throws {
        self.endpoint = try Self.endpoint(endpoint, option: "--s3-endpoint")
        self.publicEndpoint =
            try publicEndpoint.map { try Self.endpoint($0, option: "--s3-public-endpoint") }
            ?? self.endpoint
        guard !bucket.isEmpty, bucket.utf8.count <= 63,
            bucket.utf8.allSatisfy({
                $0 == 0x2d || $0 == 0x2e || (0x30...0x39).contains($0) || (0x61...0x7a).contains($0)
            })
        else {
            throw E3DBError(.invalidParameter, "--s3-bucket must be 1 to 63 lower-case letters, digits, '.' or '-'")
        }
        guard !region.isEmpty, region.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != 0x2f }) else {
            throw E3DBError(.invalidParameter, "--s3-region must be a region name such as us-east-1")
        }
        self.bucket = bucket
        self.region = region
        self.prefix = prefix.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
        self.credentials = credentials
    }

    private static func endpoint(_ text: String, option: String) throws -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil, url.query == nil,
            url.fragment == nil, url.path.isEmpty || url.path == "/"
        else {
            throw E3DBError(.invalidParameter, "\(option) must be an http(s)://host[:port] URL without a path")
        }
        return url
    }
}

/// File bodies in an S3-compatible bucket. Clients PUT and GET the bodies themselves through presigned URLs;
/// the server only signs, HEADs at commit and DELETEs, and never reads a body.
///
/// The upload URL signs `content-length` and `content-md5` in, so the store refuses a body of another size or
/// checksum; the commit then HEADs the key (existence, `Content-Length`, and an `ETag` that is the hex MD5).
package struct S3FileBodyStore: FileBodyStore {
    let options: S3Options
    let signer: SigV4Signer
    /// How long one call to the store (HEAD, DELETE, the bucket check) may take in all, connecting, retried
    /// connection attempts and reading the answer included: 5 s. A store that does not answer makes a commit 503
    /// (and leaves a body deletion in the outbox for a later drain) within it.
    static let callDeadline: Duration = .seconds(5)
    /// How long one connection attempt to the store may take: 2 s (the HTTP client tries again, within
    /// ``callDeadline``, when an attempt fails).
    static let connectTimeout: TimeAmount = .seconds(2)
    /// The client of every call to a store, with ``connectTimeout`` (a process-wide client, as `HTTPClient.shared`
    /// is, never shut down).
    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.timeout.connect = connectTimeout
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()
    /// The largest body one S3 PUT takes (5 GiB).
    package static let largestPut: Int64 = 5 << 30

    package var maxBodySize: Int64? { Self.largestPut }

    package init(options: S3Options) {
        self.options = options
        self.signer = SigV4Signer(credentials: options.credentials, region: options.region)
    }

    func key(_ id: RecordID) -> String { options.prefix.isEmpty ? id.text : options.prefix + "/" + id.text }

    /// `host[:port]` as the signed `host` header: the port only when it is not the scheme's default.
    static func authority(_ url: URL) -> String {
        let host = (url.host ?? "").contains(":") ? "[\(url.host ?? "")]" : (url.host ?? "")
        guard let port = url.port, port != (url.scheme?.lowercased() == "https" ? 443 : 80) else { return host }
        return "\(host):\(port)"
    }

    private func objectURL(base: URL, path: String, query: String) -> String {
        "\(base.scheme?.lowercased() ?? "http")://\(Self.authority(base))"
            + SigV4Signer.encode(path, keepingSlash: true) + (query.isEmpty ? "" : "?" + query)
    }

    private func presigned(
        _ method: String, id: RecordID, headers: [(String, String)], now: Int64, expires: Int64
    ) -> String {
        let path = "/\(options.bucket)/\(key(id))"
        let query = signer.presignedQuery(
            .init(method: method, host: Self.authority(options.publicEndpoint), path: path, headers: headers),
            now: now, expires: min(max(expires - now, 1), 604_800))
        return objectURL(base: options.publicEndpoint, path: path, query: query)
    }

    package func uploadURL(id: RecordID, size: Int64, md5: Data, now: Int64, expires: Int64) -> String? {
        presigned(
            "PUT", id: id, headers: [("content-length", String(size)), ("content-md5", md5.base64EncodedString())],
            now: now, expires: expires)
    }

    package func downloadURL(id: RecordID, now: Int64, expires: Int64) -> String? {
        presigned("GET", id: id, headers: [], now: now, expires: expires)
    }

    /// One header-signed request to the store (no body): its status and headers. Throws `.fileBodyIO` when the
    /// store cannot be reached or does not answer in time.
    private func call(_ method: HTTPMethod, path: String) async throws -> (status: UInt, headers: HTTPHeaders) {
        let now = Int64(Date().timeIntervalSince1970)
        var request = HTTPClientRequest(url: objectURL(base: options.endpoint, path: path, query: ""))
        request.method = method
        for (name, value) in signer.authorizationHeaders(
            .init(method: method.rawValue, host: Self.authority(options.endpoint), path: path), now: now)
        {
            request.headers.replaceOrAdd(name: name, value: value)
        }
        let (client, prepared) = (Self.client, request)
        do {
            return try await withDeadline(Self.callDeadline) {
                let response = try await client.execute(
                    prepared, timeout: .seconds(Self.callDeadline.components.seconds))
                // The answer's body (an S3 error document, at most a few KiB) is not needed: drain it.
                _ = try? await response.body.collect(upTo: 64 << 10)
                return (response.status.code, response.headers)
            }
        } catch is DeadlineExceeded {
            throw E3DBError(
                .fileBodyIO,
                "the object store at \(Self.authority(options.endpoint)) did not answer within \(Self.callDeadline)")
        } catch {
            throw E3DBError(
                .fileBodyIO, "the object store at \(Self.authority(options.endpoint)) cannot be reached (\(error))")
        }
    }

    package func verifyStored(id: RecordID, size: Int64, md5: Data) async throws -> StoredBody {
        let answer = try await call(.HEAD, path: "/\(options.bucket)/\(key(id))")
        switch answer.status {
        case 200: break
        case 404: return .missing
        default:
            throw E3DBError(.fileBodyIO, "the object store answered HEAD with HTTP \(answer.status)")
        }
        guard let length = answer.headers.first(name: "content-length").flatMap({ Int64($0) }), length == size else {
            return .mismatch("its length is not the declared \(size) bytes")
        }
        let etag = (answer.headers.first(name: "etag") ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        guard etag.lowercased() == Hex.encode(md5) else {
            return .mismatch("its ETag is not the declared MD5")
        }
        return .present
    }

    package func remove(id: RecordID) async throws {
        let answer = try await call(.DELETE, path: "/\(options.bucket)/\(key(id))")
        guard answer.status == 204 || answer.status == 200 || answer.status == 404 else {
            throw E3DBError(.fileBodyIO, "the object store answered DELETE with HTTP \(answer.status)")
        }
    }

    /// Uploads a body from this server (the move of a local store into the bucket): a header-signed PUT of `size`
    /// bytes streamed from `chunks`, with `Content-Length` and `Content-MD5` signed in, so that the store keeps it
    /// only when both match. Replaces what the key held. Throws `.fileBodyChecksumMismatch` when the store refused
    /// the body as another one (HTTP 400), `.fileBodyIO` when it cannot be reached or refused otherwise.
    package func put(
        id: RecordID, chunks: some AsyncSequence<ByteBuffer, any Error> & Sendable, size: Int64, md5: Data
    ) async throws {
        let path = "/\(options.bucket)/\(key(id))"
        var request = HTTPClientRequest(url: objectURL(base: options.endpoint, path: path, query: ""))
        request.method = .PUT
        let signed = SigV4Signer.Request(
            method: "PUT", host: Self.authority(options.endpoint), path: path,
            headers: [("content-length", String(size)), ("content-md5", md5.base64EncodedString())])
        // AsyncHTTPClient sets Content-Length itself from the body's known length: the same value as signed.
        for (name, value) in signer.authorizationHeaders(
            signed, payloadHash: SigV4Signer.unsignedPayload, now: Int64(Date().timeIntervalSince1970))
        where name != "content-length" {
            request.headers.replaceOrAdd(name: name, value: value)
        }
        request.body = .stream(chunks, length: .known(size))
        let status: UInt
        do {
            // A minute, and a second for every MiB (a store slower than 1 MiB/s is treated as unreachable).
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60 + size >> 20))
            _ = try? await response.body.collect(upTo: 64 << 10)
            status = response.status.code
        } catch let error as E3DBError {
            throw error  // reading the local body failed
        } catch {
            throw E3DBError(
                .fileBodyIO, "the object store at \(Self.authority(options.endpoint)) cannot be reached (\(error))")
        }
        switch status {
        case 200: return
        case 400:
            throw E3DBError(
                .fileBodyChecksumMismatch, "the object store refused the body as another one than declared (HTTP 400)")
        default: throw E3DBError(.fileBodyIO, "the object store answered PUT with HTTP \(status)")
        }
    }

    /// Checks that the bucket exists and the credentials may use it; the error says which is wrong.
    package func check() async throws {
        let bucket = "bucket \(options.bucket) at \(Self.authority(options.endpoint))"
        let answer: (status: UInt, headers: HTTPHeaders)
        do {
            answer = try await call(.HEAD, path: "/\(options.bucket)")
        } catch {
            throw E3DBError(.storageUnavailable, "the object store of \(bucket) cannot be reached")
        }
        switch answer.status {
        case 200: return
        case 404: throw E3DBError(.invalidStorageConfiguration, "the object store has no \(bucket)")
        case 401, 403:
            throw E3DBError(
                .invalidStorageConfiguration,
                "the object store refused the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) for \(bucket)")
        default:
            throw E3DBError(.storageUnavailable, "the object store answered HTTP \(answer.status) for \(bucket)")
        }
    }

    // The bodies do not pass through this server: its blob route has nothing to serve.

    package func store(
        id: RecordID, chunks: some AsyncSequence<ByteBuffer, any Error> & Sendable, expectedSize: Int64,
        expectedMD5: Data
    ) async throws {
        throw E3DBError(.fileBodyNotFound, "file bodies are uploaded to the object store, not to this server")
    }

    package func size(id: RecordID) throws -> Int64 {
        throw E3DBError(.fileBodyNotFound, "file bodies are in the object store, not on this server")
    }

    package func read(id: RecordID, into write: (ByteBuffer) async throws -> Void) async throws {
        throw E3DBError(.fileBodyNotFound, "file bodies are in the object store, not on this server")
    }

    package func removeAbandonedUploads(idle: TimeInterval) -> Int { 0 }
}
