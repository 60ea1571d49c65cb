import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import E3DBTestSupport
import Foundation
import GRDB
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension PeerKeying {
    static let mcHex = String(repeating: "5a", count: 32)
    static let mcSaltHex = String(repeating: "c3", count: 16)

    static let mcPassphrase = PeerKeying(
        name: "chacha20, passphrase", peerArguments: ["--key", "peer pass", "--engine", "sqlite3mc"],
        key: { TestKeys.passphrase("peer pass") }, settings: .chacha20)
    /// The cipher not named here: the file's page 1 shows it.
    static let mcRecognised = PeerKeying(
        name: "chacha20 recognised from the file", peerArguments: ["--key", "peer pass", "--engine", "sqlite3mc"],
        key: { TestKeys.passphrase("peer pass") }, settings: .v4)
    static let mcRawKey = PeerKeying(
        name: "chacha20, raw key", peerArguments: ["--key", mcHex, "--raw-key", "--engine", "sqlite3mc"],
        key: { TestKeys.raw(0x5a) }, settings: .chacha20)
    static let mcRawKeyAndSalt = PeerKeying(
        name: "chacha20, raw key with salt",
        peerArguments: ["--key", mcHex + mcSaltHex, "--raw-key", "--engine", "sqlite3mc"],
        key: {
            .rawKeyAndSalt(
                key: SecureBytes(copying: [UInt8](repeating: 0x5a, count: 32)),
                salt: [UInt8](repeating: 0xc3, count: 16))
        }, settings: .chacha20)
    static let mcLegacy = PeerKeying(
        name: "sqleet legacy layout", peerArguments: ["--key", "peer pass", "--engine", "sqlite3mc", "--legacy"],
        key: { TestKeys.passphrase("peer pass") }, settings: .sqleet)
    static let mcKdfIter: PeerKeying = {
        var settings = SQLCipherSettings.chacha20
        settings.kdfIterations = 1000
        return PeerKeying(
            name: "chacha20, kdf_iter 1000",
            peerArguments: ["--key", "peer pass", "--engine", "sqlite3mc", "--kdf-iter", "1000"],
            key: { TestKeys.passphrase("peer pass") }, settings: settings)
    }()
    static let mcLegacyLargePages: PeerKeying = {
        var settings = SQLCipherSettings.sqleet
        settings.pageSize = 8192
        return PeerKeying(
            name: "sqleet legacy layout, 8 KiB pages",
            peerArguments: ["--key", "peer pass", "--engine", "sqlite3mc", "--legacy", "--page-size", "8192"],
            key: { TestKeys.passphrase("peer pass") }, settings: settings)
    }()
    static let mcOlder = PeerKeying(
        name: "chacha20, SQLite3 Multiple Ciphers 2.0.2",
        peerArguments: ["--key", "peer pass", "--engine", "sqlite3mc-2.0"],
        key: { TestKeys.passphrase("peer pass") }, settings: .chacha20)

    static let sqlite3mc: [PeerKeying] = [
        .mcPassphrase, .mcRecognised, .mcRawKey, .mcRawKeyAndSalt, .mcLegacy, .mcLegacyLargePages, .mcKdfIter,
        .mcOlder,
    ]
}

@Suite("E3DBSQLite's chacha20 format with SQLite3 Multiple Ciphers (apsw-sqlite3mc, pysqlite3mc) as the oracle")
struct SQLite3MCInteropTests {
    static func items(_ dump: Dump, _ table: String = "items") -> Int? {
        ((dump["tables"] as? NSDictionary)?[table] as? [Any])?.count
    }

