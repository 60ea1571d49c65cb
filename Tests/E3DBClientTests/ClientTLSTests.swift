import E3DBKit
import E3DBServerTestSupport
import E3DBTestSupport
import Foundation
import HTTPTypes
import Testing

@testable import E3DBAsyncHTTPClient
@testable import E3DBClient

/// A private CA and server certificates made with `openssl` at test time, in a temporary directory.
struct TestPKI: Sendable {
    let directory: URL
    /// The CA's certificate (PEM).
    var caFile: String { directory.appendingPathComponent("ca.pem").path }

    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// Runs a shell command line (openssl only, file names only in it) in the directory; returns its output.
    @discardableResult
    func shell(_ line: String) async throws -> String {
        let result = try await ChildProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", line], in: directory)
        guard result.status == 0 else { throw ServerProcess.ServerFailure(description: "openssl failed: \(line)") }
        return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A CA, and a server certificate `name`.pem/`name`.key signed by it for `subjectAltName`.
    static func make() async throws -> TestPKI {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "e3dbkit-pki-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let pki = TestPKI(directory: directory)
        try await pki.shell(
            """
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 \
            -subj '/CN=E3DBKit test CA' -addext basicConstraints=critical,CA:TRUE \
            -addext keyUsage=critical,keyCertSign,cRLSign
            """)
        return pki
    }

    /// A server key and certificate signed by the CA, valid for `subjectAltName`.
    func server(_ name: String, subjectAltName: String) async throws -> (cert: String, key: String) {
        try await shell(
            """
            printf 'subjectAltName=%s\\nextendedKeyUsage=serverAuth\\nbasicConstraints=CA:FALSE\\n' '\(subjectAltName)' \
            > \(name).ext && \
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(name).key -out \(name).csr \
            -subj '/CN=\(name)' && \
            openssl x509 -req -in \(name).csr -CA ca.pem -CAkey ca.key -CAcreateserial -out \(name).pem -days 2 \
            -extfile \(name).ext
            """)
        return (path("\(name).pem"), path("\(name).key"))
    }

    /// A server key and a certificate for localhost and 127.0.0.1 that expired in 2020, signed by the CA
    /// (`openssl ca`, which takes explicit dates).
    func expiredServer(_ name: String) async throws -> (cert: String, key: String) {
        let config =
            "[ca]\ndefault_ca = test\n[test]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n"
            + "default_md = sha256\npolicy = any\ncopy_extensions = none\n[any]\ncommonName = supplied\n"
        try Data(config.utf8).write(to: directory.appendingPathComponent("ca.cnf"))
        try Data("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n".utf8)
            .write(to: directory.appendingPathComponent("\(name).ext"))
        try Data().write(to: directory.appendingPathComponent("index.txt"))
        try Data("01\n".utf8).write(to: directory.appendingPathComponent("serial"))
        try await shell(
            """
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(name).key -out \(name).csr \
            -subj '/CN=\(name)' && \
            openssl ca -batch -notext -config ca.cnf -cert ca.pem -keyfile ca.key -in \(name).csr -out \(name).pem \
            -startdate 20200101000000Z -enddate 20200102000000Z -extfile \(name).ext
            """)
        return (path("\(name).pem"), path("\(name).key"))
    }

    /// The base64 SHA-256 of a certificate's SubjectPublicKeyInfo, as openssl computes it.
    func pin(ofCertificate file: String) async throws -> String {
        try await shell(
            "openssl x509 -in '\(file)' -pubkey -noout | openssl pkey -pubin -outform DER "
                + "| openssl dgst -sha256 -binary | openssl base64 -A")
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

/// `e3dbkit` with arguments and extra environment, without the proxy and CA variables of this process's
/// environment; its status, stdout and stderr.
func runE3DBKit(_ arguments: [String], environment extra: [String: String] = [:]) async throws
    -> (status: Int32, out: String, err: String)
{
    let result = try await CLIRunner.run(
        arguments, environment: extra,
        removingEnvironment: [
            "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "E3DBKIT_CA_FILE",
        ])
    return (result.status, result.stdoutText, result.stderr)
}

@Suite("E3DBClient and e3dbkit client over HTTPS with a private CA", .serialized)
struct ClientTLSTests {
    /// Runs `body` with a new CA and a server using a certificate it signed, for `subjectAltName` (or one that
    /// expired in 2020); stops the server and removes the files afterwards (off the cooperative pool).
    static func withServer<T>(
        subjectAltName: String = "DNS:localhost,IP:127.0.0.1", expired: Bool = false,
        _ body: (TestPKI, ServerProcess) async throws -> T
    ) async throws -> T {
        let pki = try await TestPKI.make()
        defer { pki.remove() }
        let (cert, key) =
            expired
            ? try await pki.expiredServer("server")
            : try await pki.server("server", subjectAltName: subjectAltName)
        let server = try await ServerProcess.start(extraArguments: ["--tls-cert", cert, "--tls-key", key])
        do {
            let result = try await body(pki, server)
            await server.stopped()
            return result
        } catch {
            await server.stopped()
            throw error
        }
    }

    static func tls(_ pki: TestPKI, pins: [String] = []) throws -> ClientTLSOptions {
        try ClientTLSOptions(
            certificateAuthoritiesPEM: try Data(contentsOf: URL(fileURLWithPath: pki.caFile)),
            pins: try pins.map { text throws(E3DBError) in try PublicKeyPin(base64: text) })
    }

    @Test("library: with the CA, register, write and read over HTTPS; without it, the certificate is not trusted")
    func libraryWithCA() async throws {
        try await Self.withServer { pki, server in
            #expect(server.url.hasPrefix("https://"))
            let transport = AsyncHTTPClientTransport(tls: try Self.tls(pki))
            let identity = try await E3DBClient.register(
                token: server.token, name: "tls", apiURL: server.url,
                transport: transport)
            let client = try E3DBClient(identity: identity, transport: transport)
            let written = try await client.write(type: "contact", data: ["name": "Jon"])
            #expect(try await client.read(try #require(written.id)).data["name"] == "Jon")

            let untrusted = await #expect(throws: E3DBError(.untrustedCertificate)) {
                _ = try await E3DBClient.register(
                    token: server.token, name: "no-ca", apiURL: server.url, transport: AsyncHTTPClientTransport())
            }
            #expect(untrusted?.message.contains("not trusted") == true, "\(String(describing: untrusted))")
            #expect(untrusted?.message.contains("127.0.0.1") == true, "\(String(describing: untrusted))")
            // URLSession knows the system's CAs only: the same verdict, from URLSession's error (on Linux, from
            // libcurl's text), never retried.
            let viaURLSession = await #expect(throws: E3DBError(.untrustedCertificate)) {
                _ = try await E3DBClient.register(
                    token: server.token, name: "no-ca", apiURL: server.url, transport: ClientTransport.urlSession.make()
                )
            }
            #expect(viaURLSession?.message.contains("127.0.0.1") == true, "\(String(describing: viaURLSession))")
            #expect(viaURLSession?.message.hasPrefix("register: ") == true, "\(String(describing: viaURLSession))")
            // The system's CAs are still used by a transport without options: an existing client fails the same way.
            let plain = try E3DBClient(identity: identity, transport: AsyncHTTPClientTransport())
            await #expect(throws: E3DBError(.untrustedCertificate)) {
                _ = try await plain.read(try #require(written.id))
            }
        }
    }

    @Test("library: the right pin works (among others); a wrong pin fails naming the pinned and the seen key")
    func pins() async throws {
        try await Self.withServer { pki, server in
            let serverPin = try await pki.pin(ofCertificate: pki.path("server.pem"))
            let caPin = try await pki.pin(ofCertificate: pki.caFile)
            #expect(serverPin != caPin)

            let pinned = AsyncHTTPClientTransport(tls: try Self.tls(pki, pins: [caPin, "sha256//" + serverPin]))
            let identity = try await E3DBClient.register(
                token: server.token, name: "pinned", apiURL: server.url,
                transport: pinned)
            let client = try E3DBClient(identity: identity, transport: pinned)
            let written = try await client.write(type: "note", data: ["body": "pinned"])
            #expect(try await client.read(try #require(written.id)).data["body"] == "pinned")

            let wrong = AsyncHTTPClientTransport(tls: try Self.tls(pki, pins: [caPin]))
            let mismatch = await #expect(throws: E3DBError(.pinMismatch)) {
                _ = try await E3DBClient(identity: identity, transport: wrong).read(try #require(written.id))
            }
            let message = mismatch?.message ?? ""
            #expect(message.contains("sha256//" + caPin), "\(message)")
            #expect(message.contains("sha256//" + serverPin), "\(message)")

            // A pin is checked after the usual verification: the right pin without the CA is still untrusted.
            let noCA = AsyncHTTPClientTransport(tls: try ClientTLSOptions(pins: [try PublicKeyPin(base64: serverPin)]))
            await #expect(throws: E3DBError(.untrustedCertificate)) {
                _ = try await E3DBClient(identity: identity, transport: noCA).read(try #require(written.id))
            }
        }
    }

    /// Whether this process may run a command as another user (`nobody`, through `setpriv`) with `curl`.
    @Test("library: through the pinning forwarder, a presigned URL's path and query reach the server byte for byte")
    func pinnedPresignedQueryByteForByte() async throws {
        let pki = try await TestPKI.make()
        defer { pki.remove() }
        let raw = try await RawHTTPServer(tls: try await pki.server("echo", subjectAltName: "IP:127.0.0.1"))
        defer { raw.stop() }
        let pin = try await pki.pin(ofCertificate: pki.path("echo.pem"))
        let transport = AsyncHTTPClientTransport(tls: try Self.tls(pki, pins: [pin]))
        let target = TransportFailureTests.presignedTarget
        let request = try HTTPRequest(method: .get, checkedURL: raw.url + target)
        let (sent, response) = try await transport.send(
            request, body: nil, timeout: .seconds(30), maxResponseSize: 1 << 20)
        #expect(response.status == .ok && String(decoding: sent, as: UTF8.self) == target)
        var pieces = Data()
        _ = try await transport.download(request, timeout: .seconds(30)) { pieces.append($0) }
        #expect(String(decoding: pieces, as: UTF8.self) == target)
    }

    static let canActAsAnotherUser =
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/curl")

    @Test(
        "L4: another local user cannot reach the pinned server through this process's forwarder",
        .enabled(if: canActAsAnotherUser, "needs root, setpriv and curl to act as another user"))
    func forwarderIsPrivate() async throws {
        try await Self.withServer { pki, server in
            let pin = try await pki.pin(ofCertificate: pki.path("server.pem"))
            let tls = try Self.tls(pki, pins: [pin])
            let (healthz, response) = try await AsyncHTTPClientTransport(tls: tls).send(
                try HTTPRequest(method: .get, checkedURL: server.url + "/healthz"), body: nil, timeout: .seconds(30),
                maxResponseSize: 1 << 20)
            #expect(response.status == .ok && String(decoding: healthz, as: UTF8.self).contains("ok"))
            let url = try #require(URLComponents(string: server.url))
            let tunnel = try await PinnedTunnel.shared(
                host: try #require(url.host), port: try #require(url.port), tls: tls, proxy: nil)
            // A Unix domain socket in a directory of this user's, mode 0700, that no other user may enter.
            let socket = try FileManager.default.attributesOfItem(atPath: tunnel.socketPath)
            #expect(socket[.type] as? FileAttributeType == .typeSocket)
            let directory = URL(fileURLWithPath: tunnel.socketPath).deletingLastPathComponent().path
            let attributes = try FileManager.default.attributesOfItem(atPath: directory)
            #expect(attributes[.posixPermissions] as? Int == 0o700)
            #expect((attributes[.ownerAccountID] as? NSNumber)?.uint32Value == getuid())
            // This user reaches the server through it (a pinned request did, above); `nobody` cannot, as the
            // review's attacker (who found a TCP port on 127.0.0.1 in /proc/net/tcp) could before.
            func health(as user: [String]) async throws -> String {
                try await ChildProcess.run(
                    URL(fileURLWithPath: "/usr/bin/setpriv"),
                    user + ["--", "/usr/bin/curl", "-s", "-m", "5", "--unix-socket", tunnel.socketPath]
                        + ["http://localhost/healthz"]
                ).stdoutText
            }
            #expect(try await health(as: ["--reuid=0"]).contains("ok"), "the socket answers this user")
            let stranger = try await health(as: ["--reuid=65534", "--regid=65534", "--clear-groups"])
            #expect(!stranger.contains("ok"), "nobody reached the server: \(stranger)")
        }
    }

    @Test("library: a certificate for another name is reported as a host name mismatch")
    func hostnameMismatch() async throws {
        try await Self.withServer(subjectAltName: "DNS:elsewhere.example") { pki, server in
            let transport = AsyncHTTPClientTransport(tls: try Self.tls(pki))
            let error = await #expect(throws: E3DBError(.hostnameMismatch)) {
                _ = try await E3DBClient.register(
                    token: server.token, name: "mismatch", apiURL: server.url,
                    transport: transport)
            }
            #expect(error?.message.contains("not valid for 127.0.0.1") == true, "\(String(describing: error))")
            // Through the pinning forwarder too (the pin is right; the name is not).
            let pin = try await pki.pin(ofCertificate: pki.path("server.pem"))
            let pinned = AsyncHTTPClientTransport(tls: try Self.tls(pki, pins: [pin]))
            await #expect(throws: E3DBError(.hostnameMismatch)) {
                _ = try await E3DBClient.register(
                    token: server.token, name: "mismatch", apiURL: server.url,
                    transport: pinned)
            }
        }
    }

