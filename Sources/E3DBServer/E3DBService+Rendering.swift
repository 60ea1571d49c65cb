import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

extension E3DBService {
    // MARK: Rendering

    /// A record body (a write, an update, a file record) with the JSON text to store for its `plain` and `data`.
    struct RecordRequest {
        var record: API.Record
        /// `meta.plain`'s text; nil when the body has no `plain` (or `null`).
        var plainJSON: String?
        var dataJSON: String
    }

    /// Decodes a record body with the strict record reader (`API.Record.decodeJSONKeepingText`), which decides
    /// every body: a body it refuses is a 400 saying what is wrong and where. The `plain` and `data` text stored is
    /// the objects as the client sent them, which the reader has read through (string members, no repeated name,
    /// valid UTF-8; `JSONBody.decode` refused U+0000): the server never writes them again. A `data` that is absent
    /// or `null` is stored as `{}`. Reads check the stored text again before they splice it (`RecordJSON`): the
    /// database may have been written by someone else.
    func recordRequest(_ body: Data, what: String = "record") throws -> RecordRequest {
        let (record, text) = try JSONBody.decode(body, what: what, API.Record.decodeJSONKeepingText)
        return RecordRequest(record: record, plainJSON: text.plain, dataJSON: text.data ?? "{}")
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
