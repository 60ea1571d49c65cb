import E3DBKit
import E3DBSQLite
import Foundation
import GRDB
import Testing

@testable import E3DBStore

/// E3DBSQLite's key registry is process-wide; an app that uses it beside a store owns only the keys it registered.
@Suite("E3DBStore: an app's E3DBSQLite.forgetAllKeys() leaves the store's page key")
struct KeyOwnershipTests {
    /// `forgetAllKeys()` acts on the whole process, so the check runs in a child process of its own (an exit test):
    /// in this one it would take the keys of the E3DBSQLite tests that run in parallel.
    @Test("after forgetAllKeys() the store reads and writes, deriving no page key again; the app's keys are gone")
    func forgetAllKeysLeavesTheStoresKey() async {
        await #expect(processExitsWith: .success) {
            let dir = try StoreDirectory()
            let store = try await EncryptedStore.create(
                at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
            guard store.databaseEncryption == .encrypted else { throw Failure("the store is not encrypted") }
            let first = try await store.put(collection: "c", type: "t", data: ["f": "one"])
            let appURI = try E3DBSQLite.uri(
                forDatabaseAt: dir.url.appendingPathComponent("app.sqlite").path,
                key: .passphrase(SecureBytes(copying: Array("app".utf8))))
            try await DatabaseQueue(path: appURI).write { db in try db.execute(sql: "CREATE TABLE t (x)") }

            // The derived page keys of each: the store's stay cached, the app's go.
            let storeKey = SQLCipherKey.rawKey(try store.databasePageKey())
            let storeSalt = Array(try Data(contentsOf: URL(fileURLWithPath: store.databasePath)).prefix(16))
            let appKey = SQLCipherKey.passphrase(SecureBytes(copying: Array("app".utf8)))
            let appSalt = Array(try Data(contentsOf: dir.url.appendingPathComponent("app.sqlite")).prefix(16))
            let derived = PageCodecCache.shared.derivations(key: storeKey, salt: storeSalt, settings: .v4)
            guard derived >= 1, PageCodecCache.shared.contains(key: appKey, salt: appSalt, settings: .v4) else {
                throw Failure("the cache holds both codecs before")
            }
            // The same key stays registered by another owner: a connection open on another database with it.
            let otherPath = dir.url.appendingPathComponent("other.sqlite").path
            let other = try SQLiteConnection(path: otherPath, key: appKey)
            try other.execute("CREATE TABLE t (x)")
            let otherSalt = Array(try Data(contentsOf: URL(fileURLWithPath: otherPath)).prefix(16))

            E3DBSQLite.forgetAllKeys()
            // The app's database is closed: its codec goes, though its key is still registered for the other.
            guard !PageCodecCache.shared.contains(key: appKey, salt: appSalt, settings: .v4) else {
                throw Failure("the app's derived keys are still cached")
            }
            guard PageCodecCache.shared.contains(key: appKey, salt: otherSalt, settings: .v4) else {
                throw Failure("the open connection's codec is no longer found")
            }
            withExtendedLifetime(other) {}
            // The pool's idle readers are closed: the next read opens a new connection with the store's key.
            store.pool.releaseMemory()
            guard try await store.get(collection: "c", id: first.id).data == ["f": "one"] else {
                throw Failure("first record")
            }
            // ... which found the store's codec in the cache: its page keys were not derived again.
            guard PageCodecCache.shared.derivations(key: storeKey, salt: storeSalt, settings: .v4) == derived else {
                throw Failure("the store's page keys were derived again")
            }
            let second = try await store.put(collection: "c", type: "t", data: ["f": "two"])
            guard try await store.get(collection: "c", id: second.id).data == ["f": "two"] else {
                throw Failure("second record")
            }
            // A second store instance on the same directory registers and uses a key of its own.
            guard try await EncryptedStore.open(at: dir.url, credential: passphrase("p")).count(collection: "c") == 2
            else { throw Failure("a second store instance") }
            // The app's key is forgotten: a new connection through its URI fails.
            let forgotten: Bool
            do {
                let queue = try DatabaseQueue(path: appURI)
                _ = try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_schema") }
                forgotten = false
            } catch {
                forgotten = true
            }
            guard forgotten else { throw Failure("the app's key still opens its database") }
        }
    }
}

/// Why the child process of an exit test failed (it exits with a failure when the body throws).
private struct Failure: Error {
    let what: String
    init(_ what: String) { self.what = what }
}
