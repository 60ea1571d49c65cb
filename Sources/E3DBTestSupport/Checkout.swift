@_exported public import E3DBConformance
package import Foundation

extension VectorLocations {
    /// The root of the checkout these tests were compiled from (the directory holding `Package.swift`), found
    /// from this source file's path so that tests run from any working directory. Test code only: products never
    /// depend on where they were compiled.
    package static var projectRoot: URL {
        // This file is <root>/Sources/E3DBTestSupport/Checkout.swift.
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()
            .deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// The vectors of the checkout these tests were compiled from.
    package static var checkout: VectorLocations {
        VectorLocations(testVectors: projectRoot.appendingPathComponent("TestVectors", isDirectory: true))
    }
}
