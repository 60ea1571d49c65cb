import E3DBDocuments
public import E3DBKeys
public import E3DBPrimitives
public import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What ``EncryptedStore/export(collection:to:readerPublicKey:)`` wrote.
public struct StoreExport: Sendable, Hashable {
    /// `DIR/records.ndjson`: one `EncryptedDocument` per line, in write order.
    public let recordsFile: URL
    /// `DIR/eak.json`: the collection's access key wrapped for the reader (EAKInfo, the E3DB API's shape).
    public let eakFile: URL
    /// The number of records written.
    public let recordCount: Int
}

extension EncryptedStore {
    /// The store's Curve25519 public key: the `authorizer_public_key` of the EAKs it writes.
    public var publicKey: Box.PublicKey {
        get throws(E3DBError) { try currentKeys().boxKey.publicKey }
    }

    /// Wraps `collection`'s access key for another E3DB client (an EAKInfo whose authorizer is this store).
    /// - Parameter readerPublicKey: the reader's Curve25519 public key.
    /// - Throws: ``E3DBError/Code/collectionNotFound``, `storeLocked`.
    public func share(collection: String, with readerPublicKey: Box.PublicKey) throws(E3DBError) -> EAKInfo {
        let keys = try currentKeys()
        let access = try accessKey(for: collection, create: false)
        let eak = try EncryptedAccessKey.wrap(access.key, for: readerPublicKey, by: keys.boxKey)
        return EAKInfo(eak: eak, authorizerID: storeID, authorizerPublicKey: keys.boxKey.publicKey)
    }

    /// Writes `collection` for another E3DB client: `DIR/records.ndjson` (every record as the `EncryptedDocument`
    /// the store holds, one per line, each authenticated in its place first) and `DIR/eak.json` (the access key
    /// wrapped for the reader). Any E3DB SDK decrypts the records with the reader's private key and the EAKInfo.
    /// Both files are written to temporary names and renamed into place; existing files are not replaced.
    /// - Throws: ``E3DBError/Code/collectionNotFound``, `recordTampered` for a record that does not authenticate
    ///   (nothing is published then), `databaseError` for I/O failures.
    @discardableResult
    public func export(collection: String, to directory: URL, readerPublicKey: Box.PublicKey) throws(E3DBError)
        -> StoreExport
    {
        let info = try share(collection: collection, with: readerPublicKey)
        let status = try keyStatus(collection: collection)
        guard status.recordsUnderOlderKeys == 0 else {
            throw E3DBError(
                .invalidParameter,
                "collection \(collection) is being rotated (\(status.recordsUnderOlderKeys) records under an older key); "
                    + "finish the rotation first", context: .init(item: collection))
        }
        let recordsURL = directory.appendingPathComponent("records.ndjson")
        let eakURL = directory.appendingPathComponent("eak.json")
        for url in [recordsURL, eakURL] where FileManager.default.fileExists(atPath: url.path) {
            throw E3DBError(.storeExists, "\(url.path) exists", context: .init(item: url.lastPathComponent))
        }
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw E3DBError(.databaseError, "cannot create \(directory.path): \(error.localizedDescription)")
        }
        let writer = try ExportFile(finalURL: recordsURL)
        var count = 0
        var after: Int64?
        while true {
            let rows = try databaseCall("exporting collection \(collection)") {
                try pool.read { db in
                    try Row.fetchAll(
                        db, sql: "SELECT * FROM records WHERE collection = ? AND seq > ? ORDER BY seq LIMIT 512",
                        arguments: [collection, after ?? 0])
                }
            }
            for row in rows {
                // Authenticate the record in its place (and that it decrypts) before it leaves the store.
                _ = try decode(row, collection: collection)
                guard let bytes = row["document"] as Data? else { continue }
                try writer.append(bytes)
                try writer.append(Data([0x0A]))
                count += 1
            }
            guard let last = rows.last else { break }
            after = last["seq"]
        }
        try writer.commit()
        let eakWriter = try ExportFile(finalURL: eakURL)
        try eakWriter.append(info.jsonData())
        try eakWriter.append(Data([0x0A]))
        try eakWriter.commit()
        return StoreExport(recordsFile: recordsURL, eakFile: eakURL, recordCount: count)
    }

    /// Imports a collection shared with an E3DB client: `DIR/eak.json` (an EAKInfo for that client) and
    /// `DIR/records.ndjson` (one `EncryptedDocument` per line, as ``export(collection:to:readerPublicKey:)`` and
    /// the other SDKs write them). Every record is decrypted (and its `rec_sig` verified when present and the
    /// EAKInfo names a signing key) before anything is stored; the records keep their ciphertext and get new ids.
    /// All records are stored in one transaction.
    /// - Parameters:
    ///   - directory: the export directory.
    ///   - reader: the client the EAKInfo was written for.
    ///   - collection: the new collection's name (it must not exist).
    /// - Returns: the new records' references, in file order.
    /// - Throws: `storeExists` when the collection exists; EAK and record errors naming the line
    ///   (`context.item` `records.ndjson:N`).
    @discardableResult
    public func importCollection(from directory: URL, reader: Box.PrivateKey, as collection: String) throws(E3DBError)
        -> [RecordReference]
    {
        let keys = try currentKeys()
        let eakData = try readFile(directory.appendingPathComponent("eak.json"))
        let info = try withItem("eak.json") { () throws(E3DBError) in try EAKInfo(jsonData: eakData) }
        let accessKey = try withItem("eak.json") { () throws(E3DBError) in try info.unwrap(with: reader) }
        let recordsData = try readFile(directory.appendingPathComponent("records.ndjson"))
        var documents: [(EncryptedDocument, Data)] = []
        var lineNumber = 0
        for line in recordsData.split(separator: 0x0A, omittingEmptySubsequences: false) {
            lineNumber += 1
            var bytes = Data(line)
            if bytes.last == 0x0D { bytes.removeLast() }
            if bytes.isEmpty { continue }
            let item = "records.ndjson:\(lineNumber)"
            let document = try withItem(item) { () throws(E3DBError) in try EncryptedDocument(jsonData: bytes) }
            _ = try withItem(item) { () throws(E3DBError) in
                try document.decrypt(
                    accessKey: accessKey, verifyingKey: info.signerSigningKey,
                    verification: RecordVerification(
                        policy: info.signerSigningKey == nil ? .ignore : .verifyIfPresent, requireWriterIsSigner: false))
            }
            documents.append((document, document.jsonData()))
        }
        let wrapped = StoreKeys.wrap(accessKey.secretBoxKey, under: keys.master)
        let now = StoreTime.format(StoreTime.now())
        var references: [RecordReference] = []
        var rows: [(RecordReference, String, Data, Data, RecordData)] = []
        for (document, bytes) in documents {
            let id = UUID()
            let mac = try bindingMAC(
                keys, collection: collection, id: id, version: 1, keyVersion: 1, created: now, updated: now,
                document: bytes)
            let reference = RecordReference(id: id, version: 1)
            rows.append((reference, document.meta.type, bytes, mac, document.meta.plain))
            references.append(reference)
        }
        try databaseCall("importing collection \(collection)") {
            try pool.write { db in
                if try Bool.fetchOne(db, sql: "SELECT 1 FROM collections WHERE name = ?", arguments: [collection]) == true {
                    throw E3DBError(.storeExists, "collection \(collection) exists", context: .init(item: collection))
                }
                try db.execute(
                    sql: "INSERT INTO collections (name, key_version, created) VALUES (?, 1, ?)", arguments: [collection, now])
                try db.execute(
                    sql: "INSERT INTO collection_keys (collection, version, wrapped_key) VALUES (?, 1, ?)",
                    arguments: [collection, wrapped])
                for (reference, type, bytes, mac, plain) in rows {
                    try db.execute(
                        sql: """
                            INSERT INTO records (id, collection, type, version, key_version, created, updated, document, mac)
                            VALUES (?, ?, ?, 1, 1, ?, ?, ?, ?)
                            """,
                        arguments: [reference.id.uuidString.lowercased(), collection, type, now, now, bytes, mac])
                    try insertPlain(db, seq: db.lastInsertedRowID, plain: plain)
                }
            }
        }
        return references
    }

    func readFile(_ url: URL) throws(E3DBError) -> Data {
        do {
            return try Data(contentsOf: url)
        } catch {
            throw E3DBError(.databaseError, "cannot read \(url.path)", context: .init(item: url.lastPathComponent))
        }
    }
}

