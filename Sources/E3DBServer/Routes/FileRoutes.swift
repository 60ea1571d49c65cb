import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird
import Logging

extension E3DBService {
    /// File records (`/v1/storage/files`, for registered clients) and their bodies (`/v1/storage/blobs`, by
    /// capability URL).
    func addFileRoutes(to router: Router<E3DBRequestContext>) {
        router.group().add(middleware: Authentication(service: self, requirement: .client))
            .on(API.Endpoints.createFile) { try await self.createPendingFile($0) }
            .on(API.Endpoints.commitFile) { try await self.commitFile($0, id: $0.parameter("id")) }
            .on(API.Endpoints.readFile) { try await self.readFile($0, id: $0.parameter("id")) }
        router.on(API.Endpoints.uploadBody) { try await self.uploadBody($0, id: $0.parameter("id")) }
            .on(API.Endpoints.downloadBody) { try await self.downloadBody($0, id: $0.parameter("id")) }
    }

    // MARK: Files

    /// Seconds after which an upload's claim is taken over by another upload of the same file.
    static let uploadClaimTimeout: Int64 = 600

    /// A capability URL for one operation on one body, valid until `expires` (Unix seconds):
    /// `token = hex(BLAKE2b-256 keyed by the server secret, "op\nid\nexpires")`.
    func capabilityToken(op: String, id: RecordID, expires: Int64) throws -> String {
        let message = Data("\(op)\n\(id.text)\n\(expires)".utf8)
        return Hex.encode(try BLAKE2b.hash(data: message, outputByteCount: 32, key: secret))
    }

    /// Now and when a URL minted now expires (Unix seconds): ``ServerConfiguration/capabilityLifetime`` later.
    func urlValidity() -> (now: Int64, expires: Int64) {
        let now = clock.now() / 1_000_000
        return (now, now + configuration.capabilityLifetime)
    }

    func capabilityURL(_ r: APIRequest, op: String, id: RecordID) throws -> String {
        let expires = urlValidity().expires
        let token = try capabilityToken(op: op, id: id, expires: expires)
        let base: String
        if let configured = configuration.publicURL {
            base = configured.hasSuffix("/") ? String(configured.dropLast()) : configured
        } else {
            let host = r.request.head.authority ?? (configuration.host + ":" + String(configuration.port))
            base = (configuration.tlsCertificatePath == nil ? "http://" : "https://") + host
        }
        return "\(base)/v1/storage/blobs/\(id.text)?op=\(op)&expires=\(expires)&token=\(token)"
    }

    func checkCapability(_ r: APIRequest, op: String, id: RecordID) throws {
        guard r.queryValues("op").first == op, let expiresText = r.queryValues("expires").first,
            let expires = Int64(expiresText), let token = r.queryValues("token").first
        else {
            throw E3DBError(.forbidden, "this URL is not a valid \(op) capability")
        }
        guard expires >= clock.now() / 1_000_000 else { throw E3DBError(.forbidden, "this \(op) URL has expired") }
        let expected = try capabilityToken(op: op, id: id, expires: expires)
        guard ConstantTime.equals(Array(expected.utf8), Array(token.utf8)) else {
            throw E3DBError(.forbidden, "this URL is not a valid \(op) capability")
        }
    }

    func createPendingFile(_ r: APIRequest) async throws -> Response {
        let caller = try r.caller()
        let request = try recordRequest(try await body(r, for: .client(caller.clientID)), what: "file record")
        let req = request.record
        try checkWriter(req.meta, caller: caller)
        guard let fm = req.meta.fileMeta, let checksum = fm.checksum, let md5 = Data(base64Encoded: checksum),
            md5.count == 16
        else {
            throw E3DBError(.badRequest, "meta.file_meta.checksum must be the base64 MD5 of the encrypted file")
        }
        guard let size = fm.size, size >= 0, size <= maxFileSize else {
            throw E3DBError(.badRequest, "meta.file_meta.size must be between 0 and \(maxFileSize)")
        }
        let id = RecordID.random()
        let now = clock.now()
        let name = (fm.fileName?.isEmpty == false ? fm.fileName : nil) ?? "\(id.text)-\(now)"
        let stored = API.FileMeta(
            fileURL: nil, fileName: name, checksum: checksum, compression: fm.compression ?? "raw",
            size: size)
        let fileMetaJSON = JSONText.fileMeta(stored)
        try await storage.insertPendingFile(
            PendingFileRow(
                pendingID: id,
                record: RecordRow(
                    recordID: id, writerID: caller.clientID, userID: caller.clientID, type: req.meta.type,
                    plainJSON: request.plainJSON ?? "{}", dataJSON: request.dataJSON,
                    recSig: req.recSig, fileMetaJSON: fileMetaJSON, created: now, lastModified: now,
                    version: ""),
                checksum: checksum, size: size, uploaded: false, created: now))
        let validity = urlValidity()
        let url =
            try files.uploadURL(id: id, size: size, md5: md5, now: validity.now, expires: validity.expires)
            ?? capabilityURL(r, op: "upload", id: id)
        return try JSONBody.response(
            API.PendingFile(id: id.text, fileURL: url),
            status: .accepted)
    }

