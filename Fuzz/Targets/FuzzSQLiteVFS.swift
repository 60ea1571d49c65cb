// Fuzz target FuzzSQLiteVFS: E3DBSQLite's VFS, on real encrypted databases (a raw key, a few pages with an overflow
// chain) in each page format, SQLCipher 4's and SQLite3 Multiple Ciphers' chacha20, made once per process.
//
// Byte 0 chooses the mode (mod 3) and the format ((byte 0 / 3) mod 2: SQLCipher 4, chacha20); the rest drives it.
// - 0: "reads at any split". Each 5 bytes give an offset (3 bytes, up to a page past the end) and a length
//   (2 bytes). xRead on the main database file must return exactly the bytes of the same range of the plaintext
//   image (read once, whole page by whole page, at start), or, past the end, those bytes then zeros with
//   SQLITE_IOERR_SHORT_READ; never other data.
// - 1: "writes at any split". Each 5 bytes give an offset and a length; a write that is not one whole page at a
//   page boundary must fail and leave the file's bytes as they were; a whole page rewritten with its own plaintext
//   changes the stored bytes (a fresh IV) and reads back the same.
// - 2: "corruption". Pairs of (3-byte offset, byte) are XORed into a copy of the database file, which is then
//   opened through the VFS and read whole: every outcome is either the original rows or an E3DBError (a wrong
//   key, a tampered page, a malformed file, SQLite's own corruption report), never other rows and never a trap.
import E3DBPageCodec
import E3DBPrimitives
import E3DBSQLite
import Foundation
import GRDB
import GRDBSQLite

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzSQLiteVFS invariant violated: \(message())") }
}

private let SHORT_READ = SQLITE_IOERR | (2 << 8)

// @safe: `file` is the main database file of `queue`, which the fixture keeps open for its whole life.
@safe
private final class Fixture: @unchecked Sendable {
    let directory: URL
    let path: String
    let key = SQLCipherKey.rawKey(SecureBytes(copying: [UInt8](repeating: 0x77, count: 32)))
    let settings: SQLCipherSettings
    let queue: DatabaseQueue
    let file: UnsafeMutablePointer<sqlite3_file>
    let image: [UInt8]
    let rows: [SQLiteRow]
    let pageSize = 4096

    init(settings: SQLCipherSettings) throws {
        self.settings = settings
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fuzzvfs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("fuzz.db").path
        let connection = try SQLiteConnection(path: path, key: key, settings: settings)
        try connection.execute(
            """
            CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB);
            INSERT INTO t(v, b) VALUES ('one', x'0102'), ('two', zeroblob(9000)), ('three', NULL);
            """)
        rows = try connection.rows("SELECT * FROM t ORDER BY id")
        queue = try DatabaseQueue(path: try E3DBSQLite.uri(forDatabaseAt: path, key: key, settings: settings))
        var pointer: UnsafeMutablePointer<sqlite3_file>?
        try queue.inDatabase { db in
            _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
            _ = unsafe sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_FILE_POINTER, &pointer)
        }
        guard let pointer = unsafe pointer else { throw E3DBError(.databaseError, "no file pointer") }
        unsafe file = unsafe pointer
        let size = try Data(contentsOf: URL(fileURLWithPath: path)).count
        var image = [UInt8](repeating: 0, count: size)
        let page = pageSize
        for start in stride(from: 0, to: size, by: page) {
            let rc = unsafe image.withUnsafeMutableBytes { buffer in
                unsafe pointer.pointee.pMethods.pointee.xRead(
                    pointer, buffer.baseAddress! + start, Int32(page), Int64(start))
            }
            guard rc == SQLITE_OK else { throw E3DBError(.databaseError, "page read failed: \(rc)") }
        }
        self.image = image
    }

    func read(offset: Int, count: Int) -> (Int32, [UInt8]) {
        var out = [UInt8](repeating: 0xee, count: count)
        let rc = queue.inDatabase { _ in
            unsafe out.withUnsafeMutableBytes { buffer in
                unsafe file.pointee.pMethods.pointee.xRead(file, buffer.baseAddress, Int32(count), Int64(offset))
            }
        }
        return (rc, out)
    }

    func write(_ bytes: [UInt8], offset: Int) -> Int32 {
        queue.inDatabase { _ in
            unsafe bytes.withUnsafeBytes { buffer in
                unsafe file.pointee.pMethods.pointee.xWrite(file, buffer.baseAddress, Int32(bytes.count), Int64(offset))
            }
        }
    }

    func raw() -> [UInt8] { (try? Array(Data(contentsOf: URL(fileURLWithPath: path)))) ?? [] }
}

