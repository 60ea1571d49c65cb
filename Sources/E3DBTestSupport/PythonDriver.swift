import Foundation

/// The Python driver scripts beside the test suites (Tozny's Python SDK and `e3dbkit` against one server).
package enum PythonDriver {
    /// Runs `script` (a path from the checkout's root) with the project's Python, the `e3dbkit` binary and a new
    /// work directory as its first two arguments, then `extra`; awaited, never blocking a cooperative thread.
    /// Returns its status and its standard output and error, merged.
    package static func run(_ script: String, _ extra: [String]) async throws -> (status: Int32, output: String) {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-server-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let result = try await ChildProcess.run(
            try await ChildProcess.makeProjectPython(),
            [VectorLocations.projectRoot.appendingPathComponent(script).path, CLIRunner.binary.path, work.path] + extra,
            mergingStandardError: true)
        return (result.status, result.stdoutText)
    }
}
