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

@Suite("e3dbkit sqlite: exec, encrypt, decrypt, rekey, verify")
struct SQLiteCLITests {
    static func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    @Test("exec prints one JSON object per row, members in column order, each type as the issue says")
    func execJSON() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try Self.write("  cli pass \n", to: dir.path("pass"))
        let db = dir.path("cli.db")
        let sql = """
            CREATE TABLE t(z INTEGER, a REAL, m TEXT, n, b BLOB);
            INSERT INTO t VALUES (9007199254740993, 1.5, 'quote " and \\ and é', NULL, x'00ff10');
            SELECT z, a, m, n, b FROM t; SELECT 2 AS two
            """
        let result = try await CLIRunner.run(["sqlite", "exec", "--passphrase-file", dir.path("pass"), db, sql])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdoutText.split(separator: "\n").map(String.init)
        #expect(
            lines == [
                #"{"z":9007199254740993,"a":1.5,"m":"quote \" and \\ and é","n":null,"b":"AP8Q"}"#, #"{"two":2}"#,
            ])
        // The passphrase's surrounding whitespace is not part of it.
        #expect(
            try SQLiteConnection(path: db, key: TestKeys.passphrase("cli pass")).rows("SELECT count(*) FROM t").first?
                .values == [.integer(1)])
        // SQL from standard input; without a key, a plaintext database.
        let plain = dir.path("plain.db")
        let fromStdin = try await CLIRunner.run(
            ["sqlite", "exec", plain],
            stdin: Data("CREATE TABLE p(v); INSERT INTO p VALUES ('x'); SELECT v FROM p".utf8))
        #expect(fromStdin.status == 0 && fromStdin.stdoutText == "{\"v\":\"x\"}\n")
        #expect(try Data(contentsOf: URL(fileURLWithPath: plain)).starts(with: Data("SQLite format 3".utf8)))
        // An SQL error exits 1 with SQLite's message; a wrong key 77; a key on a plaintext database 65.
        let bad = try await CLIRunner.run(["sqlite", "exec", "--passphrase-file", dir.path("pass"), db, "SELEC 1"])
        #expect(bad.status == 1 && bad.stderr.contains("syntax error"))
        try Self.write("wrong", to: dir.path("wrong"))
        let wrong = try await CLIRunner.run(["sqlite", "exec", "--passphrase-file", dir.path("wrong"), db, "SELECT 1"])
        #expect(wrong.status == 77 && wrong.stdout.isEmpty)
        let keyed = try await CLIRunner.run([
            "sqlite", "exec", "--passphrase-file", dir.path("pass"), plain, "SELECT 1",
        ])
        #expect(keyed.status == 65, "\(keyed.stderr)")
        #expect(!wrong.stderr.contains("wrong\n") && !bad.stderr.contains("cli pass"))
    }

    @Test(
        "encrypt, rekey (passphrase to raw key) and decrypt keep every row; the old key no longer opens; verify names bad pages with exit 2"
    )
    func roundTrip() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let plain = dir.path("plain.db")
        try SQLiteConnection(path: plain, key: nil).execute(
            """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT); CREATE TABLE r(v); PRAGMA user_version = 5;
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500)
            INSERT INTO t(v) SELECT 'value ' || x FROM c;
            INSERT INTO r(rowid, v) VALUES (10, 'a'), (77, 'b');
            """)
        try Self.write("first", to: dir.path("pass"))
        try Self.write(String(repeating: "0a", count: 32) + "\n", to: dir.path("key"))
        let encrypted = dir.path("enc.db")
        let steps: [[String]] = [
            ["encrypt", "--passphrase-file", dir.path("pass"), plain, encrypted],
            ["rekey", "--passphrase-file", dir.path("pass"), "--new-key-file", dir.path("key"), encrypted],
            ["verify", "--key-file", dir.path("key"), encrypted],
            ["decrypt", "--key-file", dir.path("key"), encrypted, dir.path("out.db")],
        ]
        for step in steps {
            let result = try await CLIRunner.run(["sqlite"] + step)
            #expect(result.status == 0, "\(step[0]): \(result.stderr)")
        }
        let out = try SQLiteConnection(path: dir.path("out.db"), key: nil)
        #expect(
            try out.rows("SELECT count(*), sum(length(v)) FROM t").first?.values == [.integer(500), .integer(4392)])
        #expect(try out.rows("SELECT group_concat(rowid) FROM r").first?.values == [.text("10,77")])
        #expect(try out.rows("PRAGMA user_version").first?.values == [.integer(5)])
        let old = try await CLIRunner.run([
            "sqlite", "exec", "--passphrase-file", dir.path("pass"), encrypted, "SELECT 1",
        ])
        #expect(old.status == 77)
        // An existing output is never replaced.
        let again = try await CLIRunner.run([
            "sqlite", "decrypt", "--key-file", dir.path("key"), encrypted, dir.path("out.db"),
        ])
        #expect(again.status == 64)
        // Two pages tampered with: verify names both and exits 2.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: encrypted))
        bytes[4096 + 7] ^= 1
        bytes[3 * 4096 + 9] ^= 1
        try bytes.write(to: URL(fileURLWithPath: encrypted))
        let verify = try await CLIRunner.run(["sqlite", "verify", "--key-file", dir.path("key"), encrypted])
        #expect(verify.status == 2)
        #expect(verify.stdoutText.contains("\"bad_pages\":[2,4]"))
        #expect(
            verify.stderr.contains("page 2 did not authenticate")
                && verify.stderr.contains("page 4 did not authenticate"))
    }

    /// Kills a writer with SIGKILL at a random moment, `rounds` times; every transaction whose result the writer
    /// printed (it prints after each commit) must be there afterwards, and the database must verify.
    static func crashLoop(mode: String, rounds: Int) async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try Self.write("crash pass", to: dir.path("pass"))
        let db = dir.path("crash.db")
        try SQLiteConnection(path: db, key: TestKeys.passphrase("crash pass"), settings: TestKeys.fast).execute(
            "PRAGMA journal_mode = \(mode); CREATE TABLE t(id INTEGER PRIMARY KEY, round INTEGER, b BLOB)")
        var committed = 0
        var hotRounds = 0
        for round in 0..<rounds {
            var script = "PRAGMA journal_mode = \(mode); PRAGMA cache_size = 3;\n"
            for index in 0..<400 {
                script += "BEGIN; INSERT INTO t(round, b) VALUES (\(round), randomblob(\(500 + index % 7 * 900))); "
                script +=
                    "UPDATE t SET b = randomblob(300) WHERE id % 17 = \(index % 17); COMMIT; SELECT count(*) AS n FROM t;\n"
            }
            let delay = UInt32.random(in: 150_000...1_200_000)
            let input = Data(script.utf8)
            let process = try CLIRunner.start(
                ["sqlite", "exec", "--passphrase-file", dir.path("pass"), "--kdf-iter", "1000", db], stdin: input)
            _ = await process.signal(SIGKILL, after: .microseconds(delay))
            let output = String(decoding: try await process.readOutput(), as: UTF8.self)
            try await process.exit()
            let counts = output.split(separator: "\n").compactMap { line -> Int? in
                guard let range = line.range(of: "\"n\":") else { return nil }
                return Int(line[range.upperBound...].dropLast())
            }
            committed = max(committed, counts.last ?? 0)
            let leftover =
                (try? FileManager.default.attributesOfItem(atPath: db + (mode == "wal" ? "-wal" : "-journal"))[.size]
                    as? Int) ?? 0
            if leftover > 0 { hotRounds += 1 }
            // The next open recovers the hot journal or WAL; nothing printed as committed is lost.
            let connection = try SQLiteConnection(
                path: db, key: TestKeys.passphrase("crash pass"), settings: TestKeys.fast)
            let rows = try connection.rows("SELECT count(*) FROM t; PRAGMA integrity_check")
            guard case .integer(let count) = rows.first?.values.first else {
                Issue.record("no count")
                return
            }
            #expect(Int(count) >= committed, "round \(round): \(count) rows, \(committed) printed as committed")
            #expect(rows.last?.values == [.text("ok")], "round \(round)")
            committed = Int(count)
        }
        #expect(committed > 0)
        #expect(hotRounds > 0, "no round left a \(mode == "wal" ? "WAL" : "journal") to recover")
        #expect(
            try E3DBSQLite.verify(databaseAt: db, key: TestKeys.passphrase("crash pass"), settings: TestKeys.fast)
                .isIntact)
    }

    @Test("kill -9 during writes in rollback-journal mode: the next open recovers and loses no committed transaction")
    func crashJournal() async throws { try await Self.crashLoop(mode: "delete", rounds: 12) }

    @Test("kill -9 during writes in WAL mode: the next open recovers and loses no committed transaction")
    func crashWAL() async throws { try await Self.crashLoop(mode: "wal", rounds: 12) }
}