    @Test(
        "files SQLite3 Multiple Ciphers writes open here with equal rows; each side then writes to the other's file",
        arguments: PeerKeying.sqlite3mc)
    func peerFiles(keying: PeerKeying) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("peer.db")
        let written = try await SQLCipherPeer.run(["write", path, "--rows", "60"] + keying.peerArguments)
        try #require(written.status == 0, "\(written.stderr)")
        let peerDump = try await LocalDump.peer(path, keying)
        #expect(peerDump["integrity_check"] as? [String] == ["ok"])
        #expect(try LocalDump.dump(path, keying) == peerDump)
        #expect(try E3DBSQLite.verify(databaseAt: path, key: keying.key(), settings: keying.settings).isIntact)
        try InteropTests.writeHere(path, keying, rows: 1...300)
        let afterHere = try await LocalDump.peer(path, keying)
        #expect(afterHere["integrity_check"] as? [String] == ["ok"])
        #expect(Self.items(afterHere, "here") == 300)
        #expect(try LocalDump.dump(path, keying) == afterHere)
        let again = try await SQLCipherPeer.run(
            ["write", path, "--rows", "40", "--start", "60"] + keying.peerArguments)
        #expect(again.status == 0, "\(again.stderr)")
        let final = try await LocalDump.peer(path, keying)
        #expect(try LocalDump.dump(path, keying) == final)
        #expect(Self.items(final) == 100)
    }

    @Test(
        "files written here open in SQLite3 Multiple Ciphers with equal rows; it then writes to them",
        arguments: [PeerKeying.mcPassphrase, .mcRawKey, .mcRawKeyAndSalt, .mcLegacy, .mcOlder])
    func localFiles(keying: PeerKeying) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("here.db")
        try InteropTests.writeHere(path, keying, rows: 1...200)
        let header = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(24)
        // Non-legacy: bytes 16-23 readable, 32 reserved bytes; legacy: page 1 encrypted from byte 0.
        #expect((header[header.startIndex + 20] == 32) == !keying.settings.legacy)
        let peerDump = try await LocalDump.peer(path, keying)
        #expect(peerDump["integrity_check"] as? [String] == ["ok"])
        #expect(try LocalDump.dump(path, keying) == peerDump)
        let written = try await SQLCipherPeer.run(["write", path, "--rows", "50"] + keying.peerArguments)
        #expect(written.status == 0, "\(written.stderr)")
        let final = try await LocalDump.peer(path, keying)
        #expect(Self.items(final) == 50)
        #expect(try LocalDump.dump(path, keying) == final)
    }

    @Test(
        "several-MiB files in each journal mode, with overflow pages and indexes, written by either side",
        arguments: ["delete", "wal"])
    func largeFiles(mode: String) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let keying = PeerKeying.mcPassphrase
        let peerPath = dir.path("peer.db")
        let written = try await SQLCipherPeer.run(
            ["write", peerPath, "--rows", "3000", "--journal-mode", mode] + keying.peerArguments)
        try #require(written.status == 0, "\(written.stderr)")
        #expect(((try FileManager.default.attributesOfItem(atPath: peerPath)[.size] as? Int) ?? 0) > 2 << 20)
        let peer = try await LocalDump.peer(peerPath, keying)
        #expect(try LocalDump.dump(peerPath, keying) == peer)
        let localPath = dir.path("here.db")
        try InteropTests.writeHere(localPath, keying, rows: 1...3000, mode: mode)
        #expect(((try FileManager.default.attributesOfItem(atPath: localPath)[.size] as? Int) ?? 0) > 4 << 20)
        let fromHere = try await LocalDump.peer(localPath, keying)
        #expect(fromHere["integrity_check"] as? [String] == ["ok"])
        #expect(try LocalDump.dump(localPath, keying) == fromHere)
    }

    @Test(
        "a hot WAL and a hot rollback journal SQLite3 Multiple Ciphers leaves are recovered here as it recovers them",
        arguments: ["wal", "delete"])
    func peerHot(mode: String) async throws {
        try await InteropTests.hotRecovery(.mcPassphrase, mode: mode)
    }

    @Test(
        "a hot WAL and a hot rollback journal this library leaves are recovered by SQLite3 Multiple Ciphers",
        arguments: ["wal", "delete"])
    func localHot(mode: String) async throws {
        try await InteropTests.hotHere(mode: mode, keying: .mcPassphrase, cliOptions: ["--cipher", "chacha20"])
    }

    @Test("wrong keys of each kind: a typed wrongKey from the API, 77 from every e3dbkit sqlite command")
    func wrongKeys() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("peer.db")
        let keying = PeerKeying.mcPassphrase
        let written = try await SQLCipherPeer.run(["write", path, "--rows", "20"] + keying.peerArguments)
        try #require(written.status == 0, "\(written.stderr)")
        let wrong: [(SQLCipherKey, SQLCipherSettings)] = [
            (TestKeys.passphrase("not it"), .chacha20), (TestKeys.passphrase("not it"), .v4),
            (TestKeys.raw(1), .chacha20), (TestKeys.passphrase("peer pass"), .sqleet),
        ]
        for (key, settings) in wrong {
            let error = VFSOutcomeTests.error { _ = try SQLiteConnection(path: path, key: key, settings: settings) }
            #expect(error?.code == .wrongKey, "\(settings): \(String(describing: error))")
        }
        try InteropTests.write("not it", to: dir.path("wrong"))
        try InteropTests.write(String(repeating: "01", count: 32), to: dir.path("wrong.key"))
        for source in [["--passphrase-file", dir.path("wrong")], ["--key-file", dir.path("wrong.key")]] {
            for command in [["exec"], ["verify"], ["decrypt"]] {
                var arguments = ["sqlite"] + command + source + [path]
                if command == ["exec"] { arguments.append("SELECT 1") }
                if command == ["decrypt"] { arguments.append(dir.path("out-\(arguments.count).db")) }
                let result = try await CLIRunner.run(arguments)
                #expect(result.status == 77, "\(arguments): \(result.stderr)")
            }
        }
    }

    @Test("a flipped byte anywhere in a page is a typed pageTampered naming the page, here and in the CLI")
    func flippedBytes() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let keying = PeerKeying.mcRawKey
        let path = dir.path("peer.db")
        let written = try await SQLCipherPeer.run(["write", path, "--rows", "40"] + keying.peerArguments)
        try #require(written.status == 0, "\(written.stderr)")
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = 4096
        let pages = original.count / pageSize
        try #require(pages >= 3)
        let salt = Array(original.prefix(16))
        let codec = try PageCodec(key: keying.key(), salt: salt, settings: .chacha20)
        // Every byte of page 2 (ciphertext, nonce, tag), and bytes of page 1 in the salt, the readable header and
        // the ciphertext: each flip fails to authenticate, and names its page.
        for (number, offsets) in [(2, Array(0..<pageSize)), (1, [0, 15, 16, 20, 23, 24, 100, 4064, 4080, 4095])] {
            let start = (number - 1) * pageSize
            let stored = Array(original[start..<(start + pageSize)])
            for offset in offsets {
                var flipped = stored
                flipped[offset] ^= 0x01
                let error = VFSOutcomeTests.error { _ = try codec.decrypt(page: flipped, number: UInt32(number)) }
                #expect(error?.code == .pageTampered && error?.context.actual == number, "page \(number) @\(offset)")
            }
        }
        // In a file: the VFS names the page (the key opens page 1, so page 3 is tampering, not a wrong key).
        var file = original
        file[2 * pageSize + 1000] ^= 0x80
        try file.write(to: URL(fileURLWithPath: path))
        let result = try E3DBSQLite.verify(databaseAt: path, key: keying.key(), settings: keying.settings)
        #expect(result.badPages == [3])
        try InteropTests.write(PeerKeying.mcHex, to: dir.path("key"))
        let cli = try await CLIRunner.run(["sqlite", "verify", "--key-file", dir.path("key"), path])
        #expect(cli.status == 2 && cli.stderr.contains("page 3 did not authenticate"), "\(cli.stderr)")
        // Truncation inside a page: typed, never zeros in its place.
        try original.prefix(original.count - 100).write(to: URL(fileURLWithPath: path))
        let cut = VFSOutcomeTests.error {
            let connection = try SQLiteConnection(path: path, key: keying.key(), settings: keying.settings)
            _ = try connection.rows("SELECT count(*), sum(length(data)) FROM items")
        }
        #expect(cut?.code == .pageTampered && cut?.context.actual == pages, "\(String(describing: cut))")
    }

    /// A nonce for page `number` whose block counter (its last 4 bytes, little-endian, XOR the page number) is
    /// `counter`.
    static func nonce(counter: UInt32, number: UInt32) -> [UInt8] {
        let stored = counter ^ number
        return [UInt8](repeating: 0xa7, count: 12) + withUnsafeBytes(of: stored.littleEndian) { Array($0) }
    }

    /// Pages whose block counter wraps, as (page number, the counter of the one-time key block): page 2's one-time
    /// key block is at 2³² − 1 and its data starts at block 0; page 3's data wraps after 10 of its 64 blocks, page
    /// 1's (from byte 24) after 2.
    static let wrappingPages: [(number: UInt32, counter: UInt32)] = [(2, .max), (3, .max - 10), (1, .max - 2)]

    /// The peers that read each set of wrapping pages alike. SQLite3 Multiple Ciphers 2.0.2 (and its scalar ChaCha20
    /// through 2.5, like sqleet and BoringSSL) wraps the 32-bit counter to 0 within a page; 2.6.1 carries it into
    /// the nonce's first word instead (its 4-block ChaCha20), so it reads a page whose data crosses 2³² otherwise
    /// than every earlier release (about 63 page writes in 2³²): it is checked only on the page whose data starts at
    /// block 0, where no release carries.
    static let wrapCases: [(peer: PeerKeying, pages: Int)] = [
        (
            PeerKeying(
                name: "SQLite3 Multiple Ciphers 2.0.2, every wrap",
                peerArguments: ["--key", PeerKeying.mcHex, "--raw-key", "--engine", "sqlite3mc-2.0"],
                key: { TestKeys.raw(0x5a) }, settings: .chacha20), 3
        ),
        (PeerKeying.mcRawKey, 1),
    ]

    @Test(
        "pages whose ChaCha20 block counter wraps at 2³² inside them: read here, and the peer reads them alike",
        arguments: [0, 1])
    func counterWrap(wrapCase: Int) async throws {
        let (keying, count) = Self.wrapCases[wrapCase]
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("wrap.db")
        try InteropTests.writeHere(path, keying, rows: 1...40)
        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = 4096
        try #require(file.count / pageSize >= 4)
        let codec = try PageCodec(key: keying.key(), salt: Array(file.prefix(16)), settings: .chacha20)
        for (number, counter) in Self.wrappingPages.prefix(count) {
            let start = Int(number - 1) * pageSize
            let plain = try codec.decrypt(page: Array(file[start..<(start + pageSize)]), number: number)
            let stored = try codec.encrypt(
                page: plain, number: number, nonce: Self.nonce(counter: counter, number: number))
            file.replaceSubrange(start..<(start + pageSize), with: stored)
            #expect(try codec.decrypt(page: stored, number: number) == plain)
        }
        try file.write(to: URL(fileURLWithPath: path))
        let local = try LocalDump.dump(path, keying)
        #expect(local["integrity_check"] as? [String] == ["ok"])
        let peer = try await LocalDump.peer(path, keying)
        #expect(peer == local)
        #expect(Self.items(local, "here") == 40)
    }
}

