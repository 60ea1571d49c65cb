public import E3DBCanonicalJSON
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

extension E3DBError.Code {
    /// No file at this path in the store's file tree. `context.item` names the path.
    public static let fileNotFound = Self("fileNotFound", category: .invalidArgument)
    /// A file (or a directory of files) already exists where one was to be written or moved.
    public static let fileExists = Self("fileExists", category: .invalidArgument)
    /// A stored file does not authenticate: its row was edited, or its body (`files/<id>.e3f`) is missing, cut,
    /// edited or belongs to another row. `context.item` names the path, `context.part` the body file.
    public static let fileTampered = Self("fileTampered", category: .verification)
    /// A body in the store's `files/` directory that no file row names (left by a crash between writing it and
    /// committing its row, or after deleting a row). ``EncryptedStore/removeOrphanFiles()`` removes them.
    public static let fileBodyOrphaned = Self("fileBodyOrphaned", category: .verification)
}

/// A file of the store's encrypted file tree (an attachment when ``recordID`` is set), authenticated in its
/// place. Its contents are read with ``EncryptedStore/readFile(at:to:)``.
public struct StoredFile: Sendable, Hashable {
    /// The file's path in the virtual tree: `/` followed by `/`-separated names (NFC, no `.` or `..`).
    public let path: String
    /// The id of its current body: `files/<id>.e3f` in the store directory (a new id on every write).
    public let id: UUID
    /// The record it is attached to, if any.
    public let recordID: UUID?
    /// The plaintext size in bytes.
    public let size: Int
    /// The body's size in bytes (E3DB file format v3).
    public let encryptedSize: Int
    /// BLAKE2b-512 of the body, checked on every full read.
    public let checksum: Data
    /// When the path was first written (kept when the file is replaced).
    public let created: Date
    /// When the file last changed: written, replaced or moved.
    public let updated: Date

    /// The body's path relative to the store directory.
    public var bodyName: String { "\(EncryptedStore.filesDirectoryName)/\(id.lowercasedString).e3f" }

    /// `{"path":…,"size":…,…}` as `e3dbkit store ls` prints it.
    public var jsonValue: JSONValue {
        var object: JSONObject = [
            "path": .string(path), "id": .string(id.lowercasedString), "size": .number(Double(size)),
            "encrypted_size": .number(Double(encryptedSize)),
            "blake2b512": .string(Hex.encode(checksum)),
            "created": .string(StoreTime.format(created)), "updated": .string(StoreTime.format(updated)),
        ]
        if let recordID { object["record_id"] = .string(recordID.lowercasedString) }
        return .object(object)
    }
}

/// Paths of the virtual file tree.
enum StorePath {
    static let maxBytes = 1024

    /// `/a/b` for `a/b`, `/a//b/` or `/a/b` (NFC); `.`, `..`, control characters and empty paths are refused.
    static func normalize(_ text: String) throws(E3DBError) -> String {
        let names = text.precomposedStringWithCanonicalMapping.split(separator: "/", omittingEmptySubsequences: true)
        for name in names
        where name == "." || name == ".."
            || name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        {
            throw E3DBError(
                .invalidParameter, "a file path may not contain '.', '..' or control characters",
                context: .init(item: text))
        }
        let path = "/" + names.joined(separator: "/")
        guard !names.isEmpty else {
            throw E3DBError(
                .invalidParameter, "a file path needs at least one name (not only '/')", context: .init(item: text))
        }
        guard path.utf8.count <= maxBytes else {
            throw E3DBError(
                .invalidParameter, "a file path is at most \(maxBytes) bytes",
                context: .init(item: String(text.prefix(64))))
        }
        return path
    }

    /// `/` or a normalized directory path.
    static func normalizeDirectory(_ text: String) throws(E3DBError) -> String {
        text.split(separator: "/").isEmpty ? "/" : try normalize(text)
    }

    /// The proper ancestors of a normalized path (`/a`, `/a/b` for `/a/b/c`).
    static func ancestors(_ path: String) -> [String] {
        let names = path.split(separator: "/")
        return (1..<max(1, names.count)).map { "/" + names.prefix($0).joined(separator: "/") }
    }

