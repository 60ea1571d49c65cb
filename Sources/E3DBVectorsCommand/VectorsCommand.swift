package import ArgumentParser
import E3DBCommandLine
import E3DBConformance
import Foundation

/// `e3dbkit vectors verify`: check this build against the cross-language test vectors (E3DBConformance).
///
/// One command type, two executables: `e3dbkit` has it as its `vectors` group, and `e3dbkit-vectors` (the main
/// job's executable, `scripts/run.sh`) is it alone, so that the main job does not compile the client, the store or
/// their HTTP and SQLite stacks.
package struct VectorsCommand: SubcommandGroup {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "vectors",
        abstract: "Check E3DBKit against the committed cross-language test vectors.",
        subcommands: [VerifyVectorsCommand.self]
    )
}

/// `e3dbkit vectors verify [DIR]`: runs every vector suite and prints a table.
package struct VerifyVectorsCommand: ParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Run every committed vector suite and print passed/failed counts per suite.",
        discussion: """
            DIR is the project's TestVectors directory (default: the TestVectors directory of the E3DBKit checkout \
            that contains the current directory; an installed binary run elsewhere needs DIR). Suites that need \
            the external vectors in ../shared/vectors (beside the project root, or --shared) are skipped with a \
            note when that directory is absent. Exits 1 if any case fails, 66 if there is no vectors directory.
            """
    )

    @Argument(help: "The TestVectors directory.")
    var directory: String?

    @Option(help: "The external vectors directory (default: ../shared/vectors beside the project root).")
    var shared: String?

    @Option(help: "Run only suites whose name contains this text.")
    var filter: String?

    @Flag(name: .shortAndLong, help: "List every failing case, not only the first few per suite.")
    var verbose = false

    package func run() throws {
        let locations = VectorLocations(
            testVectors: directory.map { URL(fileURLWithPath: $0, isDirectory: true) },
            sharedVectors: shared.map { URL(fileURLWithPath: $0, isDirectory: true) })
        var isDirectory: ObjCBool = false
        guard unsafe FileManager.default.fileExists(atPath: locations.testVectors.path, isDirectory: &isDirectory),
            isDirectory.boolValue
        else {
            throw CLIError(
                directory == nil
                    ? "no TestVectors directory: run inside an E3DBKit checkout or pass the directory"
                    : "\(locations.testVectors.path) is not a directory",
                exitCode: ExitStatus.noInput)
        }
        if locations.sharedVectors == nil {
            try StandardOutput.line("note: \(VectorLocations.sharedMissingMessage)")
        }
        var rows: [(String, Int, Int, Int, String)] = []
        var failures: [String] = []
        for suite in AllVectorSuites.all where filter.map({ suite.name.contains($0) }) ?? true {
            guard suite.isAvailable(locations) else {
                rows.append((suite.name, 0, 0, 0, "skipped: no ../shared"))
                continue
            }
            let cases: [VectorCase]
            do {
                cases = try suite.cases(locations)
            } catch {
                rows.append((suite.name, 0, 0, 1, "cannot load"))
                failures.append("\(suite.name): \(error)")
                continue
            }
            var passed = 0
            var failed = 0
            for vectorCase in cases {
                do {
                    try vectorCase.check()
                    passed += 1
                } catch {
                    failed += 1
                    if verbose || failed <= 5 { failures.append("\(vectorCase): \(error)") }
                }
            }
            rows.append((suite.name, cases.count, passed, failed, ""))
        }
        let width = max(5, rows.map(\.0.count).max() ?? 5)
        func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
        func left(_ s: String, _ n: Int) -> String { String(repeating: " ", count: max(0, n - s.count)) + s }
        try StandardOutput.line(
            pad("suite", width) + "  " + left("cases", 6) + "  " + left("passed", 6) + "  " + left("failed", 6))
        try StandardOutput.line(String(repeating: "-", count: width + 24))
        for row in rows {
            try StandardOutput.line(
                pad(row.0, width) + "  " + left("\(row.1)", 6) + "  " + left("\(row.2)", 6) + "  " + left("\(row.3)", 6)
                    + (row.4.isEmpty ? "" : "  (\(row.4))"))
        }
        let totalPassed = rows.map(\.2).reduce(0, +)
        let totalFailed = rows.map(\.3).reduce(0, +)
        try StandardOutput.line(String(repeating: "-", count: width + 24))
        for failure in failures { try StandardOutput.line("FAIL \(failure)") }
        try StandardOutput.line("vectors: \(totalPassed) passed, \(totalFailed) failed")
        if totalFailed > 0 { throw ExitCode.failure }
    }
}
