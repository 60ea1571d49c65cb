import E3DBAPI
public import E3DBCanonicalJSON
import E3DBDocuments
public import E3DBFiles
import E3DBKeys
import E3DBPrimitives
public import Foundation
import HTTPTypes

extension E3DBClient {
    /// Creates `dir`, a private temporary directory (mode 0700) for ciphertext on its way up; removed by the caller.
    static func createPrivateDirectory(_ dir: URL) throws {
        try FileManager.default.createDirectory(
            at: dir, withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700])
    }

    /// Encrypts `path` into the new file `scratch` (mode 0600, in a private directory). The ciphertext only waits
    /// there for the upload and is removed after it, so it is not flushed to disk: an `fsync` would write the whole
    /// file out to the disk while the server writes its own copy.
    static func encryptToScratch(
        _ path: String, _ scratch: String, accessKey: AccessKey,
        options: FileEncryptionOptions
    ) throws -> FileEncryptionResult {
        let input = unsafe open(path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else {
            throw E3DBError(.fileIOFailed, "cannot open \(path) to upload it (errno \(errno))")
        }
        defer { close(input) }
        let output = unsafe open(scratch, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else {
            throw E3DBError(.fileIOFailed, "cannot create the temporary ciphertext file (errno \(errno))")
        }
        let result: FileEncryptionResult
        do {
            result = try E3DBFileCipher.encrypt(
                fileDescriptor: input, to: output, accessKey: accessKey, options: options)
        } catch {
            close(output)
            throw error
        }
        guard close(output) == 0 else {
            throw E3DBError(.fileIOFailed, "writing the temporary ciphertext file failed (errno \(errno))")
        }
        return result
    }

    /// Encrypts a file (E3DB file format v3) and stores it as a file record: the ciphertext goes to a private
    /// temporary file with its MD5 and size computed in the same pass, a pending file is created, the body is
    /// uploaded streaming to the server's upload URL (with `Content-MD5`), and the record is committed.
    /// Constant memory whatever the file's size. The encryption runs on a thread of its own, never on a thread of
    /// Swift concurrency's cooperative pool (at most twice the processors, at least 8, at once in the process:
    /// further calls wait for one, suspended).
    /// - Parameters:
    ///   - type: the record type.
    ///   - path: the plaintext file.
    ///   - plain: plaintext metadata.
    ///   - progress: called with the encryption progress, from the encrypting thread.
    /// - Returns: the file record (metadata, `file_meta`, empty data).
    /// - Throws: `E3DBError` from encryption (`.fileIOFailed`), `.requestCancelled` (before the encryption starts,
    ///   nothing is created; during it, the file cipher stops at its next chunk and the ciphertext is removed),
    ///   `.foreignFileURL` for an upload URL off the API's origin and ``fileOrigins``, the server or the transport.
    public func writeFile(
        type: String, path: String, plain: RecordData = RecordData(),
        progress: (@Sendable (FileProgress) -> Void)? = nil
    ) async throws -> ClientRecord {
        // The ciphertext's private directory is made and filled on a thread of whole-file work (`FileWork`), and
        // removed when the call ends (however it ends) as an I/O step, never on the caller's cooperative thread.
        // Cancelled before the encryption starts, nothing is created; during it, the file cipher stops at its next
        // chunk.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "e3dbkit-\(UUID().lowercasedString)")
        do {
            let record = try await writeFile(type: type, path: path, plain: plain, progress: progress, scratch: scratch)
            await FileWork.removeQuietly(scratch)
            return record
        } catch {
            await FileWork.removeQuietly(scratch)
            throw error
        }
    }

    /// `writeFile(type:path:plain:progress:)` with its private directory at `scratch`, which the caller removes.
    private func writeFile(
        type: String, path: String, plain: RecordData, progress: (@Sendable (FileProgress) -> Void)?, scratch: URL
    ) async throws -> ClientRecord {
        let ak = try await ownAccessKey(type: type)
        let encrypted = scratch.appendingPathComponent("body.e3db").path
        let result = try await FileWork.run("file encryption", kind: .wholeFile) { cancellation in
            try Self.createPrivateDirectory(scratch)
            return try Self.encryptToScratch(
                path, encrypted, accessKey: ak,
                options: FileEncryptionOptions(
                    checksums: [.ciphertextMD5], progress: progress, cancellation: cancellation))
        }
        guard let md5 = result.checksums.md5Base64 else {
            throw E3DBError(.invalidResponse, "the file cipher returned no MD5")
        }
        if Task.isCancelled { throw cancelledError("file upload") }
        let me = clientID.lowercasedString
        let body = API.Record(
            meta: API.Meta(
                writerID: me, userID: me, type: type, plain: plain,
                fileMeta: API.FileMeta(
                    fileName: URL(fileURLWithPath: path).lastPathComponent,
                    checksum: md5, size: Int64(result.encryptedSize))),
            data: [:])
        let pending = try await call(
            API.Endpoints.createFile, json: body, operation: "file create", idempotent: false)
        try checkFileURL(pending.fileURL, operation: "file upload")
        let put = try Self.request(
            "PUT", pending.fileURL, [(.contentType, "application/octet-stream"), (.contentMD5, md5)],
            operation: "file upload", serverField: "file_url")
        let (answer, upload) = try await transportCall("file upload") {
            try await transport.upload(
                put, bodyPath: encrypted, size: Int64(result.encryptedSize), timeout: .seconds(3600))
        }
        guard upload.status.code == 200 else {
            let message = API.ErrorBody.message(in: answer)
            throw httpError(status: upload.status.code, operation: "file upload", serverMessage: message)
        }
        let record = try await call(
            API.Endpoints.commitFile, [pending.id], operation: "file commit", idempotent: false)
        return ClientRecord(meta: record.meta, data: RecordData())
    }

    /// Downloads a file record's body and decrypts it as it arrives into a private temporary file beside
    /// `destination` (mode 0600; on Linux unnamed until commit), which is renamed to `destination` only after the
    /// chunk tagged FINAL authenticated, the body ended right after it, and the body's size matched the record's
    /// `file_meta` (and its MD5, with `verifyChecksum`, computed in the same pass). Constant memory (the download
    /// waits for the decryption once a few MiB are pending); nothing is written at `destination` on any failure (a
    /// cut, altered or oversized body, a failed transfer, cancellation).
    ///
    /// Every chunk of the body is authenticated under the file's own data key, which only holders of the access
    /// key can have made: an altered, cut, extended or reordered body is refused whatever `verifyChecksum` says.
    /// The MD5 adds one check, which Tozny's SDKs do not make: that the body is the one this record's `file_meta` names,
    /// and not another file encrypted under the same access key (a mix-up of bodies on the server). It is not a
    /// check against a hostile server, which serves `file_meta` too; it doubles the CPU a download costs (MD5 runs
    /// at about 500 MB/s, the decryption several times faster).
    /// - Parameters:
    ///   - id: the file record's id.
    ///   - destination: where the plaintext goes; an existing file there is replaced on success.
    ///   - verifyChecksum: also check the body's MD5 against `file_meta.checksum` before committing.
    ///   - progress: called with the ciphertext bytes decrypted so far (total: `file_meta.size`), from the
    ///     decrypting thread.
    /// - Returns: the file record.
    /// The body is fetched only from the API's origin (scheme, host and port of ``apiURL``) or one of
    /// ``fileOrigins``: a `file_url` elsewhere is refused before any request is made to it.
    /// - Throws: `E3DBError` `.notFound`, `.foreignFileURL`, `.invalidResponse` (the server answered with another
    ///   record), `.checksumMismatch` (with `verifyChecksum`), `.chunkAuthenticationFailed`,
    ///   `.fileTruncated`, `.trailingData`, `.wrongAccessKey`, `.fileIOFailed`, `.requestCancelled`, the
    ///   transport's (`.transportFailed`).
    public func readFile(
        _ id: UUID, to destination: String, verifyChecksum: Bool = false,
        progress: (@Sendable (FileProgress) -> Void)? = nil
    ) async throws -> ClientRecord {
        let record = try await call(API.Endpoints.readFile, [id.lowercasedString], operation: "file read")
        try Self.checkAnswer(record.meta, id: id, operation: "file read")
        guard let meta = record.meta.fileMeta, let url = meta.fileURL, let checksum = meta.checksum else {
            throw E3DBError(.invalidResponse, "the file record has no file_meta with a URL and checksum")
        }
        try checkFileURL(url, operation: "file download")
        let get = try Self.request("GET", url, [], operation: "file download", serverField: "file_url")
        guard let writer = UUID(uuidString: record.meta.writerID), let user = UUID(uuidString: record.meta.userID)
        else {
            throw E3DBError(.invalidResponse, "a record's writer_id or user_id is not a UUID")
        }
        let (ak, _) = try await readerAccessKey(writer: writer, user: user, type: record.meta.type)
        if Task.isCancelled { throw cancelledError("file download") }
        let size = meta.size.map { Int($0) }
        let options = FileDecryptionOptions(
            expectedChecksum: verifyChecksum ? .md5Base64(checksum) : nil,
            expectedEncryptedSize: size, progress: progress)
        let sink: AtomicFileSink
        do { sink = try AtomicFileSink(path: destination) } catch {
            throw E3DBError(.fileIOFailed, "cannot create the output beside \(destination): \(error)", cause: error)
        }
        let pipe = DownloadPipe(limit: 8 << 20)
        // A thread of its own, without a `FileWork` permit: it waits for the network most of the time, and what
        // feeds it may itself need a permit (`URLSessionTransport` reads its spill file through `FileWork`), so
        // decryptions holding every permit could wait forever for one. One thread per `readFile` call.
        async let decrypted = onOwnThread(named: "e3dbkit-file") { () throws -> FileDecryptionResult in
            defer { pipe.closeReading() }
            var source = DownloadPipe.Source(pipe: pipe, totalByteCount: size)
            var output = sink
            return try E3DBFileCipher.decrypt(from: &source, to: &output, accessKey: ak, options: options)
        }
        do {
            let (answer, response) = try await withTaskCancellationHandler {
                try await transport.download(get, timeout: .seconds(3600)) { try await pipe.write($0) }
            } onCancel: {
                pipe.finish(failing: E3DBError(.requestCancelled, "file download was cancelled"))
            }
            if response.status.kind == .successful {
                pipe.finish(failing: nil)
            } else {
                let message = API.ErrorBody.message(in: answer)
                pipe.finish(
                    failing: httpError(
                        status: response.status.code, operation: "file download",
                        serverMessage: message))
            }
        } catch {
            pipe.finish(failing: transportError(error, operation: "file download"))
        }
        // The decryption's outcome decides: it ends with the transfer's error when the transfer failed first.
        do { _ = try await decrypted } catch let error as E3DBError { throw error } catch {
            throw E3DBError(.fileIOFailed, "the file decryption failed (\(type(of: error)))")
        }
        return ClientRecord(meta: record.meta, data: RecordData())
    }

    /// Runs a transport call, mapping its failures to `E3DBError` (`transportError(_:operation:)`).
    func transportCall<T>(_ operation: String, _ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw transportError(error, operation: operation) }
    }
}