    @Test("library: an expired certificate from the trusted CA is reported as expired, with its date")
    func expired() async throws {
        try await Self.withServer(expired: true) { pki, server in
            let transport = AsyncHTTPClientTransport(tls: try Self.tls(pki))
            let error = await #expect(throws: E3DBError(.certificateExpired)) {
                _ = try await E3DBClient.register(
                    token: server.token, name: "expired", apiURL: server.url,
                    transport: transport)
            }
            #expect(error?.message.contains("expired at 2020-01-02") == true, "\(String(describing: error))")
        }
    }

    @Test("CLI: register, write and read with --ca-file and a pin; without the CA exit 2 'not trusted'; wrong pin")
    func cli() async throws {
        try await Self.withServer { pki, server in
            let tokenFile = pki.path("token")
            try Data(server.token.utf8).write(to: URL(fileURLWithPath: tokenFile))
            let config = pki.path("client.json")
            let register = [
                "client", "register", "--api-url", server.url, "--token-file", tokenFile, "--name", "cli",
                "--out", config,
            ]

            let refused = try await runE3DBKit(register)
            #expect(refused.status == 2, "\(refused.err)")
            #expect(refused.err.contains("not trusted"), "\(refused.err)")
            #expect(!FileManager.default.fileExists(atPath: config))

            let registered = try await runE3DBKit(register + ["--ca-file", pki.caFile])
            #expect(registered.status == 0, "\(registered.err)")
            let data = pki.path("data.json")
            try Data(#"{"name":"Jon"}"#.utf8).write(to: URL(fileURLWithPath: data))
            // The CA from the environment this time.
            let written = try await runE3DBKit(
                ["client", "write", "--config", config, "--type", "contact", data],
                environment: ["E3DBKIT_CA_FILE": pki.caFile])
            #expect(written.status == 0, "\(written.err)")
            let line = try JSONSerialization.jsonObject(with: Data(written.out.utf8)) as? [String: Any]
            let meta = try #require(line?["meta"] as? [String: Any])
            let id = try #require(meta["record_id"] as? String)

            let pin = try await pki.pin(ofCertificate: pki.path("server.pem"))
            let read = try await runE3DBKit([
                "client", "read", "--config", config, "--ca-file", pki.caFile,
                "--pin-sha256", pin, id,
            ])
            #expect(read.status == 0, "\(read.err)")
            #expect(read.out.contains(#""name":"Jon""#), "\(read.out)")

            let caPin = try await pki.pin(ofCertificate: pki.caFile)
            let wrong = try await runE3DBKit([
                "client", "read", "--config", config, "--ca-file", pki.caFile,
                "--pin-sha256", caPin, id,
            ])
            #expect(wrong.status == 2, "\(wrong.err)")
            #expect(wrong.err.contains("sha256//" + caPin) && wrong.err.contains("sha256//" + pin), "\(wrong.err)")

            let badPin = try await runE3DBKit(["client", "read", "--config", config, "--pin-sha256", "abc", id])
            #expect(badPin.status == 65, "\(badPin.err)")
            #expect(badPin.err.contains("base64 of a SHA-256"), "\(badPin.err)")
            let notPEM = try await runE3DBKit(["client", "read", "--config", config, "--ca-file", data, id])
            #expect(notPEM.status == 64, "\(notPEM.err)")
            #expect(notPEM.err.contains("no PEM certificate"), "\(notPEM.err)")
        }
    }
}

