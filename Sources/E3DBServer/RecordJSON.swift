import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import NIOCore

/// Record response bodies, for every response that carries a record (reads, field-filtered reads, writes, updates,
/// file records, search results), written with the one JSON text writer (E3DBAPI's `JSONTextWriter`, the writer of
/// `API.Record.jsonData()`). The stored `plain` and `data` members are the JSON text of objects of strings as the
/// client sent them (the record reader read them through), spliced in as they are: the server never decodes stored
/// JSON into a map and never encodes it again. A row comes from a database someone else may have written, so each
/// text is checked first (`JSONText.checkStringObject`, one linear pass that builds the names and no value; a field
/// filter reads the members with the reader's members loop instead, `JSONText.members(of:values:)`, skipping the
/// values, and keeps each selected member's text as stored): text that is not one object of strings with distinct
/// names (by code units) is `storageCorrupted` naming the column and the record, never a malformed answer, a member
/// of its own, or a name that means one value to a search and another to an SDK. `file_meta`, the server's own small object, is read with the record reader's `file_meta` grammar
/// (`JSONText.fileMeta(_:)`) and written again with the file URL of the response. The members and their order are
/// those of `API.Record`'s encoding.
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
    ///   - textRead: `row`'s `plain` and `data` are the text of the request being answered, which the record reader
    ///     has read (a write's answer): spliced without reading them a second time. A row from storage is always
    ///     read first.
    /// - Returns: the response body.
    /// - Throws: `storageCorrupted` naming the column and the record when the row's `plain`, `data` or
    ///   `file_meta` is not what the server stores there (`plain` or `data` with a repeated member name included).
    static func render(
        _ row: RecordRow, fields: [String] = [], plain: Plain = .stored, fileURL: String? = nil, textRead: Bool = false
    ) throws -> ByteBuffer {
        var w = JSONTextWriter(
            capacity: 320 + row.type.utf8.count + row.plainJSON.utf8.count + row.dataJSON.utf8.count
                + (row.recSig?.utf8.count ?? 0) + (row.fileMetaJSON?.utf8.count ?? 0) + (fileURL?.utf8.count ?? 0))
        w.byte(UInt8(ascii: "{"))
        w.key("meta", first: true)
        try writeMeta(row, plain: plain, fileURL: fileURL, textRead: textRead, into: &w)
        w.key("data", first: false)
        try writeData(row, fields: fields, textRead: textRead, into: &w)
        w.optionalString("rec_sig", row.recSig)
        w.byte(UInt8(ascii: "}"))
        return ByteBuffer(bytes: w.bytes)
    }

    /// A search result: `{"meta":{…},"record_data":{…} or null,"access_key":… or null,"rec_sig":…}` (`rec_sig`
    /// when set), the members of `API.SearchResult`'s encoding.
    /// - Parameter accessKey: the JSON text of the caller's `API.EAKInfo` for the record, nil for `null`.
    static func writeSearchResult(
        _ row: RecordRow, includeData: Bool, accessKey: String?, into w: inout JSONTextWriter
    ) throws {
        w.byte(UInt8(ascii: "{"))
        w.key("meta", first: true)
        try writeMeta(row, plain: .stored, fileURL: nil, textRead: false, into: &w)
        w.key("record_data", first: false)
        if includeData { try writeData(row, fields: [], textRead: false, into: &w) } else { w.raw("null") }
        w.key("access_key", first: false)
        if let accessKey { w.json(accessKey) } else { w.raw("null") }
        w.optionalString("rec_sig", row.recSig)
        w.byte(UInt8(ascii: "}"))
    }

    /// `meta`, with the one meta writer (`JSONTextWriter.meta`), from the stored row.
    static func writeMeta(
        _ row: RecordRow, plain: Plain, fileURL: String?, textRead: Bool, into w: inout JSONTextWriter
    ) throws {
        let plainText: JSONTextWriter.MetaPlain?
        switch plain {
        case .stored: plainText = .text(textRead ? row.plainJSON : try checked(row.plainJSON, "records.plain", of: row))
        case .request(let text): plainText = text.map { .text($0) }
        }
        var fileMeta: API.FileMeta?
        if let stored = row.fileMetaJSON {
            guard let read = JSONText.fileMeta(stored) else {
                throw E3DBError(
                    .storageCorrupted,
                    "records.file_meta of stored record \(row.recordID.text) is not a file_meta object")
            }
            fileMeta = read
            fileMeta?.fileURL = fileURL
        }
        w.meta(
            recordID: row.recordID.text, writerID: row.writerID.text, userID: row.userID.text, type: row.type,
            plain: plainText, created: APITimestamp.format(micros: row.created),
            lastModified: APITimestamp.format(micros: row.lastModified), version: row.version, fileMeta: fileMeta)
    }

    /// `data`: the stored text, or with `fields` the stored text of the members they name.
    private static func writeData(
        _ row: RecordRow, fields: [String], textRead: Bool, into w: inout JSONTextWriter
    ) throws {
        guard !fields.isEmpty else {
            w.json(textRead ? row.dataJSON : try checked(row.dataJSON, "records.data", of: row))
            return
        }
        let members = try stored("records.data", of: row) { () throws(E3DBError) in
            try JSONText.members(of: row.dataJSON, values: false)
        }
        let wanted = Set(fields.map(CodeUnitKey.init))
        w.byte(UInt8(ascii: "{"))
        var first = true
        for member in members where wanted.contains(CodeUnitKey(member.name)) {
            if !first { w.byte(UInt8(ascii: ",")) }
            first = false
            w.json(member.text)
        }
        w.byte(UInt8(ascii: "}"))
    }

    /// The members of a row's stored `plain`, for a search to match: names distinct by code units (the reader
    /// refuses a repeated one), so two that are equal as Swift `String`s (`"é"`, `"e\u{301}"`) stay two members.
    static func plainMembers(_ row: RecordRow) throws -> RecordData {
        let members = try stored("records.plain", of: row) { () throws(E3DBError) in
            try JSONText.members(of: row.plainJSON, values: true)
        }
        var map = RecordData(capacity: members.count)
        for member in members { map.insert(key: member.name, value: member.value ?? "") }
        return map
    }

    /// `text` when it is one JSON object of strings with distinct names (`JSONText.checkStringObject`).
    private static func checked(_ text: String, _ column: String, of row: RecordRow) throws -> String {
        try stored(column, of: row) { () throws(E3DBError) in try JSONText.checkStringObject(text) }
        return text
    }

    /// What `read` returns from a row's stored `column`; its refusal is `storageCorrupted` naming the column and
    /// the record (the reader's message says what is wrong and at which byte).
    private static func stored<T>(
        _ column: String, of row: RecordRow, _ read: () throws(E3DBError) -> T
    ) throws(E3DBError) -> T {
        do { return try read() } catch {
            throw E3DBError(
                .storageCorrupted,
                "\(column) of stored record \(row.recordID.text) is not a JSON object of strings: \(error.message)")
        }
    }
}
