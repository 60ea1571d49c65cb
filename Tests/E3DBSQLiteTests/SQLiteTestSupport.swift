import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import E3DBTestSupport
import Foundation

/// A temporary directory for one test, removed by `remove()`.
struct TestDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbsqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    func remove() { try? FileManager.default.removeItem(at: url) }

    /// Every file in the directory, with its bytes.
    func files() throws -> [(name: String, bytes: Data)] {
        try FileManager.default.contentsOfDirectory(atPath: url.path).sorted().map {
            ($0, try Data(contentsOf: url.appendingPathComponent($0)))
        }
    }
}

enum TestKeys {
    static func passphrase(_ text: String = "correct horse battery staple") -> SQLCipherKey {
        .passphrase(SecureBytes(copying: Array(text.utf8)))
    }

    static func raw(_ byte: UInt8 = 0x42) -> SQLCipherKey {
        .rawKey(SecureBytes(copying: [UInt8](repeating: byte, count: 32)))
    }

    /// Fast settings for tests that open many databases: SQLCipher 4 with fewer PBKDF2 rounds.
    static let fast: SQLCipherSettings = {
        var settings = SQLCipherSettings.v4
        settings.kdfIterations = 1000
        return settings
    }()
}

extension Data {
    /// Whether `marker` occurs in these bytes.
    func contains(marker: String) -> Bool { range(of: Data(marker.utf8)) != nil }
}

/// The SQLCipher 4.12 peer (Tests/E3DBSQLiteTests/sqlcipher_peer.py on the project's Python).
enum SQLCipherPeer {
    static var script: String {
        VectorLocations.projectRoot.appendingPathComponent("Tests/E3DBSQLiteTests/sqlcipher_peer.py").path
    }

    /// Runs the peer with `arguments` and awaits its end.
    static func run(_ arguments: [String]) async throws -> CLIRunner.Result {
        guard let python = ChildProcess.projectPython else { throw PeerMissing() }
        return try await ChildProcess.run(python, [script] + arguments)
    }

    struct PeerMissing: Error, CustomStringConvertible {
        var description: String {
            "the project's Python environment with sqlcipher3-binary (.venv, scripts/python-env.sh) is missing"
        }
    }
}

/// The files of writers killed mid-flight (`e3dbkit sqlite exec` started with ``CLIRunner/start``).
enum KilledWriter {
    /// Copies a database with its -wal, -shm and -journal (a crashed state that two readers recover separately).
    static func copyDatabase(_ path: String, to copy: String) throws {
        for suffix in ["", "-wal", "-shm", "-journal"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
        }
    }
}
