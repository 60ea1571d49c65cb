import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import E3DBTestSupport
import Foundation
import GRDB
import Testing

@Suite("E3DBSQLite: GRDB apps on the encrypting VFS")
struct GRDBTests {
    @Test(
        "a DatabasePool (WAL) opened with two lines writes, reads from concurrent readers and reopens; the file is ciphertext"
    )
    func pool() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("app.sqlite")
        let key = TestKeys.passphrase()
        do {
            let uri = try E3DBSQLite.uri(forDatabaseAt: path, key: key)
            let pool = try DatabasePool(path: uri)
            #expect(try await pool.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") } == "wal")
            try await pool.write { db in
                try db.execute(
                    sql: "CREATE TABLE player(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, score INTEGER)")
                for index in 0..<2000 {
                    try db.execute(
                        sql: "INSERT INTO player(name, score) VALUES (?, ?)",
                        arguments: ["secret-player-\(index)", index])
                }
            }
            let sums = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        try await pool.read { try Int.fetchOne($0, sql: "SELECT sum(score) FROM player") ?? -1 }
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(sums == Array(repeating: 1_999_000, count: 6))
            // Seven connections (the writer and six readers), one key derivation.
            let salt = Array(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(16))
            #expect(PageCodecCache.shared.derivations(key: key, salt: salt, settings: .v4) == 1)
            let wal = try Data(contentsOf: URL(fileURLWithPath: path + "-wal"))
            #expect(!wal.isEmpty && !wal.contains(marker: "secret-player"))
            try pool.close()
        }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(!bytes.starts(with: Data("SQLite format 3".utf8)))
        #expect(!bytes.contains(marker: "secret-player"))
        // Reopened, through GRDB and through the library's own connection.
        let queue = try DatabaseQueue(path: try E3DBSQLite.uri(forDatabaseAt: path, key: key))
        #expect(try await queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM player") } == 2000)
        let connection = try SQLiteConnection(path: path, key: key)
        #expect(try connection.rows("SELECT count(*) FROM player").first?.values == [.integer(2000)])
    }

    @Test("paths with spaces, '#', '?', '%' and non-ASCII characters open through the URI; :memory: stays in memory")
    func awkwardPaths() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let folder = dir.url.appendingPathComponent("a dir #1 ?x=%41 é")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("data base%2F.sqlite").path
        let queue = try DatabaseQueue(path: try E3DBSQLite.uri(forDatabaseAt: path, key: TestKeys.raw()))
        try await queue.write { try $0.execute(sql: "CREATE TABLE t(v); INSERT INTO t VALUES ('awkward')") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["data base%2F.sqlite"])
        #expect(
            try SQLiteConnection(path: path, key: TestKeys.raw()).rows("SELECT v FROM t").first?.values == [
                .text("awkward")
            ])
        let memory = try SQLiteConnection(path: ":memory:", key: nil)
        #expect(try memory.rows("SELECT 1").first?.values == [.integer(1)])
        #expect(!FileManager.default.fileExists(atPath: FileManager.default.currentDirectoryPath + "/:memory:"))
    }

    @Test("the SQLite.swift / C API path: a `vfs=` URI and PRAGMA key before anything else; a wrong key is typed")
    func pragmaKey() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("pragma.db")
        try E3DBSQLite.register()
        func open(_ passphrase: String) throws -> DatabaseQueue {
            var configuration = Configuration()
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA key = '\(passphrase)'") }
            return try DatabaseQueue(path: "file:\(path)?vfs=\(E3DBSQLite.vfsName)", configuration: configuration)
        }
        try open("pragma pass").write { db in
            try db.execute(sql: "CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('pragma-marker')")
            #expect(try String.fetchOne(db, sql: "PRAGMA cipher_provider") == "e3dbkit")
        }
        #expect(try open("pragma pass").read { try String.fetchOne($0, sql: "SELECT v FROM t") } == "pragma-marker")
        let error = #expect(throws: DatabaseError.self) {
            try open("wrong").read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") }
        }
        #expect(error?.resultCode == .SQLITE_NOTADB)
        #expect(E3DBSQLite.lastFailure(forDatabaseAt: path)?.code == .wrongKey)
        // The same file opens with SQLiteConnection and the passphrase as a key.
        let connection = try SQLiteConnection(path: path, key: TestKeys.passphrase("pragma pass"))
        #expect(try connection.rows("SELECT v FROM t").first?.values == [.text("pragma-marker")])
        #expect(!(try Data(contentsOf: URL(fileURLWithPath: path))).contains(marker: "pragma-marker"))
    }

    @Test(
        "PRAGMA key = \"x'<64 hex>'\" is a raw key in both formats; an unquoted blob and cipher_default_* are refused",
        arguments: [SQLCipherSettings.Cipher.sqlcipher, .chacha20])
    func pragmaRawKey(cipher: SQLCipherSettings.Cipher) throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("raw-\(cipher.rawValue).db")
        try E3DBSQLite.register()
        let hex = String(repeating: "2d", count: 32)
        func open(_ statements: [String]) throws -> DatabaseQueue {
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                try db.execute(sql: "PRAGMA cipher = '\(cipher.rawValue)'")
                for statement in statements { try db.execute(sql: statement) }
            }
            return try DatabaseQueue(path: "file:\(path)?vfs=\(E3DBSQLite.vfsName)", configuration: configuration)
        }
        try open(["PRAGMA key = \"x'\(hex)'\""]).write { db in
            try db.execute(sql: "CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('raw-marker')")
        }
        // The same file opens with the 32 bytes as a raw key (not the text as a passphrase), recognised from page 1.
        let connection = try SQLiteConnection(path: path, key: TestKeys.raw(0x2d))
        #expect(try connection.rows("SELECT v FROM t").first?.values == [.text("raw-marker")])
        #expect(
            VFSOutcomeTests.error {
                _ = try SQLiteConnection(
                    path: path, key: TestKeys.passphrase("x'\(hex)'"), settings: .defaults(cipher))
            }?.code == .wrongKey)
        // A blob literal is not a pragma value in SQLite's grammar: a syntax error, never a key.
        #expect(throws: DatabaseError.self) { _ = try open(["PRAGMA key = x'\(hex)'"]) }
        // SQLCipher's process-wide defaults would be ignored silently by SQLite: refused, naming the pragma.
        let refused = #expect(throws: DatabaseError.self) {
            _ = try open(["PRAGMA cipher_default_kdf_iter = 4000", "PRAGMA key = \"x'\(hex)'\""])
        }
        #expect(refused?.message?.contains("cipher_default_kdf_iter") == true)
        let failure = E3DBSQLite.lastFailure(forDatabaseAt: path)
        #expect(failure?.code == .invalidParameter)
        #expect(failure?.context.part == "cipher_default_kdf_iter")
    }

    @Test("page 1 rewritten in place under an open connection, in chacha20 with 8 KiB pages: pageSizeMismatch, no stop")
    func pageOneRewrittenWithAnotherPageSize() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("a.db")
        let uri = try E3DBSQLite.uri(forDatabaseAt: path, key: TestKeys.passphrase())
        defer { E3DBSQLite.forgetKey(inURI: uri) }
        let queue = try DatabaseQueue(path: uri)
        try queue.write { db in try db.execute(sql: "CREATE TABLE t(x); INSERT INTO t VALUES (1)") }
        // The same passphrase in the other format and page size, written to a second file...
        let other = dir.path("b.db")
        var settings = SQLCipherSettings.chacha20
        settings.pageSize = 8192
        let otherURI = try E3DBSQLite.uri(forDatabaseAt: other, key: TestKeys.passphrase(), settings: settings)
        defer { E3DBSQLite.forgetKey(inURI: otherURI) }
        try DatabaseQueue(path: otherURI).write { db in
            try db.execute(sql: "CREATE TABLE u(y); INSERT INTO u VALUES (2)")
        }
        // ...then copied over the first in place (the same inode), as someone holding the key could.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: other))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.write(contentsOf: bytes)
        try handle.truncate(atOffset: UInt64(bytes.count))
        try handle.close()
        #expect(throws: DatabaseError.self) {
            try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") }
        }
        let failure = E3DBSQLite.lastFailure(forDatabaseAt: path)
        #expect(failure?.code == .pageSizeMismatch, "\(String(describing: failure))")
        // Found by the page-1 re-check this test is about (without it, the page codec's precondition stopped the
        // process: its buffers hold 4096 bytes, the new codec's pages are 8192).
        #expect(failure?.message.contains("was rewritten with 8192-byte pages") == true)
    }
}

