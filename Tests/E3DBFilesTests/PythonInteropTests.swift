import E3DBConformance
import E3DBFiles
import E3DBKeys
import E3DBPrimitives
import E3DBTestSupport
import Foundation
import Testing

/// Swift → Python: files E3DBKit encrypts must decrypt with Tozny's Python SDK (e3db 2.3.0), and the SDK-side
/// MD5 and BLAKE2b-512 must equal what E3DBKit reported. Runs when python3 is available (CI has it).
@Suite("E3DB file v3: Swift → Python SDK", .enabled(if: PythonPeer.isAvailable, "python3 not found"))
struct PythonInteropTests {
    static let sizes = [0, 1, 16, 65_535, 65_536, 65_537, 131_071, 131_072, 131_073, 200_000, 1_048_577]

    @Test func pythonSDKDecryptsSwiftFiles() async throws {
        let python = try await ChildProcess.makeProjectPython()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-py-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var entries: [[String: Any]] = []
        for size in Self.sizes {
            let key = AccessKey()
            let plain = try FilesSuites.expand(seed: Data(repeating: UInt8(size % 251), count: 32), count: size)
            let inPath = directory.appendingPathComponent("plain-\(size)").path
            let outPath = directory.appendingPathComponent("enc-\(size)").path
            try plain.write(to: URL(fileURLWithPath: inPath))
            let result = try E3DBFileCipher.encryptFile(
                atPath: inPath, toPath: outPath, accessKey: key, options: FileEncryptionOptions(checksums: .all))
            entries.append([
                "name": "\(size) bytes", "encryptedPath": outPath, "accessKey": key.base64URLEncoded,
                "plaintextBlake2b512": Hex.encode(try BLAKE2b.hash(data: plain, outputByteCount: 64)),
                "plaintextSize": size, "checksum": result.checksums.md5Base64 ?? "",
                "ciphertextBlake2b512": result.checksums.blake2b512Hex ?? "",
            ])
        }
        let manifest = directory.appendingPathComponent("manifest.json")
        try JSONSerialization.data(withJSONObject: ["files": entries]).write(to: manifest)
        let script = VectorLocations.projectRoot.appendingPathComponent("TestVectors/generators/check_swift_files.py")
        let result = try await ChildProcess.run(python, [script.path, manifest.path])
        #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
        #expect(
            result.stdoutText.contains("\(Self.sizes.count) passed, 0 failed"), "\(result.stdoutText)\(result.stderr)")
    }
}

enum PythonPeer {
    static var isAvailable: Bool {
        ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":").contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/python3")
        } ?? false
    }
}