@Suite("ClientTLSOptions and PublicKeyPin refuse bad input")
struct TLSOptionInputTests {
    @Test("pins: base64 of 32 bytes, with or without sha256//; other lengths and non-base64 refused")
    func pins() throws {
        let bytes = Data((0..<32).map { UInt8($0) })
        let text = bytes.base64EncodedString()
        #expect(try PublicKeyPin(base64: text).sha256 == bytes)
        #expect(try PublicKeyPin(base64: " sha256//" + text + "\n").description == "sha256//" + text)
        #expect(throws: E3DBError(.invalidLength)) { try PublicKeyPin(base64: Data(count: 31).base64EncodedString()) }
        #expect(throws: E3DBError(.invalidBase64)) { try PublicKeyPin(base64: "not base64!") }
    }

    @Test("CAs and pins with an http:// URL are refused (library: invalidParameter before a request; CLI: exit 64)")
    func httpURLs() async throws {
        let pin = try PublicKeyPin(sha256: Data(count: 32))
        let pki = try await TestPKI.make()
        defer { pki.remove() }
        let ca = try Data(contentsOf: URL(fileURLWithPath: pki.caFile))
        // Port 9 (discard) is closed here: without the check the error would be a refused connection.
        let url = "http://127.0.0.1:9"
        for tls in [try ClientTLSOptions(pins: [pin]), try ClientTLSOptions(certificateAuthoritiesPEM: ca)] {
            #expect(throws: E3DBError(.invalidParameter)) { try tls.check(for: url + "/v1/auth/token") }
            let transport = AsyncHTTPClientTransport(tls: tls)
            await #expect(throws: E3DBError(.invalidParameter)) {
                _ = try await transport.send(
                    try HTTPRequest(method: .get, checkedURL: url + "/"), body: nil, timeout: .seconds(5),
                    maxResponseSize: 1024)
            }
            await #expect(throws: E3DBError(.invalidParameter)) {
                _ = try await E3DBClient.register(token: "t", name: "n", apiURL: url, transport: transport)
            }
            try tls.check(for: "https://127.0.0.1:9/")
        }
        try ClientTLSOptions().check(for: url)
        for option in [["--pin-sha256", pin.description], ["--ca-file", pki.caFile]] {
            let r = try await runE3DBKit(
                [
                    "client", "register", "--api-url", url, "--token-file", pki.path("none"),
                    "--name", "n", "--out", pki.path("n.json"),
                ] + option)
            #expect(r.status == 64 && r.err.contains("https://"), "\(r.err)")
        }
        // E3DBKIT_CA_FILE is a default for https URLs only: an http URL goes on (to the closed port: exit 1).
        let r = try await runE3DBKit(
            [
                "client", "register", "--api-url", url, "--token-file", pki.caFile, "--name", "n",
                "--out", pki.path("n.json"),
            ], environment: ["E3DBKIT_CA_FILE": pki.caFile])
        #expect(r.status == 1, "\(r.err)")
    }

    @Test("CA PEM: no certificate block, or a block that is not a certificate, is refused")
    func caPEM() {
        #expect(throws: E3DBError(.invalidParameter)) {
            try ClientTLSOptions(certificateAuthoritiesPEM: Data("hello".utf8))
        }
        let broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
        #expect(throws: E3DBError(.invalidParameter)) {
            try ClientTLSOptions(certificateAuthoritiesPEM: Data(broken.utf8))
        }
    }
}

