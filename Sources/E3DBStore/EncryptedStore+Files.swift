import E3DBCanonicalJSON
public import E3DBFiles
import E3DBKeys
public import E3DBPrimitives
public import Foundation
import GRDB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// The store's file tree: writing, listing, moving and deleting files.

extension EncryptedStore {
    /// The directory of file bodies inside the store directory.
    public static let filesDirectoryName = "files"

    // MARK: Writing

    /// Encrypts everything `source` delivers as the file at `path` (constant memory): an E3DB v3 file under a
    /// fresh per-file access key (sealed under a key derived from the master key), written to an unnamed
    /// temporary file, named `files/<id>.e3f` in the transaction that commits its row (size, BLAKE2b-512 checksum,
    /// wrapped key and a binding MAC).
    /// - Parameters:
    ///   - path: the path in the virtual tree (`a/b.txt` is `/a/b.txt`).
    ///   - source: the plaintext.
    ///   - recordID: the record the file is attached to (it must exist), or nil.
    ///   - replace: replace an existing file at `path` (its old body is removed after the commit).
    /// - Throws: `fileExists` (a file or directory is at `path`, or an ancestor is a file), `recordNotFound`,
    ///   `invalidParameter` (a bad path), `fileIOFailed` (the source failed), `databaseError`.
    @discardableResult
    public func putFile(
        at path: String, from source: inout some FileByteSource, attachedTo recordID: UUID? = nil, replace: Bool = false
    ) throws(E3DBError) -> StoredFile {
        try putFile(at: path, from: &source, attachedTo: recordID, replace: replace, cancellation: nil)
    }

    /// `putFile(at:from:attachedTo:replace:)`, stopped with `cancelled` between chunks once `cancellation` is set
    /// (nothing is stored then).
    func putFile(
        at path: String, from source: inout some FileByteSource, attachedTo recordID: UUID?, replace: Bool,
        cancellation: FileCancellation?
    ) throws(E3DBError) -> StoredFile {
        let keys = try currentKeys()
        let path = try StorePath.normalize(path)
        if let recordID {
            let exists = try databaseCall("reading record \(recordID)") {
                try pool.read { db in
                    try Bool.fetchOne(
                        db, sql: "SELECT 1 FROM records WHERE id = ?", arguments: [recordID.lowercasedString])
                }
            }
            guard exists == true else {
                let item = recordID.lowercasedString
                throw E3DBError(.recordNotFound, "there is no record \(item) to attach to", context: .init(item: item))
            }
        }
        // Refuse early, before encrypting a large file for nothing (checked again in the transaction).
        try databaseCall("reading the file tree") {
            try pool.read { db in try checkFree(db, path: path, replace: replace) }
        }
        guard let bodies = try BodyDirectory(in: directory, create: true) else {
            throw E3DBError(.databaseError, "cannot create the store's \(EncryptedStore.filesDirectoryName) directory")
        }
        let id = UUID().lowercasedString
        let fileKey = AccessKey()
        var body = try StagedBody(in: bodies, id: id)
        let result = try E3DBFileCipher.encrypt(
            from: &source, to: &body, accessKey: fileKey,
            options: FileEncryptionOptions(checksums: [.ciphertextBLAKE2b512], cancellation: cancellation))
        guard let checksum = result.checksums.ciphertextBLAKE2b512 else {
            body.abort()
            throw E3DBError(.databaseError, "the file cipher returned no checksum")
        }
        let wrapped = StoreKeys.wrap(fileKey.secretBoxKey, under: try filesKey(keys))
        let now = StoreTime.format(StoreTime.now())
        var entry = FileEntry(
            id: id, path: path, recordID: recordID?.lowercasedString, size: result.plaintextSize,
            encryptedSize: result.encryptedSize, checksum: checksum, wrappedKey: wrapped, created: now, updated: now)
        var replaced: String?
        do {
            try databaseCall("storing file \(path)") {
                try pool.writeWithoutTransaction { db in
                    try db.inTransaction(.immediate) {
                        try checkFree(db, path: path, replace: replace)
                        if let old = try Row.fetchOne(
                            db, sql: "SELECT id, created FROM files WHERE path = ?", arguments: [path])
                        {
                            replaced = old["id"]
                            entry.created = old["created"] ?? now
                            try db.execute(sql: "DELETE FROM files WHERE path = ?", arguments: [path])
                        }
                        try commitState(db, keys, nil)
                        try insertFile(db, entry, keys: keys)
                        try body.publish()
                        try bodies.sync()
                        return .commit
                    }
                }
            }
        } catch {
            if body.published { bodies.remove(body.name) } else { body.abort() }
            throw error
        }
        if let replaced, let name = BodyDirectory.bodyName(replaced) { bodies.remove(name) }
        return try entry.stored()
    }

