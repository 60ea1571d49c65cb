import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

extension E3DBService {
    // MARK: Rendering

    static func jsonText(_ map: [String: String]) -> String { JSONText.sortedObject(map) }

    /// A record body (a write, an update, a file record) with the JSON text to store for its `plain` and `data`.
    struct RecordRequest {
        var record: API.Record
        /// `meta.plain`'s text; nil when the body has no `plain` (or `null`).
        var plainJSON: String?
        var dataJSON: String
    }

    /// Decodes a record body. The `plain` and `data` text stored is the objects as the client sent them, which the
    /// record reader has read through (string members, no repeated name, valid UTF-8; `JSONBody.decode` refused
    /// U+0000): the server does not write them again. A body the reader declines (a repeated member, a number with
    /// a fraction or an exponent, deep nesting, a byte order mark, keys equal as Swift `String`s but different in
    /// code units) is decoded by `JSONDecoder` and its maps stored re-encoded, key-sorted (`jsonText(_:)`). Reads
    /// check the stored text again before they splice it (`RecordJSON`): the database may have been written by
    /// someone else.
    func recordRequest(_ body: Data, what: String = "record") throws -> RecordRequest {
        let (record, text) = try JSONBody.decode(body, what: what, API.Record.decodeJSONKeepingText)
        return RecordRequest(
            record: record, plainJSON: text?.plain ?? record.meta.plain.map(Self.jsonText),
            dataJSON: text?.data ?? Self.jsonText(record.data))
    }

    static func map(_ json: String) throws -> [String: String] {
        do { return try JSONDecoder().decode([String: String].self, from: Data(json.utf8)) } catch {
            throw E3DBError(.storageCorrupted, "a stored record's JSON does not decode")
        }
    }

    func meta(_ row: RecordRow, plain: [String: String]?? = .none, fileURL: String? = nil) throws -> API.Meta {
        var fileMeta: API.FileMeta?
        if let fm = row.fileMetaJSON {
            do { fileMeta = try JSONDecoder().decode(API.FileMeta.self, from: Data(fm.utf8)) } catch {
                throw E3DBError(.storageCorrupted, "a stored file record's file_meta does not decode")
            }
            fileMeta?.fileURL = fileURL
        }
        let plainValue: [String: String]? =
            switch plain {
            case .none: try Self.map(row.plainJSON)
            case .some(let p): p
            }
        return API.Meta(
            recordID: row.recordID.text, writerID: row.writerID.text, userID: row.userID.text, type: row.type,
            plain: plainValue,
            created: APITimestamp.format(micros: row.created),
            lastModified: APITimestamp.format(micros: row.lastModified),
            version: row.version, fileMeta: fileMeta)
    }

    func record(_ row: RecordRow, fields: [String]? = nil, plain: [String: String]?? = .none, fileURL: String? = nil)
        throws -> API.Record
    {
        var data = try Self.map(row.dataJSON)
        if let fields, !fields.isEmpty { data = data.filter { fields.contains($0.key) } }
        return API.Record(meta: try meta(row, plain: plain, fileURL: fileURL), data: data, recSig: row.recSig)
    }

    /// Checks the writer rules of a record write: `writer_id` is the caller, `user_id` the writer, `type` non-empty.
    func checkWriter(_ meta: API.Meta, caller: ClientRow) throws {
        guard ClientID(meta.writerID) == caller.clientID else {
            throw E3DBError(.forbidden, "meta.writer_id must be the authenticated client")
        }
        guard ClientID(meta.userID) == caller.clientID else {
            throw E3DBError(.badRequest, "meta.user_id must equal meta.writer_id")
        }
        guard !meta.type.isEmpty else { throw E3DBError(.badRequest, "meta.type must not be empty") }
    }
}
