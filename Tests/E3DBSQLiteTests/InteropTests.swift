import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import E3DBTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One way of keying a database, as the SQLCipher peer and this library each say it.
struct PeerKeying: Sendable, CustomTestStringConvertible {
    let name: String
    let peerArguments: [String]
    let key: @Sendable () -> SQLCipherKey
    let settings: SQLCipherSettings
    var testDescription: String { name }
    /// Whether the peer is SQLCipher (SQLite3 Multiple Ciphers has no `cipher_integrity_check`).
    var peerIsSQLCipher: Bool { !peerArguments.contains("--engine") }

    static let passphrase = PeerKeying(
        name: "passphrase", peerArguments: ["--key", "peer pass"], key: { TestKeys.passphrase("peer pass") },
        settings: .v4)
    static let rawKey = PeerKeying(
        name: "raw key", peerArguments: ["--key", String(repeating: "5a", count: 32), "--raw-key"],
        key: { TestKeys.raw(0x5a) },
        settings: .v4)
    static let rawKeyAndSalt = PeerKeying(
        name: "raw key with salt",
        peerArguments: ["--key", String(repeating: "5a", count: 32) + String(repeating: "c3", count: 16), "--raw-key"],
        key: {
            .rawKeyAndSalt(
                key: SecureBytes(copying: [UInt8](repeating: 0x5a, count: 32)),
                salt: [UInt8](repeating: 0xc3, count: 16))
        },
        settings: .v4)
    static let version3 = PeerKeying(
        name: "SQLCipher 3 settings", peerArguments: ["--key", "peer pass", "--compat", "3"],
        key: { TestKeys.passphrase("peer pass") }, settings: .v3)
    static let version3AfterKey = PeerKeying(
        name: "cipher_compatibility 3 after the key (80 reserved bytes, 48 used)",
        peerArguments: ["--key", "peer pass", "--compat", "3", "--compat-after-key"],
        key: { TestKeys.passphrase("peer pass") }, settings: .v3)
    static let largePages: PeerKeying = {
        var settings = SQLCipherSettings.v4
        settings.pageSize = 8192
        settings.kdfIterations = 10000
        return PeerKeying(
            name: "8 KiB pages, kdf_iter 10000",
            peerArguments: ["--key", "peer pass", "--page-size", "8192", "--kdf-iter", "10000"],
            key: { TestKeys.passphrase("peer pass") }, settings: settings)
    }()

    static let all: [PeerKeying] = [.passphrase, .rawKey, .rawKeyAndSalt, .version3, .version3AfterKey, .largePages]
}

/// A dump (JSON objects from Foundation): compared whole, read by member.
struct Dump: @unchecked Sendable, Equatable {
    // @unchecked: made once, never mutated; NSDictionary is immutable.
    let dictionary: NSDictionary
    subscript(_ key: String) -> Any? { dictionary[key] }
    static func == (lhs: Dump, rhs: Dump) -> Bool { lhs.dictionary.isEqual(rhs.dictionary) }
}

/// The peer's dump, made here through E3DBSQLite: every user table's rows ordered by primary key (rowid when none),
/// `integrity_check`, and `cipher_integrity_check`.
enum LocalDump {
    static func cell(_ value: SQLiteValue) -> Any {
        switch value {
        case .null: NSNull()
        case .integer(let value): NSNumber(value: value)
        case .real(let value):
            value.isInfinite ? ["real": value > 0 ? "Infinity" : "-Infinity"] as [String: Any] : NSNumber(value: value)
        case .text(let value): value
        case .blob(let value): ["base64": Data(value).base64EncodedString()]
        }
    }

