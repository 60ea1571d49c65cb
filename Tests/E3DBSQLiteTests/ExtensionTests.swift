import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import E3DBTestSupport
import Foundation
import Testing

@Suite("E3DBSQLite as a loadable extension of the system SQLite")
struct ExtensionTests {
    static var library: String { CLIRunner.productsDirectory.appendingPathComponent("libE3DBSQLiteExtension").path }

    @Test(
        "the sqlite3 shell loads the extension, reads a database written here and writes to it; SQLCipher's format holds"
    )
    func shell() async throws {
        let shell = "/usr/bin/sqlite3"
        try #require(
            FileManager.default.isExecutableFile(atPath: shell),
            "the sqlite3 shell is missing (scripts/setup.sh installs it)")
        #expect(
            FileManager.default.fileExists(atPath: Self.library + ".so")
                || FileManager.default.fileExists(atPath: Self.library + ".dylib"))
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("shell.db")
        try SQLiteConnection(path: path, key: TestKeys.passphrase("shell pass")).execute(
            "CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('written by swift')")
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: shell),
            [
                ":memory:", "-cmd", ".load \(Self.library)", "-cmd", ".open file:\(path)?vfs=\(E3DBSQLite.vfsName)",
                "PRAGMA key = 'shell pass'; INSERT INTO t VALUES ('written by the shell'); SELECT group_concat(v, '|') FROM t; PRAGMA cipher_provider;",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText == "ok\nwritten by swift|written by the shell\ne3dbkit\n")
        let connection = try SQLiteConnection(path: path, key: TestKeys.passphrase("shell pass"))
        #expect(try connection.rows("SELECT count(*) FROM t").first?.values == [.integer(2)])
        #expect(try E3DBSQLite.verify(databaseAt: path, key: TestKeys.passphrase("shell pass")).isIntact)
        // A wrong key in the shell: SQLite's "file is not a database", never a row.
        let wrong = try await ChildProcess.run(
            URL(fileURLWithPath: shell),
            [
                ":memory:", "-cmd", ".load \(Self.library)", "-cmd", ".open file:\(path)?vfs=\(E3DBSQLite.vfsName)",
                "PRAGMA key = 'no'; SELECT v FROM t;",
            ])
        #expect(
            wrong.status != 0 && wrong.stderr.contains("file is not a database")
                && !wrong.stdoutText.contains("written"))
    }

    @Test("Python's sqlite3 module (the system Python's) loads the extension and reads the database")
    func python() async throws {
        let python = "/usr/bin/python3"
        let probe = try await ChildProcess.run(
            URL(fileURLWithPath: python),
            ["-c", "import sqlite3; print(hasattr(sqlite3.Connection, 'enable_load_extension'))"])
        try #require(probe.stdoutText == "True\n", "the system Python's sqlite3 module cannot load extensions")
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("python.db")
        try SQLiteConnection(path: path, key: TestKeys.raw(7)).execute(
            "CREATE TABLE t(v); INSERT INTO t VALUES (41), (1)")
        let script = """
            import sqlite3, sys
            loader = sqlite3.connect(":memory:")
            loader.enable_load_extension(True)
            loader.load_extension(sys.argv[1])
            db = sqlite3.connect("file:" + sys.argv[2] + "?vfs=e3dbkit-sqlcipher", uri=True)
            db.execute("PRAGMA key = \\"x'" + "07" * 32 + "'\\"")
            print(db.execute("SELECT sum(v) FROM t").fetchone()[0])
            """
        let result = try await ChildProcess.run(URL(fileURLWithPath: python), ["-c", script, Self.library, path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText == "42\n")
    }

    @Test(
        "through the extension, SQLite3 Multiple Ciphers' selection works: PRAGMA cipher and legacy before the key, the URI's cipher and legacy; a non-legacy chacha20 file opens without naming it"
    )
    func sqlite3mcSelection() async throws {
        let python = "/usr/bin/python3"
        let dir = try TestDirectory()
        defer { dir.remove() }
        let legacy = dir.path("legacy.db")
        let plain = dir.path("chacha.db")
        let script = """
            import sqlite3, sys
            loader = sqlite3.connect(":memory:")
            loader.enable_load_extension(True)
            loader.load_extension(sys.argv[1])
            def connect(path, query=""):
                return sqlite3.connect("file:" + path + "?vfs=e3dbkit-sqlcipher" + query, uri=True, isolation_level=None)
            db = connect(sys.argv[2])
            db.execute("PRAGMA cipher = 'chacha20'")
            db.execute("PRAGMA legacy = 1")
            db.execute("PRAGMA key = 'pragma pass'")
            db.execute("CREATE TABLE t(v)")
            db.execute("INSERT INTO t VALUES (1)")
            print(db.execute("PRAGMA cipher").fetchone()[0], db.execute("PRAGMA legacy").fetchone()[0])
            db.close()
            db = connect(sys.argv[2], "&cipher=chacha20&legacy=1")
            db.execute("PRAGMA key = 'pragma pass'")
            print(db.execute("SELECT v FROM t").fetchone()[0])
            db = connect(sys.argv[3], "&cipher=chacha20")
            db.execute("PRAGMA key = 'raw:" + "07" * 32 + "'")
            db.execute("CREATE TABLE t(v)")
            db.execute("INSERT INTO t VALUES (2)")
            db.close()
            db = connect(sys.argv[3])
            db.execute("PRAGMA key = 'raw:" + "07" * 32 + "'")
            print(db.execute("SELECT v FROM t").fetchone()[0], db.execute("PRAGMA cipher").fetchone()[0])
            try:
                connect(sys.argv[3]).execute("PRAGMA cipher = 'aegis'")
            except sqlite3.Error as error:
                print("refused:", "aegis" in str(error))
            """
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: python), ["-c", script, Self.library, legacy, plain])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText == "chacha20 1\n1\n2 chacha20\nrefused: True\n")
        let sqleet = try SQLiteConnection(path: legacy, key: TestKeys.passphrase("pragma pass"), settings: .sqleet)
        #expect(try sqleet.rows("SELECT v FROM t").first?.values == [.integer(1)])
        let header = try Data(contentsOf: URL(fileURLWithPath: plain)).prefix(24)
        #expect(header[header.startIndex + 20] == 32)
        let recognised = try SQLiteConnection(path: plain, key: TestKeys.raw(7))
        #expect(try recognised.rows("SELECT v FROM t").first?.values == [.integer(2)])
    }

    @Test(
        "through the extension, SQLCipher's cipher_hmac_algorithm, cipher_kdf_algorithm, cipher_plaintext_header_size and cipher_salt; SQLCipher 4.12 opens the file"
    )
    func sqlcipherSettings() async throws {
        let python = "/usr/bin/python3"
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("settings.db")
        let salt = Hex.encode(PeerKeying.headerSalt)
        let script = """
            import sqlite3, sys
            loader = sqlite3.connect(":memory:")
            loader.enable_load_extension(True)
            loader.load_extension(sys.argv[1])
            db = sqlite3.connect("file:" + sys.argv[2] + "?vfs=e3dbkit-sqlcipher", uri=True, isolation_level=None)
            db.execute("PRAGMA key = 'settings pass'")
            db.execute("PRAGMA kdf_iter = 4000")
            db.execute("PRAGMA cipher_hmac_algorithm = HMAC_SHA256")
            db.execute("PRAGMA cipher_kdf_algorithm = PBKDF2_HMAC_SHA256")
            db.execute("PRAGMA cipher_plaintext_header_size = 32")
            db.execute("PRAGMA cipher_salt = \\"x'" + sys.argv[3] + "'\\"")
            db.execute("CREATE TABLE t(v)")
            db.execute("INSERT INTO t VALUES (3)")
            print(db.execute("PRAGMA cipher_hmac_algorithm").fetchone()[0], db.execute("PRAGMA cipher_salt").fetchone()[0])
            """
        let result = try await ChildProcess.run(
            URL(fileURLWithPath: python), ["-c", script, Self.library, path, salt])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText == "HMAC_SHA256 \(salt)\n")
        let start = try Data(contentsOf: URL(fileURLWithPath: path)).prefix(32)
        #expect(start.starts(with: Data("SQLite format 3\0".utf8)) && start[start.startIndex + 20] == 48)
        let keying = PeerKeying.settings(
            "extension", hmac: .sha256, kdf: .sha256, header: 32, salt: PeerKeying.headerSalt)
        let peer = try await LocalDump.peer(path, keying)
        #expect(((peer["tables"] as? NSDictionary)?["t"] as? [Any])?.count == 1)
        #expect(peer["cipher_integrity_check"] as? [String] == [])
    }
}
