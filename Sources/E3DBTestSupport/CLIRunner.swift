package import Foundation

/// Runs the built `e3dbkit` binary (a sibling of the test bundle in the build products directory) as an awaited
/// child process (``ChildProcess``).
package enum CLIRunner {
    package struct Result: Sendable {
        /// The exit status, or the signal's number when ``uncaughtSignal``.
        package let status: Int32
        /// Whether a signal ended the child.
        package let uncaughtSignal: Bool
        package let stdout: Data
        package let stderr: String
        package var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// The build products directory holding the test bundle and `e3dbkit`.
    package static var productsDirectory: URL {
        #if os(macOS)
            if let bundle = Bundle.allBundles.first(where: { $0.bundlePath.hasSuffix(".xctest") }) {
                return bundle.bundleURL.deletingLastPathComponent()
            }
        #endif
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        return executable.deletingLastPathComponent()
    }

    package static var binary: URL { productsDirectory.appendingPathComponent("e3dbkit") }

    /// The built `e3dbkit-server` binary, beside ``binary``.
    package static var serverBinary: URL { productsDirectory.appendingPathComponent("e3dbkit-server") }

    /// The built `e3dbkit-vectors` binary (`e3dbkit vectors` alone, the main job's executable), beside ``binary``.
    package static var vectorsBinary: URL { productsDirectory.appendingPathComponent("e3dbkit-vectors") }

    /// The built `generate-swift-vectors` development tool (not a product), beside ``binary``.
    package static var vectorGenerator: URL { productsDirectory.appendingPathComponent("generate-swift-vectors") }

    package struct MissingBinary: Error, CustomStringConvertible {
        package let path: String
        package init(path: String) { self.path = path }
        package var description: String { "the e3dbkit binary is not built at \(path): run swift build first" }
    }

    package static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: binary.path) }

    /// Runs `e3dbkit` with `arguments`, feeding `stdin`; waits for it to exit. The other parameters are
    /// ``ChildProcess/run(_:_:stdin:in:environment:removingEnvironment:standardOutput:mergingStandardError:)``'s.
    /// - Throws: when the binary is missing, so that every CLI test fails (never skips) without it.
    package static func run(
        _ arguments: [String], stdin: Data? = nil, in directory: URL? = nil, environment: [String: String] = [:],
        removingEnvironment: Set<String> = [], standardOutput: FileHandle? = nil
    ) async throws -> Result {
        guard isAvailable else { throw MissingBinary(path: binary.path) }
        return try await ChildProcess.run(
            binary, arguments, stdin: stdin, in: directory, environment: environment,
            removingEnvironment: removingEnvironment, standardOutput: standardOutput)
    }

    /// Starts `e3dbkit` with `arguments` as a ``RunningProcess``, for a test that talks to it, interrupts or kills it.
    /// The parameters are ``RunningProcess/init(_:_:stdin:reading:other:environment:keepingInputOpen:)``'s.
    /// - Throws: when the binary is missing.
    package static func start(
        _ arguments: [String], stdin: Data? = nil, reading: RunningProcess.Stream? = .standardOutput,
        keepingInputOpen: Bool = false
    ) throws -> RunningProcess {
        guard isAvailable else { throw MissingBinary(path: binary.path) }
        return try RunningProcess(binary, arguments, stdin: stdin, reading: reading, keepingInputOpen: keepingInputOpen)
    }

    /// A fresh temporary directory, removed by the caller.
    package static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