    static func dump(_ path: String, _ keying: PeerKeying) throws -> Dump {
        let connection = try SQLiteConnection(path: path, key: keying.key(), settings: keying.settings)
        var tables: [String: Any] = [:]
        let names = try connection.rows(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        for row in names {
            guard case .text(let name) = row.values[0] else { continue }
            let info = try connection.rows("PRAGMA table_info(\"\(name)\")")
            let keys = info.filter { $0.values[5] != .integer(0) }.sorted {
                if case .integer(let a) = $0.values[5], case .integer(let b) = $1.values[5] { return a < b }
                return false
            }.compactMap { row -> String? in if case .text(let key) = row.values[1] { "\"\(key)\"" } else { nil } }
            let order = keys.isEmpty ? "rowid" : keys.joined(separator: ", ")
            tables[name] = try connection.rows("SELECT * FROM \"\(name)\" ORDER BY \(order)").map {
                $0.values.map(cell)
            }
        }
        func texts(_ sql: String) throws -> [String] {
            try connection.rows(sql).compactMap { if case .text(let text) = $0.values.first { text } else { nil } }
        }
        var dump: [String: Any] = ["tables": tables, "integrity_check": try texts("PRAGMA integrity_check")]
        if keying.peerIsSQLCipher { dump["cipher_integrity_check"] = try texts("PRAGMA cipher_integrity_check") }
        return Dump(dictionary: dump as NSDictionary)
    }

    /// The peer's dump of `path` (SQLCipher 4.12, or SQLite3 Multiple Ciphers when `keying` names it).
    static func peer(_ path: String, _ keying: PeerKeying) async throws -> Dump {
        let result = try await SQLCipherPeer.run(["dump", path] + keying.peerArguments)
        guard result.status == 0, let object = try JSONSerialization.jsonObject(with: result.stdout) as? NSDictionary
        else {
            throw E3DBError(.databaseError, "the peer could not dump \(path): \(result.stderr)")
        }
        return Dump(dictionary: object)
    }
}

@Suite("E3DBSQLite with SQLCipher 4.12 as the oracle")
struct InteropTests {
    /// Writes rows here in the peer's schema (created by the peer, or here when absent).
    static func writeHere(_ path: String, _ keying: PeerKeying, rows: ClosedRange<Int>, mode: String? = nil) throws {
        let connection = try SQLiteConnection(path: path, key: keying.key(), settings: keying.settings)
        if let mode { try connection.execute("PRAGMA journal_mode = \(mode)") }
        try connection.execute(
            """
            CREATE TABLE IF NOT EXISTS here(id INTEGER PRIMARY KEY, name TEXT UNIQUE, data BLOB);
            CREATE TABLE IF NOT EXISTS here_tags(tag TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID;
            CREATE TRIGGER IF NOT EXISTS here_count AFTER INSERT ON here BEGIN
                INSERT INTO here_tags VALUES ('t' || (new.id % 5), 1) ON CONFLICT(tag) DO UPDATE SET n = n + 1;
            END;
            BEGIN;
            WITH RECURSIVE c(x) AS (SELECT \(rows.lowerBound) UNION ALL SELECT x + 1 FROM c WHERE x < \(rows.upperBound))
            INSERT INTO here(id, name, data) SELECT x, 'hier ' || x || ' ✓', zeroblob(x % 9 * 1000) || x FROM c;
            COMMIT;
            """)
    }

    @Test(
        "files SQLCipher writes open here with equal rows; each side then writes to the other's file",
        arguments: PeerKeying.all)
    func sqlcipherFiles(keying: PeerKeying) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("peer.db")
        let written = try await SQLCipherPeer.run(["write", path, "--rows", "60"] + keying.peerArguments)
        try #require(written.status == 0, "\(written.stderr)")
        let peerDump = try await LocalDump.peer(path, keying)
        #expect(try LocalDump.dump(path, keying) == peerDump)
        #expect(try E3DBSQLite.verify(databaseAt: path, key: keying.key(), settings: keying.settings).isIntact)
        // Here writes to SQLCipher's file; SQLCipher reads it, its cipher_integrity_check finds nothing.
        try Self.writeHere(path, keying, rows: 1...300)
        let afterHere = try await LocalDump.peer(path, keying)
        #expect(afterHere["cipher_integrity_check"] as? [String] == [])
        #expect(afterHere["integrity_check"] as? [String] == ["ok"])
        #expect(try LocalDump.dump(path, keying) == afterHere)
        // SQLCipher writes again to the file this side wrote; both read the same.
        let again = try await SQLCipherPeer.run(
            ["write", path, "--rows", "40", "--start", "60"] + keying.peerArguments)
        #expect(again.status == 0, "\(again.stderr)")
        let final = try await LocalDump.peer(path, keying)
        #expect(try LocalDump.dump(path, keying) == final)
        #expect(((final["tables"] as? NSDictionary)?["items"] as? [Any])?.count == 100)
    }