@Suite("The pinning forwarder reports a failure only to the request it failed")
struct ClientTLSFailureSlotTests {
    @Test("a failure is reported to a request that started before it and failed within the window, to no other")
    func staleFailuresAreNotReported() async {
        let slot = PinnedTunnel.FailureSlot()
        let t0 = ContinuousClock.now
        #expect(await slot.reason(requestStarted: t0, failedAt: t0 + .seconds(1)) == nil)
        let first = slot.accept(at: t0 + .milliseconds(900))
        slot.settle(first, with: E3DBError(.pinMismatch, "pin"), at: t0 + .seconds(1))
        // The request whose connection it closed: started before, failed right after.
        #expect(
            (await slot.reason(requestStarted: t0, failedAt: t0 + .milliseconds(1010)) as? E3DBError)?.code
                == .pinMismatch)
        // Its loopback connection closed a little before the verdict came (the scheduler's order).
        #expect(
            (await slot.reason(requestStarted: t0, failedAt: t0 + .milliseconds(950)) as? E3DBError)?.code
                == .pinMismatch)
        // Reported again to another request under way then (it is not used up), but not:
        #expect((await slot.reason(requestStarted: t0, failedAt: t0 + .seconds(2)) as? E3DBError)?.code == .pinMismatch)
        // to a request that started after it (its own connection did not fail of it),
        #expect(await slot.reason(requestStarted: t0 + .seconds(2), failedAt: t0 + .seconds(3)) == nil)
        // to one that failed long after it (a timeout hours later),
        #expect(
            await slot.reason(
                requestStarted: t0,
                failedAt: t0 + .seconds(1) + PinnedTunnel.FailureSlot.window + .milliseconds(1)) == nil)
        #expect(await slot.reason(requestStarted: t0, failedAt: t0 + .seconds(3600)) == nil)
        // or to one that failed before the failed connection was accepted.
        #expect(await slot.reason(requestStarted: t0, failedAt: t0 + .milliseconds(500)) == nil)
        // A later failure replaces it.
        let second = slot.accept(at: t0 + .seconds(9))
        slot.settle(second, with: E3DBError(.tlsHandshakeFailed, "eof"), at: t0 + .seconds(10))
        #expect(
            (await slot.reason(requestStarted: t0 + .seconds(9), failedAt: t0 + .seconds(10)) as? E3DBError)?.code
                == .tlsHandshakeFailed)
        // A connection that succeeded leaves the last failure in place and reports nothing new.
        slot.settle(slot.accept(at: t0 + .seconds(11)), with: nil, at: t0 + .seconds(11))
        #expect(await slot.reason(requestStarted: t0 + .seconds(11), failedAt: t0 + .seconds(12)) == nil)
    }

    @Test("a request that fails before the forwarder's verdict on its connection waits for it")
    func aFailureThatComesAfterTheRequestsIsStillReported() async throws {
        let slot = PinnedTunnel.FailureSlot()
        let started = ContinuousClock.now
        let connection = slot.accept()
        // The loopback connection closed first: the request fails while the verdict is still pending.
        let request = Task { await slot.reason(requestStarted: started) }
        try await Task.sleep(for: .milliseconds(200))
        slot.settle(connection, with: E3DBError(.hostnameMismatch, "name"))
        #expect((await request.value as? E3DBError)?.code == .hostnameMismatch)
    }
}