nonisolated(unsafe) private var fixtureDirectories: [URL] = []
/// One fixture per page format.
private let fixtures: [Fixture] = {
    do {
        let made = [try Fixture(settings: .v4), try Fixture(settings: .chacha20)]
        unsafe fixtureDirectories = made.map(\.directory)
        atexit {
            for directory in unsafe fixtureDirectories { try? FileManager.default.removeItem(at: directory) }
        }
        return made
    } catch {
        fatalError("FuzzSQLiteVFS: cannot make the fixture databases: \(error)")
    }
}()

private func splits(_ bytes: ArraySlice<UInt8>, limit: Int, pageSize: Int) -> [(offset: Int, count: Int)] {
    var result: [(Int, Int)] = []
    var rest = bytes
    while rest.count >= 5, result.count < 16 {
        let b = Array(rest.prefix(5))
        rest = rest.dropFirst(5)
        let offset = (Int(b[0]) << 16 | Int(b[1]) << 8 | Int(b[2])) % limit
        let count = (Int(b[3]) << 8 | Int(b[4])) % (2 * pageSize) + 1
        result.append((offset, count))
    }
    return result
}

func fuzzSQLiteVFS(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = unsafe Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let fixture = fixtures[Int(mode / 3) % fixtures.count]
    let image = fixture.image
    switch mode % 3 {
    case 0:
        for (offset, count) in splits(
            bytes.dropFirst(), limit: image.count + fixture.pageSize, pageSize: fixture.pageSize)
        {
            let (rc, out) = fixture.read(offset: offset, count: count)
            let available = max(0, min(count, image.count - offset))
            let expected =
                Array(image[min(offset, image.count)..<(min(offset, image.count) + available)])
                + [UInt8](repeating: 0, count: count - available)
            require(rc == (available == count ? SQLITE_OK : SHORT_READ), "read \(count) at \(offset): rc \(rc)")
            require(out == expected, "read \(count) at \(offset): other bytes than the plaintext")
        }
    case 1:
        for (offset, count) in splits(bytes.dropFirst(), limit: image.count, pageSize: fixture.pageSize) {
            let before = fixture.raw()
            if offset % fixture.pageSize == 0 && count == fixture.pageSize {
                let rc = fixture.write(Array(image[offset..<(offset + count)]), offset: offset)
                require(rc == SQLITE_OK, "a whole-page write failed: \(rc)")
                require(fixture.raw() != before, "a rewritten page kept its IV or nonce")
                require(
                    fixture.read(offset: offset, count: count).1 == Array(image[offset..<(offset + count)]),
                    "rewritten page")
            } else {
                let rc = fixture.write([UInt8](repeating: 0x41, count: count), offset: offset)
                require(rc != SQLITE_OK, "a write of \(count) bytes at \(offset) was accepted")
                require(fixture.raw() == before, "a refused write changed the file")
            }
        }
    default:
        var copy = fixture.raw()
        var rest = bytes.dropFirst()
        while rest.count >= 4 {
            let b = Array(rest.prefix(4))
            rest = rest.dropFirst(4)
            copy[(Int(b[0]) << 16 | Int(b[1]) << 8 | Int(b[2])) % copy.count] ^= b[3]
        }
        let path = fixture.directory.appendingPathComponent("corrupt.db").path
        try? FileManager.default.removeItem(atPath: path)
        guard (try? Data(copy).write(to: URL(fileURLWithPath: path))) != nil else { return 0 }
        do {
            let connection = try SQLiteConnection(
                path: path, key: fixture.key, settings: fixture.settings, readOnly: true)
            let rows = try connection.rows("SELECT * FROM t ORDER BY id")
            require(rows == fixture.rows, "a corrupted database gave other rows")
        } catch {
            // Typed by construction (SQLiteConnection throws E3DBError); a trap would have ended the run.
        }
    }
    return 0
}