@Suite("chacha20 through GRDB and the CLI, with SQLite3 Multiple Ciphers as the oracle")
struct SQLite3MCUsageTests {
    @Test("GRDB's two lines: a pool on a chacha20 URI writes what the peer reads; a peer file opens unnamed")
    func grdb() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let keying = PeerKeying.mcPassphrase
        let path = dir.path("grdb.db")
        let pool = try DatabasePool(
            path: try E3DBSQLite.uri(forDatabaseAt: path, key: keying.key(), settings: .chacha20))
        try await pool.write { db in
            try db.execute(sql: "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT); CREATE INDEX n ON items(name)")
            for id in 1...500 { try db.execute(sql: "INSERT INTO items VALUES (?, ?)", arguments: [id, "row \(id)"]) }
        }
        let peer = try await LocalDump.peer(path, keying)
        #expect(SQLite3MCInteropTests.items(peer) == 500 && peer["integrity_check"] as? [String] == ["ok"])
        let other = dir.path("peer.db")
        let written = try await SQLCipherPeer.run(["write", other, "--rows", "30"] + keying.peerArguments)
        try #require(written.status == 0, "\(written.stderr)")
        let unnamed = try DatabaseQueue(path: try E3DBSQLite.uri(forDatabaseAt: other, key: keying.key()))
        #expect(try await unnamed.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM items") } == 30)
    }

    @Test("rekey of a chacha20 file here: SQLite3 Multiple Ciphers opens it under the new key only, in chacha20")
    func rekey() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let keying = PeerKeying.mcPassphrase
        let path = dir.path("rekey.db")
        let written = try await SQLCipherPeer.run(["write", path, "--rows", "40"] + keying.peerArguments)
        try #require(written.status == 0, "\(written.stderr)")
        let before = try await LocalDump.peer(path, keying)
        try E3DBSQLite.rekey(databaseAt: path, from: keying.key(), settings: .chacha20, to: TestKeys.raw(0x5a))
        #expect(try await LocalDump.peer(path, .mcRawKey) == before)
        let old = try await SQLCipherPeer.run(["dump", path] + keying.peerArguments)
        #expect(old.status == 2, "\(old.stderr)")
    }

    @Test("the CLI opens a peer's file unnamed, its legacy file with --legacy, and migrates one to SQLCipher 4")
    func cli() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try InteropTests.write("peer pass", to: dir.path("pass"))
        let pass = ["--passphrase-file", dir.path("pass")]
        let current = dir.path("current.db")
        let legacy = dir.path("legacy.db")
        for (path, keying) in [(current, PeerKeying.mcPassphrase), (legacy, .mcLegacy)] {
            let written = try await SQLCipherPeer.run(["write", path, "--rows", "25"] + keying.peerArguments)
            try #require(written.status == 0, "\(written.stderr)")
        }
        let count = "SELECT count(*) AS n FROM items"
        let unnamed = try await CLIRunner.run(["sqlite", "exec"] + pass + [current, count])
        #expect(unnamed.status == 0 && unnamed.stdoutText == "{\"n\":25}\n", "\(unnamed.stderr)")
        let named = try await CLIRunner.run(
            ["sqlite", "exec", "--cipher", "chacha20", "--legacy"] + pass + [legacy, count])
        #expect(named.status == 0 && named.stdoutText == "{\"n\":25}\n", "\(named.stderr)")
        // A legacy file is not recognised: without --legacy the key does not open it.
        let unnamedLegacy = try await CLIRunner.run(["sqlite", "exec"] + pass + [legacy, count])
        #expect(unnamedLegacy.status == 77, "\(unnamedLegacy.stderr)")
        let verify = try await CLIRunner.run(
            ["sqlite", "verify", "--cipher", "chacha20", "--legacy"] + pass + [legacy])
        #expect(verify.status == 0, "\(verify.stderr)")
        // Migration: decrypt the SQLite3 Multiple Ciphers file, encrypt it as SQLCipher 4; SQLCipher reads it.
        let plain = dir.path("plain.db")
        let migrated = dir.path("sqlcipher.db")
        let decrypted = try await CLIRunner.run(
            ["sqlite", "decrypt"] + pass + [legacy, plain] + ["--cipher", "chacha20", "--legacy"])
        #expect(decrypted.status == 0, "\(decrypted.stderr)")
        let encrypted = try await CLIRunner.run(["sqlite", "encrypt"] + pass + [plain, migrated])
        #expect(encrypted.status == 0, "\(encrypted.stderr)")
        let fromSQLCipher = try await LocalDump.peer(migrated, .passphrase)
        let fromSQLite3MC = try await LocalDump.peer(legacy, .mcLegacy)
        #expect((fromSQLCipher["tables"] as? NSDictionary) == (fromSQLite3MC["tables"] as? NSDictionary))
        #expect(fromSQLCipher["cipher_integrity_check"] as? [String] == [])
    }
}
