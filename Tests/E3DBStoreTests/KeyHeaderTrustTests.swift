import E3DBKit
import Foundation
import GRDB
import Testing

@testable import E3DBStore

/// The key header (`keys.sqlite`) is a plain file that anyone who can write the store's directory can edit, restore
/// from a backup, or swap for another store's: nothing in it is trusted before it is checked, and opening a store
/// never deletes anything (security review 3: H1, M2, M4, L9, L10).
@Suite("E3DBStore: the key header is not trusted (restored, swapped, edited headers)")
struct KeyHeaderTrustTests {
    /// Every file in the store's directory with its bytes (what must survive a refused open untouched).
    static func files(_ url: URL) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: url.path) {
            let item = url.appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            // A WAL and its index come and go with connections; the files the store keeps are compared.
            if name.hasSuffix("-wal") || name.hasSuffix("-shm") { continue }
            if FileManager.default.fileExists(atPath: item.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                files[name] = try Data(contentsOf: item)
            }
        }
        return files
    }

    static func editHeader(_ dir: StoreDirectory, _ sql: String, _ arguments: StatementArguments = []) throws {
        let queue = try DatabaseQueue(path: dir.keyHeader)
        try queue.write { db in try db.execute(sql: sql, arguments: arguments) }
        try queue.close()
    }

    static func store(_ dir: StoreDirectory, _ encryption: DatabaseEncryption = .encrypted) throws -> EncryptedStore {
        let store = try EncryptedStore.create(
            at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        try store.put(collection: "notes", type: "note", data: ["n": "1"])
        return store
    }

    @Test(
        "a key header restored from before a rekey: open refuses and deletes nothing; the right header opens again",
        arguments: DatabaseEncryption.allCases)
    func restoredHeader(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        _ = try Self.store(dir, encryption)
        let beforeRekey = try Data(contentsOf: URL(fileURLWithPath: dir.keyHeader))
        do {
            let rekeyed = try EncryptedStore.rekey(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
            try rekeyed.put(collection: "notes", type: "note", data: ["n": "written after the rekey"])
        }
        let current = try Data(contentsOf: URL(fileURLWithPath: dir.keyHeader))
        try beforeRekey.write(to: URL(fileURLWithPath: dir.keyHeader))
        let files = try Self.files(dir.url)
        expectStoreError(.storeCorrupted) {
            _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p"), expectedMinimumWriteCounter: 3)
        }
        #expect(try Self.files(dir.url) == files, "a refused open changed the store's files")
        try current.write(to: URL(fileURLWithPath: dir.keyHeader))
        let reopened = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(try reopened.count(collection: "notes") == 2)
    }

    @Test("another store's header that the same passphrase opens: open refuses and deletes nothing")
    func swappedHeader() throws {
        let a = try StoreDirectory()
        let b = try StoreDirectory()
        _ = try Self.store(a)
        _ = try Self.store(b)
        _ = try EncryptedStore.rekey(at: b.url, credential: passphrase("p"), kdfParameters: testKDF)
        let original = try Data(contentsOf: URL(fileURLWithPath: a.keyHeader))
        try Data(contentsOf: URL(fileURLWithPath: b.keyHeader)).write(to: URL(fileURLWithPath: a.keyHeader))
        let files = try Self.files(a.url)
        expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: a.url, credential: passphrase("p")) }
        #expect(try Self.files(a.url) == files)
        try original.write(to: URL(fileURLWithPath: a.keyHeader))
        #expect(try EncryptedStore.open(at: a.url, credential: passphrase("p")).count(collection: "notes") == 1)
    }

    @Test("database_file naming the key header itself, a path or a non-store name is storeCorrupted; nothing deleted")
    func databaseFileNames() throws {
        let dir = try StoreDirectory()
        _ = try Self.store(dir, .plain)
        for name in ["keys.sqlite", "../store.sqlite", "store.sqlite.bak", "STORE-0BADF00D.sqlite", ".", ""] {
            try Self.editHeader(
                dir, "UPDATE store_meta SET database_file = ?, database_encryption = 'plain'", [name])
            let files = try Self.files(dir.url)
            expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
            #expect(try Self.files(dir.url) == files, "\(name)")
        }
    }

    @Test(
        "database_file or database_encryption edited to another valid value: storeTampered (the master key sealed them)",
        arguments: DatabaseEncryption.allCases)
    func boundToTheMasterKey(encryption: DatabaseEncryption) throws {
        let dir = try StoreDirectory()
        _ = try Self.store(dir, encryption)
        // A copy of the live database under another store name, then the header pointed at it.
        try FileManager.default.copyItem(
            atPath: dir.database, toPath: dir.url.appendingPathComponent("store-0badf00d.sqlite").path)
        try Self.editHeader(dir, "UPDATE store_meta SET database_file = 'store-0badf00d.sqlite'")
        expectStoreError(.storeTampered) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
        try Self.editHeader(dir, "UPDATE store_meta SET database_file = 'store.sqlite'")
        let flipped: DatabaseEncryption = encryption == .plain ? .encrypted : .plain
        try Self.editHeader(dir, "UPDATE store_meta SET database_encryption = ?", [flipped.rawValue])
        expectStoreError(.storeTampered) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
        try Self.editHeader(dir, "UPDATE store_meta SET database_encryption = ?", [encryption.rawValue])
        #expect(try EncryptedStore.open(at: dir.url, credential: passphrase("p")).count(collection: "notes") == 1)
        #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("store-0badf00d.sqlite").path))
    }

    @Test("a store made before the binding opens, and its sealed box key names its database file from then on")
    func bindingUpgrade() throws {
        let dir = try StoreDirectory()
        let store = try Self.store(dir)
        let keys = try store.currentKeys()
        #expect(keys.binding == .init(databaseFile: "store.sqlite", encryption: .encrypted))
        try Self.editHeader(
            dir, "UPDATE store_meta SET wrapped_box_private = ?",
            [StoreKeys.wrap(keys.boxKey, under: keys.master, binding: nil)])
        let reopened = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(try reopened.currentKeys().binding == nil)
        let upgraded = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(try upgraded.currentKeys().binding == .init(databaseFile: "store.sqlite", encryption: .encrypted))
        try Self.editHeader(dir, "UPDATE store_meta SET database_encryption = 'plain'")
        expectStoreError(.storeTampered) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
    }

    @Test("a rekey row naming a path outside the store or the live database: rekey refuses, deletes nothing (M4)")
    func pendingRekeyName() throws {
        let dir = try StoreDirectory()
        let victim = try StoreDirectory()
        let precious = victim.url.appendingPathComponent("precious.txt")
        try Data("precious".utf8).write(to: precious)
        try Data("journal".utf8).write(to: URL(fileURLWithPath: precious.path + "-journal"))
        _ = try Self.store(dir)
        let escape = "../\(victim.url.lastPathComponent)/precious.txt"
        for name in [escape, "store.sqlite", "keys.sqlite", "store-0badf00d.sqlite/x"] {
            try Self.editHeader(dir, KeyHeader.rekeySchema)
            try Self.editHeader(
                dir, "INSERT OR REPLACE INTO rekey_pending VALUES (1, ?, randomblob(72))", [name])
            let files = try Self.files(dir.url)
            expectStoreError(.storeCorrupted) {
                _ = try EncryptedStore.rekey(at: dir.url, credential: passphrase("p"), kdfParameters: testKDF)
            }
            // The store opened (its database may be written by that), then the rekey refused: no file is gone and
            // the key header is as it was.
            let after = try Self.files(dir.url)
            #expect(Set(after.keys) == Set(files.keys), "\(name): \(after.keys.sorted())")
            #expect(after["keys.sqlite"] == files["keys.sqlite"], "\(name)")
            #expect(try Self.files(victim.url).count == 2, "\(name)")
        }
        try Self.editHeader(dir, "DELETE FROM rekey_pending")
        #expect(try EncryptedStore.open(at: dir.url, credential: passphrase("p")).count(collection: "notes") == 1)
    }

    @Test("Argon2id costs above the sensitive preset in the header are storeCorrupted before any work (M2)")
    func kdfCeiling() throws {
        let dir = try StoreDirectory()
        _ = try Self.store(dir)
        let started = ContinuousClock.now
        for (ops, mem) in [
            (2_000_000_000, 1 << 16), (1, 3 << 30), (Int(Int64.max), 1 << 16), (1, Int(Int64.max)), (0, 1 << 16),
            (1, 1024),
        ] {
            try Self.editHeader(dir, "UPDATE store_meta SET kdf_ops = ?, kdf_mem = ?", [ops, mem])
            do {
                _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
                Issue.record("opened with ops \(ops), mem \(mem)")
            } catch {
                #expect(error.code == .storeCorrupted, "\(error)")
                #expect(error.context.part == "store_meta.kdf_ops", "\(error)")
            }
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        try Self.editHeader(
            dir, "UPDATE store_meta SET kdf_ops = ?, kdf_mem = ?", [testKDF.opsLimit, testKDF.memoryLimit])
        #expect(try EncryptedStore.open(at: dir.url, credential: passphrase("p")).count(collection: "notes") == 1)
        let above = Argon2id.Parameters(opsLimit: 5, memoryLimit: 1 << 16)
        expectStoreError(.invalidParameter) {
            _ = try EncryptedStore.create(
                at: try StoreDirectory().url, credential: passphrase("p"), kdfParameters: above)
        }
    }

    @Test("a header that is empty, not a key header, a symlink, or a database file that is a directory: storeCorrupted")
    func damagedHeaderFiles() throws {
        let dir = try StoreDirectory()
        _ = try Self.store(dir)
        let header = URL(fileURLWithPath: dir.keyHeader)
        let saved = try Data(contentsOf: header)
        try Data().write(to: header)
        expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
        try saved.write(to: header)
        try Self.editHeader(dir, "ALTER TABLE store_meta RENAME TO other")
        expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
        try saved.write(to: header)
        let elsewhere = try StoreDirectory()
        let target = elsewhere.url.appendingPathComponent("keys.sqlite")
        try FileManager.default.moveItem(at: header, to: target)
        try FileManager.default.createSymbolicLink(at: header, withDestinationURL: target)
        expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
        try FileManager.default.removeItem(at: header)
        try FileManager.default.moveItem(at: target, to: header)
        let database = URL(fileURLWithPath: dir.database)
        try FileManager.default.moveItem(at: database, to: elsewhere.url.appendingPathComponent("db"))
        try FileManager.default.createDirectory(at: database, withIntermediateDirectories: false)
        expectStoreError(.storeCorrupted) { _ = try EncryptedStore.open(at: dir.url, credential: passphrase("p")) }
    }

    @Test("a new store's directory is 0700 and its key header and database files 0600, whatever the umask (L10)")
    func privateModes() throws {
        let parent = try StoreDirectory()
        let url = parent.url.appendingPathComponent("s")
        let store = try EncryptedStore.create(at: url, credential: passphrase("p"), kdfParameters: testKDF)
        try store.put(collection: "notes", type: "note", data: ["n": "1"])
        func mode(_ name: String?) throws -> Int {
            let path = name.map { url.appendingPathComponent($0).path } ?? url.path
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            return ((attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1) & 0o777
        }
        #expect(try mode(nil) == 0o700)
        for name in try FileManager.default.contentsOfDirectory(atPath: url.path)
        where name.hasSuffix("sqlite")
            || name.hasSuffix("-wal") || name.hasSuffix("-shm")
        {
            #expect(try mode(name) == 0o600, "\(name)")
        }
        #expect(try mode("keys.sqlite") == 0o600)
        #expect(try mode("store.sqlite") == 0o600)
    }

    @Test("open never removes a stale database file; store gc (removeStaleDatabaseFiles) removes only store names")
    func staleFilesOnlyByGC() throws {
        let dir = try StoreDirectory()
        _ = try Self.store(dir)
        for name in ["store-0badf00d.sqlite", "store-0badf00d.sqlite-journal", "store.sqlite.bak", "notes.sqlite"] {
            try Data("old".utf8).write(to: dir.url.appendingPathComponent(name))
        }
        let store = try EncryptedStore.open(at: dir.url, credential: passphrase("p"))
        #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("store-0badf00d.sqlite").path))
        #expect(try store.removeStaleDatabaseFiles() == ["store-0badf00d.sqlite", "store-0badf00d.sqlite-journal"])
        #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("store.sqlite.bak").path))
        #expect(FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("notes.sqlite").path))
        #expect(try store.count(collection: "notes") == 1)
    }
}