@Suite("HTTPS_PROXY, http_proxy and NO_PROXY")
struct ProxyEnvironmentTests {
    @Test("NO_PROXY: names and their subdomains, leading dots, addresses, CIDR, ports, *, case and spaces")
    func noProxyMatching() {
        let cases: [(host: String, port: Int, noProxy: String, bypass: Bool)] = [
            ("example.com", 443, "example.com", true),
            ("api.example.com", 443, "example.com", true),
            ("api.example.com", 443, ".example.com", true),
            ("example.com", 443, ".example.com", true),
            ("badexample.com", 443, "example.com", false),
            ("example.com.evil", 443, "example.com", false),
            ("API.Example.COM.", 443, "example.com", true),
            ("example.org", 443, "localhost, example.com ,10.0.0.0/8", false),
            ("10.1.2.3", 443, "localhost, example.com ,10.0.0.0/8", true),
            ("11.1.2.3", 443, "10.0.0.0/8", false),
            ("192.168.1.20", 80, "192.168.1.0/24", true),
            ("192.168.2.20", 80, "192.168.1.0/24", false),
            ("10.0.0.1", 443, "0.0.1", false),
            ("127.0.0.1", 8443, "127.0.0.1", true),
            ("::1", 8443, "::1", true),
            ("::1", 8443, "[::1]:8443", true),
            ("::1", 8443, "[::1]:9000", false),
            ("internal.example", 8443, "internal.example:8443", true),
            ("internal.example", 443, "internal.example:8443", false),
            ("anything.example", 443, "*", true),
            ("anything.example", 443, "", false),
            ("anything.example", 443, "*.example", false),
        ]
        for c in cases {
            #expect(
                HTTPProxy.bypassesProxy(host: c.host, port: c.port, noProxy: c.noProxy) == c.bypass,
                "\(c.host):\(c.port) with NO_PROXY=\(c.noProxy)")
        }
    }

    @Test(
        "the variable for the URL's scheme, lower case first, only http_proxy for http (httpoxy), NO_PROXY, bad values")
    func environment() throws {
        let env = [
            "HTTPS_PROXY": "http://upper:3128", "https_proxy": "http://lower:3129",
            "HTTP_PROXY": "proxy.internal:8080", "NO_PROXY": "skip.example",
        ]
        #expect(
            try HTTPProxy.fromEnvironment(for: "https://api.example:8443", environment: env)?.description
                == "lower:3129")
        #expect(
            try HTTPProxy.fromEnvironment(
                for: "https://api.example", environment: ["HTTPS_PROXY": "http://upper:3128"])?
                .description == "upper:3128")
        // HTTP_PROXY is what a CGI program gets from a request's Proxy: header: never read, only http_proxy.
        #expect(try HTTPProxy.fromEnvironment(for: "http://api.example", environment: env) == nil)
        #expect(
            try HTTPProxy.fromEnvironment(
                for: "http://api.example",
                environment: env.merging(
                    ["http_proxy": "lower.internal:8081"]) { $1 })?.description == "lower.internal:8081")
        #expect(
            try HTTPProxy.fromEnvironment(
                for: "http://skip.example", environment: ["http_proxy": "p:1", "no_proxy": "skip.example"])
                == nil)
        #expect(try HTTPProxy.fromEnvironment(for: "https://a.skip.example", environment: env) == nil)
        #expect(try HTTPProxy.fromEnvironment(for: "https://api.example", environment: [:]) == nil)
        #expect(try HTTPProxy.fromEnvironment(for: "https://api.example", environment: ["https_proxy": ""]) == nil)
        #expect(
            try HTTPProxy.fromEnvironment(for: "https://api.example", environment: ["https_proxy": "h"])?.port == 1080)
        let secret = try #require(
            try HTTPProxy.fromEnvironment(
                for: "https://api.example", environment: ["https_proxy": "http://user:s3cret@proxy:3128"]))
        #expect(!secret.description.contains("s3cret"))
        let refused = #expect(throws: E3DBError(.invalidParameter)) {
            _ = try HTTPProxy.fromEnvironment(
                for: "https://api.example",
                environment: ["https_proxy": "socks5://user:s3cret@proxy:1080"])
        }
        #expect(refused?.message.contains("s3cret") == false)
    }
}

