import E3DBAPI
import E3DBPrimitives
import NIOCore

/// Record response bodies written straight into the response bytes. The stored `plain` and `data` members are the
/// JSON text of objects of strings (the client's, as the record reader read it, or the server's own re-encoding),
/// spliced in as they are: no decode and re-encode per read. A row comes from a database someone else may have
/// written, so each text is checked first (`JSONText.isStringObject`, one linear pass that builds nothing): text
/// that is not one object of strings is `storageCorrupted`, never a malformed answer or a member of its own. The
/// members and their order are those of `API.Record`'s encoding.
enum RecordJSON {
    /// `{"meta":{"record_id":…,"writer_id":…,"user_id":…,"type":…,"plain":{…},"created":…,"last_modified":…,
    /// "version":…},"data":{…},"rec_sig":…}` (`rec_sig` only when set). For records without `file_meta`, read
    /// without a field filter.
    /// - Parameter row: the stored record.
    /// - Returns: the response body.
    /// - Throws: `storageCorrupted` when the row's `plain` or `data` is not the text of one JSON object of strings.
    static func render(_ row: RecordRow) throws -> ByteBuffer {
        guard JSONText.isStringObject(row.plainJSON) else {
            throw E3DBError(.storageCorrupted, "records.plain of a stored record is not a JSON object of strings")
        }
        guard JSONText.isStringObject(row.dataJSON) else {
            throw E3DBError(.storageCorrupted, "records.data of a stored record is not a JSON object of strings")
        }
        var out = ByteBuffer()
        out.reserveCapacity(
            320 + row.type.utf8.count + row.plainJSON.utf8.count + row.dataJSON.utf8.count
                + (row.recSig?.utf8.count ?? 0))
        out.writeStaticString(#"{"meta":{"record_id":"#)
        writeString(row.recordID.text, into: &out)
        out.writeStaticString(#","writer_id":"#)
        writeString(row.writerID.text, into: &out)
        out.writeStaticString(#","user_id":"#)
        writeString(row.userID.text, into: &out)
        out.writeStaticString(#","type":"#)
        writeString(row.type, into: &out)
        out.writeStaticString(#","plain":"#)
        out.writeString(row.plainJSON)
        out.writeStaticString(#","created":"#)
        writeString(APITimestamp.format(micros: row.created), into: &out)
        out.writeStaticString(#","last_modified":"#)
        writeString(APITimestamp.format(micros: row.lastModified), into: &out)
        out.writeStaticString(#","version":"#)
        writeString(row.version, into: &out)
        out.writeStaticString(#"},"data":"#)
        out.writeString(row.dataJSON)
        if let sig = row.recSig {
            out.writeStaticString(#","rec_sig":"#)
            writeString(sig, into: &out)
        }
        out.writeStaticString("}")
        return out
    }

    /// Writes `text` as a JSON string the way the server's `JSONEncoder` does (`JSONText.writeString(_:_:)`).
    static func writeString(_ text: String, into out: inout ByteBuffer) {
        // Safety: `JSONText.writeString` lends each run of bytes only for the callback, and `writeBytes` copies it.
        unsafe JSONText.writeString(text) { unsafe out.writeBytes($0) }
    }
}
