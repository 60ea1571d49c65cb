import E3DBCanonicalJSON
import E3DBDocuments
import E3DBFiles
public import E3DBKeys
public import E3DBPrimitives
import E3DBRows
public import Foundation
import GRDB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What `EncryptedStore.export(collection:to:readerPublicKey:)` wrote.
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

    /// Wraps `collection`'s current access key, as the database holds it now, for another E3DB client (an EAKInfo
    /// whose authorizer is this store).
    /// - Parameters:
    ///   - collection: the collection to share.
    ///   - readerPublicKey: the reader's Curve25519 public key.
    /// - Throws: `E3DBError.Code.collectionNotFound`, `storeLocked`.
    public func share(collection: String, with readerPublicKey: Box.PublicKey) throws(E3DBError) -> EAKInfo {
        try sharedKey(collection, with: readerPublicKey).info
    }

    /// `share(collection:with:)` for async callers.
    public func share(collection: String, with readerPublicKey: Box.PublicKey) async throws(E3DBError) -> EAKInfo {
        try await run(sharing(collection, with: readerPublicKey)).info
    }

    /// `collection`'s current access key wrapped for the reader, and its version.
    private func sharedKey(_ collection: String, with readerPublicKey: Box.PublicKey) throws(E3DBError) -> (
        info: EAKInfo, version: Int
    ) {
        try run(sharing(collection, with: readerPublicKey))
    }

    /// The procedure of `sharedKey`. The keys kept in memory are forgotten first and read again: another
    /// connection may have rotated the collection since, and deleted the kept key, which no record is under any
    /// more.
    private func sharing(_ collection: String, with readerPublicKey: Box.PublicKey) throws(E3DBError) -> SharedKeyRead {
        let keys = try currentKeys()
        invalidateKeys(collection)
        return SharedKeyRead(
            read: CollectionKeysRead(store: self, collection: collection, create: false), keys: keys,
            reader: readerPublicKey, storeID: storeID)
    }

    /// A collection's keys read (`CollectionKeysRead`), its current one wrapped for a reader.
    struct SharedKeyRead: StoreProcedure {
        let read: CollectionKeysRead
        let keys: StoreKeys
        let reader: Box.PublicKey
        let storeID: UUID

        func step(
            _ answer: CollectionKeysRead.Answer?
        ) throws(E3DBError) -> StoreStep<CollectionKeysRead.Answer, (info: EAKInfo, version: Int)> {
            switch try read.step(answer) {
            case .access(let access):
                return .access(access)
            case .done(let collectionKeys):
                let access = collectionKeys.currentKey
                let eak = try EncryptedAccessKey.wrap(access.key, for: reader, by: keys.boxKey)
                let info = EAKInfo(eak: eak, authorizerID: storeID, authorizerPublicKey: keys.boxKey.publicKey)
                return .done((info, access.version))
            }
        }
    }

    /// Writes `collection` for another E3DB client: `DIR/records.ndjson` (every record as the `EncryptedDocument`
    /// the store holds, one per line, each authenticated in its place first) and `DIR/eak.json` (the access key
    /// wrapped for the reader). Any E3DB SDK decrypts the records with the reader's private key and the EAKInfo.
    /// Both files appear only when complete, `eak.json` first (a reader that sees `records.ndjson` finds its key), each
    /// linked under a name nothing has: the call refuses to start when either exists, and an export to the same
    /// directory that published meanwhile keeps its files (this one fails with `storeExists`). When the records cannot
    /// be published, this export's `eak.json` is removed again, unless a `records.ndjson` is there. A crash between
    /// the two files leaves `eak.json` alone, which refuses later exports to the directory until it is removed.
    /// The key is the collection's current one, read from the database, and every page of records is read in a
    /// transaction that checks it is still current and every record is under it.
    /// - Throws: `E3DBError.Code.collectionNotFound`, `recordTampered` for a record that does not authenticate,
    ///   `invalidParameter` while the collection is being rotated, `versionConflict` when it is rotated during the
    ///   export (nothing is published then), `storeExists` when either file exists, `databaseError` for I/O failures.
    @discardableResult
    public func export(collection: String, to directory: URL, readerPublicKey: Box.PublicKey) throws(E3DBError)
        -> StoreExport
    {
        try export(collection: collection, to: directory, readerPublicKey: readerPublicKey, cancellation: nil)
    }

    /// `export(collection:to:readerPublicKey:)`, stopped with `cancelled` before each page of records once
    /// `cancellation` is set (the async form's): nothing is published then.
    func export(
        collection: String, to directory: URL, readerPublicKey: Box.PublicKey, cancellation: FileCancellation?
    ) throws(E3DBError) -> StoreExport {
        let (info, keyVersion) = try sharedKey(collection, with: readerPublicKey)
        let status = try keyStatus(collection: collection)
        guard status.keyVersion == keyVersion else { throw rotatedDuringExport(collection) }
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
            try EncryptedStore.stopIfCancelled(cancellation, "the export of \(collection)")
            let rows = try databaseCall("exporting collection \(collection)") {
                try pool.read { db -> [Row] in
                    // The page and the key version in one read transaction.
                    guard try keyIsCurrent(db, collection: collection, version: keyVersion) else {
                        throw rotatedDuringExport(collection)
                    }
                    return try Row.fetchAll(
                        db, sql: "SELECT * FROM records WHERE collection = ? AND seq > ? ORDER BY seq LIMIT 512",
                        arguments: [collection, after ?? 0])
                }
            }
            for row in rows {
                // Authenticate the record in its place (and that it decrypts) before it leaves the store.
                _ = try decode(row, collection: collection)
                let stored = UntrustedRow(store: row, table: "records")
                // Only records under the key in eak.json (the version is bound by the record's MAC).
                guard try stored.value("key_version", as: Int.self) == keyVersion else {
                    throw rotatedDuringExport(collection)
                }
                let bytes = try stored.value("document", as: Data.self)
                try writer.append(bytes)
                try writer.append(Data([0x0A]))
                count += 1
            }
            guard let last = rows.last else { break }
            after = try UntrustedRow(store: last, table: "records").value("seq", as: Int64.self)
            testHook(.afterExportPage)
        }
        // The key first: whoever sees records.ndjson finds eak.json beside it. Each file is linked under a name
        // nothing has (an export that published meanwhile keeps its files).
        let eakWriter = try ExportFile(finalURL: eakURL)
        try eakWriter.append(info.jsonData())
        try eakWriter.append(Data([0x0A]))
        do {
            try eakWriter.commit()
        } catch {
            // eak.json goes if it got its name (its directory sync failed), so that the export can be run again.
            eakWriter.unpublish()
            throw error
        }
        testHook(.betweenExportFiles)
        do {
            try writer.commit()
        } catch {
            // Our eak.json goes unless our records.ndjson got its name (only its directory sync failed): then the two
            // belong together. Another records.ndjson there (the link refused) never keeps our key beside it.
            if !writer.isPublished { eakWriter.unpublish() }
            throw error
        }
        return StoreExport(recordsFile: recordsURL, eakFile: eakURL, recordCount: count)
    }

    private func rotatedDuringExport(_ collection: String) -> E3DBError {
        E3DBError(
            .versionConflict,
            "the key of collection \(collection) was rotated during the export; nothing was published: export again",
            context: .init(item: collection))
    }

    /// Imports a collection shared with an E3DB client: `DIR/eak.json` (an EAKInfo for that client) and
    /// `DIR/records.ndjson` (one `EncryptedDocument` per line, as `export(collection:to:readerPublicKey:)` and
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
        var documents: [(EncryptedDocument, Data, RecordData)] = []
        var lineNumber = 0
        for line in recordsData.split(separator: 0x0A, omittingEmptySubsequences: false) {
            lineNumber += 1
            var bytes = Data(line)
            if bytes.last == 0x0D { bytes.removeLast() }
            if bytes.isEmpty { continue }
            let item = "records.ndjson:\(lineNumber)"
            let document = try withItem(item) { () throws(E3DBError) in try EncryptedDocument(jsonData: bytes) }
            let plaintext = try withItem(item) { () throws(E3DBError) in
                try document.decrypt(
                    accessKey: accessKey, verifyingKey: info.signerSigningKey,
                    verification: RecordVerification(
                        policy: info.signerSigningKey == nil ? .ignore : .verifyIfPresent, requireWriterIsSigner: false)
                )
            }
            documents.append((document, document.jsonData(), plaintext.data))
        }
        let wrapped = StoreKeys.wrap(accessKey.secretBoxKey, under: keys.master)
        let now = StoreTime.format(StoreTime.now())
        var rows: [NewRecordRow] = []
        for (document, bytes, data) in documents {
            let id = UUID()
            let mac = try bindingMAC(
                keys, collection: collection, id: id, version: 1, keyVersion: 1, created: now, updated: now,
                document: bytes)
            rows.append(
                NewRecordRow(
                    reference: RecordReference(id: id, version: 1), type: document.meta.type, keyVersion: 1, time: now,
                    document: bytes, mac: mac, plain: document.meta.plain, data: data))
        }
        try databaseCall("importing collection \(collection)") {
            try pool.write { db in
                if try Bool.fetchOne(db, sql: "SELECT 1 FROM collections WHERE name = ?", arguments: [collection])
                    == true
                {
                    throw E3DBError(.storeExists, "collection \(collection) exists", context: .init(item: collection))
                }
                try db.execute(
                    sql: "INSERT INTO collections (name, key_version, created) VALUES (?, 1, ?)",
                    arguments: [collection, now])
                try db.execute(
                    sql: "INSERT INTO collection_keys (collection, version, wrapped_key) VALUES (?, 1, ?)",
                    arguments: [collection, wrapped])
                // A new collection has no blind indexes yet.
                try writingRecords(db, keys, collection: collection, creating: true) { state in
                    for row in rows { try insertRecord(db, row, collection: collection, indexes: [], state: &state) }
                }
            }
        }
        return rows.map(\.reference)
    }

    func readFile(_ url: URL) throws(E3DBError) -> Data {
        do {
            return try Data(contentsOf: url)
        } catch {
            throw E3DBError(.databaseError, "cannot read \(url.path)", context: .init(item: url.lastPathComponent))
        }
    }
}

