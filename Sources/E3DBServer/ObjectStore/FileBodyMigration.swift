import E3DBAPI
import E3DBPrimitives
import Foundation
public import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The move of a deployment's local file bodies (`DIR/files/<id>`) into its S3-compatible bucket, as
/// `e3dbkit-server files migrate` runs it: what it counts as it goes and what it reports.
public enum FileBodyMigration {
    /// The counts so far: every body looked at is in exactly one of `uploaded`, `replaced`, `alreadyStored`,
    /// `unreferenced` and `failed`, or a name that is not a body (`notBodies`, never uploaded).
    public struct Progress: Sendable, Equatable {
        /// Body names in the directory, and their bytes.
        public var total = 0
        public var totalBytes: Int64 = 0
        /// Names looked at so far, and the bytes of those.
        public var done = 0
        public var doneBytes: Int64 = 0
        /// Uploaded to a key that held nothing, and the bytes sent (both kinds of upload).
        public var uploaded = 0
        public var uploadedBytes: Int64 = 0
        /// Uploaded over a key that held something else (another length or MD5): the local body, which the
        /// database declares, replaced it.
        public var replaced = 0
        /// Already in the bucket with the declared length and MD5 (an earlier run): not uploaded again.
        public var alreadyStored = 0
        /// Bodies of no live file record and no uploaded pending file: left in place, not uploaded.
        public var unreferenced = 0
        /// Entries that are not a body: names other than a lowercase record id, symbolic links, anything but a
        /// regular file. Left in place.
        public var notBodies = 0
        /// Bodies that could not be moved (another size or MD5 than declared, a local read or removal that failed):
        /// left in place, each reported.
        public var failed = 0
        /// Of `failed`: bodies that are not what the database declares (their size or MD5).
        public var damaged = 0
    }

    /// What the migration tells as it goes.
    public enum Event: Sendable {
        /// After each name looked at.
        case progress(Progress)
        /// Something about one entry that the operator should see (no content, no secret).
        case problem(String)
    }
}

extension E3DBServer {
    /// Copies every local file body of `configuration`'s deployment (`DIR/files/<id>`) into the bucket of
    /// `configuration.objectStore`, under the key the S3 store reads, and removes the local copy once a HEAD shows
    /// the bucket holds it with the declared length and MD5. Run it with every node stopped (or already on the
    /// bucket): a node on the local store no longer finds a moved body.
    ///
    /// Only bodies the database names are moved (a live file record, or a pending file whose body was uploaded),
    /// with the length and `Content-MD5` it declares: the store itself refuses a local body that is not that one.
    /// A name that is not a lowercase record id, a symbolic link (never followed) or anything but a regular file
    /// is left alone. Resumable: a key that already holds the declared body is not uploaded again; a key that
    /// holds something else is overwritten with the local body.
    /// - Parameters:
    ///   - configuration: the data directory, the database, and `objectStore` (required).
    ///   - keepLocal: keep the local copies (the next run finds them in the bucket and removes them unless kept).
    ///   - logger: where the database backend logs.
    ///   - report: told after each entry (``FileBodyMigration/Event``).
    /// - Returns: the final counts (bodies that failed are among them; nothing is thrown for them).
    /// - Throws: `.invalidParameter` without an object store; the bucket check's refusals; a storage failure
    ///   (`isStorageFailure`) when the database or the object store cannot be used (`.storageUnavailable`: the
    ///   run stops there, and a later run resumes).
    public static func migrateFileBodies(
        _ configuration: ServerConfiguration, keepLocal: Bool, logger: Logger,
        report: (FileBodyMigration.Event) -> Void
    ) async throws -> FileBodyMigration.Progress {
        guard let options = configuration.objectStore else {
            throw E3DBError(.invalidParameter, "moving file bodies needs an object store (--s3-endpoint)")
        }
        let bucket = S3FileBodyStore(options: options)
        try await bucket.check()
        let storage = try StorageBackend.open(configuration, logger: logger).storage
        return try await storage.running {
            try await storage.migrate()
            return try await FileBodyMover(
                storage: storage, bucket: bucket,
                directory: configuration.dataDirectory.appendingPathComponent("files"), keepLocal: keepLocal
            ).run(report: report)
        }
    }
}

/// One run of ``E3DBServer/migrateFileBodies(_:keepLocal:logger:report:)``.
private struct FileBodyMover {
    let storage: any ServerStorage
    let bucket: S3FileBodyStore
    let directory: URL
    let keepLocal: Bool

    /// How one body's move ended.
    private enum Outcome {
        case uploaded, replaced, alreadyStored, unreferenced, notBody, failed(damaged: Bool)
    }

