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

// Reading file bodies, checking them against their rows, and the keys that bind the two.

extension EncryptedStore {
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
        try readFile(at: path, to: &sink, in: nil)
    }

    /// `readFile(at:to:)` with `files/` already open (nil: opened for this read), stopped with `cancelled` (the
    /// sink aborted) between chunks once `cancellation` is set.
    @discardableResult
    func readFile<S: FileByteSink>(
        at path: String, to sink: inout S, in bodies: BodyDirectory?, cancellation: FileCancellation? = nil
    ) throws(E3DBError) -> StoredFile {
        let (entry, fd, key) = try openForReading(path, abort: &sink, in: bodies)
        defer { _ = close(fd) }
        var source = FileDescriptorSource(fileDescriptor: fd)
        let options = FileDecryptionOptions(
            expectedChecksum: .ciphertextBLAKE2b512(entry.checksum), expectedEncryptedSize: entry.encryptedSize,
            cancellation: cancellation)
        _ = try entry.naming { () throws(E3DBError) in
            try E3DBFileCipher.decrypt(from: &source, to: &sink, accessKey: key, options: options)
        }
        return try entry.stored()
    }

    /// The whole file at `path`, in memory; see `readFile(at:to:)`.
    public func readFile(at path: String) throws(E3DBError) -> Data {
        var sink = MemoryByteSink()
        try readFile(at: path, to: &sink)
        return sink.committed ?? Data()
    }

    /// Decrypts plaintext bytes `range` (both ends included) of the file at `path` into `sink`, reading only the
    /// chunks that hold them (E3DBFiles' range reads). Each chunk is authenticated under the file's own key, so
    /// bytes from another body never come out; damage outside the range is found by a full read or `verify()`.
    /// - Throws: as `readFile(at:to:)`, and `rangeNotSatisfiable` (naming the path).
    public func readFile<S: FileByteSink>(at path: String, range: ClosedRange<Int>, to sink: inout S) throws(E3DBError)
    {
        let (entry, fd, key) = try openForReading(path, abort: &sink, in: nil)
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

    /// Plaintext bytes `range` of the file at `path`, in memory; see `readFile(at:range:to:)`.
    public func readFile(at path: String, range: ClosedRange<Int>) throws(E3DBError) -> Data {
        var sink = MemoryByteSink()
        try readFile(at: path, range: range, to: &sink)
        return sink.committed ?? Data()
    }

    /// The row, open body and key of the file at `path`; on failure `sink` is aborted, so a read always either
    /// finishes or aborts its sink.
    func openForReading<S: FileByteSink>(_ path: String, abort sink: inout S, in bodies: BodyDirectory?)
        throws(E3DBError) -> (FileEntry, Int32, AccessKey)
    {
        do throws(E3DBError) {
            let (entry, fd) = try openCurrentBody(path, in: bodies)
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
    /// row is `fileTampered`. `files/` is opened once the row is found, unless `given` (already open).
    func openCurrentBody(_ path: String, in given: BodyDirectory?) throws(E3DBError) -> (FileEntry, Int32) {
        var entry = try fileEntry(at: path)
        let bodies: BodyDirectory?
        if let given { bodies = given } else { bodies = try BodyDirectory(in: directory, create: false) }
        for _ in 0..<3 {
            do {
                return (entry, try openBody(entry, in: bodies))
            } catch {
                let current = try fileEntry(at: path)
                guard current.id != entry.id else { throw error }
                entry = current
            }
        }
        return (entry, try openBody(entry, in: bodies))
    }

    /// Opens the body of `entry` in `bodies` (nil: the store has no `files/`) and checks its size against the row:
    /// a regular file only, never through a link and never waiting (a FIFO).
    func openBody(_ entry: FileEntry, in bodies: BodyDirectory?) throws(E3DBError) -> Int32 {
        guard let bodies, let name = BodyDirectory.bodyName(entry.id) else {
            throw entry.tampered("its body is missing")
        }
        let fd: Int32
        switch bodies.openBody(name) {
        case .success(let opened): fd = opened
        case .failure(.missing): throw entry.tampered("its body is missing")
        case .failure(.notRegular(let what)): throw entry.tampered("its body is \(what), not a regular file")
        case .failure(.system(let code)):
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

    // MARK: Verification

    /// Authenticates every file row and decrypts every body in full (size, chunks, checksum), then looks for
    /// orphan bodies; one error per problem, naming the path (or the orphan body).
    /// When the store refuses its `files/` (a link or not a directory), that is one problem and the rows are only
    /// authenticated: nothing outside the store is read or listed. Stops with `cancelled` before each file, and
    /// inside a body between chunks, once `cancellation` is set.
    func verifyFiles(cancellation: FileCancellation? = nil) throws(E3DBError) -> (checked: Int, problems: [E3DBError]) {
        let keys = try currentKeys()
        var checked = 0
        var problems: [E3DBError] = []
        var bodies: BodyDirectory?
        var refused = false
        do {
            bodies = try BodyDirectory(in: directory, create: false)
        } catch {
            problems.append(error)
            refused = true
        }
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
                try EncryptedStore.stopIfCancelled(cancellation, "the verification of files")
                checked += 1
                do {
                    let entry = try decodeFile(FileRow(row), keys: keys)
                    guard !refused else { continue }
                    var discard = DiscardingByteSink()
                    try readFile(at: entry.path, to: &discard, in: bodies, cancellation: cancellation)
                } catch {
                    try EncryptedStore.stopIfCancelled(cancellation, "the verification of files")
                    problems.append(error)
                }
            }
            guard let last = rows.last else { break }
            after = last["seq"]
        }
        for name in try orphanBodies(in: bodies) {
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
        let bodies = try BodyDirectory(in: directory, create: false)
        return try orphanBodies(in: bodies, remove: true).map { "\(EncryptedStore.filesDirectoryName)/\($0)" }
    }

    /// Names in `bodies` of the form `<uuid>.e3f` that are not the body of a row. Nothing else there is an orphan
    /// or removed: not the temporary files of writers in progress (`.e3dbkit-*.tmp` where the system lacks unnamed
    /// temporary files), nor anything someone else put there. Listed under the write lock: a writer names its body
    /// inside its row's transaction. With `remove`, each is unlinked (a link itself, never its target) and only
    /// those removed are returned.
    func orphanBodies(in bodies: BodyDirectory?, remove: Bool = false) throws(E3DBError) -> [String] {
        guard let bodies else { return [] }
        return try databaseCall("looking for orphan file bodies") {
            try pool.writeWithoutTransaction { db in
                var orphans: [String] = []
                try db.inTransaction(.immediate) {
                    let known = Set(try String.fetchAll(db, sql: "SELECT id FROM files").map { "\($0).e3f" })
                    for name in try bodies.names().sorted()
                    where BodyDirectory.isBodyName(name) && !known.contains(name) && (!remove || bodies.remove(name)) {
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
        if let damage = row.damage {
            throw E3DBError(
                .fileTampered, "the row of file \(item) is damaged: \(damage.message)",
                context: .init(part: damage.context.part, item: item))
        }
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