/// A file written under a temporary name beside its final one and renamed into place on `commit()`; removed
/// when not committed.
final class ExportFile {
    let finalURL: URL
    let temporaryURL: URL
    let handle: FileHandle
    var committed = false

    init(finalURL: URL) throws(E3DBError) {
        self.finalURL = finalURL
        self.temporaryURL = finalURL.deletingLastPathComponent()
            .appendingPathComponent(".\(finalURL.lastPathComponent).\(UUID().uuidString.prefix(8)).tmp")
        guard FileManager.default.createFile(atPath: temporaryURL.path, contents: nil),
            let handle = FileHandle(forWritingAtPath: temporaryURL.path)
        else {
            throw E3DBError(.databaseError, "cannot create \(temporaryURL.path)")
        }
        self.handle = handle
    }

    func append(_ data: Data) throws(E3DBError) {
        do {
            try handle.write(contentsOf: data)
        } catch {
            throw E3DBError(.databaseError, "cannot write \(finalURL.path): \(error.localizedDescription)")
        }
    }

    func commit() throws(E3DBError) {
        do {
            try handle.synchronize()
            try handle.close()
        } catch {
            throw E3DBError(.databaseError, "cannot write \(finalURL.path): \(error.localizedDescription)")
        }
        guard link(temporaryURL.path, finalURL.path) == 0 else {
            throw E3DBError(.databaseError, "cannot create \(finalURL.path) (it may exist)")
        }
        unlink(temporaryURL.path)
        committed = true
    }

    deinit {
        if !committed {
            try? handle.close()
            unlink(temporaryURL.path)
        }
    }
}
