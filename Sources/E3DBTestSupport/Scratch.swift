import E3DBPrimitives
package import Foundation

/// A private scratch directory for one test: plaintext inputs and download destinations.
package final class Scratch {
    package let url = FileManager.default.temporaryDirectory.appendingPathComponent(
        "e3dbkit-files-\(UUID().uuidString)")

    package init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false) }

    deinit { try? FileManager.default.removeItem(at: url) }

    package func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Writes `count` bytes: random 1 MiB blocks repeated, each block's first 8 bytes its index.
    package func file(_ name: String, count: Int) throws -> String {
        let path = path(name)
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        let block = SecureRandom.bytes(count: 1 << 20)
        var written = 0
        var index: UInt64 = 0
        while written < count {
            var piece = Data((0..<8).map { UInt8(truncatingIfNeeded: index >> (8 * $0)) }) + block.dropFirst(8)
            piece = piece.prefix(count - written)
            try handle.write(contentsOf: piece)
            written += piece.count
            index += 1
        }
        return path
    }

    /// The names in the directory other than `keeping`: a failed download must leave none (no plaintext, no
    /// temporary file).
    package func leftovers(keeping: Set<String>) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: url.path).filter { !keeping.contains($0) }.sorted()
    }
}