/// A tiny HTTP CONNECT proxy on 127.0.0.1 (POSIX sockets on threads of its own): it tunnels each `CONNECT
/// a.b.c.d:port` to that IPv4 address and records the targets, so a test can tell that a request went through it.
final class ConnectProxy: @unchecked Sendable {
    // @unchecked: `seen` is guarded by `lock`; the rest is immutable.
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var seen: [String] = []

    /// The `host:port` of every CONNECT so far.
    var targets: [String] { lock.withLock { seen } }

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(listener, raw, length) == 0 && listen(listener, 16) == 0
                    && getsockname(listener, raw, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw ServerProcess.ServerFailure(description: "the proxy cannot listen")
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 { return }
                Thread { self.tunnel(client) }.start()
            }
        }.start()
    }

    /// Stops accepting (open tunnels end with their connections).
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func tunnel(_ client: Int32) {
        defer { close(client) }
        var head = [UInt8]()
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual("\r\n\r\n".utf8) {
            guard read(client, &byte, 1) == 1, head.count < 8192 else { return }
            head.append(byte)
        }
        let request = String(decoding: head, as: UTF8.self).split(separator: " ")
        guard request.count >= 3, request[0] == "CONNECT" else { return }
        let target = String(request[1])
        lock.withLock { seen.append(target) }
        guard let colon = target.lastIndex(of: ":"), let targetPort = UInt16(target[target.index(after: colon)...])
        else { return }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = targetPort.bigEndian
        guard inet_pton(AF_INET, String(target[..<colon]), &address.sin_addr) == 1 else { return }
        let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(upstream) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return }
        let ok = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)
        guard write(client, ok, ok.count) == ok.count else { return }
        let done = DispatchSemaphore(value: 0)
        Thread {
            Self.copy(from: upstream, to: client)
            done.signal()
        }.start()
        Self.copy(from: client, to: upstream)
        done.wait()
    }

    private static func copy(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = read(source, &buffer, buffer.count)
            if n <= 0 { break }
            var sent = 0
            while sent < n {
                let w = buffer[sent..<n].withUnsafeBytes { write(destination, $0.baseAddress, n - sent) }
                if w <= 0 {
                    shutdown(source, Int32(SHUT_RDWR))
                    return
                }
                sent += w
            }
        }
        shutdown(destination, Int32(SHUT_WR))
    }
}

