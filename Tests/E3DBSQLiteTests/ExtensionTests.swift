import E3DBPageCodec
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
}
