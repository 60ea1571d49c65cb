public import Foundation

/// Where the project's own vectors (`TestVectors/`) and the external vectors (`../shared/vectors/`) live.
///
/// Paths are found from this source file (`#filePath`), the way swift-crypto finds its Wycheproof files, so
/// tests and the `e3dbkit` binary built from this checkout find them from any working directory. Pass an
/// explicit directory to `init(testVectors:)` to run the suites over a copy elsewhere.
public struct VectorLocations: Sendable {
    /// The project's `TestVectors/` directory.
    public let testVectors: URL
    /// `../shared/vectors/` beside the project root, or nil when that checkout does not exist.
    public let sharedVectors: URL?

    /// Locations derived from where this package was built.
    public static let `default` = VectorLocations()

    public init(testVectors: URL? = nil, sharedVectors: URL? = nil) {
        let root = VectorLocations.projectRoot
        self.testVectors = testVectors ?? root.appendingPathComponent("TestVectors", isDirectory: true)
        if let sharedVectors {
            self.sharedVectors = sharedVectors
        } else {
            let candidate = root.deletingLastPathComponent()
                .appendingPathComponent("shared", isDirectory: true)
                .appendingPathComponent("vectors", isDirectory: true)
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory)
            self.sharedVectors = exists && isDirectory.boolValue ? candidate : nil
        }
    }

    /// The package root (the directory holding `Package.swift`).
    public static var projectRoot: URL {
        // This file is <root>/Sources/E3DBTestSupport/VectorLocations.swift.
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()
            .deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// The message printed when a suite that needs `../shared` is skipped.
    public static let sharedMissingMessage =
        "../shared/vectors is not present beside the project root; external-vector suites are skipped"

    /// A file under `TestVectors/`.
    public func projectFile(_ relativePath: String) -> URL {
        testVectors.appendingPathComponent(relativePath)
    }

    /// A file under `../shared/vectors/`, or nil when that directory is absent.
    public func sharedFile(_ relativePath: String) -> URL? {
        sharedVectors?.appendingPathComponent(relativePath)
    }
}