@Suite("E3DBSQLite: ATTACH")
struct AttachTests {
    @Test(
        "ATTACH opens a database under the main database's key, or under the key its URI names; a wrong one is refused")
    func attach() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let (main, same, other) = (dir.path("main.db"), dir.path("same.db"), dir.path("other.db"))
        for (path, key, value) in [(same, TestKeys.passphrase(), "same"), (other, TestKeys.raw(3), "other")] {
            try SQLiteConnection(path: path, key: key).execute(
                "CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('\(value)')")
        }
        let connection = try SQLiteConnection(path: main, key: TestKeys.passphrase())
        try connection.execute("ATTACH '\(same)' AS same")
        #expect(try connection.rows("SELECT v FROM same.t").first?.values == [.text("same")])
        let uri = try E3DBSQLite.uri(forDatabaseAt: other, key: TestKeys.raw(3))
        defer { E3DBSQLite.forgetKey(inURI: uri) }
        try connection.execute("ATTACH '\(uri)' AS other")
        #expect(try connection.rows("SELECT v FROM other.t").first?.values == [.text("other")])
        // Without its key, the other database is refused with the typed error.
        let refused = VFSOutcomeTests.error { try connection.execute("ATTACH '\(other)' AS wrong") }
        #expect(refused?.code == .wrongKey)
    }
}

