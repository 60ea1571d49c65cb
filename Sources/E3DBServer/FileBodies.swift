public import E3DBPrimitives
package import Foundation
package import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension E3DBError.Code {
    /// A file body has more or fewer bytes than declared (`context.expected` and `context.actual`).
    public static let fileBodySizeMismatch = Self("fileBodySizeMismatch", category: .verification)
    /// The MD5 of a file body is not the declared checksum.
    public static let fileBodyChecksumMismatch = Self("fileBodyChecksumMismatch", category: .verification)
    /// No file body is stored under the id.
    public static let fileBodyNotFound = Self("fileBodyNotFound", category: .io)
    /// Reading or writing file bodies failed (`errno`-level detail, no content).
    public static let fileBodyIO = Self("fileBodyIO", category: .io)
}

/// What a store holds under an id, checked at commit for a body that did not pass through this server.
package enum StoredBody: Sendable, Equatable {
    /// The body is there with the declared size and MD5.
    case present
    /// Nothing is stored under the id.
    case missing
    /// Something is stored, but not the declared body: the reason says what differs (no content).
    case mismatch(String)
}

/// Where encrypted file bodies live. Bodies are opaque ciphertext (E3DB file v3); the server never opens them. A
/// body is stored under its file record's id.
///
/// Two shapes: a store whose bodies pass through this server (``LocalFileBodyStore``: the client PUTs and GETs
/// this server's capability URLs, `/v1/storage/blobs`, and ``store(id:chunks:expectedSize:expectedMD5:)`` checks
/// the body as it arrives), and a store the client reaches itself (``S3FileBodyStore``:
/// ``uploadURL(id:size:md5:now:expires:)`` and ``downloadURL(id:now:expires:)`` return its URLs, and the commit
/// asks ``verifyStored(id:size:md5:)``).
package protocol FileBodyStore: Sendable {
    /// Where the client PUTs the body of pending file `id` (`size` bytes with MD5 `md5`), valid from `now` until
    /// `expires` (Unix seconds); nil: this server's capability URL.
    func uploadURL(id: RecordID, size: Int64, md5: Data, now: Int64, expires: Int64) throws -> String?
    /// Where the client GETs the body of file `id`, valid from `now` until `expires` (Unix seconds); nil: this
    /// server's capability URL.
    func downloadURL(id: RecordID, now: Int64, expires: Int64) throws -> String?
    /// At commit, for a pending file whose body this server did not receive: is it stored, whole? Throws when
    /// the store cannot be asked (the commit is then refused as unavailable, and may be retried).
    func verifyStored(id: RecordID, size: Int64, md5: Data) async throws -> StoredBody
    /// Removes a body (no error when it is missing; an error when the store cannot be reached).
    func remove(id: RecordID) async throws
    /// Stores a body streamed from `chunks`, checking its size and MD5 on the way; nothing is visible under
    /// `id` unless both match (the body is written to a temporary file, synced, then renamed).
    func store(
        id: RecordID, chunks: some AsyncSequence<ByteBuffer, any Error> & Sendable, expectedSize: Int64,
        expectedMD5: Data) async throws
    /// The size of a stored body.
    func size(id: RecordID) throws -> Int64
    /// Streams a stored body to `write`, in chunks of at most 256 KiB.
    func read(id: RecordID, into write: (ByteBuffer) async throws -> Void) async throws
    /// Removes the partial uploads of uploads that died (a killed process, a dropped connection): those not
    /// written to for `idle` seconds. Returns how many it removed.
    func removeAbandonedUploads(idle: TimeInterval) -> Int
    /// The largest body the store takes, bytes; nil when only the server's `maxFileSize` bounds it. The server
    /// refuses a file record declaring more than the smaller of the two.
    var maxBodySize: Int64? { get }
    /// Checks, before the server answers its first request, that the store can be used; the error says what is
    /// wrong.
    func check() async throws
}