    /// SQL bounds of the paths under a directory: `dir/` <= path < `dir0` ('0' follows '/').
    static func bounds(under directory: String) -> (String, String) {
        directory == "/" ? ("/", "0") : (directory + "/", directory + "0")
    }
}

/// The columns of a `files` row, read without trusting them.
struct FileRow: Sendable {
    let id: String?
    let path: String?
    let recordID: String?
    let size: Int64?
    let encryptedSize: Int64?
    let checksum: Data?
    let wrappedKey: Data?
    let created: String?
    let updated: String?
    let mac: Data?

    init(_ row: Row) {
        id = row["id"]
        path = row["path"]
        recordID = row["record_id"]
        size = row["size"]
        encryptedSize = row["encrypted_size"]
        checksum = row["checksum"]
        wrappedKey = row["wrapped_key"]
        created = row["created"]
        updated = row["updated"]
        mac = row["mac"]
    }
}

/// A body being written: the file cipher's `finish()` only marks it complete; ``publish()`` names it (inside the
/// write transaction of its row), so a body without a committed row exists only after a crash at that moment.
final class StagedBody: FileByteSink {
    let sink: AtomicFileSink
    private(set) var complete = false
    private(set) var published = false

    init(path: String) throws(E3DBError) {
        do {
            sink = try AtomicFileSink(path: path)
        } catch {
            throw E3DBError(.databaseError, "cannot create a file body in the store: \(error)")
        }
    }

    func write(_ bytes: RawSpan) throws { try sink.write(bytes) }
    func finish() throws { complete = true }
    func abort() { sink.abort() }

    func publish() throws(E3DBError) {
        guard complete else { throw E3DBError(.databaseError, "a file body was published before it was complete") }
        do {
            try sink.finish()
        } catch {
            throw E3DBError(.databaseError, "cannot write a file body: \(error)")
        }
        published = true
    }
}

extension EncryptedStore {
    /// The directory of file bodies inside the store directory.
    public static let filesDirectoryName = "files"

    var filesDirectory: URL { directory.appendingPathComponent(EncryptedStore.filesDirectoryName, isDirectory: true) }

