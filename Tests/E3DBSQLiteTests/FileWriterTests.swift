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

/// What someone who can write a database's files (the database, its -journal, -wal and -shm, a database handed over
/// for `encrypt` or `decrypt`) can and cannot do: the tests docs/sqlite.md's threat model names.
@Suite("E3DBSQLite: someone who can write the files")
struct FileWriterTests {
    /// Sets the `sql` of schema entry `name` (writable_schema), as a crafted database would have it.
    static func craftSchema(_ connection: SQLiteConnection, name: String, sql: String) throws {
        let literal = "'" + sql.replacingOccurrences(of: "'", with: "''") + "'"
        try connection.execute(
            """
            PRAGMA writable_schema = ON;
            UPDATE sqlite_schema SET sql = \(literal) WHERE name = '\(name)';
            PRAGMA writable_schema = OFF
            """)
    }

    /// The review's payload: an ATTACH of a file in `dir` and a table created in it, after the entry's own statement.
    static func payload(_ statement: String, attaching path: String) -> String {
        "\(statement); ATTACH DATABASE 'file:\(path)?vfs=unix' AS p; CREATE TABLE p.owned(x); "
            + "INSERT INTO p.owned VALUES ('written by the source database schema')"
    }

    /// A plaintext database whose entry `name` (a table t, an index i or a trigger g) carries `sql`.
    static func craftedPlaintext(at path: String, entry name: String, sql: String) throws {
        let connection = try SQLiteConnection(path: path, key: nil)
        try connection.execute(
            """
            CREATE TABLE t(a); INSERT INTO t VALUES ('hello'); CREATE INDEX i ON t(a);
            CREATE TRIGGER g AFTER INSERT ON t BEGIN SELECT 1; END
            """)
        try craftSchema(connection, name: name, sql: sql)
    }

    // MARK: H2: schema text runs as one statement