@Suite("E3DBSQLite: rekey")
struct RekeyTests {
    @Test(
        "rekey of a WAL database keeps WAL mode and every row, under new settings too; the old key no longer opens; no file of the old key remains"
    )
    func rekeyWAL() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("wal.db")
        try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: TestKeys.fast).execute(
            """
            PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000) INSERT INTO t(v) SELECT 'v' || x FROM c;
            """)
        var newSettings = SQLCipherSettings.v4
        newSettings.pageSize = 8192
        newSettings.kdfIterations = 2000
        try E3DBSQLite.rekey(
            databaseAt: path, from: TestKeys.passphrase(), settings: TestKeys.fast, to: TestKeys.raw(9),
            newSettings: newSettings)
        let connection = try SQLiteConnection(path: path, key: TestKeys.raw(9), settings: newSettings)
        #expect(
            try connection.rows("PRAGMA journal_mode; SELECT count(*) FROM t").map(\.values) == [
                [.text("wal")], [.integer(1000)],
            ])
        #expect(
            VFSOutcomeTests.error {
                _ = try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: TestKeys.fast)
            }?.code == .wrongKey)
        #expect(try dir.files().map(\.name).filter { $0.contains("rekey") } == [])
        // With a wrong old key nothing changes.
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(
            VFSOutcomeTests.error {
                try E3DBSQLite.rekey(
                    databaseAt: path, from: TestKeys.raw(1), settings: newSettings, to: TestKeys.raw(2))
            }?.code == .wrongKey)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }
}

@Suite("E3DBSQLite: typed outcomes for wrong keys, tampering and mismatches")
struct VFSOutcomeTests {
    /// A small encrypted database with a few pages and an overflow row.
    static func make(
        _ path: String, key: SQLCipherKey = TestKeys.passphrase(), settings: SQLCipherSettings = TestKeys.fast
    ) throws {
        let connection = try SQLiteConnection(path: path, key: key, settings: settings)
        try connection.execute(
            """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB);
            WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200)
            INSERT INTO t(v, b) SELECT 'row ' || x, randomblob(x * 10) FROM c;
            INSERT INTO t(v, b) VALUES ('big', randomblob(20000));
            """)
    }

