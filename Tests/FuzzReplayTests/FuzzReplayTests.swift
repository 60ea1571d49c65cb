import E3DBTestSupport
import Foundation
import Testing

/// Every committed fuzz input (Fuzz/Corpus/*/ and Fuzz/FailCases/*/) through every fuzz target, once, with the
/// regular build's `e3dbkit-fuzz` (no sanitizers): the regression half of fuzzing, in the ordinary test run. A
/// violated invariant traps the replay process, and the test reports its status and output. Fuzz/run.sh does the
/// fuzzing itself, with libFuzzer and AddressSanitizer.
@Suite("Fuzz corpora and FailCases replayed through every target")
struct FuzzReplayTests {
    static var fuzzDirectory: URL { VectorLocations.projectRoot.appendingPathComponent("Fuzz") }

    /// The targets: one file per target in Fuzz/Targets, named like the target.
    static var targets: [String] {
        let files =
            (try? FileManager.default.contentsOfDirectory(atPath: fuzzDirectory.appendingPathComponent("Targets").path))
            ?? []
        return files.filter { $0.hasPrefix("Fuzz") && $0.hasSuffix(".swift") }.map {
            String($0.dropLast(".swift".count))
        }.sorted()
    }

    /// Every committed input, in a stable order.
    static func inputs() throws -> [String] {
        var paths: [String] = []
        for directory in ["Corpus", "FailCases"] {
            let root = fuzzDirectory.appendingPathComponent(directory)
            guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey])
            else {
                continue
            }
            for case let url as URL in walker where url.lastPathComponent != ".gitkeep" {
                if try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true { paths.append(url.path) }
            }
        }
        return paths.sorted()
    }

    @Test("the target list and the inputs are there")
    func inventory() throws {
        #expect(Self.targets.count >= 18, "\(Self.targets)")
        #expect(try Self.inputs().count > 1000)
    }

    @Test("every corpus file and FailCase runs through the target without violating an invariant", arguments: targets)
    func replay(target: String) async throws {
        let binary = CLIRunner.productsDirectory.appendingPathComponent("e3dbkit-fuzz")
        try #require(
            FileManager.default.isExecutableFile(atPath: binary.path), "e3dbkit-fuzz is not built at \(binary.path)")
        let inputs = try Self.inputs()
        let result = try await ChildProcess.run(binary, [target] + inputs)
        #expect(result.status == 0, "\(target) failed on replay: \(result.stderr.suffix(2000))")
        #expect(result.stdoutText == "\(target): \(inputs.count) inputs replayed\n", "\(result.stdoutText)")
    }
}
