import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import E3DBTestSupport
import Foundation
import GRDB
import Testing

extension PeerKeying {
    /// SQLCipher settings with another HMAC, KDF hash or a plaintext header, said to SQLCipher 4.12 through its
    /// pragmas (after the key, or as `cipher_default_*` before it) and here through `SQLCipherSettings`. Passphrases
    /// use 4,000 PBKDF2 rounds to keep the suite fast.
    static func settings(
        _ name: String, hmac: SQLCipherSettings.Algorithm = .sha512, kdf: SQLCipherSettings.Algorithm = .sha512,
        header: Int = 0, salt: [UInt8]? = nil, rawKeyAndSalt: Bool = false, beforeKey: Bool = false
    ) -> PeerKeying {
        var settings = SQLCipherSettings(
            pageSize: 4096, kdfIterations: 4000, algorithm: hmac, kdfAlgorithm: kdf, plaintextHeaderSize: header,
            salt: salt)
        var arguments = ["--kdf-iter", "4000", "--hmac-algorithm", hmac.hmacName, "--kdf-algorithm", kdf.kdfName]
        if header > 0 { arguments += ["--plaintext-header-size", String(header)] }
        if let salt { arguments += ["--cipher-salt", Hex.encode(salt)] }
        if beforeKey { arguments.append("--defaults-before-key") }
        if rawKeyAndSalt {
            settings.salt = nil
            let key = [UInt8](repeating: 0x5a, count: 32)
            let keySalt = [UInt8](repeating: 0xc3, count: 16)
            return PeerKeying(
                name: name, peerArguments: ["--key", Hex.encode(key + keySalt), "--raw-key"] + arguments,
                key: { .rawKeyAndSalt(key: SecureBytes(copying: key), salt: keySalt) }, settings: settings)
        }
        return PeerKeying(
            name: name, peerArguments: ["--key", "settings pass"] + arguments,
            key: { TestKeys.passphrase("settings pass") }, settings: settings)
    }

    static let headerSalt = [UInt8](0x10..<0x20)

    static let sqlcipherSettings: [PeerKeying] = [
        .settings("HMAC_SHA1", hmac: .sha1),
        .settings("HMAC_SHA256", hmac: .sha256),
        .settings("HMAC_SHA256 as cipher_default_hmac_algorithm before the key", hmac: .sha256, beforeKey: true),
        .settings("HMAC_SHA512 with PBKDF2_HMAC_SHA1", kdf: .sha1),
        .settings("HMAC_SHA256 with PBKDF2_HMAC_SHA256", hmac: .sha256, kdf: .sha256),
        .settings("PBKDF2_HMAC_SHA512 with HMAC_SHA1", hmac: .sha1, kdf: .sha512),
        .settings("plaintext header 32 with cipher_salt", header: 32, salt: headerSalt),
        .settings(
            "plaintext header 32, HMAC_SHA256, defaults before the key", hmac: .sha256, header: 32,
            salt: headerSalt, beforeKey: true),
        .settings("plaintext header 32 with a raw key and its salt", header: 32, rawKeyAndSalt: true),
    ]
}

extension PeerKeying {
    /// chacha20 with SQLite3 Multiple Ciphers' `plaintext_header_size` and `cipher_salt` (before the key there).
    static func mcHeader(_ size: Int, legacy: Bool = false) -> PeerKeying {
        var settings = SQLCipherSettings.defaults(.chacha20, legacy: legacy)
        settings.kdfIterations = 1000
        settings.plaintextHeaderSize = size
        settings.salt = headerSalt
        return PeerKeying(
            name: "chacha20\(legacy ? " legacy" : ""), plaintext header \(size) with cipher_salt",
            peerArguments: [
                "--key", "peer pass", "--engine", "sqlite3mc", "--kdf-iter", "1000", "--plaintext-header-size",
                String(size), "--cipher-salt", Hex.encode(headerSalt),
            ] + (legacy ? ["--legacy"] : []),
            key: { TestKeys.passphrase("peer pass") }, settings: settings)
    }

