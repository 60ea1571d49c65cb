import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

extension E3DBService {
    /// `POST /v1/storage/records`, `GET /v1/storage/records/{id}`, and the versioned (`safe`) and unversioned
    /// update and delete, for registered clients.
    func addRecordRoutes(to router: Router<E3DBRequestContext>) {
        router.group().add(middleware: Authentication(service: self, requirement: .client))
            .on(API.Endpoints.writeRecord) { try await self.writeRecord($0) }
            .on(API.Endpoints.readRecord) { try await self.readRecord($0, id: $0.parameter("id")) }
            .on(API.Endpoints.updateRecord) {
                try await self.updateRecord($0, id: $0.parameter("id"), version: $0.parameter("version"))
            }
            .on(API.Endpoints.deleteRecordVersion) {
                try await self.deleteRecord($0, id: $0.parameter("id"), version: $0.parameter("version"))
            }
            .on(API.Endpoints.deleteRecord) { try await self.deleteRecord($0, id: $0.parameter("id"), version: nil) }
    }

    func writeRecord(_ r: APIRequest) async throws -> Response {
        let caller = try r.caller()
        let row = try await storage.insertRecord(
            newRecord(try await body(r, for: .client(caller.clientID)), caller: caller))
        // The row's plain and data are this request's text, which the record reader has read.
        return try Self.recordResponse(row, status: .created, textRead: true)
    }

    /// The row a record write stores: the body decoded and checked as `POST /v1/storage/records` requires.
    func newRecord(_ body: Data, caller: ClientRow) throws -> RecordRow {
        let request = try recordRequest(body)
        let req = request.record
        try checkWriter(req.meta, caller: caller)
        guard !req.data.isEmpty else { throw E3DBError(.badRequest, "data must have at least one field") }
        guard req.meta.fileMeta == nil else {
            throw E3DBError(.badRequest, "file records are written through /v1/storage/files")
        }
        let now = clock.now()
        return RecordRow(
            recordID: .random(), writerID: caller.clientID, userID: caller.clientID, type: req.meta.type,
            plainJSON: request.plainJSON ?? "{}", dataJSON: request.dataJSON,
            recSig: req.recSig, fileMetaJSON: nil, created: now, lastModified: now, version: RecordRow.newVersion())
    }

    /// The refusal of a record read, whether the record is missing or not shared (the two are not told apart).
    static let unreadableRecord = E3DBError(.notFound, "no such record, or it is not shared with this client")

    func readRecord(_ r: APIRequest, id: String) async throws -> Response {
        let caller = try r.caller()
        guard let id = RecordID(id), let row = try await storage.record(id: id, readableBy: caller.clientID)
        else {
            throw Self.unreadableRecord
        }
        return try Self.recordResponse(row, fields: r.queryValues("field"))
    }

    /// A record response spliced from the stored JSON text (`RecordJSON.render`, whose parameters these are).
    static func recordResponse(
        _ row: RecordRow, status: HTTPResponse.Status = .ok, fields: [String] = [],
        plain: RecordJSON.Plain = .stored, fileURL: String? = nil, textRead: Bool = false
    ) throws -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(
                byteBuffer: try RecordJSON.render(
                    row, fields: fields, plain: plain, fileURL: fileURL, textRead: textRead)))
    }

    func updateRecord(_ r: APIRequest, id: String, version: String) async throws -> Response {
        let caller = try r.caller()
        let request = try recordRequest(try await body(r, for: .client(caller.clientID)))
        let req = request.record
        guard !req.data.isEmpty else { throw E3DBError(.badRequest, "data must have at least one field") }
        guard let id = RecordID(id), let current = try await storage.record(id: id),
            AccessRules.mayChangeRecord(caller: caller.clientID, writer: current.writerID)
        else {
            throw E3DBError(.forbidden, "no such record, or this client did not write it")
        }
        let outcome = try await storage.updateRecord(
            id: id, expectedVersion: version.lowercased(), plainJSON: request.plainJSON,
            dataJSON: request.dataJSON, recSig: req.recSig, newVersion: RecordRow.newVersion(), now: clock.now())
        switch outcome {
        case .done(let row):
            // The response echoes the request's plain (absent stays absent: old Swift's test); reads return {}.
            return try Self.recordResponse(row, plain: .request(request.plainJSON))
        case .conflict: throw E3DBError(.conflict, "the record's version is not \(version.prefix(40))")
        case .notFound: throw E3DBError(.forbidden, "no such record")
        }
    }

    func deleteRecord(_ r: APIRequest, id: String, version: String?) async throws -> Response {
        let caller = try r.caller()
        guard let id = RecordID(id), let current = try await storage.record(id: id),
            AccessRules.mayChangeRecord(caller: caller.clientID, writer: current.writerID)
        else {
            throw E3DBError(.forbidden, "no such record, or this client did not write it")
        }
        switch try await storage.deleteRecord(id: id, expectedVersion: version?.lowercased()) {
        case .done(let row):
            // The delete put the body in the outbox; it is removed now, or by a later maintenance pass.
            if row.fileMetaJSON != nil { await drainDeletedBody(row.recordID) }
            return Response(status: .noContent)
        case .conflict: throw E3DBError(.conflict, "the record's version is not \(version?.prefix(40) ?? "")")
        case .notFound: throw E3DBError(.forbidden, "no such record")
        }
    }
}