/// File bodies in `DIR/files/<id>`, temporary uploads in `DIR/files/tmp/` (written through the package's
/// `AtomicFile`: on Linux unnamed until they are complete, elsewhere `.e3dbkit-<hex>.tmp`): the embedded default.
/// Several server processes share bodies only when they share this directory. The bodies pass through this server:
/// the client uses its capability URLs, and an upload through them marks the pending file uploaded.
package struct LocalFileBodyStore: FileBodyStore {
    let directory: URL
    let temporary: URL
    /// The threads of its disk writes (writing and syncing uploads, removing bodies): no request waits for the disk
    /// on a thread of Swift concurrency's cooperative pool, and at most `blockingThreadLimit` such threads run at
    /// once; a request beyond them waits, suspended, and leaves the queue when it is cancelled.
    let permits = AsyncPermits<Never>(blockingThreadLimit)
    /// The threads of its downloads' reads (opening a body, reading it a MiB at a time), the same bound: a pool of
    /// their own, so that a download's short read never waits behind the long `fsync` of an upload's commit or the
    /// unlink of a large body.
    let readPermits = AsyncPermits<Never>(blockingThreadLimit)

    /// The bytes of an upload handed to a thread at once: a few hundred microseconds of thread per MiB written.
    static let batchBytes = 1 << 20

    /// No limit of its own: the file system's is reported when a body is written.
    package var maxBodySize: Int64? { nil }

    /// Nothing to check: `init` created the directories.
    package func check() async throws {}

    /// Creates the directories if needed (mode 0700).
    package init(directory: URL) throws {
        self.directory = directory
        self.temporary = directory.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(
            at: temporary, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
    }

    private func path(_ id: RecordID) -> String { directory.appendingPathComponent(id.text).path }

    /// The refusal of a body of `actual` bytes where `expected` were declared.
    static func sizeMismatch(_ expected: Int64, _ actual: Int64) -> E3DBError {
        E3DBError(
            .fileBodySizeMismatch,
            "the body is \(actual > expected ? "longer" : "shorter") than the declared \(expected) bytes",
            context: .init(expected: Int(clamping: expected), actual: Int(clamping: actual)))
    }

    package func store(
        id: RecordID, chunks: some AsyncSequence<ByteBuffer, any Error> & Sendable, expectedSize: Int64,
        expectedMD5: Data
    ) async throws {
        // The network hands the body over in buffers of up to tens of KiB; they go to the disk a batch at a time, on
        // a thread of the store's (the thread costs a few hundred microseconds, a batch about a millisecond).
        var upload = Upload(path: path(id), temporary: temporary.path)
        do {
            var batch: [ByteBuffer] = []
            var batched = 0
            var received: Int64 = 0
            for try await chunk in chunks {
                received += Int64(chunk.readableBytes)
                guard received <= expectedSize else { throw Self.sizeMismatch(expectedSize, received) }
                batch.append(chunk)
                batched += chunk.readableBytes
                // The last batch goes with the commit, on one thread.
                guard batched >= Self.batchBytes, received < expectedSize else { continue }
                upload = try await onOwnThread(named: "e3dbkit-upload", permits: permits) { [upload, batch] in
                    var upload = upload
                    try upload.append(batch)
                    return upload
                }
                batch.removeAll(keepingCapacity: true)
                batched = 0
            }
            guard received == expectedSize else { throw Self.sizeMismatch(expectedSize, received) }
            try await onOwnThread(named: "e3dbkit-upload", permits: permits) { [upload, batch] in
                var upload = upload
                try upload.append(batch)
                try upload.commit(expectedMD5: expectedMD5)
            }
        } catch {
            // A failed batch removed its file on its thread; this removes it after a refusal or a lost connection.
            if let file = upload.file { _ = try? await onOwnThread(named: "e3dbkit-upload") { file.abort() } }
            throw error
        }
    }

    package func size(id: RecordID) throws -> Int64 {
        var st = stat()
        // Safety: `stat` gets a NUL-terminated copy of the path and the address of the local `st`, both for the call
        // only.
        guard unsafe stat(path(id), &st) == 0 else {
            throw E3DBError(.fileBodyNotFound, "no file body is stored under the id")
        }
        return Int64(st.st_size)
    }

    package func read(id: RecordID, into write: (ByteBuffer) async throws -> Void) async throws {
        let path = path(id)
        // One thread opens the body and reads its first MiB.
        let (file, first) = try await onOwnThread(named: "e3dbkit-download", permits: readPermits) {
            () throws -> (OwnedDescriptor, ByteBuffer) in
            let file: OwnedDescriptor
            do throws(FileIOError) { file = try OwnedDescriptor(opening: path, flags: O_RDONLY) } catch {
                throw E3DBError(.fileBodyNotFound, "no file body is stored under the id")
            }
            return (file, try BodyChunks.read(file.fd))
        }
        for try await buffer in BodyChunks(file: file, permits: readPermits, first: first) { try await write(buffer) }
    }

    /// Nil: the client uses this server's capability URL.
    package func uploadURL(id: RecordID, size: Int64, md5: Data, now: Int64, expires: Int64) -> String? { nil }

    /// Nil: the client uses this server's capability URL.
    package func downloadURL(id: RecordID, now: Int64, expires: Int64) -> String? { nil }

    /// ``StoredBody/missing``: a body stored here came through the blob route, which marked its pending file
    /// uploaded, so a commit asks only about bodies that never arrived.
    package func verifyStored(id: RecordID, size: Int64, md5: Data) async -> StoredBody { .missing }

    /// On a thread of the store's: unlinking a large body frees its blocks, which takes a while.
    package func remove(id: RecordID) async throws {
        let path = path(id)
        // Safety: the path is lent to `unlink` as a NUL-terminated copy for the call only.
        try await onOwnThread(named: "e3dbkit-remove", permits: permits) { _ = unsafe unlink(path) }
    }

    /// Removes the files in `tmp/` not modified for `idle` seconds (an upload in progress writes to its file as the
    /// body arrives, and other processes sharing the directory may have uploads in progress). On Linux an upload
    /// has no name there until it is complete, so only uploads of other systems, or of older versions, remain.
    package func removeAbandonedUploads(idle: TimeInterval) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? []
        let cutoff = Date().addingTimeInterval(-idle)
        var removed = 0
        for name in names {
            let file = temporary.appendingPathComponent(name).path
            // Safety: the path is lent to `unlink` as a NUL-terminated copy for the call only.
            guard let modified = (try? FileManager.default.attributesOfItem(atPath: file))?[.modificationDate] as? Date,
                modified < cutoff, unsafe unlink(file) == 0
            else { continue }
            removed += 1
        }
        return removed
    }
}

