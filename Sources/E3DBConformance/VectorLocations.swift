package import Foundation

/// Where the project's own vectors (`TestVectors/`) and the external vectors (`../shared/vectors/`) live.
///
/// Nothing here depends on where the code was compiled, so an installed `e3dbkit` works the same as one in a
/// checkout: ``default`` looks for a checkout from the current directory upwards (a directory holding
/// `Package.swift` and `TestVectors/`); pass explicit directories to run the suites over vectors anywhere else.
package struct VectorLocations: Sendable {
    /// The project's `TestVectors/` directory.
    package let testVectors: URL
    /// `../shared/vectors/` beside the project root, or nil when that checkout does not exist.
    package let sharedVectors: URL?

    /// The checkout that contains the current directory, or `./TestVectors` when there is none (loading a suite
    /// from it then fails with a message naming the missing file).
    package static var `default`: VectorLocations { VectorLocations() }

    /// Locations of a checkout, or of explicit directories.
    /// - Parameters:
    ///   - testVectors: The `TestVectors/` directory; by default the one of the checkout containing the current
    ///     directory.
    ///   - sharedVectors: The external vectors directory; by default `../shared/vectors` beside that checkout,
    ///     when it exists.
    package init(testVectors: URL? = nil, sharedVectors: URL? = nil) {
        let root = VectorLocations.checkoutRoot()
        let base = root ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        self.testVectors = testVectors ?? base.appendingPathComponent("TestVectors", isDirectory: true)
        if let sharedVectors {
            self.sharedVectors = sharedVectors
        } else {
            let projectRoot = testVectors?.deletingLastPathComponent() ?? base
            let candidate = projectRoot.deletingLastPathComponent()
                .appendingPathComponent("shared", isDirectory: true)
                .appendingPathComponent("vectors", isDirectory: true)
            self.sharedVectors = VectorLocations.isDirectory(candidate) ? candidate : nil
        }
    }

    /// The nearest directory, from `start` (default: the current directory) upwards, that holds both
    /// `Package.swift` and `TestVectors/`; nil when there is none.
    package static func checkoutRoot(from start: URL? = nil) -> URL? {
        var directory = (start ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true))
            .standardizedFileURL
        while true {
            let manifest = directory.appendingPathComponent("Package.swift")
            let vectors = directory.appendingPathComponent("TestVectors", isDirectory: true)
            if FileManager.default.fileExists(atPath: manifest.path) && isDirectory(vectors) { return directory }
            let parent = directory.deletingLastPathComponent()
            if parent.path == directory.path { return nil }
            directory = parent
        }
    }

    private static func isDirectory(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return unsafe FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
            && isDirectory.boolValue
    }

    /// The message printed when a suite that needs `../shared` is skipped.
    package static let sharedMissingMessage =
        "../shared/vectors is not present beside the project root; external-vector suites are skipped"

    /// A file under `TestVectors/`.
    package func projectFile(_ relativePath: String) -> URL {
        testVectors.appendingPathComponent(relativePath)
    }

    /// A file under `../shared/vectors/`, or nil when that directory is absent.
    package func sharedFile(_ relativePath: String) -> URL? {
        sharedVectors?.appendingPathComponent(relativePath)
    }
}
