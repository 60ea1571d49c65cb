import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import E3DBTestSupport
import Foundation
import Synchronization
import Testing

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

    /// Runs the peer with `arguments` and awaits its end. When the engine they name (`--engine`; SQLCipher by
    /// default) cannot be imported by the project's Python, the current test (case) is skipped with a printed
    /// message instead.
    static func run(_ arguments: [String]) async throws -> CLIRunner.Result {
        guard let python = ChildProcess.projectPython else { throw PeerMissing() }
        try await requireEngine(arguments, python)
        return try await ChildProcess.run(python, [script] + arguments)
    }

    /// The Python module and the package that brings it, for each `--engine` of the peer.
    static let engines: [String: (module: String, package: String)] = [
        "sqlcipher": ("sqlcipher3", "sqlcipher3-binary"),
        "sqlite3mc": ("apsw", "apsw-sqlite3mc"),
        "sqlite3mc-2.0": ("pysqlite3mc", "pysqlite3mc-binary"),
    ]
    private static let importable = Mutex<[String: Bool]>([:])

    /// Skips the current test (case) with a printed message when the engine named in `arguments` is absent.
    private static func requireEngine(_ arguments: [String], _ python: URL) async throws {
        let engine = arguments.firstIndex(of: "--engine").map { arguments.index(after: $0) }.flatMap {
            $0 < arguments.count ? arguments[$0] : nil
        }
        guard let (module, package) = engines[engine ?? "sqlcipher"] else { return }
        let known = importable.withLock { $0[module] }
        let present: Bool
        if let known {
            present = known
        } else {
            present = try await ChildProcess.run(python, ["-c", "import \(module)"]).status == 0
            importable.withLock { $0[module] = present }
        }
        guard present else {
            let message =
                "skipped: the project's Python cannot import \(module) (\(package), installed by scripts/python-env.sh)"
            print("E3DBSQLiteTests: \(message)")
            try Test.cancel(Comment(rawValue: message))
        }
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
