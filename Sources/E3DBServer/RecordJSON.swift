import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import NIOCore

/// Record response bodies written straight into the response bytes, for every response that carries a record
/// (reads, field-filtered reads, writes, updates, file records, search results). The stored `plain` and `data`
/// members are the JSON text of objects of strings as the client sent them (the record reader read them through),
/// spliced in as they are: the server never decodes stored JSON into a map and never encodes it again. A row comes
/// from a database someone else may have written, so each text is checked first (`JSONText.isStringObject`, one
/// linear pass that builds nothing; a field filter reads the members with the reader's members loop instead,
/// `JSONText.members(of:)`, and keeps each selected member's text as stored): text that is not one object of
/// strings is `storageCorrupted`, never a malformed answer or a member of its own. `file_meta`, the server's own
/// small object, is read with the record reader's `file_meta` grammar (`JSONText.fileMeta(_:)`) and written again
/// with the file URL of the response. The members and their order are those of `API.Record`'s encoding.
enum RecordJSON {
    /// Where a response's `meta.plain` comes from.
    enum Plain {
        /// The stored text (checked).
        case stored
        /// The text of the request being answered (read by the record reader already); nil leaves `plain` out.
        case request(String?)
    }

    /// `{"meta":{"record_id":…,"writer_id":…,"user_id":…,"type":…,"plain":{…},"created":…,"last_modified":…,
    /// "version":…,"file_meta":{…}},"data":{…},"rec_sig":…}` (`file_meta` for file records, `rec_sig` when set).
    /// - Parameters:
    ///   - row: the stored record.
    ///   - fields: the `data` members to keep, by code units (empty: all).
    ///   - plain: where `meta.plain` comes from.
    ///   - fileURL: a file record's `file_meta.file_url` (`null` without).
    /// - Returns: the response body.
    /// - Throws: `storageCorrupted` naming the column when the row's `plain`, `data` or `file_meta` is not what
    ///   the server stores there.
    static func render(_ row: RecordRow, fields: [String] = [], plain: Plain = .stored, fileURL: String? = nil)
        throws -> ByteBuffer
    {
        var out = ByteBuffer()
        out.reserveCapacity(
            320 + row.type.utf8.count + row.plainJSON.utf8.count + row.dataJSON.utf8.count
                + (row.recSig?.utf8.count ?? 0) + (row.fileMetaJSON?.utf8.count ?? 0) + (fileURL?.utf8.count ?? 0))
        out.writeStaticString(#"{"meta":"#)
        try writeMeta(row, plain: plain, fileURL: fileURL, into: &out)
        out.writeStaticString(#","data":"#)
        try writeData(row, fields: fields, into: &out)
        if let sig = row.recSig {
            out.writeStaticString(#","rec_sig":"#)
            writeString(sig, into: &out)
        }
        out.writeStaticString("}")
        return out
    }

    /// A search result: `{"meta":{…},"record_data":{…} or null,"access_key":… or null,"rec_sig":…}` (`rec_sig`
    /// when set), the members of `API.SearchResult`'s encoding.
    /// - Parameter accessKey: the JSON text of the caller's `API.EAKInfo` for the record, nil for `null`.
    static func writeSearchResult(
        _ row: RecordRow, includeData: Bool, accessKey: ByteBuffer?, into out: inout ByteBuffer
    ) throws {
        out.writeStaticString(#"{"meta":"#)
        try writeMeta(row, plain: .stored, fileURL: nil, into: &out)
        out.writeStaticString(#","record_data":"#)
        if includeData { try writeData(row, fields: [], into: &out) } else { out.writeStaticString("null") }
        out.writeStaticString(#","access_key":"#)
        if let accessKey { out.writeImmutableBuffer(accessKey) } else { out.writeStaticString("null") }
        if let sig = row.recSig {
            out.writeStaticString(#","rec_sig":"#)
            writeString(sig, into: &out)
        }
        out.writeStaticString("}")
    }

    /// `meta`, in `API.Meta`'s member order.
    static func writeMeta(_ row: RecordRow, plain: Plain, fileURL: String?, into out: inout ByteBuffer) throws {
        out.writeStaticString(#"{"record_id":"#)
        writeString(row.recordID.text, into: &out)
        out.writeStaticString(#","writer_id":"#)
        writeString(row.writerID.text, into: &out)
        out.writeStaticString(#","user_id":"#)
        writeString(row.userID.text, into: &out)
        out.writeStaticString(#","type":"#)
        writeString(row.type, into: &out)
        switch plain {
        case .stored:
            out.writeStaticString(#","plain":"#)
            out.writeString(try checked(row.plainJSON, "records.plain"))
        case .request(let text?):
            out.writeStaticString(#","plain":"#)
            out.writeString(text)
        case .request(nil): break
        }
        out.writeStaticString(#","created":"#)
        writeString(APITimestamp.format(micros: row.created), into: &out)
        out.writeStaticString(#","last_modified":"#)
        writeString(APITimestamp.format(micros: row.lastModified), into: &out)
        out.writeStaticString(#","version":"#)
        writeString(row.version, into: &out)
        if let stored = row.fileMetaJSON {
            guard var fileMeta = JSONText.fileMeta(stored) else {
                throw E3DBError(
                    .storageCorrupted, "records.file_meta of a stored file record is not a file_meta object")
            }
            fileMeta.fileURL = fileURL
            out.writeStaticString(#","file_meta":"#)
            out.writeString(JSONText.fileMeta(fileMeta))
        }
        out.writeStaticString("}")
    }

    /// `data`: the stored text, or with `fields` the stored text of the members they name.
    private static func writeData(_ row: RecordRow, fields: [String], into out: inout ByteBuffer) throws {
        guard !fields.isEmpty else {
            out.writeString(try checked(row.dataJSON, "records.data"))
            return
        }
        guard let members = JSONText.members(of: row.dataJSON) else { throw corrupted("records.data") }
        let wanted = Set(fields.map(CodeUnitKey.init))
        out.writeStaticString("{")
        var first = true
        for member in members where wanted.contains(CodeUnitKey(member.name)) {
            if !first { out.writeStaticString(",") }
            first = false
            out.writeSubstring(member.text)
        }
        out.writeStaticString("}")
    }

    /// The members of a row's stored `plain`, for a search to match (a name that repeats under Swift's `String`
    /// equality keeps its first value).
    static func plainMembers(_ row: RecordRow) throws -> [String: String] {
        guard let members = JSONText.members(of: row.plainJSON) else { throw corrupted("records.plain") }
        var map: [String: String] = Dictionary(minimumCapacity: members.count)
        for member in members where map[member.name] == nil { map[member.name] = member.value }
        return map
    }

    /// `text` when it is one JSON object of strings (`JSONText.isStringObject`).
    private static func checked(_ text: String, _ column: String) throws -> String {
        guard JSONText.isStringObject(text) else { throw corrupted(column) }
        return text
    }

    private static func corrupted(_ column: String) -> E3DBError {
        E3DBError(.storageCorrupted, "\(column) of a stored record is not a JSON object of strings")
    }

    /// Writes `text` as a JSON string the way the server's `JSONEncoder` does (`JSONText.writeString(_:_:)`).
    static func writeString(_ text: String, into out: inout ByteBuffer) {
        // Safety: `JSONText.writeString` lends each run of bytes only for the callback, and `writeBytes` copies it.
        unsafe JSONText.writeString(text) { unsafe out.writeBytes($0) }
    }
}