    static let mcHeaders: [PeerKeying] = [.mcHeader(32), .mcHeader(16)]
}

@Suite("E3DBSQLite: chacha20's plaintext header against SQLite3 Multiple Ciphers 2.6.1")
struct ChaCha20PlaintextHeaderTests {
    @Test(
        "files SQLite3 Multiple Ciphers writes with a plaintext header open here; each side writes to the other's",
        arguments: PeerKeying.mcHeaders)
    func peerFiles(keying: PeerKeying) async throws {
        try await SQLite3MCInteropTests().peerFiles(keying: keying)
    }

    @Test(
        "files written here with a plaintext header open in SQLite3 Multiple Ciphers; they start as SQLite's do",
        arguments: PeerKeying.mcHeaders)
    func localFiles(keying: PeerKeying) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("here.db")
        try InteropTests.writeHere(path, keying, rows: 1...200)
        let start = Array(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(24))
        #expect(Array(start[0..<16]) == Array("SQLite format 3\0".utf8))
        #expect(start[20] == 32)
        let peer = try await LocalDump.peer(path, keying)
        #expect(peer["integrity_check"] as? [String] == ["ok"])
        #expect(try LocalDump.dump(path, keying) == peer)
        let written = try await SQLCipherPeer.run(["write", path, "--rows", "50"] + keying.peerArguments)
        #expect(written.status == 0, "\(written.stderr)")
        #expect(try LocalDump.dump(path, keying) == (try await LocalDump.peer(path, keying)))
        // Without the salt: typed.
        var noSalt = keying.settings
        noSalt.salt = nil
        let error = #expect(throws: E3DBError.self) {
            _ = try SQLiteConnection(path: path, key: keying.key(), settings: noSalt).rows("SELECT 1 FROM items")
        }
        #expect(error?.code == .keyMissing)
        // sqleet's legacy layout with a plaintext header is refused, typed (the peers did not agree on it).
        var legacy = SQLCipherSettings.sqleet
        legacy.plaintextHeaderSize = 32
        #expect(throws: E3DBError.self) { try legacy.validate() }
    }
}

@Suite("E3DBSQLite: SQLCipher's HMAC, KDF and plaintext header settings against SQLCipher 4.12")
struct SQLCipherSettingsTests {
    @Test(
        "files SQLCipher writes with these settings open here with equal rows; each side then writes to the other's",
        arguments: PeerKeying.sqlcipherSettings)
    func peerFiles(keying: PeerKeying) async throws {
        try await InteropTests().sqlcipherFiles(keying: keying)
    }

