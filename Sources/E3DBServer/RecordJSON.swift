import E3DBAPI
import NIOCore

/// Record response bodies written straight into the response bytes. The stored `plain` and `data` members are JSON
/// objects of strings the server read through at write time (the client's text, or the server's own), so they are
/// spliced in as they are: no decode and re-encode per read. The members and their order are those of ``API/Record``'s encoding.
enum RecordJSON {
    /// `{"meta":{"record_id":…,"writer_id":…,"user_id":…,"type":…,"plain":{…},"created":…,"last_modified":…,
    /// "version":…},"data":{…},"rec_sig":…}` (`rec_sig` only when set). For records without `file_meta`, read
    /// without a field filter.
    /// - Parameter row: the stored record.
    /// - Returns: the response body.
    static func render(_ row: RecordRow) -> ByteBuffer {
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

    /// Writes `text` as a JSON string the way the server's `JSONEncoder` does (``JSONText/writeString(_:_:)``).
    static func writeString(_ text: String, into out: inout ByteBuffer) {
        // Safety: `JSONText.writeString` lends each run of bytes only for the callback, and `writeBytes` copies it.
        unsafe JSONText.writeString(text) { unsafe out.writeBytes($0) }
    }
}