@Suite("e3dbkit client through an HTTP CONNECT proxy", .serialized)
struct ClientProxyTests {
    @Test("HTTPS_PROXY carries register, write and read (TLS inside the tunnel), pinned too; NO_PROXY bypasses it")
    func throughProxy() async throws {
        let proxy = try ConnectProxy()
        defer { proxy.stop() }
        try await ClientTLSTests.withServer { pki, server in
            let serverAddress = String(try #require(server.url.split(separator: "/").last))
            let tokenFile = pki.path("token")
            try Data(server.token.utf8).write(to: URL(fileURLWithPath: tokenFile))
            let config = pki.path("client.json")
            let proxied = ["HTTPS_PROXY": "http://127.0.0.1:\(proxy.port)", "E3DBKIT_CA_FILE": pki.caFile]

            let registered = try await runE3DBKit(
                [
                    "client", "register", "--api-url", server.url, "--token-file", tokenFile,
                    "--name", "proxied", "--out", config,
                ], environment: proxied)
            #expect(registered.status == 0, "\(registered.err)")
            let data = pki.path("data.json")
            try Data(#"{"city":"Oslo"}"#.utf8).write(to: URL(fileURLWithPath: data))
            let written = try await runE3DBKit(
                ["client", "write", "--config", config, "--type", "place", data],
                environment: proxied)
            #expect(written.status == 0, "\(written.err)")
            let through = proxy.targets.count
            #expect(through >= 2, "\(proxy.targets)")
            #expect(proxy.targets.allSatisfy { $0 == serverAddress }, "\(proxy.targets)")

            var direct = proxied
            direct["NO_PROXY"] = "localhost,127.0.0.1"
            let bypassed = try await runE3DBKit(
                ["client", "write", "--config", config, "--type", "place", data],
                environment: direct)
            #expect(bypassed.status == 0, "\(bypassed.err)")
            #expect(proxy.targets.count == through, "\(proxy.targets)")

            // A proxy that refuses connections: the CLI fails rather than going around it.
            let dead = try await runE3DBKit(
                ["client", "write", "--config", config, "--type", "place", data],
                environment: ["HTTPS_PROXY": "http://127.0.0.1:1", "E3DBKIT_CA_FILE": pki.caFile])
            #expect(dead.status == 1, "\(dead.err)")

            // A pinned server through the proxy: the pinning forwarder asks the proxy for the tunnel.
            let pin = try await pki.pin(ofCertificate: pki.path("server.pem"))
            let before = proxy.targets.count
            let pinned = try await runE3DBKit(
                [
                    "client", "write", "--config", config, "--type", "place",
                    "--pin-sha256", pin, data,
                ], environment: proxied)
            #expect(pinned.status == 0, "\(pinned.err)")
            #expect(
                proxy.targets.count > before && proxy.targets.allSatisfy { $0 == serverAddress }, "\(proxy.targets)")
            let caPin = try await pki.pin(ofCertificate: pki.caFile)
            let wrongPin = try await runE3DBKit(
                [
                    "client", "write", "--config", config, "--type", "place",
                    "--pin-sha256", caPin, data,
                ], environment: proxied)
            #expect(wrongPin.status == 2, "\(wrongPin.err)")
            #expect(wrongPin.err.contains("sha256//" + pin), "\(wrongPin.err)")
        }
    }
}

#if canImport(FoundationNetworking)
    import FoundationNetworking