    func run(report: (FileBodyMigration.Event) -> Void) async throws -> FileBodyMigration.Progress {
        var progress = FileBodyMigration.Progress()
        // Every entry but tmp/ (uploads in progress); sizes from lstat, which follows no link.
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0 != "tmp" }.sorted()
        var sizes: [String: Int64] = [:]
        for name in names {
            var st = stat()
            // Safety: `lstat` gets a NUL-terminated copy of the path and the address of the local `st`, both for the
            // call only.
            guard unsafe lstat(path(name), &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            sizes[name] = Int64(st.st_size)
        }
        progress.total = names.count
        progress.totalBytes = sizes.values.reduce(0, +)
        report(.progress(progress))
        for name in names {
            let size = sizes[name] ?? 0
            let outcome = try await move(name, report: report)
            progress.done += 1
            progress.doneBytes += size
            switch outcome {
            case .uploaded:
                progress.uploaded += 1
                progress.uploadedBytes += size
            case .replaced:
                progress.replaced += 1
                progress.uploadedBytes += size
            case .alreadyStored: progress.alreadyStored += 1
            case .unreferenced: progress.unreferenced += 1
            case .notBody: progress.notBodies += 1
            case .failed(let damaged):
                progress.failed += 1
                if damaged { progress.damaged += 1 }
            }
            report(.progress(progress))
        }
        return progress
    }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// The size and MD5 the database declares for body `id`: a live file record's `file_meta`, or an uploaded
    /// pending file's; nil when neither names it.
    private func declared(_ id: RecordID) async throws -> (size: Int64, md5: Data)? {
        if let row = try await storage.record(id: id), let json = row.fileMetaJSON {
            let meta = JSONText.fileMeta(json)
            guard let size = meta?.size, let md5 = meta?.checksum.flatMap({ Data(base64Encoded: $0) }), md5.count == 16
            else {
                throw E3DBError(.storageCorrupted, "the file_meta of file record \(id.text) is not a file_meta object")
            }
            return (size, md5)
        }
        if let pending = try await storage.pendingFile(id: id), pending.uploaded {
            guard let md5 = Data(base64Encoded: pending.checksum), md5.count == 16 else {
                throw E3DBError(.storageCorrupted, "the checksum of pending file \(id.text) does not decode")
            }
            return (pending.size, md5)
        }
        return nil
    }

    private func move(_ name: String, report: (FileBodyMigration.Event) -> Void) async throws -> Outcome {
        let shown = "files/" + String(String(reflecting: name).dropFirst().dropLast().prefix(80))
        guard let id = RecordID(name), id.text == name else {
            report(.problem("\(shown) is not named as a body (a lowercase record id): left in place"))
            return .notBody
        }
        // No link is followed; O_NONBLOCK: a FIFO in its place does not block the open. The descriptor is owned by
        // `file` and by the body sequence made of it below: closed when the last of them goes (the HTTP client may
        // still read the body after the PUT returned), so the next body's open never gets a number still read.
        let file: OwnedDescriptor
        do throws(FileIOError) {
            file = try OwnedDescriptor(opening: path(name), flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            if error.errno == ELOOP {
                report(.problem("\(shown) is a symbolic link: not followed, left in place"))
                return .notBody
            }
            report(.problem("\(shown) cannot be opened (errno \(error.errno)): left in place"))
            return .failed(damaged: false)
        }
        var st = stat()
        // Safety: `fstat` writes into the local `st`, for the call only.
        guard unsafe fstat(file.fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            report(.problem("\(shown) is not a regular file: left in place"))
            return .notBody
        }
        let declared: (size: Int64, md5: Data)?
        do { declared = try await self.declared(id) } catch let error as E3DBError where error.code == .storageCorrupted
        {
            report(.problem("\(shown): \(error.message): left in place"))
            return .failed(damaged: false)
        }
        guard let declared else {
            report(.problem("\(shown) is the body of no file record and no uploaded pending file: left in place"))
            return .unreferenced
        }
        guard Int64(st.st_size) == declared.size else {
            report(.problem("\(shown) has \(st.st_size) bytes, not the declared \(declared.size): left in place"))
            return .failed(damaged: true)
        }
        let outcome: Outcome
        guard declared.size <= S3FileBodyStore.largestPut else {
            report(.problem("\(shown) is larger than the 5 GiB one S3 PUT takes: left in place"))
            return .failed(damaged: false)
        }
        let before = try await ask(id, declared)
        switch before {
        case .present: outcome = .alreadyStored
        case .missing, .mismatch:
            do {
                // One body at a time: its reads take one thread at a time.
                let chunks = BodyChunks(file: file, permits: AsyncPermits(1))
                try await bucket.put(id: id, chunks: chunks, size: declared.size, md5: declared.md5)
            } catch let error as E3DBError where error.code == .fileBodyChecksumMismatch {
                report(.problem("\(shown) is not its declared body (its MD5 differs): left in place"))
                return .failed(damaged: true)
            } catch let error as E3DBError where error.code == .fileBodyIO {
                // The store, or this disk, failed: the run stops here and a later one resumes.
                throw E3DBError(.storageUnavailable, "uploading \(shown) failed: \(error.message)")
            }
            guard try await ask(id, declared) == .present else {
                report(.problem("\(shown): the bucket does not hold the declared body after its upload: left in place"))
                return .failed(damaged: false)
            }
            outcome = before == .missing ? .uploaded : .replaced
        }
        if !keepLocal {
            // Safety: the path is lent to `unlink` as a NUL-terminated copy for the call only.
            guard unsafe unlink(path(name)) == 0 else {
                report(.problem("\(shown) is in the bucket but cannot be removed (errno \(errno))"))
                return .failed(damaged: false)
            }
        }
        return outcome
    }

    /// What the bucket holds under `id`; a store that cannot be asked stops the run.
    private func ask(_ id: RecordID, _ declared: (size: Int64, md5: Data)) async throws -> StoredBody {
        do {
            return try await bucket.verifyStored(id: id, size: declared.size, md5: declared.md5)
        } catch let error as E3DBError {
            throw E3DBError(.storageUnavailable, error.message)
        }
    }
}