/// An upload on its way to the disk: its temporary file (created by the first batch), its size and MD5 so far. A
/// value `LocalFileBodyStore.store` hands to a thread of its own with each batch and gets back.
struct Upload: Sendable {
    let path: String
    let temporary: String
    private(set) var file: AtomicFile?
    private var md5 = Hashes.MD5()
    private var written: Int64 = 0
    private var writeback = Writeback()

    init(path: String, temporary: String) {
        self.path = path
        self.temporary = temporary
    }

    // Errors name the call and errno only: a path of the data directory is not the client's business.
    private static func failure(_ what: String, _ error: FileIOError) -> E3DBError {
        E3DBError(.fileBodyIO, "\(what) failed (\(error.operation), errno \(error.errno))")
    }

    /// The temporary file, created on first use.
    private mutating func opened() throws(E3DBError) -> AtomicFile {
        if let file { return file }
        do throws(FileIOError) {
            let created = try AtomicFile(path: path, temporaryDirectory: temporary)
            file = created
            return created
        } catch {
            throw Self.failure("creating a temporary upload file", error)
        }
    }

    /// Writes `batch` (blocking), hashing it on the way; a failure removes the temporary file.
    mutating func append(_ batch: [ByteBuffer]) throws(E3DBError) {
        let file = try opened()
        for chunk in batch {
            let bytes = chunk.readableBytesSpan
            // Safety: the pointer is the chunk's readable bytes, lent for the closure; `update` only reads them.
            unsafe bytes.withUnsafeBytes { unsafe md5.update(bufferPointer: $0) }
            do throws(FileIOError) { try file.write(bytes) } catch {
                file.abort()
                throw Self.failure("writing an upload", error)
            }
            written += Int64(chunk.readableBytes)
            writeback.wrote(upTo: written, fd: file.descriptor)
        }
    }