    static func error(_ body: () throws -> Void) -> E3DBError? {
        do {
            try body()
            return nil
        } catch let error as E3DBError {
            return error
        } catch {
            return E3DBError(.databaseError, "\(error)")
        }
    }

    @Test("each key form that is not the database's is reported as a wrong key at open")
    func wrongKeys() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("keys.db")
        try Self.make(path)
        let wrong: [SQLCipherKey] = [
            TestKeys.passphrase("not it"), TestKeys.raw(),
            .rawKeyAndSalt(
                key: SecureBytes(copying: [UInt8](repeating: 1, count: 32)), salt: [UInt8](repeating: 2, count: 16)),
        ]
        for key in wrong {
            let error = Self.error { _ = try SQLiteConnection(path: path, key: key, settings: TestKeys.fast) }
            #expect(error?.code == .wrongKey, "\(key)")
        }
        // The right passphrase under other round counts is a wrong key too (another derived key).
        var rounds = TestKeys.fast
        rounds.kdfIterations = 1001
        #expect(
            Self.error { _ = try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: rounds) }?.code
                == .wrongKey)
    }

    @Test("a raw key with its salt opens a database created with it, and the salt is the file's first 16 bytes")
    func rawKeyWithSalt() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("salted.db")
        let salt = Array(UInt8(0)..<16)
        let key = SQLCipherKey.rawKeyAndSalt(key: SecureBytes(copying: [UInt8](repeating: 9, count: 32)), salt: salt)
        try Self.make(path, key: key)
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path)).prefix(16)) == salt)
        #expect(
            try SQLiteConnection(path: path, key: key).rows("SELECT count(*) FROM t").first?.values == [.integer(201)])
        // The raw key alone (salt from the file) opens it as well.
        let rawOnly = SQLCipherKey.rawKey(SecureBytes(copying: [UInt8](repeating: 9, count: 32)))
        #expect(
            try SQLiteConnection(path: path, key: rawOnly).rows("SELECT count(*) FROM t").first?.values == [
                .integer(201)
            ])
    }

    @Test("every byte of a page flipped is tampering naming that page; page 1 flipped is tampering, not a wrong key")
    func flippedBytes() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("flip.db")
        try Self.make(path)
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = 4096
        let pages = original.count / pageSize
        #expect(pages > 4)
        // Every byte of page 3, and a spread of bytes of every other page (ciphertext, IV, HMAC regions).
        var positions: [(page: Int, byte: Int)] = (0..<pageSize).map { (3, $0) }
        for page in 1...pages where page != 3 {
            for byte in [16, 17, 100, 2000, 4015, 4016, 4031, 4032, 4095] { positions.append((page, byte)) }
        }
        for (page, byte) in positions {
            var copy = original
            copy[(page - 1) * pageSize + byte] ^= 0x01
            try copy.write(to: URL(fileURLWithPath: path))
            let result = Self.error {
                let verification = try E3DBSQLite.verify(
                    databaseAt: path, key: TestKeys.passphrase(), settings: TestKeys.fast)
                if verification.badPages != [UInt32(page)] {
                    throw E3DBError(.databaseError, "bad pages \(verification.badPages), expected [\(page)]")
                }
                throw E3DBError(.pageTampered, "page \(page)", context: .init(actual: page))
            }
            #expect(
                result?.code == .pageTampered && result?.context.actual == page,
                "page \(page) byte \(byte): \(String(describing: result))")
        }
        // A salt byte changed derives other keys: that reads as a wrong key (SQLCipher cannot tell either).
        var salted = original
        salted[3] ^= 0x01
        try salted.write(to: URL(fileURLWithPath: path))
        #expect(
            Self.error { _ = try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: TestKeys.fast) }?
                .code == .wrongKey)
        // A query on a tampered page fails with the typed error, naming the page.
        var tampered = original
        tampered[(pages - 1) * pageSize + 50] ^= 0x80
        try tampered.write(to: URL(fileURLWithPath: path))
        let connection = try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: TestKeys.fast)
        let queryError = Self.error { _ = try connection.rows("SELECT sum(length(b)) FROM t") }
        #expect(queryError?.code == .pageTampered && queryError?.context.actual == pages)
    }

    @Test("two pages swapped, a page from another database, and truncations are refused with typed errors")
    func swappedAndTruncated() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("swap.db")
        try Self.make(path)
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        let pageSize = 4096
        var swapped = original
        swapped.replaceSubrange(pageSize..<(2 * pageSize), with: original[(2 * pageSize)..<(3 * pageSize)])
        swapped.replaceSubrange((2 * pageSize)..<(3 * pageSize), with: original[pageSize..<(2 * pageSize)])
        try swapped.write(to: URL(fileURLWithPath: path))
        #expect(
            try E3DBSQLite.verify(databaseAt: path, key: TestKeys.passphrase(), settings: TestKeys.fast).badPages == [
                2, 3,
            ])

        // Page 2 of another database under the same passphrase (another salt, so other keys).
        let other = dir.path("other.db")
        try Self.make(other)
        var foreign = original
        foreign.replaceSubrange(
            pageSize..<(2 * pageSize),
            with: try Data(contentsOf: URL(fileURLWithPath: other))[pageSize..<(2 * pageSize)])
        try foreign.write(to: URL(fileURLWithPath: path))
        #expect(
            try E3DBSQLite.verify(databaseAt: path, key: TestKeys.passphrase(), settings: TestKeys.fast).badPages == [2]
        )

        // Cut in the middle of a page: SQLite sees fewer pages than page 1 announces.
        try original.prefix(original.count - 100).write(to: URL(fileURLWithPath: path))
        let cut = try E3DBSQLite.verify(databaseAt: path, key: TestKeys.passphrase(), settings: TestKeys.fast)
        #expect(!cut.isIntact)
        // Shorter than one page, shorter than the salt, empty of content.
        try original.prefix(1000).write(to: URL(fileURLWithPath: path))
        #expect(
            Self.error { _ = try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: TestKeys.fast) }?
                .code == .invalidLength)
        try original.prefix(10).write(to: URL(fileURLWithPath: path))
        #expect(
            Self.error { _ = try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: TestKeys.fast) }?
                .code == .invalidLength)
    }

    @Test("a page size mismatch, a plaintext database and a missing key have their own errors")
    func mismatches() throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("size.db")
        var large = TestKeys.fast
        large.pageSize = 8192
        try Self.make(path, settings: large)
        let error = Self.error {
            _ = try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: TestKeys.fast)
        }
        #expect(error?.code == .pageSizeMismatch && error?.context.expected == 4096 && error?.context.actual == 8192)
        #expect(
            try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: large).rows("SELECT count(*) FROM t")
                .first?.values == [.integer(201)])

        let plain = dir.path("plain.db")
        try SQLiteConnection(path: plain, key: nil).execute("CREATE TABLE t(v); INSERT INTO t VALUES (1)")
        #expect(
            Self.error { _ = try SQLiteConnection(path: plain, key: TestKeys.passphrase(), settings: TestKeys.fast) }?
                .code == .databaseNotEncrypted)

        // An encrypted file opened through the VFS with no key at all.
        try E3DBSQLite.register()
        let keyless = #expect(throws: DatabaseError.self) {
            _ = try DatabaseQueue(path: "file:\(path)?vfs=\(E3DBSQLite.vfsName)")
        }
        #expect(keyless?.resultCode == .SQLITE_NOTADB)
        #expect(E3DBSQLite.lastFailure(forDatabaseAt: path)?.code == .keyMissing)
    }

    @Test("malformed keys are refused before any file is touched")
    func malformedKeys() throws {
        for text in ["", "x''", "x'abcd'", "x'" + String(repeating: "g", count: 64) + "'"] {
            let result = Self.error { _ = try SQLCipherKey.parse(SecureBytes(copying: Array(text.utf8))) }
            #expect(result?.code == .invalidKey, "\(text)")
        }
        if case .rawKey(let key) = try SQLCipherKey.parse(
            SecureBytes(copying: Array(("x'" + String(repeating: "aB", count: 32) + "'").utf8)))
        {
            #expect(key.count == 32)
        } else {
            Issue.record("x'…' with 64 hex digits is a raw key")
        }
        #expect(
            Self.error { _ = try SQLCipherKey.rawKey(hex: SecureBytes(copying: Array("1234".utf8))) }?.code
                == .invalidKey)
    }
}