    @Test(
        "a several-MiB file SQLCipher writes in each journal mode opens here with equal rows and verifies",
        arguments: ["delete", "wal"])
    func largeSQLCipherFiles(mode: String) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let keying = PeerKeying.passphrase
        let path = dir.path("large.db")
        let written = try await SQLCipherPeer.run(
            ["write", path, "--rows", "5000", "--journal-mode", mode] + keying.peerArguments)
        try #require(written.status == 0, "\(written.stderr)")
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        #expect(size > 4 << 20)
        let peer = try await LocalDump.peer(path, keying)
        #expect(try LocalDump.dump(path, keying) == peer)
        #expect(try E3DBSQLite.verify(databaseAt: path, key: keying.key()).isIntact)
    }

    @Test(
        "files written here pass SQLCipher's cipher_integrity_check and integrity_check with equal rows, in both journal modes",
        arguments: ["delete", "wal"])
    func localFiles(mode: String) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("here.db")
        let keying = PeerKeying.passphrase
        // Several MiB, overflow pages, a WITHOUT ROWID table, an index, a trigger.
        try Self.writeHere(path, keying, rows: 1...4000, mode: mode)
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        #expect(size > 8 << 20)
        let peerDump = try await LocalDump.peer(path, keying)
        #expect(peerDump["cipher_integrity_check"] as? [String] == [])
        #expect(peerDump["integrity_check"] as? [String] == ["ok"])
        #expect(try LocalDump.dump(path, keying) == peerDump)
    }

    @Test(
        "a hot WAL and a hot rollback journal SQLCipher leaves are recovered here as SQLCipher recovers them",
        arguments: ["wal", "delete"])
    func sqlcipherHot(mode: String) async throws {
        try await Self.hotRecovery(.passphrase, mode: mode)
    }

    /// The peer (`keying` names which) leaves a hot WAL or rollback journal (`mode`: `wal` or `delete`) over 30
    /// committed rows with 400 more in flight; a copy of that crashed state recovered here must equal the original
    /// recovered by the peer: committed WAL rows are kept, the uncommitted transaction is rolled back.
    static func hotRecovery(_ keying: PeerKeying, mode: String) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("hot.db")
        let base = try await SQLCipherPeer.run(["write", path, "--rows", "30"] + keying.peerArguments)
        try #require(base.status == 0, "\(base.stderr)")
        let hot = try await SQLCipherPeer.run(
            ["hot", path, "--journal-mode", mode, "--rows", "400", "--start", "30"] + keying.peerArguments)
        try #require(hot.status == 0, "\(hot.stderr)")
        let leftover = path + (mode == "wal" ? "-wal" : "-journal")
        try #require(FileManager.default.fileExists(atPath: leftover), "the peer left no \(leftover)")
        // Two copies of the crashed state: the peer recovers one, this library the other.
        let copy = dir.path("copy.db")
        try KilledWriter.copyDatabase(path, to: copy)
        let local = try LocalDump.dump(copy, keying)
        let peer = try await LocalDump.peer(path, keying)
        #expect(local == peer)
        let items = ((local["tables"] as? NSDictionary)?["items"] as? [Any])?.count
        #expect(
            items == (mode == "wal" ? 430 : 30),
            "committed WAL rows are kept, the uncommitted transaction is rolled back")
    }

    /// Runs `e3dbkit sqlite exec` on `script` and kills it with SIGKILL once it printed `marker`.
    static func killAfter(marker: String, arguments: [String], script: String) async throws {
        let input = Data(script.utf8)
        let process = try CLIRunner.start(arguments, stdin: input)
        let seen = try await process.readOutput { $0.contains(marker: marker) }
        process.signal(SIGKILL)
        try await process.exit()
        if !seen.contains(marker: marker) { throw E3DBError(.databaseError, "the writer ended before \(marker)") }
    }

    @Test(
        "a hot WAL and a hot rollback journal this library leaves are recovered by SQLCipher, with the same rows",
        arguments: ["wal", "delete"])
    func localHot(mode: String) async throws {
        try await Self.hotHere(mode: mode, keying: .passphrase)
    }

    /// Leaves a hot WAL or journal here (an `e3dbkit sqlite exec` writer killed mid-transaction, `cliOptions` naming
    /// the format), then has the peer and this library recover separate copies: the same rows, the uncommitted
    /// transaction rolled back.
    static func hotHere(mode: String, keying: PeerKeying, cliOptions: [String] = []) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("hot.db")
        try Self.writeHere(path, keying, rows: 1...50, mode: mode)
        try Self.write("peer pass", to: dir.path("pass"))
        let transaction =
            mode == "wal"
            ? """
            PRAGMA wal_autocheckpoint = 0;
            BEGIN; WITH RECURSIVE c(x) AS (SELECT 51 UNION ALL SELECT x + 1 FROM c WHERE x < 700)
            INSERT INTO here(id, name, data) SELECT x, 'hot ' || x, randomblob(900) FROM c; COMMIT;
            """
            : """
            PRAGMA cache_size = 2;
            BEGIN; UPDATE here SET name = name || ' changed', data = randomblob(1500);
            """
        let script =
            "PRAGMA journal_mode = \(mode);\n\(transaction)\nSELECT 'MARKER' AS m;\n"
            + "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000) SELECT count(*) FROM c;"
        try await Self.killAfter(
            marker: "MARKER",
            arguments: ["sqlite", "exec"] + cliOptions + ["--passphrase-file", dir.path("pass"), path], script: script
        )
        let leftover = path + (mode == "wal" ? "-wal" : "-journal")
        #expect(
            ((try? FileManager.default.attributesOfItem(atPath: leftover)[.size] as? Int) ?? 0) > 0,
            "no hot \(leftover)")
        let copy = dir.path("copy.db")
        try KilledWriter.copyDatabase(path, to: copy)
        let peer = try await LocalDump.peer(path, keying)
        #expect(peer["integrity_check"] as? [String] == ["ok"])
        if keying.peerIsSQLCipher { #expect(peer["cipher_integrity_check"] as? [String] == []) }
        let local = try LocalDump.dump(copy, keying)
        #expect(local == peer)
        let rows = ((local["tables"] as? NSDictionary)?["here"] as? [[Any]]) ?? []
        #expect(rows.count == (mode == "wal" ? 700 : 50))
        #expect(
            !rows.contains { ($0[1] as? String)?.hasSuffix("changed") == true }, "the uncommitted update is rolled back"
        )
    }

    static func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    @Test(
        "a writer that recovers a hot WAL and commits before it is killed too: every commit survives, in SQLCipher and here"
    )
    func recoveredWALWrittenAgain() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let keying = PeerKeying.passphrase
        let path = dir.path("twice.db")
        try Self.writeHere(path, keying, rows: 1...10, mode: "wal")
        try Self.write("peer pass", to: dir.path("pass"))
        let arguments = ["sqlite", "exec", "--passphrase-file", dir.path("pass"), path]
        let spin =
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000) SELECT count(*) FROM c;"
        for (round, range) in [(1, 11...200), (2, 201...400), (3, 401...600)] {
            // Each writer starts on the hot WAL the previous one left: it recovers it (reading whole frames), then
            // appends its own frames after the recovered ones.
            let script = """
                PRAGMA wal_autocheckpoint = 0;
                BEGIN; WITH RECURSIVE c(x) AS (SELECT \(range.lowerBound) UNION ALL SELECT x + 1 FROM c WHERE x < \(range.upperBound))
                INSERT INTO here(id, name, data) SELECT x, 'round \(round) ' || x, randomblob(700) FROM c; COMMIT;
                SELECT 'MARKER' AS m;
                """ + spin
            try await Self.killAfter(marker: "MARKER", arguments: arguments, script: script)
        }
        let copy = dir.path("copy.db")
        try KilledWriter.copyDatabase(path, to: copy)
        let peer = try await LocalDump.peer(path, keying)
        #expect(((peer["tables"] as? NSDictionary)?["here"] as? [Any])?.count == 600)
        #expect(try LocalDump.dump(copy, keying) == peer)
    }

    @Test("a WAL that declares another page size is refused as tampering, never read as pages")
    func forgedWALPageSize() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let keying = PeerKeying.passphrase
        let path = dir.path("forged.db")
        try Self.writeHere(path, keying, rows: 1...10, mode: "delete")
        // A WAL header for 1024-byte pages with a valid checksum (no key needed), then one frame of plaintext.
        var header = Data([0x37, 0x7f, 0x06, 0x82, 0x00, 0x2d, 0xe2, 0x18, 0x00, 0x00, 0x04, 0x00])
        header += Data(repeating: 0, count: 4) + Data([1, 2, 3, 4, 5, 6, 7, 8])
        var s1: UInt32 = 0
        var s2: UInt32 = 0
        for index in stride(from: 0, to: 24, by: 8) {
            let a = header[index..<(index + 4)].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self).littleEndian }
            let b = header[(index + 4)..<(index + 8)].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self).littleEndian }
            s1 = s1 &+ a &+ s2
            s2 = s2 &+ b &+ s1
        }
        for word in [s1, s2] { header += withUnsafeBytes(of: word.bigEndian) { Data($0) } }
        try (header + Data(repeating: 0x41, count: 24 + 1024)).write(to: URL(fileURLWithPath: path + "-wal"))
        let error = VFSOutcomeTests.error { _ = try LocalDump.dump(path, keying) }
        #expect(error != nil)
        #expect(
            [E3DBError.Code.pageSizeMismatch, .invalidLength].contains(error?.code ?? .databaseError),
            "\(String(describing: error))")
    }

    @Test(
        "SQLCipher's PRAGMA rekey output opens here under the new key only; rekey here opens in SQLCipher under the new key only"
    )
    func rekeyBothWays() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let keying = PeerKeying.passphrase
        let newKeying = PeerKeying(
            name: "new", peerArguments: ["--key", "new pass"], key: { TestKeys.passphrase("new pass") }, settings: .v4)
        let path = dir.path("rekey.db")
        let made = try await SQLCipherPeer.run(["write", path, "--rows", "80"] + keying.peerArguments)
        try #require(made.status == 0)
        let before = try await LocalDump.peer(path, keying)
        let rekeyed = try await SQLCipherPeer.run(["rekey", path, "--key", "peer pass", "--new-key", "new pass"])
        #expect(rekeyed.status == 0, "\(rekeyed.stderr)")
        #expect(try LocalDump.dump(path, newKeying) == before)
        #expect(VFSOutcomeTests.error { _ = try LocalDump.dump(path, keying) }?.code == .wrongKey)
        try E3DBSQLite.rekey(databaseAt: path, from: newKeying.key(), to: keying.key())
        let back = try await LocalDump.peer(path, keying)
        #expect(back == before)
        let refused = try await SQLCipherPeer.run(["dump", path] + newKeying.peerArguments)
        #expect(refused.status == 2)
    }
}