    @Test(
        "files made here with these settings open in SQLCipher, intact; page 1 holds the salt or the plaintext header",
        arguments: PeerKeying.sqlcipherSettings)
    func localFiles(keying: PeerKeying) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("here.db")
        try InteropTests.writeHere(path, keying, rows: 1...200)
        let peer = try await LocalDump.peer(path, keying)
        #expect(peer["integrity_check"] as? [String] == ["ok"])
        #expect(peer["cipher_integrity_check"] as? [String] == [])
        #expect(try LocalDump.dump(path, keying) == peer)
        let start = Array(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(32))
        let settings = keying.settings
        if settings.plaintextHeaderSize > 0 {
            // SQLite's own header: "SQLite format 3\0", the page size, and the cipher's reserve (48 or 80).
            #expect(Array(start[0..<16]) == Array("SQLite format 3\0".utf8))
            #expect(start[16] == 0x10 && start[17] == 0)
            #expect(Int(start[20]) == settings.reserveByteCount)
        } else {
            #expect(Array(start[0..<16]) != Array("SQLite format 3\0".utf8))
        }
        #expect(settings.reserveByteCount == (settings.algorithm == .sha512 ? 80 : 48))
        // SQLCipher writes to this file too; this side reads what it wrote.
        let again = try await SQLCipherPeer.run(["write", path, "--rows", "20"] + keying.peerArguments)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try LocalDump.dump(path, keying) == (try await LocalDump.peer(path, keying)))
    }

    @Test("wrong settings are typed errors: another HMAC or KDF, a missing or wrong salt, a bad header size")
    func wrongSettings() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let sha256 = PeerKeying.settings("HMAC_SHA256", hmac: .sha256)
        let path = dir.path("sha256.db")
        try InteropTests.writeHere(path, sha256, rows: 1...10)
        func failure(_ path: String, _ settings: SQLCipherSettings) -> E3DBError? {
            #expect(throws: E3DBError.self) {
                _ = try SQLiteConnection(path: path, key: TestKeys.passphrase("settings pass"), settings: settings)
                    .rows("SELECT count(*) FROM sqlite_master")
            }
        }
        var other = sha256.settings
        other.algorithm = .sha512
        #expect(failure(path, other)?.code == .wrongKey)
        other = sha256.settings
        other.kdfAlgorithm = .sha1
        #expect(failure(path, other)?.code == .wrongKey)
        // SQLCipher agrees: the wrong KDF does not open the file.
        let peer = try await SQLCipherPeer.run(
            [
                "dump", path, "--key", "settings pass", "--kdf-iter", "4000", "--hmac-algorithm", "HMAC_SHA256",
                "--kdf-algorithm", "PBKDF2_HMAC_SHA1",
            ])
        #expect(peer.status == 2, "\(peer.stderr)")

        let header = PeerKeying.settings("header", header: 32, salt: PeerKeying.headerSalt)
        let headerPath = dir.path("header.db")
        try InteropTests.writeHere(headerPath, header, rows: 1...10)
        var noSalt = header.settings
        noSalt.salt = nil
        #expect(failure(headerPath, noSalt)?.code == .keyMissing)
        var wrongSalt = header.settings
        wrongSalt.salt = [UInt8](repeating: 7, count: 16)
        #expect(failure(headerPath, wrongSalt)?.code == .wrongKey)
        var noHeader = header.settings
        noHeader.plaintextHeaderSize = 0
        #expect(failure(headerPath, noHeader)?.code == .databaseNotEncrypted)
        for size in [8, 20, 4096] {
            var bad = header.settings
            bad.plaintextHeaderSize = size
            #expect(failure(dir.path("new-\(size).db"), bad)?.code == .invalidParameter)
        }
    }

    @Test("the pragmas: cipher_hmac_algorithm, cipher_kdf_algorithm, cipher_plaintext_header_size, cipher_salt")
    func pragmas() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("pragma.db")
        try E3DBSQLite.register()
        func open(salt: String?) throws -> DatabaseQueue {
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA key = 'settings pass'; PRAGMA kdf_iter = 4000")
                try db.execute(sql: "PRAGMA cipher_hmac_algorithm = HMAC_SHA256")
                try db.execute(sql: "PRAGMA cipher_kdf_algorithm = pbkdf2_hmac_sha256")
                try db.execute(sql: "PRAGMA cipher_plaintext_header_size = 32")
                if let salt { try db.execute(sql: "PRAGMA cipher_salt = \"x'\(salt)'\"") }
            }
            return try DatabaseQueue(path: "file:\(path)?vfs=\(E3DBSQLite.vfsName)", configuration: configuration)
        }
        // A new database: its salt is random, and PRAGMA cipher_salt says which.
        let salt = try await open(salt: nil).write { db in
            try db.execute(sql: "CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('pragma-marker')")
            #expect(try String.fetchOne(db, sql: "PRAGMA cipher_hmac_algorithm") == "HMAC_SHA256")
            #expect(try String.fetchOne(db, sql: "PRAGMA cipher_kdf_algorithm") == "PBKDF2_HMAC_SHA256")
            #expect(try String.fetchOne(db, sql: "PRAGMA cipher_plaintext_header_size") == "32")
            return try String.fetchOne(db, sql: "PRAGMA cipher_salt")
        }
        let hex = try #require(salt)
        #expect(hex.count == 32)
        #expect(try await open(salt: hex).read { try String.fetchOne($0, sql: "SELECT v FROM t") } == "pragma-marker")
        // SQLCipher opens it with the same pragmas and that salt.
        let keying = PeerKeying.settings(
            "pragmas", hmac: .sha256, kdf: .sha256, header: 32, salt: Array(try Hex.decode(hex)))
        let peer = try await LocalDump.peer(path, keying)
        #expect(peer["cipher_integrity_check"] as? [String] == [])
        // The same file by SQLite3 Multiple Ciphers' URI parameters, and not without the salt.
        var uriKeyed = Configuration()
        uriKeyed.prepareDatabase { db in try db.execute(sql: "PRAGMA key = 'settings pass'; PRAGMA kdf_iter = 4000") }
        let uri =
            "file:\(path)?vfs=\(E3DBSQLite.vfsName)&hmac_algorithm=1&kdf_algorithm=PBKDF2_HMAC_SHA256"
            + "&plaintext_header_size=32"
        let byURI = try DatabaseQueue(path: uri + "&cipher_salt=\(hex)", configuration: uriKeyed)
        #expect(try await byURI.read { try String.fetchOne($0, sql: "SELECT v FROM t") } == "pragma-marker")
        #expect(throws: DatabaseError.self) { _ = try DatabaseQueue(path: uri, configuration: uriKeyed) }
        // Bad values are refused, by name.
        var keyed = Configuration()
        keyed.prepareDatabase { db in try db.execute(sql: "PRAGMA key = 'settings pass'") }
        let queue = try DatabaseQueue(
            path: "file:\(dir.path("bad.db"))?vfs=\(E3DBSQLite.vfsName)", configuration: keyed)
        for statement in [
            "PRAGMA cipher_hmac_algorithm = HMAC_MD5", "PRAGMA cipher_kdf_algorithm = HMAC_SHA1",
            "PRAGMA cipher_plaintext_header_size = 20", "PRAGMA cipher_salt = \"x'00'\"",
        ] {
            let error = #expect(throws: DatabaseError.self) { try queue.write { try $0.execute(sql: statement) } }
            #expect(error?.message?.contains("cipher") == true, "\(statement)")
        }
    }

    @Test("e3dbkit sqlite: --hmac-algorithm, --kdf-algorithm, --plaintext-header-size and --cipher-salt")
    func commandLine() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try SQLiteCLITests.write("settings pass", to: dir.path("pass"))
        let db = dir.path("cli.db")
        let options = [
            "--passphrase-file", dir.path("pass"), "--kdf-iter", "4000", "--hmac-algorithm", "HMAC_SHA256",
            "--kdf-algorithm", "PBKDF2_HMAC_SHA256", "--plaintext-header-size", "32", "--cipher-salt",
            Hex.encode(PeerKeying.headerSalt),
        ]
        let made = try await CLIRunner.run(
            ["sqlite", "exec"] + options + [db, "CREATE TABLE t(v); INSERT INTO t VALUES (7)"])
        #expect(made.status == 0, "\(made.stderr)")
        let verify = try await CLIRunner.run(["sqlite", "verify"] + options + [db])
        #expect(verify.status == 0, "\(verify.stderr)")
        let keying = PeerKeying.settings(
            "cli", hmac: .sha256, kdf: .sha256, header: 32, salt: PeerKeying.headerSalt)
        let peer = try await LocalDump.peer(db, keying)
        #expect(((peer["tables"] as? NSDictionary)?["t"] as? [Any])?.count == 1)
        // Without the salt: a typed failure (65), not a crash; a bad value is a usage error.
        let noSalt = try await CLIRunner.run(["sqlite", "exec"] + options.dropLast(2) + [db, "SELECT v FROM t"])
        #expect(noSalt.status != 0 && noSalt.stderr.contains("salt"), "\(noSalt.stderr)")
        let bad = try await CLIRunner.run(["sqlite", "exec", "--hmac-algorithm", "HMAC_MD5", db, "SELECT 1"])
        #expect(bad.status == 64, "\(bad.stderr)")
    }
}
