package import Foundation

/// `e3dbkit-server run --port 0` as a child process, for tests of the client library against a real server.
/// Started with ``start(data:postgres:extraArguments:log:)``, which awaits the line that says where it listens.
package final class ServerProcess: Sendable {
    package let process: RunningProcess
    package let url: String
    package let data: URL
    package let token: String
    /// The PostgreSQL URL of the PostgreSQL backend, `nil` for SQLite.
    package let postgres: String?

    /// The executable that serves (`e3dbkit-server`, built beside the test bundle).
    package static var binary: URL { CLIRunner.serverBinary }

    /// Runs `e3dbkit-server ARGUMENTS` to its end; its standard output without the final newline.
    package static func command(_ arguments: [String]) async throws -> String {
        let result = try await ChildProcess.run(binary, arguments)
        guard result.status == 0 else {
            throw ServerFailure(description: "e3dbkit-server \(arguments.prefix(2)) failed: \(result.stderr)")
        }
        return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    package struct ServerFailure: Error, CustomStringConvertible {
        package let description: String
        package init(description: String) { self.description = description }
    }

    private init(process: RunningProcess, url: String, data: URL, token: String, postgres: String?) {
        self.process = process
        self.url = url
        self.data = data
        self.token = token
        self.postgres = postgres
    }

    /// Starts a server on `existing` (a new data directory by default).
    /// - Parameters:
    ///   - log: where its standard error goes, at `--log-level info`, to be read while it runs (by default a pipe,
    ///     at `warning`, read until the server listens).
    ///   - environment: variables added to the server's environment (the object store's credentials).
    package static func start(
        data existing: URL? = nil, postgres: String? = nil, extraArguments: [String] = [], log: URL? = nil,
        environment: [String: String] = [:]
    ) async throws -> ServerProcess {
        let data =
            existing
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-srv-\(UUID().uuidString)")
        let storage = ["--data", data.path] + (postgres.map { ["--postgres", $0] } ?? [])
        _ = try await command(["migrate"] + storage)  // administrative commands do not migrate
        let token = try await command(["token", "create"] + storage)
        let arguments =
            ["run", "--port", "0", "--log-level", log == nil ? "warning" : "info"]
            + storage + extraArguments
        @Sendable func listening(_ bytes: Data) -> String? {
            let text = String(decoding: bytes, as: UTF8.self)
            return text.range(of: #"listening on (https?://\S+)"#, options: .regularExpression)
                .map { String(text[$0].dropFirst("listening on ".count)) }
        }
        let process: RunningProcess
        var found: String?
        if let log {
            guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
                throw ServerFailure(description: "cannot create the log file")
            }
            process = try RunningProcess(
                binary, arguments, reading: .standardOutput, other: try FileHandle(forWritingTo: log),
                environment: environment)
            for _ in 0..<600 where found == nil && process.isRunning {
                found = listening((try? Data(contentsOf: log)) ?? Data())
                if found == nil { try await Task.sleep(for: .milliseconds(100)) }
            }
        } else {
            process = try RunningProcess(binary, arguments, reading: .standardError, environment: environment)
            found = listening(try await process.readOutput { listening($0) != nil })
        }
        guard let found else {
            process.signal(SIGKILL)
            throw ServerFailure(description: "the server did not start")
        }
        return ServerProcess(process: process, url: found, data: data, token: token, postgres: postgres)
    }

    /// Kills the server (SIGKILL) and awaits its end.
    package func kill() async {
        process.signal(SIGKILL)
        _ = try? await process.exit()
    }

    /// Stops the server (SIGTERM) and awaits its end, then removes its data directory if asked.
    package func stopped(removingData: Bool = true) async {
        process.signal(SIGTERM)
        _ = try? await process.exit()
        if removingData { try? FileManager.default.removeItem(at: data) }
    }

    /// Stops the server (SIGTERM) without waiting, for `defer` blocks; the data directory is removed once it ended.
    package func stop(removingData: Bool = true) {
        let data = self.data
        process.signal(SIGTERM) {
            if removingData { try? FileManager.default.removeItem(at: data) }
        }
    }
}