    @Test(
        "encrypt refuses a schema entry with a second statement (ATTACH + CREATE TABLE in another file): typed, nothing written",
        arguments: [
            ("t", "CREATE TABLE t(a)"), ("i", "CREATE INDEX i ON t(a)"),
            ("g", "CREATE TRIGGER g AFTER INSERT ON t BEGIN SELECT 1; END"),
        ])
    func encryptRunsOneStatement(entry: String, statement: String) throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let source = dir.path("evil.db")
        try Self.craftedPlaintext(
            at: source, entry: entry, sql: Self.payload(statement, attaching: dir.path("pwned.db")))
        #expect(try SQLiteConnection(path: source, key: nil).rows("SELECT a FROM t").count == 1)
        let error = #expect(throws: E3DBError.self) {
            try E3DBSQLite.encrypt(
                plaintextDatabaseAt: source, to: dir.path("out.db"), key: TestKeys.raw(), settings: TestKeys.fast)
        }
        #expect(error?.code.category == .malformedInput, "\(String(describing: error))")
        #expect(error?.context.item == entry, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: dir.path("pwned.db")))
        #expect(!FileManager.default.fileExists(atPath: dir.path("out.db")))
    }

    @Test("a schema entry of another kind than its type, or in another schema, is refused; a trailing comment is not")
    func schemaKinds() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let cases: [(entry: String, sql: String, refused: Bool)] = [
            ("t", "CREATE TABLE t(a) -- a note; ATTACH", false),
            ("t", "CREATE TABLE t(a) /* ; */ ;  ", false),
            ("i", "CREATE TABLE i(a)", true),
            ("i", "CREATE TEMP TRIGGER i AFTER INSERT ON main.t BEGIN SELECT 1; END", true),
            ("t", "CREATE TABLE source.t(a)", true),
            ("g", "CREATE TRIGGER g AFTER INSERT ON t BEGIN SELECT 1; END; DETACH DATABASE source", true),
        ]
        for (index, item) in cases.enumerated() {
            let source = dir.path("source-\(index).db")
            try Self.craftedPlaintext(at: source, entry: item.entry, sql: item.sql)
            let output = dir.path("out-\(index).db")
            do {
                try E3DBSQLite.encrypt(
                    plaintextDatabaseAt: source, to: output, key: TestKeys.raw(), settings: TestKeys.fast)
                #expect(!item.refused, "\(item.sql) was accepted")
                let copy = try SQLiteConnection(path: output, key: TestKeys.raw(), settings: TestKeys.fast)
                #expect(try copy.rows("SELECT a FROM t").first?.values == [.text("hello")])
            } catch {
                #expect(item.refused, "\(item.sql): \(error)")
                // Refused by the export naming the entry, or already by SQLite's schema loader (its message names it).
                #expect(
                    error.code.category == .malformedInput
                        && (error.context.item == item.entry || error.message.contains("(\(item.entry))")),
                    "\(error)")
            }
        }
    }

    @Test("decrypt refuses the same payload in an encrypted source: typed, the attached file never made")
    func decryptRunsOneStatement() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let source = dir.path("evil.db")
        let connection = try SQLiteConnection(path: source, key: TestKeys.raw(), settings: TestKeys.fast)
        try connection.execute("CREATE TABLE t(a); INSERT INTO t VALUES ('hello')")
        try Self.craftSchema(
            connection, name: "t", sql: Self.payload("CREATE TABLE t(a)", attaching: dir.path("pwned.db")))
        let error = #expect(throws: E3DBError.self) {
            try E3DBSQLite.decrypt(
                databaseAt: source, key: TestKeys.raw(), settings: TestKeys.fast, to: dir.path("out.db"))
        }
        #expect(error?.code.category == .malformedInput && error?.context.item == "t", "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: dir.path("pwned.db")))
        #expect(!FileManager.default.fileExists(atPath: dir.path("out.db")))
    }

    @Test(
        "e3dbkit sqlite encrypt and decrypt of a crafted schema exit 65 naming the table; the attached file is not made"
    )
    func cliCraftedSchema() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try SQLiteCLITests.write(String(repeating: "42", count: 32), to: dir.path("key"))
        let plain = dir.path("evil.db")
        try Self.craftedPlaintext(
            at: plain, entry: "t", sql: Self.payload("CREATE TABLE t(a)", attaching: dir.path("pwned.db")))
        let encrypt = try await CLIRunner.run([
            "sqlite", "encrypt", "--key-file", dir.path("key"), plain, dir.path("out.db"),
        ])
        #expect(encrypt.status == 65, "\(encrypt.stderr)")
        #expect(encrypt.stderr.contains("(t, sqlite_schema)"), "\(encrypt.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("pwned.db")))
        #expect(!FileManager.default.fileExists(atPath: dir.path("out.db")))

        let encrypted = dir.path("evil-encrypted.db")
        let connection = try SQLiteConnection(path: encrypted, key: TestKeys.raw())
        try connection.execute("CREATE TABLE t(a); INSERT INTO t VALUES ('hello')")
        try Self.craftSchema(
            connection, name: "t", sql: Self.payload("CREATE TABLE t(a)", attaching: dir.path("pwned2.db")))
        let decrypt = try await CLIRunner.run([
            "sqlite", "decrypt", "--key-file", dir.path("key"), encrypted, dir.path("plain-out.db"),
        ])
        #expect(decrypt.status == 65, "\(decrypt.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("pwned2.db")))
        #expect(!FileManager.default.fileExists(atPath: dir.path("plain-out.db")))
    }

    // MARK: Issue 35: every sqlite command fails the same typed way

    @Test("decrypt with a wrong key exits 77 like exec, without the URI or key handle in the message")
    func decryptWrongKey() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let db = dir.path("db.sqlite")
        try SQLiteConnection(path: db, key: TestKeys.passphrase("right"), settings: TestKeys.fast).execute(
            "CREATE TABLE t(a); INSERT INTO t VALUES (1)")
        try SQLiteCLITests.write("wrong", to: dir.path("wrong"))
        for command in [["decrypt"], ["exec"], ["verify"], ["rekey", "--new-passphrase-file", dir.path("wrong")]] {
            let output = command == ["decrypt"] ? [dir.path("out.db")] : command == ["exec"] ? ["SELECT 1"] : []
            let result = try await CLIRunner.run(
                ["sqlite"] + command + ["--passphrase-file", dir.path("wrong"), "--kdf-iter", "1000", db] + output)
            #expect(result.status == 77, "\(command): \(result.stderr)")
            #expect(!result.stderr.contains("e3db_key") && !result.stderr.contains("file:"), "\(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path("out.db")))
        // A missing or non-database source: typed, without the URI either.
        try SQLiteCLITests.write(String(repeating: "not a database ", count: 400), to: dir.path("junk"))
        for (input, status) in [(dir.path("missing.db"), Int32(66)), (dir.path("junk"), 65)] {
            let result = try await CLIRunner.run([
                "sqlite", "encrypt", "--passphrase-file", dir.path("wrong"), input, dir.path("enc.db"),
            ])
            #expect(result.status == status, "\(input): \(result.stderr)")
            #expect(!result.stderr.contains("file:") && !result.stderr.contains("vfs="), "\(result.stderr)")
        }
    }

    // MARK: L10: outputs are private

    @Test("decrypt and encrypt create their output 0600, whatever the umask")
    func outputModes() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try SQLiteCLITests.write(String(repeating: "42", count: 32), to: dir.path("key"))
        let plain = dir.path("plain.db")
        try SQLiteConnection(path: plain, key: nil).execute("CREATE TABLE t(a); INSERT INTO t VALUES ('secret')")
        let encrypt = try await CLIRunner.run([
            "sqlite", "encrypt", "--key-file", dir.path("key"), plain, dir.path("enc.db"),
        ])
        #expect(encrypt.status == 0, "\(encrypt.stderr)")
        let decrypt = try await CLIRunner.run([
            "sqlite", "decrypt", "--key-file", dir.path("key"), dir.path("enc.db"), dir.path("dec.db"),
        ])
        #expect(decrypt.status == 0, "\(decrypt.stderr)")
        for name in ["enc.db", "dec.db"] {
            let mode = try FileManager.default.attributesOfItem(atPath: dir.path(name))[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(name): \(String(mode ?? -1, radix: 8))")
        }
        try E3DBSQLite.decrypt(databaseAt: dir.path("enc.db"), key: TestKeys.raw(), to: dir.path("lib.db"))
        let mode = try FileManager.default.attributesOfItem(atPath: dir.path("lib.db"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    // MARK: M5, L9: truncation

    /// An encrypted database of `t(id, b)` with one 10,000-byte blob (pages 1-4, the last an overflow page).
    static func blobDatabase(_ path: String) throws {
        try SQLiteConnection(path: path, key: TestKeys.raw(), settings: TestKeys.fast).execute(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB); INSERT INTO t VALUES (1, randomblob(10000))")
    }

    @Test(
        "a file cut inside its last page is pageTampered (the page it holds part of), not zeros",
        arguments: [1, 100, 4095])
    func cutInsideLastPage(cut: Int) throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let db = dir.path("db.sqlite")
        try Self.blobDatabase(db)
        let size = try FileManager.default.attributesOfItem(atPath: db)[.size] as? Int ?? 0
        #expect(size % 4096 == 0 && size >= 4 * 4096)
        #expect(truncate(db, off_t(size - cut)) == 0)
        let error = #expect(throws: E3DBError.self) {
            _ = try SQLiteConnection(path: db, key: TestKeys.raw(), settings: TestKeys.fast).rows(
                "SELECT length(b), hex(b) FROM t")
        }
        #expect(error?.code == .pageTampered, "\(String(describing: error))")
        #expect(error?.context.actual == size / 4096, "\(String(describing: error))")
    }

    @Test("through the CLI: a b-tree page cut short exits 2, a file cut at a page boundary 65 (not 1)")
    func cliTruncation() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try SQLiteCLITests.write(String(repeating: "42", count: 32), to: dir.path("key"))
        let db = dir.path("db.sqlite")
        // The last page is a b-tree leaf: the rows of u, written after t's overflow pages.
        try Self.blobDatabase(db)
        try SQLiteConnection(path: db, key: TestKeys.raw(), settings: TestKeys.fast).execute(
            "CREATE TABLE u(v); INSERT INTO u VALUES ('one'), ('two')")
        let size = try FileManager.default.attributesOfItem(atPath: db)[.size] as? Int ?? 0
        let query = ["sqlite", "exec", "--key-file", dir.path("key"), "--kdf-iter", "1000", db, "SELECT v FROM u"]
        #expect(truncate(db, off_t(size - 10)) == 0)
        let midPage = try await CLIRunner.run(query)
        #expect(midPage.status == 2, "\(midPage.stderr)")
        #expect(truncate(db, off_t(size - 4096)) == 0)
        let boundary = try await CLIRunner.run(query)
        #expect(boundary.status == 65, "\(boundary.stderr)")
    }

    // MARK: L9: a hot journal of another page size

    @Test("a hot journal whose records are not cipher pages is pageSizeMismatch (part journal); the file is unchanged")
    func foreignHotJournal() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let db = dir.path("db.sqlite")
        try SQLiteConnection(path: db, key: TestKeys.raw(), settings: TestKeys.fast).execute(
            "CREATE TABLE t(a); INSERT INTO t VALUES ('kept')")
        let before = try Data(contentsOf: URL(fileURLWithPath: db))
        // A rollback journal of a 1024-byte-page database: header (one sector), then record 1 (page 1, zeros, whose
        // checksum is the header's nonce, 0).
        var journal = Data([0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7])
        for value in [UInt32(1), 0, UInt32(before.count / 1024), 512, 1024] {
            journal += withUnsafeBytes(of: value.bigEndian) { Data($0) }
        }
        journal += Data(count: 512 - journal.count)
        journal += withUnsafeBytes(of: UInt32(1).bigEndian) { Data($0) } + Data(count: 1024) + Data(count: 4)
        try journal.write(to: URL(fileURLWithPath: db + "-journal"))
        let error = #expect(throws: E3DBError.self) {
            _ = try SQLiteConnection(path: db, key: TestKeys.raw(), settings: TestKeys.fast).rows("SELECT a FROM t")
        }
        #expect(error?.code == .pageSizeMismatch && error?.context.part == "journal", "\(String(describing: error))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: db)) == before)
    }

    // MARK: L7: verification is bounded

    @Test("verify of a sparse-extended file: bounded time and output, the trailing bytes one problem")
    func sparseVerify() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try SQLiteCLITests.write(String(repeating: "42", count: 32), to: dir.path("key"))
        let db = dir.path("db.sqlite")
        try Self.blobDatabase(db)
        // 64 GiB apparent, a few KB on disk: going through every page would take many minutes and print
        // 16 million lines; the header's four pages take milliseconds, so the bound holds on a loaded machine.
        #expect(truncate(db, 1 << 36) == 0)
        let result = try await CLIRunner.run([
            "sqlite", "verify", "--key-file", dir.path("key"), "--kdf-iter", "1000", db,
        ])
        #expect(result.status == 2, "\(result.stderr.prefix(500))")
        #expect(result.stdout.count < 1000, "\(result.stdout.count) bytes of stdout")
        #expect(result.stderr.split(separator: "\n").count <= 3, "\(result.stderr.prefix(500))")
        #expect(result.stderr.contains("trailing"), "\(result.stderr.prefix(500))")
        // The time of the verification itself (in this process, no suspension point: a loaded test run cannot
        // stretch it the way it delays a child process's completion).
        let clock = ContinuousClock()
        let start = clock.now
        let verification = try E3DBSQLite.verify(databaseAt: db, key: TestKeys.raw(), settings: TestKeys.fast)
        let elapsed = clock.now - start
        #expect(elapsed < .seconds(30), "\(elapsed)")
        #expect(verification.badPages.isEmpty && verification.badPageCount == 0 && !verification.isIntact)
        #expect(verification.trailingBytes == (1 << 36) - 4 * 4096 && verification.pageCount == 4)
    }

    @Test("verify lists the first 100 bad pages and counts the rest")
    func manyBadPages() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        try SQLiteCLITests.write(String(repeating: "42", count: 32), to: dir.path("key"))
        let db = dir.path("db.sqlite")
        try SQLiteConnection(path: db, key: TestKeys.raw(), settings: TestKeys.fast).execute(
            "CREATE TABLE t(id INTEGER PRIMARY KEY, b BLOB); INSERT INTO t VALUES (1, randomblob(160 * 4000))")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: db))
        let pages = bytes.count / 4096
        #expect(pages > 150)
        for page in 1..<pages { bytes[page * 4096 + 100] ^= 1 }
        try bytes.write(to: URL(fileURLWithPath: db))
        let verification = try E3DBSQLite.verify(databaseAt: db, key: TestKeys.raw(), settings: TestKeys.fast)
        #expect(verification.badPages == (2...101).map(UInt32.init) && verification.badPageCount == pages - 1)
        let result = try await CLIRunner.run([
            "sqlite", "verify", "--key-file", dir.path("key"), "--kdf-iter", "1000", db,
        ])
        #expect(result.status == 2)
        #expect(result.stderr.split(separator: "\n").count <= 102, "\(result.stderr.suffix(300))")
        #expect(result.stderr.contains("\(pages - 1 - 100) more"), "\(result.stderr.suffix(300))")
    }

    // MARK: M1: a frame is served only for the page SQLite asked for

    @Test("a -shm edit while a writer holds the database open: the swapped page is pageTampered, not another page")
    func shmSwap() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let db = dir.path("wal.sqlite")
        let writer = try SQLiteConnection(path: db, key: TestKeys.raw(), settings: TestKeys.fast)
        try writer.execute(
            """
            PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            INSERT INTO t VALUES (1, 'alice ' || hex(randomblob(1400))), (2, 'bob ' || hex(randomblob(1400))),
                (3, 'mallory ' || hex(randomblob(1400)));
            UPDATE t SET v = v || '.';
            """)
        let rows = try writer.rows("SELECT id, v FROM t")
        // The WAL's frames (headers in the clear): the latest frame of each page.
        let wal = try Data(contentsOf: URL(fileURLWithPath: db + "-wal"))
        let frameSize = 24 + 4096
        var latest: [UInt32: Int] = [:]
        var frame = 1
        while 32 + frame * frameSize <= wal.count {
            let offset = 32 + (frame - 1) * frameSize
            let page = wal[offset..<(offset + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            latest[page] = frame
            frame += 1
        }
        let leaves = latest.keys.filter { $0 > 2 }.sorted()
        try #require(leaves.count >= 2, "\(latest)")
        let (asked, served) = (leaves[0], leaves[1])
        let (askedFrame, servedFrame) = (try #require(latest[asked]), try #require(latest[served]))
        // The wal-index (region 0): aPgno[] from byte 136, the hash table (16-bit frame numbers) from byte 16384.
        let shmURL = URL(fileURLWithPath: db + "-shm")
        var shm = try Data(contentsOf: shmURL)
        var slot: Int?
        for index in 0..<8192 {
            let at = 16384 + 2 * index
            if Int(shm[at]) | Int(shm[at + 1]) << 8 == askedFrame { slot = at }
        }
        let hashSlot = try #require(slot)
        shm[hashSlot] = UInt8(servedFrame & 0xff)
        shm[hashSlot + 1] = UInt8(servedFrame >> 8)
        let pgno = 136 + 4 * (servedFrame - 1)
        for byte in 0..<4 { shm[pgno + byte] = UInt8(truncatingIfNeeded: asked >> (8 * UInt32(byte))) }
        let handle = try FileHandle(forWritingTo: shmURL)
        try handle.write(contentsOf: shm)
        try handle.close()
        // A second connection, while the writer keeps the -shm in use.
        let reader = try SQLiteConnection(path: db, key: TestKeys.raw(), settings: TestKeys.fast)
        do {
            let read = try reader.rows("SELECT id, v FROM t")
            Issue.record("the swapped page was served: \(read == rows ? "the same rows" : "other rows")")
        } catch {
            #expect(error.code == .pageTampered && error.context.part == "wal", "\(error)")
        }
        _ = writer
    }
}
