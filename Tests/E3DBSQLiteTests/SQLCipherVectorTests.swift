import E3DBConformance
import E3DBPageCodec
import E3DBTestSupport
import Foundation
import GRDB
import Testing

/// The databases SQLCipher wrote, decrypted page by page, read back through the system SQLite (the page vectors
/// alone are E3DBPageCodecTests' `PageVectorTests`).
@Suite("SQLCipher page vectors (SQLCipher 4.12)")
struct SQLCipherVectorTests {
    /// The pages PageCodec decrypts make a database that the system SQLite reads with the rows SQLCipher read.
    @Test(arguments: try SQLCipherSuites.load().filter { $0.result == .valid && $0.rows != nil }.map(\.tcId))
    func decryptedDatabaseReadsBack(_ tcId: Int) throws {
        let t = try #require(try SQLCipherSuites.load().first { $0.tcId == tcId })
        let expected = try #require(t.rows)
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("e3dbkit-pages-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("plain.db").path
        try Data(SQLCipherSuites.decryptedPages(t).joined()).write(to: URL(fileURLWithPath: path))
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.read { db in
            #expect(try String.fetchAll(db, sql: "PRAGMA integrity_check") == ["ok"])
            let tables = try String.fetchAll(
                db,
                sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            #expect(tables == expected.keys.sorted())
            for table in tables {
                let rows = try Row.fetchAll(db, sql: "SELECT * FROM \"\(table)\" ORDER BY rowid")
                let want = expected[table] ?? []
                try #require(rows.count == want.count, "\(table): row count")
                for (row, wantRow) in zip(rows, want) {
                    let got: [SQLCipherSuites.SQLValue] = row.databaseValues.map { value in
                        switch value.storage {
                        case .null: .null
                        case .int64(let v): .integer(v)
                        case .double(let v): .real(v)
                        case .string(let v): .text(v)
                        case .blob(let v): .blob(Array(v))
                        }
                    }
                    #expect(
                        got.count == wantRow.count && zip(got, wantRow).allSatisfy { $0.matches($1) },
                        "\(table): \(got) vs \(wantRow)")
                }
            }
        }
    }
}
