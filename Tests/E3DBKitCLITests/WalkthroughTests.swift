import E3DBKit
import E3DBTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The README's "E3DB API server and client" walk-through, run as the script it is, so that it cannot drift from
/// what the programs do.
@Suite("README walk-through")
struct WalkthroughTests {
    /// The fenced blocks of `language` between the walk-through markers of a file of the checkout, in order.
    static func blocks(_ language: String, in file: String) throws -> [String] {
        let text = try String(contentsOf: VectorLocations.projectRoot.appendingPathComponent(file), encoding: .utf8)
        guard let marker = text.range(of: "<!-- walkthrough:"),
            let end = text.range(of: "<!-- /walkthrough -->", range: marker.upperBound..<text.endIndex)
        else {
            throw CLIError("\(file) has no walk-through markers")
        }
        var blocks: [String] = []
        var rest = marker.upperBound..<end.lowerBound
        while let open = text.range(of: "```\(language)\n", range: rest),
            let close = text.range(of: "\n```", range: open.upperBound..<end.lowerBound)
        {
            blocks.append(String(text[open.upperBound..<close.lowerBound]))
            rest = close.upperBound..<end.lowerBound
        }
        guard !blocks.isEmpty else { throw CLIError("\(file) has no \(language) block after its marker") }
        return blocks
    }

    /// Runs `script` with bash in a fresh directory, the built binaries first on `PATH`, and 8000 replaced by a
    /// free port (the one change, so that parallel runs do not collide); a trap stops a server the script left
    /// running if a line fails. Returns the result, the directory and the port.
    static func runScript(_ script: String) async throws -> (CLIRunner.Result, URL, Int) {
        let port = try freePort()
        let dir = try CLIRunner.temporaryDirectory()
        let body = script.replacingOccurrences(of: "8000", with: String(port))
        let wrapped = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + body
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/bash"), ["-c", wrapped], in: dir,
            environment: ["PATH": CLIRunner.productsDirectory.path + ":" + path])
        return (result, dir, port)
    }

    static var binariesBuilt: Bool {
        CLIRunner.isAvailable && FileManager.default.isExecutableFile(atPath: CLIRunner.serverBinary.path)
    }

    /// A TCP port nothing listens on now (the kernel's pick for port 0), for the walk-through's fixed 8000.
    static func freePort() throws -> Int {
        #if canImport(Glibc)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw CLIError("socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw CLIError("bind: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    struct CLIError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    @Test("the README walk-through runs as written, in a fresh directory, and stops its server")
    func readmeWalkthrough() async throws {
        guard Self.binariesBuilt else {
            Issue.record("build e3dbkit and e3dbkit-server first (swift build)")
            return
        }
        let script = try #require(try Self.blocks("sh", in: "README.md").first)
        #expect(script.contains("--port 8000") && script.contains("http://127.0.0.1:8000"))
        let (result, dir, port) = try await Self.runScript(script)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        // The migration, two registrations, alice's read, the share, bob's read, the second write, the query's two
        // records.
        #expect(lines.count == 9, "\(result.stdoutText)")
        #expect(lines.first == #"{"migrated":true}"#)
        #expect(lines.filter { $0.contains(#""client_id":"#) }.count == 2)
        let records = lines.filter { $0.contains(#""signature_status":"verified""#) }
        #expect(records.count == 5, "every record printed was verified: \(result.stdoutText)")
        #expect(lines.contains { $0.contains(#""shared":"contact""#) })
        #expect(lines.filter { $0.contains(#""name":"Jon""#) }.count == 3)
        #expect(lines.filter { $0.contains(#""name":"Ann""#) }.count == 2)
        let log = try String(contentsOf: dir.appendingPathComponent("server.log"), encoding: .utf8)
        #expect(log.contains("listening on http://127.0.0.1:\(port)"))
        #expect(!result.stdoutText.contains("listening"), "the server's log stays out of the clients' output")
        // `kill %1` stopped the server: nothing listens on the port any more.
        let connection = try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/bash"), ["-c", "exec 3<>/dev/tcp/127.0.0.1/\(port)"])
        #expect(connection.status != 0, "the server still listens after the walk-through")
    }

    @Test("docs/server.md's start-up and its Python SDK example run as written against the server")
    func serverDocsWalkthrough() async throws {
        guard Self.binariesBuilt else {
            Issue.record("build e3dbkit and e3dbkit-server first (swift build)")
            return
        }
        let python = try await ChildProcess.makeProjectPython()
        let shell = try Self.blocks("sh", in: "docs/server.md")
        let example = try #require(try Self.blocks("python", in: "docs/server.md").first)
        #expect(shell.count == 1)
        let script = shell.joined(separator: "\n") + "\n'\(python.path)' - <<'PYTHON'\n\(example)\nPYTHON\nkill %1\n"
        let (result, dir, _) = try await Self.runScript(script)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText == "{\"migrated\":true}\n{'name': 'Jon'}\n", "\(result.stdoutText)")
    }

    @Test("docs/client.md's walk-through runs as written: every group of client commands against the server")
    func clientDocsWalkthrough() async throws {
        guard Self.binariesBuilt else {
            Issue.record("build e3dbkit and e3dbkit-server first (swift build)")
            return
        }
        let script = try #require(try Self.blocks("sh", in: "docs/client.md").first)
        let (result, dir, _) = try await Self.runScript(script)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        // carol read the updated record that bob shared on alice's behalf.
        #expect(
            lines.filter { $0.contains(#""city":"Salem""#) && $0.contains(#""signature_status":"verified""#) }.count
                == 2)
        #expect(lines.contains { $0.contains(#""removed_all_types":true"#) })
        // The replaced note kept its read limit.
        #expect(lines.filter { $0.contains(#""id_string":"door-code""#) && $0.contains(#""max_views":2"#) }.count == 3)
        #expect(lines.filter { $0.hasPrefix(#"{"deleted":"#) }.count == 2)
    }
}