    func bodyURL(_ id: String) -> URL { filesDirectory.appendingPathComponent("\(id).e3f") }

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
        do {
            try FileManager.default.createDirectory(at: filesDirectory, withIntermediateDirectories: true)
        } catch {
            throw E3DBError(.databaseError, "cannot create \(filesDirectory.path): \(error.localizedDescription)")
        }
        let id = UUID().lowercasedString
        let fileKey = AccessKey()
        var body = try StagedBody(path: bodyURL(id).path)
        let result = try E3DBFileCipher.encrypt(
            from: &source, to: &body, accessKey: fileKey,
            options: FileEncryptionOptions(checksums: [.ciphertextBLAKE2b512]))
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
                        let mac = try fileMAC(keys, entry)
                        try db.execute(
                            sql: """
                                INSERT INTO files (id, path, record_id, size, encrypted_size, checksum, wrapped_key, created,
                                    updated, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                                """,
                            arguments: [
                                entry.id, entry.path, entry.recordID, entry.size, entry.encryptedSize, entry.checksum,
                                entry.wrappedKey, entry.created, entry.updated, mac,
                            ])
                        try body.publish()
                        try syncDirectory(filesDirectory)
                        return .commit
                    }
                }
            }
        } catch {
            if body.published { _ = unsafe unlink(bodyURL(id).path) } else { body.abort() }
            throw error
        }
        if let replaced { _ = unsafe unlink(bodyURL(replaced).path) }
        return try entry.stored()
    }

    /// Stores `data` as the file at `path`; see ``putFile(at:from:attachedTo:replace:)``.
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

    /// The files under `directory` (`/` for all), sorted by path, each row authenticated.
    public func files(under directory: String = "/") throws(E3DBError) -> [StoredFile] {
        let directory = try StorePath.normalizeDirectory(directory)
        let (low, high) = StorePath.bounds(under: directory)
        return try fileEntries(sql: "SELECT * FROM files WHERE path >= ? AND path < ? ORDER BY path", [low, high])
    }

    /// The files attached to a record, sorted by path.
    public func files(attachedTo recordID: UUID) throws(E3DBError) -> [StoredFile] {
        try fileEntries(sql: "SELECT * FROM files WHERE record_id = ? ORDER BY path", [recordID.lowercasedString])
    }

    func fileEntries(sql: String, _ arguments: [String]) throws(E3DBError) -> [StoredFile] {
        let keys = try currentKeys()
        let rows = try databaseCall("listing files") {
            try pool.read { db in try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)) }
        }
        var files: [StoredFile] = []
        for row in rows { files.append(try decodeFile(FileRow(row), keys: keys).stored()) }
        return files
    }

    func fileEntry(at path: String) throws(E3DBError) -> FileEntry {
        let keys = try currentKeys()
        let path = try StorePath.normalize(path)
        let row = try databaseCall("reading file \(path)") {
            try pool.read { db in try Row.fetchOne(db, sql: "SELECT * FROM files WHERE path = ?", arguments: [path]) }
        }
        guard let row else { throw E3DBError(.fileNotFound, "there is no file \(path)", context: .init(item: path)) }
        return try decodeFile(FileRow(row), keys: keys)
    }

    // MARK: Reading

    /// Decrypts the whole file at `path` into `sink`, in constant memory. Every chunk is authenticated before it
    /// reaches the sink; the sink is finished only after the last chunk, the body's size and its BLAKE2b-512
    /// checksum match the row, and aborted on any failure, also one before decryption starts (a caller streaming
    /// elsewhere must discard what it got when
    /// this throws).
    /// - Throws: `fileNotFound`; `fileTampered` naming the path and body (row edited; body missing, cut, edited or
    ///   swapped); `fileIOFailed` when the sink fails.
    @discardableResult
    public func readFile<S: FileByteSink>(at path: String, to sink: inout S) throws(E3DBError) -> StoredFile {
        let (entry, fd, key) = try openForReading(path, abort: &sink)
        defer { _ = close(fd) }
        var source = FileDescriptorSource(fileDescriptor: fd)
        let options = FileDecryptionOptions(
            expectedChecksum: .ciphertextBLAKE2b512(entry.checksum), expectedEncryptedSize: entry.encryptedSize)
        _ = try entry.naming { () throws(E3DBError) in
            try E3DBFileCipher.decrypt(from: &source, to: &sink, accessKey: key, options: options)
        }
        return try entry.stored()
    }

    /// The whole file at `path`, in memory; see ``readFile(at:to:)``.
    public func readFile(at path: String) throws(E3DBError) -> Data {
        var sink = MemoryByteSink()
        try readFile(at: path, to: &sink)
        return sink.committed ?? Data()
    }

    /// Decrypts plaintext bytes `range` (both ends included) of the file at `path` into `sink`, reading only the
    /// chunks that hold them (E3DBFiles' range reads). Each chunk is authenticated under the file's own key, so
    /// bytes from another body never come out; damage outside the range is found by a full read or `verify()`.
    /// - Throws: as ``readFile(at:to:)``, and `rangeNotSatisfiable` (naming the path).
    public func readFile<S: FileByteSink>(at path: String, range: ClosedRange<Int>, to sink: inout S) throws(E3DBError)
    {
        let (entry, fd, key) = try openForReading(path, abort: &sink)
        defer { _ = close(fd) }
        let source: FileDescriptorRandomAccessSource
        do throws(E3DBError) {
            source = try entry.naming { () throws(E3DBError) in try FileDescriptorRandomAccessSource(fileDescriptor: fd)
            }
        } catch {
            sink.abort()
            throw error
        }
        _ = try entry.naming { () throws(E3DBError) in
            try E3DBFileCipher.decryptRange(range, from: source, to: &sink, accessKey: key)
        }
    }

    /// Plaintext bytes `range` of the file at `path`, in memory; see ``readFile(at:range:to:)``.
    public func readFile(at path: String, range: ClosedRange<Int>) throws(E3DBError) -> Data {
        var sink = MemoryByteSink()
        try readFile(at: path, range: range, to: &sink)
        return sink.committed ?? Data()
    }

    /// The row, open body and key of the file at `path`; on failure `sink` is aborted, so a read always either
    /// finishes or aborts its sink.
    func openForReading<S: FileByteSink>(_ path: String, abort sink: inout S) throws(E3DBError) -> (
        FileEntry, Int32, AccessKey
    ) {
        do throws(E3DBError) {
            let (entry, fd) = try openCurrentBody(path)
            do throws(E3DBError) {
                return (entry, fd, try entry.accessKey(try filesKey(try currentKeys())))
            } catch {
                _ = close(fd)
                throw error
            }
        } catch {
            sink.abort()
            throw error
        }
    }

    /// The authenticated row at `path` and its open body. A body removed between reading the row and opening it
    /// (another writer replaced or deleted the file) is looked up again, so only a body missing from the current
    /// row is `fileTampered`.
    func openCurrentBody(_ path: String) throws(E3DBError) -> (FileEntry, Int32) {
        var entry = try fileEntry(at: path)
        for _ in 0..<3 {
            do {
                return (entry, try openBody(entry))
            } catch {
                let current = try fileEntry(at: path)
                guard current.id != entry.id else { throw error }
                entry = current
            }
        }
        return (entry, try openBody(entry))
    }

    /// Opens the body of `entry` and checks its size against the row.
    func openBody(_ entry: FileEntry) throws(E3DBError) -> Int32 {
        let fd = openReadOnly(bodyURL(entry.id).path)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { throw entry.tampered("its body is missing") }
            throw E3DBError(
                .databaseError, unsafe "cannot open the body of \(entry.path): \(String(cString: strerror(code)))",
                context: .init(part: entry.bodyName, item: entry.path))
        }
        var info = stat()
        guard unsafe fstat(fd, &info) == 0, Int(info.st_size) == entry.encryptedSize else {
            _ = close(fd)
            throw entry.tampered("its body is not \(entry.encryptedSize) bytes long")
        }
        return fd
    }

    // MARK: Moving and deleting

    /// Moves the file at `source` to `destination`, or, when `source` is a directory, every file under it (one
    /// transaction). Each row is authenticated before it is bound to its new path; bodies do not move.
    /// - Returns: the number of files moved.
    /// - Throws: `fileNotFound`, `fileExists` (the destination is taken), `invalidParameter` (a directory into
    ///   itself), `fileTampered`.
    @discardableResult
    public func moveFile(from source: String, to destination: String) throws(E3DBError) -> Int {
        let keys = try currentKeys()
        let from = try StorePath.normalize(source)
        let to = try StorePath.normalize(destination)
        guard from != to else { return 0 }
        guard !to.hasPrefix(from + "/") else {
            throw E3DBError(.invalidParameter, "cannot move \(from) into itself", context: .init(item: from))
        }
        return try databaseCall("moving \(from)") {
            try pool.writeWithoutTransaction { db in
                var moved = 0
                try db.inTransaction(.immediate) {
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
                        moved += 1
                    }
                    return .commit
                }
                return moved
            }
        }
    }

    /// Deletes the file at `path` (with `recursive`, also every file under it when it is a directory). Rows are
    /// deleted in one transaction; bodies are removed after it commits (a crash in between leaves orphan bodies,
    /// which `verify()` reports and ``removeOrphanFiles()`` removes).
    /// - Returns: the number of files deleted.
    /// - Throws: `fileNotFound`.
    @discardableResult
    public func deleteFile(at path: String, recursive: Bool = false) throws(E3DBError) -> Int {
        _ = try currentKeys()
        let path = try StorePath.normalize(path)
        let ids = try databaseCall("deleting \(path)") {
            try pool.write { db in
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
                return ids
            }
        }
        for id in ids { _ = unsafe unlink(bodyURL(id).path) }
        return ids.count
    }

    // MARK: Verification

    /// Authenticates every file row and decrypts every body in full (size, chunks, checksum), then looks for
    /// orphan bodies; one error per problem, naming the path (or the orphan body).
    func verifyFiles() throws(E3DBError) -> (checked: Int, problems: [E3DBError]) {
        let keys = try currentKeys()
        var checked = 0
        var problems: [E3DBError] = []
        var after: Int64 = 0
        while true {
            let rows = try databaseCall("verifying files") {
                try pool.read { db in
                    try Row.fetchAll(
                        db, sql: "SELECT rowid AS seq, * FROM files WHERE rowid > ? ORDER BY rowid LIMIT 256",
                        arguments: [after])
                }
            }
            for row in rows {
                checked += 1
                do {
                    let entry = try decodeFile(FileRow(row), keys: keys)
                    var discard = DiscardingByteSink()
                    try readFile(at: entry.path, to: &discard)
                } catch {
                    problems.append(error)
                }
            }
            guard let last = rows.last else { break }
            after = last["seq"]
        }
        for name in try orphanBodies() {
            problems.append(
                E3DBError(
                    .fileBodyOrphaned, "\(EncryptedStore.filesDirectoryName)/\(name) is a body no file row names",
                    context: .init(item: "\(EncryptedStore.filesDirectoryName)/\(name)")))
        }
        return (checked, problems)
    }

    /// Removes the bodies no file row names (what a crash between naming a body and committing its row, or
    /// between deleting a row and its body, leaves). Runs under the database's write lock, so a body being
    /// committed by another writer of this store is never taken for an orphan.
    /// - Returns: the names removed (`files/<id>.e3f`).
    @discardableResult
    public func removeOrphanFiles() throws(E3DBError) -> [String] {
        _ = try currentKeys()
        return try orphanBodies(remove: true).map { "\(EncryptedStore.filesDirectoryName)/\($0)" }
    }

    /// Names in `files/` that are not the body of a row (temporary files of writers in progress, named
    /// `.e3dbkit-*.tmp` where the system lacks unnamed temporary files, are left alone). Listed under the write
    /// lock: a writer names its body inside its row's transaction.
    func orphanBodies(remove: Bool = false) throws(E3DBError) -> [String] {
        try databaseCall("looking for orphan file bodies") {
            try pool.writeWithoutTransaction { db in
                var orphans: [String] = []
                try db.inTransaction(.immediate) {
                    let known = Set(try String.fetchAll(db, sql: "SELECT id FROM files").map { "\($0).e3f" })
                    let names = (try? FileManager.default.contentsOfDirectory(atPath: filesDirectory.path)) ?? []
                    for name in names.sorted() where !known.contains(name) && !name.hasPrefix(".e3dbkit-") {
                        if remove { _ = unsafe unlink(filesDirectory.appendingPathComponent(name).path) }
                        orphans.append(name)
                    }
                    return .commit
                }
                return orphans
            }
        }
    }

    // MARK: Keys and binding

    /// The key that seals each file's access key.
    func filesKey(_ keys: StoreKeys) throws(E3DBError) -> SecretBox.Key {
        try SecretBox.Key(StoreKeys.derive(from: keys.master, label: "files"))
    }

    /// Keyed BLAKE2b-256 over the file's place (store, body id, path, record, sizes, times), its checksum and its
    /// wrapped key.
    func fileMAC(_ keys: StoreKeys, _ entry: FileEntry) throws(E3DBError) -> Data {
        let place: JSONValue = .array([
            .string("E3DBStore file v1"), .string(storeID.lowercasedString), .string(entry.id),
            .string(entry.path), .string(entry.recordID ?? ""), .number(Double(entry.size)),
            .number(Double(entry.encryptedSize)), .string(entry.created), .string(entry.updated),
        ])
        var hasher = try BLAKE2b(
            outputByteCount: 32, key: try StoreKeys.derive(from: keys.master, label: "file-binding"))
        hasher.update(data: CanonicalJSON.serializedBytes(place))
        hasher.update(data: [0x0A])
        hasher.update(data: entry.checksum)
        hasher.update(data: entry.wrappedKey)
        return hasher.finalize()
    }

    /// Checks a row's form and its MAC.
    func decodeFile(_ row: FileRow, keys: StoreKeys) throws(E3DBError) -> FileEntry {
        let item = row.path ?? row.id ?? "?"
        guard let id = row.id, UUID(lowercasedString: id) != nil, let path = row.path,
            let size = row.size, let encryptedSize = row.encryptedSize, size >= 0, encryptedSize >= 0,
            let checksum = row.checksum, checksum.count == 64, let wrapped = row.wrappedKey, let created = row.created,
            let updated = row.updated, let mac = row.mac
        else {
            throw E3DBError(.fileTampered, "the row of file \(item) is damaged", context: .init(item: item))
        }
        let entry = FileEntry(
            id: id, path: path, recordID: row.recordID, size: Int(size), encryptedSize: Int(encryptedSize),
            checksum: checksum, wrappedKey: wrapped, created: created, updated: updated)
        guard ConstantTime.equals(try fileMAC(keys, entry), mac) else {
            throw E3DBError(
                .fileTampered, "the row of file \(path) does not authenticate (edited or moved)",
                context: .init(part: entry.bodyName, item: path))
        }
        return entry
    }
}

