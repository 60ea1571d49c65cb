import E3DBKit
import E3DBTestSupport
import Foundation
import GRDB
import Testing

@testable import E3DBStore

/// Edited store files (security review 3, "Edited store files crash store commands"): every table and column that
/// holds rows, in every SQLite file the store keeps as a plain file (the plain-file layout's database and key
/// header, the encrypted layout's key header), given a value of the wrong type, a NULL and a blob after its `STRICT`
/// (and `NOT NULL`, `CHECK`) went through `writable_schema`. After each edit every store operation runs in this
/// process: a trap would end the test run, so finishing is the proof that none traps. Each operation either works
/// or throws an `E3DBError` (never another error type); nothing outside the store is touched; and every edit of a
/// value the store authenticates is reported by `verify()` or refused at open.
@Suite("E3DBStore: edited files never crash a store operation; verify reports every authenticated edit")
struct EditedFilesTests {
    /// The columns whose edits nothing reports, measured (with this set empty, these are exactly the ones the test
    /// names): times that decide nothing (a collection's, an index's, a setting's, the store's creation or update
    /// time) and the client id shown beside an enrolled identity, a label the EAK does not cover (docs/store.md,
    /// "Files": everything in the key header but the sealed keys is in clear and unauthenticated but what the master
    /// key binds).
    static let unauthenticated: Set<String> = [
        "collections.created", "blind_indexes.created", "settings.updated", "store_meta.created",
        "store_identities.client_id",
    ]

    /// A store holding something in every table: records in two collections with `plain` values, a blind index, a
    /// keyed record, a setting, a file, an enrolled identity. Closed when this returns.
    static func template(_ encryption: DatabaseEncryption) throws -> StoreDirectory {
        let dir = try StoreDirectory()
        let store = try EncryptedStore.create(
            at: dir.url, credential: passphrase("p"), kdfParameters: testKDF, databaseEncryption: encryption)
        let note = try store.put(collection: "notes", type: "note", data: ["body": "hello"], plain: ["tag": "a"])
        try store.put(collection: "people", type: "person", data: ["email": "a@example.com"])
        try store.createIndex(collection: "people", fields: ["email"], bits: 32)
        try store.put(collection: "people", key: "ada", type: "person", data: ["email": "ada@example.com"])
        try store.setSetting(["recent"], forKey: "recent")
        try store.putFile(at: "/docs/a.txt", data: Data("attached".utf8), attachedTo: note.id)
        try store.addIdentity(publicKey: ClientIdentity.generate(clientID: UUID()).boxKey.publicKey, clientID: nil)
        return dir
    }

    /// Every store operation, on a store opened after the edit. Returns what went wrong that must not: an error that
    /// is not an `E3DBError`, and whether anything refused or reported the edit.
    static func exercise(_ url: URL) -> (unexpected: [String], detected: Bool) {
        var unexpected: [String] = []
        var detected = false
        func attempt(_ what: String, _ body: () throws -> Void) {
            do {
                try body()
            } catch is E3DBError {
                detected = true
            } catch {
                unexpected.append("\(what): \(type(of: error)) \(error)")
            }
        }
        let store: EncryptedStore
        do {
            store = try EncryptedStore.open(at: url, credential: passphrase("p"))
        } catch {
            return ([], true)
        }
        attempt("verify") { if try !store.verify().problems.isEmpty { detected = true } }
        attempt("collections") { _ = try store.collections() }
        attempt("stats") { _ = try store.statistics() }
        attempt("count") { _ = try store.count(collection: "people") }
        attempt("find") { _ = try store.find(RecordQuery(collection: "notes")) }
        attempt("find plain") { _ = try store.find(RecordQuery(collection: "notes", plain: [.equals("tag", "a")])) }
        attempt("find index") {
            _ = try store.find(RecordQuery(collection: "people", fields: [.equals("email", "a@example.com")]))
        }
        attempt("get key") { _ = try store.get(collection: "people", key: "ada") }
        attempt("settings") { _ = try store.settingKeys() }
        attempt("setting") { _ = try store.setting([String].self, forKey: "recent") }
        attempt("identities") { _ = try store.identities() }
        attempt("files") { _ = try store.files(under: "/") }
        attempt("cat") { _ = try store.readFile(at: "/docs/a.txt") }
        attempt("update") {
            if let first = try store.find(RecordQuery(collection: "notes")).first {
                try store.update(
                    collection: "notes", id: first.id, expectedVersion: first.version, data: ["body": "changed"])
            }
        }
        attempt("put") { try store.put(collection: "notes", type: "note", data: ["body": "new"]) }
        attempt("put key") { try store.put(collection: "people", key: "ada", type: "person", data: ["email": "b@c"]) }
        attempt("delete key") { try store.delete(collection: "people", key: "ada") }
        attempt("gc") { _ = try store.removeOrphanFiles() }
        return (unexpected, detected)
    }

    @Test(
        "every column of every table with rows, in each plain SQLite file of both layouts, edited three ways",
        arguments: DatabaseEncryption.allCases)
    func everyColumn(encryption: DatabaseEncryption) throws {
        let template = try Self.template(encryption)
        var files = [EncryptedStore.keyHeaderFileName]
        if encryption == .plain { files.append(EncryptedStore.databaseFileName) }
        let outside = try StoreDirectory()
        let sentinel = outside.url.appendingPathComponent("sentinel.txt")
        try Data("outside".utf8).write(to: sentinel)
        var edits = 0
        for file in files {
            for column in try SQLiteEdits.columns(of: template.url.appendingPathComponent(file).path) {
                for variant in SQLiteEdits.Variant.allCases {
                    let copy = outside.url.appendingPathComponent("store-\(edits)")
                    try FileManager.default.copyItem(at: template.url, to: copy)
                    defer { try? FileManager.default.removeItem(at: copy) }
                    guard try SQLiteEdits.edit(copy.appendingPathComponent(file).path, column, variant) else {
                        continue
                    }
                    edits += 1
                    let (unexpected, detected) = Self.exercise(copy)
                    let name = "\(file) \(column) \(variant.rawValue)"
                    #expect(unexpected.isEmpty, "\(name): \(unexpected)")
                    if !Self.unauthenticated.contains(column.description) {
                        #expect(detected, "\(name): no operation refused or reported it")
                    }
                    let names = try FileManager.default.contentsOfDirectory(atPath: outside.url.path)
                    #expect(Set(names) == ["sentinel.txt", copy.lastPathComponent], "\(name): \(names)")
                }
            }
        }
        #expect(try Data(contentsOf: sentinel) == Data("outside".utf8))
        #expect(edits >= (encryption == .plain ? 150 : 30), "only \(edits) edits")
    }
}