    /// Records every authentication challenge URLSession raises, and performs the default handling.
    final class ChallengeRecorder: NSObject, URLSessionDelegate, @unchecked Sendable {
        // @unchecked: `methods` is guarded by `lock`.
        private let lock = NSLock()
        private var methods: [String] = []
        var seen: [String] { lock.withLock { methods } }

        func urlSession(
            _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            lock.withLock { methods.append(challenge.protectionSpace.authenticationMethod) }
            completionHandler(.performDefaultHandling, nil)
        }
    }

    @Suite("URLSession on Linux and a private CA")
    struct URLSessionTLSLimitTests {
        /// What docs/client.md says: FoundationNetworking refuses the server and never asks the delegate, so a
        /// URLSession transport cannot take `ClientTLSOptions` on Linux. Fails when that changes (then implement it).
        @Test("the server is refused and the session delegate gets no server-trust challenge")
        func noServerTrustChallenge() async throws {
            try await ClientTLSTests.withServer { pki, server in
                let recorder = ChallengeRecorder()
                let session = URLSession(configuration: .ephemeral, delegate: recorder, delegateQueue: nil)
                defer { session.invalidateAndCancel() }
                let url = try #require(
                    URL(string: server.url + "/v1/storage/clients/" + UUID().uuidString.lowercased()))
                // libcurl's verdict, in the error's description (FoundationNetworking gives it no code of its own).
                let error = await #expect(throws: URLError.self) { _ = try await session.data(from: url) }
                #expect(
                    error?.localizedDescription.contains("SSL certificate problem") == true,
                    "\(String(describing: error))")
                #expect(recorder.seen.isEmpty, "\(recorder.seen)")
            }
        }
    }
#endif
