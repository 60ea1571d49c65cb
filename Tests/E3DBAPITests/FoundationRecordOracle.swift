import E3DBAPI
import E3DBCanonicalJSON
import Foundation

/// An independent reading of a record body, with Foundation's `JSONSerialization`, that the strict record reader
/// is compared against: the record the body means under the reader's documented rules (required string
/// `writer_id`, `user_id` and `type`; `plain` and `data` objects of strings, `null` or absent; the members the
/// server sets itself read when they are strings and ignored otherwise; `file_meta` of strings or `null` and an
/// integer `size`), or nil when it means none. `API.Record` has no `Decodable` conformance to compare against.
///
/// Its two limits, where the tests compare with the reader only on bodies it can judge: `JSONSerialization` reads
/// objects into `[String: Any]`, so it cannot express member names distinct only by code units (`"é"` and
/// `"e\u{301}"` merge; the reader keeps both), and `NSNumber as? Int64` takes `12.0` and `true` as a `size`
/// (the reader refuses both).
enum FoundationRecordOracle {
    static func record(_ data: Data) -> API.Record? {
        guard let object = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]),
            let body = object as? [String: Any], let meta = body["meta"] as? [String: Any]
        else { return nil }
        func nullable<T>(_ value: Any?, _ read: (Any) -> T?) -> T?? {
            guard let value, !(value is NSNull) else { return .some(nil) }
            return read(value).map { .some($0) }
        }
        func string(_ value: Any) -> String? { value as? String }
        func map(_ value: Any) -> RecordData? {
            guard let members = value as? [String: Any] else { return nil }
            var out = RecordData()
            for (name, value) in members {
                guard let value = value as? String else { return nil }
                out[name] = value
            }
            return out
        }
        func lenient(_ name: String) -> String? { meta[name] as? String }
        guard let writer = meta["writer_id"] as? String, let user = meta["user_id"] as? String,
            let type = meta["type"] as? String, let plain = nullable(meta["plain"], map),
            let data = nullable(body["data"], map), let recSig = nullable(body["rec_sig"], string),
            let fileMeta = nullable(meta["file_meta"], self.fileMeta)
        else { return nil }
        return API.Record(
            meta: API.Meta(
                recordID: lenient("record_id"), writerID: writer, userID: user, type: type, plain: plain,
                created: lenient("created"), lastModified: lenient("last_modified"), version: lenient("version"),
                fileMeta: fileMeta),
            data: data ?? RecordData(), recSig: recSig)
    }

    private static func fileMeta(_ value: Any) -> API.FileMeta? {
        guard let members = value as? [String: Any] else { return nil }
        func text(_ name: String) -> String?? {
            guard let value = members[name], !(value is NSNull) else { return .some(nil) }
            return (value as? String).map { .some($0) }
        }
        let size: Int64??
        switch members["size"] {
        case nil, is NSNull: size = .some(nil)
        case let number as NSNumber: size = (number as? Int64).map { .some($0) }
        default: size = nil
        }
        guard let url = text("file_url"), let name = text("file_name"), let checksum = text("checksum"),
            let compression = text("compression"), let size
        else { return nil }
        return API.FileMeta(fileURL: url, fileName: name, checksum: checksum, compression: compression, size: size)
    }
}