@Suite("E3DBSQLite: nothing plaintext reaches the disk")
struct PlaintextScanTests {
    static let marker = "PLAINTEXT-MARKER-7f3a"

    /// A workload that touches every kind of file: journal and WAL modes, a statement journal, temporary tables and
    /// indexes, a big sort, VACUUM and VACUUM INTO; returns the files left in the directory, scanned at the end and
    /// while the WAL and journal are still there.
    @Test(
        "journal mode, WAL mode, temporary tables, sorts, VACUUM and VACUUM INTO leave no marker in any file",
        arguments: ["delete", "wal"])
    func scan(mode: String) throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let path = dir.path("scan.db")
        let marker = Self.marker
        var seen: [String: Data] = [:]
        func snapshot() throws { for file in try dir.files() { seen[file.name + "@\(seen.count)"] = file.bytes } }
        do {
            let connection = try SQLiteConnection(path: path, key: TestKeys.passphrase(), settings: TestKeys.fast)
            try connection.execute(
                "PRAGMA journal_mode = \(mode); PRAGMA cache_size = 5; PRAGMA mmap_size = 1000000000")
            try connection.execute(
                """
                CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT UNIQUE, b BLOB);
                BEGIN;
                WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000)
                INSERT INTO t(v, b) SELECT '\(marker)-' || x, randomblob(x % 700) FROM c;
                """)
            try snapshot()  // a hot journal (cache spilled) or an uncommitted WAL
            try connection.execute("COMMIT")
            try connection.execute(
                """
                BEGIN;
                UPDATE t SET v = v || '-u' WHERE id % 3 = 0;
                SAVEPOINT s; UPDATE t SET b = zeroblob(100); ROLLBACK TO s; RELEASE s;
                CREATE TEMP TABLE tt AS SELECT v FROM t ORDER BY v DESC;
                CREATE INDEX temp.tti ON tt(v);
                COMMIT;
                """)
            #expect(try connection.rows("SELECT count(*) FROM tt").first?.values == [.integer(3000)])
            #expect(try connection.rows("SELECT v FROM t ORDER BY random() LIMIT 1").count == 1)
            try snapshot()
            try connection.execute("VACUUM")
            try connection.execute("VACUUM INTO '\(dir.path("copy.db"))'")
            try snapshot()
        }
        try snapshot()
        for (name, bytes) in seen {
            #expect(!bytes.contains(marker: marker), "\(name) holds plaintext")
            #expect(!bytes.contains(marker: "SQLite format 3"), "\(name) holds a plaintext database header")
        }
        // The VACUUM INTO copy is encrypted under the connection's key and readable.
        let copy = try SQLiteConnection(path: dir.path("copy.db"), key: TestKeys.passphrase(), settings: TestKeys.fast)
        #expect(try copy.rows("SELECT count(*) FROM t").first?.values == [.integer(3000)])
        #expect(try E3DBSQLite.verify(databaseAt: path, key: TestKeys.passphrase(), settings: TestKeys.fast).isIntact)
    }
}