    /// Checks the MD5, then syncs the file and gives it its name (blocking); a failure removes the temporary file.
    mutating func commit(expectedMD5: Data) throws(E3DBError) {
        let file = try opened()
        guard md5.finalize() == expectedMD5 else {
            file.abort()
            throw E3DBError(.fileBodyChecksumMismatch, "the MD5 of the body is not the declared checksum")
        }
        do throws(FileIOError) { try file.commit() } catch {
            file.abort()
            throw Self.failure("storing an upload", error)
        }
    }
}

/// Starts the disk writes of an upload while it arrives, so that the `fsync` before the commit finds little left
/// to write (on Linux, with several GiB of RAM, a 1 GiB body would otherwise stay dirty in the page cache until
/// then, and the client would wait for all of it after the last byte). Every 8 MiB, `POSIX_FADV_DONTNEED` over the
/// last 40 MiB starts the writeback of what is dirty and drops what was already written: the bodies of a server
/// are large and cold, and a download reads them again from the disk.
struct Writeback {
    static let step: Int64 = 8 << 20
    static let window: Int64 = 40 << 20
    private var advised: Int64 = 0

    mutating func wrote(upTo written: Int64, fd: Int32) {
        #if os(Linux)
            guard written - advised >= Self.step else { return }
            let start = max(0, advised - (Self.window - Self.step))
            // Advice only: a failure changes nothing but the timing, and the fsync before the commit still decides.
            _ = posix_fadvise(fd, off_t(start), off_t(written - start), POSIX_FADV_DONTNEED)
            advised = written
        #endif
    }
}

/// The bytes of an open file from its current offset to its end, in chunks of at most 256 KiB read straight into
/// the buffers handed on (no `Data` in between), 1 MiB at a time on a thread of `permits` (so that no cooperative
/// thread waits for the disk, and the thread's few hundred microseconds are paid once a MiB). The sequence owns the
/// file: it stays open while the sequence, an iterator or a read holds it (an HTTP client may read a request body
/// after the request returned), and no caller closes it.
struct BodyChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let file: OwnedDescriptor
    let permits: AsyncPermits<Never>
    /// What the caller read already (`read(_:)`), if anything.
    var first: ByteBuffer? = nil

    static let chunkBytes = 256 << 10
    static let readBytes = 1 << 20

    struct AsyncIterator: AsyncIteratorProtocol {
        let file: OwnedDescriptor
        let permits: AsyncPermits<Never>
        /// Read and not yet handed on.
        private var pending: ByteBuffer
        /// Whether a read came short: the file ends after `pending`.
        private var atEnd: Bool

        init(file: OwnedDescriptor, permits: AsyncPermits<Never>, first: ByteBuffer?) {
            self.file = file
            self.permits = permits
            pending = first ?? ByteBuffer()
            atEnd = first.map { $0.readableBytes < BodyChunks.readBytes } ?? false
        }

        mutating func next() async throws -> ByteBuffer? {
            if pending.readableBytes == 0 {
                guard !atEnd else { return nil }
                // The thread holds the file itself: it stays open until the read is done.
                let file = self.file
                pending = try await onOwnThread(named: "e3dbkit-download", permits: permits) {
                    () throws(E3DBError) -> ByteBuffer in try BodyChunks.read(file.fd)
                }
                // `readFully` comes short only at the end of the file: no thread is started to read nothing.
                atEnd = pending.readableBytes < BodyChunks.readBytes
                guard pending.readableBytes > 0 else { return nil }
            }
            // A slice shares the storage of the buffer read: nothing is copied.
            return pending.readSlice(length: Swift.min(BodyChunks.chunkBytes, pending.readableBytes))
        }
    }

    /// Reads up to `readBytes` from `fd` (blocking): fewer only at the end of the file.
    static func read(_ fd: Int32) throws(E3DBError) -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: readBytes)
        var failure: FileIOError?
        // Safety: `FileIO.readFully` writes at most `readBytes` bytes, the writable bytes asked for, in the closure.
        _ = unsafe buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: readBytes) { raw in
            do throws(FileIOError) {
                return try unsafe FileIO.readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[..<readBytes]))
            } catch {
                failure = error
                return 0
            }
        }
        if let failure { throw E3DBError(.fileBodyIO, "reading a stored file failed (errno \(failure.errno))") }
        return buffer
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(file: file, permits: permits, first: first) }
}