    func uploadBody(_ r: APIRequest, id: String) async throws -> Response {
        guard let id = RecordID(id) else { throw E3DBError(.notFound, "no such upload") }
        try checkCapability(r, op: "upload", id: id)
        guard let pending = try await storage.pendingFile(id: id) else { throw E3DBError(.notFound, "no such upload") }
        guard !pending.uploaded else { throw E3DBError(.conflict, "this file was already uploaded") }
        if let declared = r.header(.contentMD5), declared != pending.checksum {
            throw E3DBError(.badRequest, "Content-MD5 is not the checksum declared for this file")
        }
        guard let md5 = Data(base64Encoded: pending.checksum) else {
            throw E3DBError(.storageCorrupted, "a pending file's checksum does not decode")
        }
        // Claimed in storage, so that of concurrent uploads (in any process) one stores the body and the others get
        // 409; a claim older than ``uploadClaimTimeout`` (a process that died mid-upload) is taken over by a retry
        // with the same URL. Two uploads that both store a body store the same bytes: size and MD5 are checked.
        let now = clock.now()
        guard
            try await storage.claimUpload(
                pendingID: id, now: now,
                staleBefore: now - Self.uploadClaimTimeout * 1_000_000)
        else {
            throw E3DBError(.conflict, "this file is being or was already uploaded")
        }
        do {
            // Under the body deadline, as JSON bodies are, with time for the declared size.
            try await files.store(
                id: id, chunks: timed(r.request.body, uploadSize: pending.size), expectedSize: pending.size,
                expectedMD5: md5)
        } catch {
            try? await storage.releaseUpload(pendingID: id)
            guard let error = error as? E3DBError else { throw error }
            switch error.code {
            case .requestTimeout: throw error
            case .fileBodySizeMismatch: throw E3DBError(.badRequest, error.message)
            case .fileBodyChecksumMismatch:
                throw E3DBError(.badRequest, "the body's MD5 is not the declared checksum (BadDigest)")
            default:
                logger.error("storing a file body failed", metadata: ["error": .string(error.message)])
                throw E3DBError(.serviceUnavailable, "storing a file body failed; try again")
            }
        }
        guard try await storage.markUploaded(pendingID: id) else {
            // Purged meanwhile: its id went through the deletion outbox when the row was deleted, possibly drained
            // before this body was stored, and no row refers to it now. Only this request knows it is there.
            await removeBody(id)
            throw E3DBError(.notFound, "no such upload")
        }
        ServerMetrics.fileBytes("upload", pending.size)
        return Response(status: .ok)
    }

    func commitFile(_ r: APIRequest, id: String) async throws -> Response {
        let caller = try r.caller()
        guard let id = RecordID(id), let pending = try await storage.pendingFile(id: id),
            pending.record.writerID == caller.clientID
        else {
            throw E3DBError(.notFound, "no such pending file")
        }
        if !pending.uploaded { try await verifyStoredBody(pending) }
        guard let row = try await storage.commitPendingFile(id: id, now: clock.now(), version: RecordRow.newVersion())
        else {
            throw E3DBError(.notFound, "no such pending file")
        }
        return try Self.recordResponse(row, status: .created)
    }

    func readFile(_ r: APIRequest, id: String) async throws -> Response {
        let caller = try r.caller()
        guard let id = RecordID(id), let row = try await storage.record(id: id, readableBy: caller.clientID),
            row.fileMetaJSON != nil
        else {
            throw E3DBError(.notFound, "no such file record, or it is not shared with this client")
        }
        let validity = urlValidity()
        let url =
            try files.downloadURL(id: id, now: validity.now, expires: validity.expires)
            ?? capabilityURL(r, op: "download", id: id)
        return try Self.recordResponse(row, fileURL: url)
    }

    /// Refuses the commit of a pending file whose body this server did not receive unless the store holds it
    /// whole: missing or different, 400; a store that cannot be asked, 503 (the client may retry the commit).
    func verifyStoredBody(_ pending: PendingFileRow) async throws {
        guard let md5 = Data(base64Encoded: pending.checksum) else {
            throw E3DBError(.storageCorrupted, "a pending file's checksum does not decode")
        }
        let stored: StoredBody
        do {
            stored = try await files.verifyStored(id: pending.pendingID, size: pending.size, md5: md5)
        } catch {
            logger.error("checking a file body in the store failed", metadata: ["error": .string("\(error)")])
            throw E3DBError(.serviceUnavailable, "the file store cannot be reached; try the commit again")
        }
        switch stored {
        case .present: return
        case .missing: throw E3DBError(.badRequest, "the file body has not been uploaded")
        case .mismatch(let reason):
            throw E3DBError(.badRequest, "the stored file body is not the declared one: \(reason)")
        }
    }

    /// Removes a body that no row refers to, logging (not throwing) a failure. Bodies of deleted records and
    /// purged pending files go through the deletion outbox instead (``drainBodyDeletions(only:now:)``).
    func removeBody(_ id: RecordID) async {
        do {
            try await files.remove(id: id)
        } catch {
            logger.warning("removing a file body failed", metadata: ["error": .string("\(error)")])
        }
    }

    func downloadBody(_ r: APIRequest, id: String) async throws -> Response {
        guard let id = RecordID(id) else { throw E3DBError(.notFound, "no such file") }
        try checkCapability(r, op: "download", id: id)
        guard try await storage.record(id: id) != nil, let size = try? files.size(id: id) else {
            throw E3DBError(.notFound, "no such file")
        }
        let files = self.files
        ServerMetrics.fileBytes("download", size)
        let body = ResponseBody(contentLength: Int(size)) { writer in
            try await files.read(id: id) { buffer in try await writer.write(buffer) }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: body)
    }
}
