import E3DBPrimitives
import Foundation
import Testing

@testable import E3DBServer

@Suite("SigV4: AWS's published S3 examples and the URLs the object store is given")
struct SigV4Tests {
    /// The example key of AWS's S3 SigV4 pages ("Authenticating Requests: Using Query Parameters" and "Using the
    /// Authorization Header"), their bucket `examplebucket` (virtual-hosted there), object `test.txt`, region
    /// us-east-1, at 20130524T000000Z.
    static let signer = SigV4Signer(
        credentials: S3Credentials(
            accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        region: "us-east-1")
    static let example: Int64 = 1_369_353_600  // 2013-05-24T00:00:00Z

    @Test("the query-parameter example: GET test.txt for 86400 s gives AWS's URL and signature")
    func presignedExample() {
        let query = Self.signer.presignedQuery(
            .init(method: "GET", host: "examplebucket.s3.amazonaws.com", path: "/test.txt"), now: Self.example,
            expires: 86400)
        #expect(
            query
                == "X-Amz-Algorithm=AWS4-HMAC-SHA256"
                + "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
                + "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
                + "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
    }

    @Test("the Authorization-header example: GET test.txt with Range bytes=0-9 gives AWS's signature")
    func headerExample() throws {
        let headers = Self.signer.authorizationHeaders(
            .init(
                method: "GET", host: "examplebucket.s3.amazonaws.com", path: "/test.txt",
                headers: [("Range", "bytes=0-9")]),
            now: Self.example)
        let authorization = try #require(headers.first { $0.0 == "Authorization" }?.1)
        #expect(
            authorization
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(headers.contains { $0 == ("x-amz-date", "20130524T000000Z") })
        #expect(
            headers.contains {
                $0 == ("x-amz-content-sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
            })
        #expect(headers.contains { $0 == ("host", "examplebucket.s3.amazonaws.com") })
    }

    @Test("a presigned PUT signs content-length and content-md5: another size or checksum is another signature")
    func presignedPut() {
        func put(_ size: String, _ md5: String) -> String {
            Self.signer.presignedQuery(
                .init(
                    method: "PUT", host: "127.0.0.1:8333", path: "/bucket/prefix/id",
                    headers: [("Content-Length", size), ("Content-MD5", md5)]),
                now: Self.example, expires: 3600)
        }
        let url = put("1000", "1B2M2Y8AsgTpgAmY7PhCfg==")
        #expect(url.contains("&X-Amz-SignedHeaders=content-length%3Bcontent-md5%3Bhost&"))
        #expect(url.contains("&X-Amz-Expires=3600&"))
        #expect(url != put("1001", "1B2M2Y8AsgTpgAmY7PhCfg=="))
        #expect(url != put("1000", "2B2M2Y8AsgTpgAmY7PhCfg=="))
        let get = Self.signer.presignedQuery(
            .init(method: "GET", host: "127.0.0.1:8333", path: "/bucket/prefix/id"), now: Self.example,
            expires: 3600)
        #expect(get.contains("X-Amz-SignedHeaders=host&"))
        #expect(url.split(separator: "&").last != get.split(separator: "&").last)
    }

    @Test("keys and values are RFC 3986 encoded with upper-case escapes; a path keeps its slashes")
    func encoding() {
        #expect(SigV4Signer.encode("AZaz09-_.~", keepingSlash: false) == "AZaz09-_.~")
        #expect(SigV4Signer.encode("a/b c+ü=;", keepingSlash: false) == "a%2Fb%20c%2B%C3%BC%3D%3B")
        #expect(SigV4Signer.encode("/bucket/odd key+ü", keepingSlash: true) == "/bucket/odd%20key%2B%C3%BC")
    }

    @Test("timestamps are UTC calendar dates, across leap days and centuries")
    func timestamps() {
        #expect(SigV4Signer.timestamp(0) == ("19700101T000000Z", "19700101"))
        #expect(SigV4Signer.timestamp(Self.example) == ("20130524T000000Z", "20130524"))
        #expect(SigV4Signer.timestamp(951_825_599) == ("20000229T115959Z", "20000229"))
        #expect(SigV4Signer.timestamp(4_102_444_799) == ("20991231T235959Z", "20991231"))
        #expect(SigV4Signer.timestamp(4_107_542_400) == ("21000301T000000Z", "21000301"))
        #expect(SigV4Signer.timestamp(1_709_164_800 + 3_723) == ("20240229T010203Z", "20240229"))
    }

    @Test("the credentials never print their secret")
    func redacted() {
        let credentials = S3Credentials(accessKeyID: "AKID", secretAccessKey: "very-secret-value")
        #expect(!String(describing: credentials).contains("very-secret"))
        #expect(!String(reflecting: credentials).contains("very-secret"))
        #expect(!"\(Self.signer)".contains("wJalrXUtnFEMI"))
    }
}