/// A file row's values (authenticated once decoded).
struct FileEntry {
    var id: String
    var path: String
    var recordID: String?
    var size: Int
    var encryptedSize: Int
    var checksum: Data
    var wrappedKey: Data
    var created: String
    var updated: String

    var bodyName: String { "\(EncryptedStore.filesDirectoryName)/\(id).e3f" }

    func stored() throws(E3DBError) -> StoredFile {
        guard let uuid = UUID(uuidString: id), let createdDate = StoreTime.parse(created),
            let updatedDate = StoreTime.parse(updated)
        else {
            throw E3DBError(
                .fileTampered, "the row of file \(path) is damaged", context: .init(part: bodyName, item: path))
        }
        var record: UUID?
        if let recordID {
            guard let parsed = UUID(uuidString: recordID) else {
                throw E3DBError(
                    .fileTampered, "the row of file \(path) names no valid record", context: .init(item: path))
            }
            record = parsed
        }
        return StoredFile(
            path: path, id: uuid, recordID: record, size: size, encryptedSize: encryptedSize, checksum: checksum,
            created: createdDate, updated: updatedDate)
    }

    /// The file's own access key, unsealed from the row.
    func accessKey(_ filesKey: SecretBox.Key) throws(E3DBError) -> AccessKey {
        AccessKey(try StoreKeys.unwrap(wrappedKey, under: filesKey, failure: tampered("its key does not open")))
    }