/// One of the two files of an export: written under no name (or a temporary one), published with `link(2)` under a
/// name nothing has (`AtomicFile.Publication.createNew`), so that an export never replaces a file, not even another
/// export's published meanwhile.
final class ExportFile {
    let finalURL: URL
    private let file: AtomicFile
    /// The file being written (its inode keeps it through the link), to tell it from another export's.
    private let identity: StoreFileSystem.Identity?

    init(finalURL: URL) throws(E3DBError) {
        self.finalURL = finalURL
        do throws(FileIOError) {
            file = try AtomicFile(path: finalURL.path, publication: .createNew)
        } catch {
            throw E3DBError(.databaseError, "cannot create \(finalURL.path): \(error)", cause: error)
        }
        identity = StoreFileSystem.identity(descriptor: file.descriptor)
    }

    func append(_ data: Data) throws(E3DBError) {
        do throws(FileIOError) {
            try file.write(contentsOf: data)
        } catch {
            throw E3DBError(.databaseError, "cannot write \(finalURL.path): \(error)", cause: error)
        }
    }

    /// Publishes the file.
    /// - Throws: `storeExists` when something has its name (nothing is replaced), `databaseError` otherwise
    ///   (`isPublished` says whether the file got its name before the failure: a failed directory sync).
    func commit() throws(E3DBError) {
        do throws(FileIOError) {
            try file.commit()
        } catch {
            if error.errno == EEXIST, !isPublished {
                throw E3DBError(
                    .storeExists, "\(finalURL.path) exists (another export?); nothing was replaced",
                    context: .init(item: finalURL.lastPathComponent), cause: error)
            }
            throw E3DBError(.databaseError, "cannot write \(finalURL.path): \(error)", cause: error)
        }
    }

    /// Whether the file at `finalURL` is this one.
    var isPublished: Bool { identity != nil && StoreFileSystem.identity(of: finalURL) == identity }

    /// Removes the published file, if the name is still this file's.
    func unpublish() {
        if isPublished { try? FileManager.default.removeItem(at: finalURL) }
    }
}
