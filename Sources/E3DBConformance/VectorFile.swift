package import Foundation

/// The Wycheproof-shaped envelope every file under `TestVectors/` uses:
/// `{"algorithm", "source", "generator", "numberOfTests", "tests": [{"tcId", "comment", "result", "flags", ...}]}`.
package struct VectorFile<Test: Decodable & Sendable>: Decodable, Sendable {
    package let algorithm: String
    package let source: String
    package let generator: String
    package let tests: [Test]

    /// Loads and decodes a vector file.
    package static func load(_ url: URL) throws -> VectorFile<Test> {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw VectorFormatError("cannot read \(url.lastPathComponent): \(error)")
        }
        do {
            return try JSONDecoder().decode(VectorFile<Test>.self, from: data)
        } catch {
            throw VectorFormatError("cannot decode \(url.lastPathComponent): \(error)")
        }
    }
}

/// `result` of a vector case.
package enum VectorResult: String, Decodable, Sendable {
    case valid
    case invalid
    case acceptable
}

/// Splits `bytes` into pieces of the given sizes (cycled), to exercise APIs over discontiguous input.
package func splitChunks(_ bytes: [UInt8], sizes: [Int]) -> [[UInt8]] {
    precondition(!sizes.isEmpty && sizes.allSatisfy { $0 > 0 })
    var out: [[UInt8]] = []
    var offset = 0
    var index = 0
    while offset < bytes.count {
        let size = min(sizes[index % sizes.count], bytes.count - offset)
        out.append(Array(bytes[offset..<(offset + size)]))
        offset += size
        index += 1
    }
    return out
}