    func tampered(_ why: String) -> E3DBError {
        E3DBError(.fileTampered, "file \(path) (\(bodyName)): \(why)", context: .init(part: bodyName, item: path))
    }

    /// Runs a file-layer call on this file's body: verification and format errors become `fileTampered`, others
    /// keep their code; all name the path and body.
    func naming<T>(_ body: () throws(E3DBError) -> T) throws(E3DBError) -> T {
        do {
            return try body()
        } catch {
            var context = error.context
            context.item = path
            context.part = bodyName
            switch error.code.category {
            case .verification, .malformedInput:
                throw E3DBError(
                    .fileTampered,
                    "file \(path) (\(bodyName)) does not authenticate: \(error.code.rawValue): \(error.message)",
                    context: context)
            default:
                throw E3DBError(error.code, "file \(path): \(error.message)", context: context)
            }
        }
    }
}

/// `open(path, O_RDONLY | O_CLOEXEC)` (a free function: inside the store, `open` names its static opener).
func openReadOnly(_ path: String) -> Int32 { unsafe open(path, O_RDONLY | O_CLOEXEC) }

/// Flushes a directory's entries (a rename in it) to disk.
func syncDirectory(_ url: URL) throws(E3DBError) {
    let fd = openReadOnly(url.path)
    guard fd >= 0 else {
        throw E3DBError(.databaseError, unsafe "cannot open \(url.path): \(String(cString: strerror(errno)))")
    }
    defer { _ = close(fd) }
    guard fsync(fd) == 0 else {
        throw E3DBError(.databaseError, unsafe "cannot sync \(url.path): \(String(cString: strerror(errno)))")
    }
}
