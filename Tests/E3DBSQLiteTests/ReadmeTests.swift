// Only the imports the README shows: E3DBSQLite brings its key types, SecureBytes and E3DBError with it.
import E3DBSQLite
import Foundation
import GRDB
import Testing

@Suite("E3DBSQLite: the README's two lines")
struct ReadmeTests {
    @Test("import E3DBSQLite and GRDB, make a URI, open a DatabasePool")
    func twoLines() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("app.sqlite").path
        let passphrase = SecureBytes(copying: Array("a passphrase from the keychain".utf8))

        let uri = try E3DBSQLite.uri(forDatabaseAt: path, key: .passphrase(passphrase))
        let dbPool = try DatabasePool(path: uri)

        try await dbPool.write {
            try $0.execute(sql: "CREATE TABLE note(text TEXT); INSERT INTO note VALUES ('hello')")
        }
        #expect(try await dbPool.read { try String.fetchOne($0, sql: "SELECT text FROM note") } == "hello")
        do {
            _ = try E3DBSQLite.verify(databaseAt: path, key: .passphrase(SecureBytes(copying: Array("wrong".utf8))))
            Issue.record("a wrong passphrase opened the database")
        } catch {
            #expect(error.code == .wrongKey)
        }
    }
}