    /// Inserts a file row bound by its MAC under `keys` (inside the caller's transaction).
    func insertFile(_ db: Database, _ entry: FileEntry, keys: StoreKeys) throws {
        try db.execute(
            sql: """
                INSERT INTO files (id, path, record_id, size, encrypted_size, checksum, wrapped_key, created, updated,
                    mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                entry.id, entry.path, entry.recordID, entry.size, entry.encryptedSize, entry.checksum,
                entry.wrappedKey, entry.created, entry.updated, try fileMAC(keys, entry),
            ])
    }

    /// Stores `data` as the file at `path`; see `putFile(at:from:attachedTo:replace:)`.
    @discardableResult
    public func putFile(at path: String, data: Data, attachedTo recordID: UUID? = nil, replace: Bool = false)
        throws(E3DBError) -> StoredFile
    {
        var source = MemoryByteSource(data)
        return try putFile(at: path, from: &source, attachedTo: recordID, replace: replace)
    }

    /// Throws `fileExists` when `path` is taken (unless `replace` and it is a file), is a directory, or has a file
    /// as an ancestor.
    func checkFree(_ db: Database, path: String, replace: Bool) throws {
        if !replace, try Bool.fetchOne(db, sql: "SELECT 1 FROM files WHERE path = ?", arguments: [path]) == true {
            throw E3DBError(.fileExists, "a file exists at \(path)", context: .init(item: path))
        }
        let (low, high) = StorePath.bounds(under: path)
        if try Bool.fetchOne(
            db, sql: "SELECT 1 FROM files WHERE path >= ? AND path < ? LIMIT 1", arguments: [low, high]) == true
        {
            throw E3DBError(.fileExists, "\(path) is a directory", context: .init(item: path))
        }
        for ancestor in StorePath.ancestors(path)
        where try Bool.fetchOne(db, sql: "SELECT 1 FROM files WHERE path = ?", arguments: [ancestor]) == true {
            throw E3DBError(.fileExists, "\(ancestor) is a file, not a directory", context: .init(item: path))
        }
    }

    // MARK: Listing

    /// The file at `path`, its row authenticated.
    /// - Throws: `fileNotFound`, `fileTampered` (the row was edited).
    public func file(at path: String) throws(E3DBError) -> StoredFile {
        try fileEntry(at: path).stored()
    }

    /// `file(at:)` for async callers.
    public func file(at path: String) async throws(E3DBError) -> StoredFile {
        try await perform(fileEntryRead(at: path)).stored()
    }

    /// The files under `directory` (`/` for all), sorted by path, each row authenticated.
    public func files(under directory: String = "/") throws(E3DBError) -> [StoredFile] {
        try perform(fileList(under: directory))
    }

    /// `files(under:)` for async callers.
    public func files(under directory: String = "/") async throws(E3DBError) -> [StoredFile] {
        try await perform(fileList(under: directory))
    }

    /// The files attached to a record, sorted by path.
    public func files(attachedTo recordID: UUID) throws(E3DBError) -> [StoredFile] {
        try perform(fileList(attachedTo: recordID))
    }

    /// `files(attachedTo:)` for async callers.
    public func files(attachedTo recordID: UUID) async throws(E3DBError) -> [StoredFile] {
        try await perform(fileList(attachedTo: recordID))
    }

    /// The read of `files(under:)`.
    private func fileList(under directory: String) throws(E3DBError) -> StoreAccess<[StoredFile]> {
        let directory = try StorePath.normalizeDirectory(directory)
        let (low, high) = StorePath.bounds(under: directory)
        return try fileList(sql: "SELECT * FROM files WHERE path >= ? AND path < ? ORDER BY path", [low, high])
    }

    /// The read of `files(attachedTo:)`.
    private func fileList(attachedTo recordID: UUID) throws(E3DBError) -> StoreAccess<[StoredFile]> {
        try fileList(sql: "SELECT * FROM files WHERE record_id = ? ORDER BY path", [recordID.lowercasedString])
    }

    /// A read of the file rows `sql` selects, each authenticated.
    private func fileList(sql: String, _ arguments: [String]) throws(E3DBError) -> StoreAccess<[StoredFile]> {
        let keys = try currentKeys()
        return .read("listing files") { [self] db in
            try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).map { row in
                try decodeFile(FileRow(row), keys: keys).stored()
            }
        }
    }

    func fileEntry(at path: String) throws(E3DBError) -> FileEntry {
        try perform(fileEntryRead(at: path))
    }

    /// The read of the authenticated row at `path`: `fileNotFound` without one.
    func fileEntryRead(at path: String) throws(E3DBError) -> StoreAccess<FileEntry> {
        let keys = try currentKeys()
        let path = try StorePath.normalize(path)
        return .read("reading file \(path)") { [self] db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM files WHERE path = ?", arguments: [path]) else {
                throw E3DBError(.fileNotFound, "there is no file \(path)", context: .init(item: path))
            }
            return try decodeFile(FileRow(row), keys: keys)
        }
    }

    // MARK: Moving and deleting

    /// Moves the file at `source` to `destination`, or, when `source` is a directory, every file under it (one
    /// transaction). Each row is authenticated before it is bound to its new path; bodies do not move.
    /// - Returns: the number of files moved.
    /// - Throws: `fileNotFound`, `fileExists` (the destination is taken), `invalidParameter` (a directory into
    ///   itself), `fileTampered`.
    @discardableResult
    public func moveFile(from source: String, to destination: String) throws(E3DBError) -> Int {
        guard let write = try moving(from: source, to: destination) else { return 0 }
        return try perform(write)
    }

    /// `moveFile(from:to:)` for async callers.
    @discardableResult
    public func moveFile(from source: String, to destination: String) async throws(E3DBError) -> Int {
        guard let write = try moving(from: source, to: destination) else { return 0 }
        return try await perform(write)
    }

    /// The write transaction of `moveFile(from:to:)` (GRDB's write transactions are IMMEDIATE); nil when the source
    /// is the destination, a move of nothing that does not touch the database.
    private func moving(from source: String, to destination: String) throws(E3DBError) -> StoreAccess<Int>? {
        let keys = try currentKeys()
        let from = try StorePath.normalize(source)
        let to = try StorePath.normalize(destination)
        guard from != to else { return nil }
        guard !to.hasPrefix(from + "/") else {
            throw E3DBError(.invalidParameter, "cannot move \(from) into itself", context: .init(item: from))
        }
        return .write("moving \(from)") { [self] db in
            let (low, high) = StorePath.bounds(under: from)
            let rows = try Row.fetchAll(
                db, sql: "SELECT * FROM files WHERE path = ? OR (path >= ? AND path < ?) ORDER BY path",
                arguments: [from, low, high])
            guard !rows.isEmpty else {
                throw E3DBError(.fileNotFound, "there is no file \(from)", context: .init(item: from))
            }
            try checkFree(db, path: to, replace: false)
            let now = StoreTime.format(StoreTime.now())
            for row in rows {
                var entry = try decodeFile(FileRow(row), keys: keys)
                let old = entry.path
                entry.path = to + old.dropFirst(from.count)
                entry.updated = now
                try db.execute(
                    sql: "UPDATE files SET path = ?, updated = ?, mac = ? WHERE id = ?",
                    arguments: [entry.path, entry.updated, try fileMAC(keys, entry), entry.id])
            }
            try commitState(db, keys, nil)
            return rows.count
        }
    }

    /// Deletes the file at `path` (with `recursive`, also every file under it when it is a directory). Rows are
    /// deleted in one transaction; bodies are removed after it commits (a crash in between, or a `files` directory
    /// the store refuses, leaves orphan bodies, which `verify()` reports and `removeOrphanFiles()` removes).
    /// - Returns: the number of files deleted.
    /// - Throws: `fileNotFound`.
    @discardableResult
    public func deleteFile(at path: String, recursive: Bool = false) throws(E3DBError) -> Int {
        removeBodies(try perform(deletion(at: path, recursive: recursive)))
    }

    /// `deleteFile(at:recursive:)` for async callers: the bodies are unlinked on a thread of their own.
    @discardableResult
    public func deleteFile(at path: String, recursive: Bool = false) async throws(E3DBError) -> Int {
        let ids = try await perform(deletion(at: path, recursive: recursive))
        guard !ids.isEmpty else { return 0 }
        // The rows are gone: the unlinking runs even for a caller cancelled since (it is a few unlinks).
        return await Task { [self] () async -> Int in
            (try? await blocking(named: "e3dbkit-store-files") { [self] _ in removeBodies(ids) }) ?? ids.count
        }.value
    }

    /// The write transaction of `deleteFile(at:recursive:)`: the ids of the rows it deleted.
    private func deletion(at path: String, recursive: Bool) throws(E3DBError) -> StoreAccess<[String]> {
        let keys = try currentKeys()
        let path = try StorePath.normalize(path)
        return .write("deleting \(path)") { [self] db in
            var ids = try String.fetchAll(db, sql: "SELECT id FROM files WHERE path = ?", arguments: [path])
            if recursive {
                let (low, high) = StorePath.bounds(under: path)
                ids += try String.fetchAll(
                    db, sql: "SELECT id FROM files WHERE path >= ? AND path < ?", arguments: [low, high])
            }
            guard !ids.isEmpty else {
                throw E3DBError(.fileNotFound, "there is no file \(path)", context: .init(item: path))
            }
            for id in ids { try db.execute(sql: "DELETE FROM files WHERE id = ?", arguments: [id]) }
            try commitState(db, keys, nil)
            return ids
        }
    }

    /// Removes the bodies of the deleted rows `ids`; returns how many rows there were. Best effort: the rows are
    /// gone; a body left (files/ refused or unwritable) is an orphan verify reports.
    private func removeBodies(_ ids: [String]) -> Int {
        if let bodies = try? BodyDirectory(in: directory, create: false) {
            for name in ids.compactMap(BodyDirectory.bodyName) { bodies.remove(name) }
        }
        return ids.count
    }
}
