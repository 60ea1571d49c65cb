public import Foundation
import E3DBAPI
public import E3DBDocuments
public import E3DBFiles
import E3DBKeys
import E3DBPrimitives

extension E3DBClient {
    /// A private temporary directory (mode 0700) for ciphertext on its way up or down; removed by the caller.
    func privateTemporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("e3dbkit-\(UUID().uuidString.lowercased())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        return dir
    }

    /// Encrypts a file (E3DB file format v3) and stores it as a file record: the ciphertext goes to a private
    /// temporary file with its MD5 and size computed in the same pass, a pending file is created, the body is
    /// uploaded streaming to the server's upload URL (with `Content-MD5`), and the record is committed.
    /// Constant memory whatever the file's size.
    /// - Parameters:
    ///   - type: the record type.
    ///   - path: the plaintext file.
    ///   - plain: plaintext metadata.
    ///   - progress: called with the encryption progress.
    /// - Returns: the file record (metadata, `file_meta`, empty data).
    /// - Throws: `E3DBError` from encryption (`.fileIOFailed`), the server or the transport.
    public func writeFile(type: String, path: String, plain: RecordData = RecordData(),
                          progress: (@Sendable (FileProgress) -> Void)? = nil) async throws -> ClientRecord {
        let ak = try await ownAccessKey(type: type)
        let scratch = try privateTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let encrypted = scratch.appendingPathComponent("body.e3db").path
        // Task cancellation reaches the file cipher between chunks.
        let cancellation = FileCancellation()
        let result = try await withTaskCancellationHandler {
            try E3DBFileCipher.encryptFile(
                atPath: path, toPath: encrypted, accessKey: ak,
                options: FileEncryptionOptions(checksums: [.ciphertextMD5], progress: progress, cancellation: cancellation))
        } onCancel: {
            cancellation.cancel()
        }
        guard let md5 = result.checksums.md5Base64 else {
            throw E3DBError(.invalidResponse, "the file cipher returned no MD5")
        }
        try Task.checkCancellation()
        var plainMap: [String: String] = [:]
        for (k, v) in plain { plainMap[k] = v }
        let me = clientID.uuidString.lowercased()
        let body = API.Record(
            meta: API.Meta(writerID: me, userID: me, type: type, plain: plainMap,
                           fileMeta: API.FileMeta(fileName: URL(fileURLWithPath: path).lastPathComponent,
                                                  checksum: md5, size: Int64(result.encryptedSize))),
            data: [:])
        let created = try await send("POST", ["v1", "storage", "files"], json: body, operation: "file create",
                                     idempotent: false)
        let pending = try Self.decode(API.PendingFile.self, created, operation: "file create")
        let upload = try await transportCall("file upload") {
            try await transport.upload(
                TransportRequest(method: "PUT", url: pending.fileURL,
                                 headers: [("Content-Type", "application/octet-stream"), ("Content-MD5", md5)]),
                bodyPath: encrypted, size: Int64(result.encryptedSize), timeout: .seconds(3600))
        }
        guard upload.status == 200 else {
            let message = (try? JSONDecoder().decode(API.ErrorBody.self, from: upload.body))?.error
            throw httpError(status: upload.status, operation: "file upload", serverMessage: message)
        }
        let committed = try await send("PATCH", ["v1", "storage", "files", pending.id], operation: "file commit",
                                       idempotent: false)
        let record = try Self.decode(API.Record.self, committed, operation: "file commit")
        return ClientRecord(meta: record.meta, data: RecordData())
    }

    /// Downloads a file record's body streaming to a private temporary file, then decrypts it into `destination`,
    /// which appears (atomically renamed) only after the whole file authenticated against the record's MD5 and
    /// size. Constant memory; nothing is written at `destination` on any failure.
    /// - Parameters:
    ///   - id: the file record's id.
    ///   - destination: where the plaintext goes.
    ///   - progress: called with the decryption progress.
    /// - Returns: the file record.
    /// - Throws: `E3DBError` `.notFound`, `.checksumMismatch`, `.authenticationFailed`, `.fileTruncated`, the
    ///   transport's.
    public func readFile(_ id: UUID, to destination: String,
                         progress: (@Sendable (FileProgress) -> Void)? = nil) async throws -> ClientRecord {
        let r = try await send("GET", ["v1", "storage", "files", id.uuidString.lowercased()], operation: "file read")
        let record = try Self.decode(API.Record.self, r, operation: "file read")
        guard let meta = record.meta.fileMeta, let url = meta.fileURL, let checksum = meta.checksum else {
            throw E3DBError(.invalidResponse, "the file record has no file_meta with a URL and checksum")
        }
        guard let writer = UUID(uuidString: record.meta.writerID), let user = UUID(uuidString: record.meta.userID) else {
            throw E3DBError(.invalidResponse, "a record's writer_id or user_id is not a UUID")
        }
        let (ak, _) = try await readerAccessKey(writer: writer, user: user, type: record.meta.type)
        let scratch = try privateTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let encrypted = scratch.appendingPathComponent("body.e3db").path
        let response = try await transportCall("file download") {
            try await transport.download(TransportRequest(method: "GET", url: url), to: encrypted,
                                         timeout: .seconds(3600))
        }
        guard (200..<300).contains(response.status) else {
            let message = (try? JSONDecoder().decode(API.ErrorBody.self, from: response.body))?.error
            throw httpError(status: response.status, operation: "file download", serverMessage: message)
        }
        try Task.checkCancellation()
        let cancellation = FileCancellation()
        _ = try await withTaskCancellationHandler {
            try E3DBFileCipher.decryptFile(
                atPath: encrypted, toPath: destination, accessKey: ak,
                options: FileDecryptionOptions(expectedChecksum: .md5Base64(checksum),
                                               expectedEncryptedSize: meta.size.map { Int($0) }, progress: progress,
                                               cancellation: cancellation))
        } onCancel: {
            cancellation.cancel()
        }
        return ClientRecord(meta: record.meta, data: RecordData())
    }

    /// Runs a transport call, mapping its failures to `E3DBError`.
    func transportCall<T>(_ operation: String, _ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as E3DBError { throw error } catch is CancellationError {
            throw E3DBError(.requestCancelled, "\(operation) was cancelled")
        } catch {
            throw E3DBError(.transportFailed, "\(operation): the transfer failed (\(type(of: error)))",
                            context: .init(part: operation))
        }
    }
}
