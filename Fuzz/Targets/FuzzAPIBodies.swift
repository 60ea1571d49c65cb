// Fuzz target FuzzAPIBodies: the JSON request bodies of the E3DB API (E3DBAPI's `API.*` types) and wire timestamps.
//
// Every input is decoded with JSONDecoder as each `Decodable` body the server accepts (RegistrationRequest,
// PutAccessKeyRequest, PolicyRequest, QueryRequest and its PlainQuery, SearchRequest, Note). Decoding throws or
// succeeds, never crashes; a decoded value encodes, and the encoding decodes to an equal value and encodes to the
// same bytes again (round trip). A PlainQuery that decodes evaluates against a fixed `plain` map without crashing.
// Records (and their `meta`) are not `Decodable`:
// `API.Record.decodeJSONKeepingText` (the strict record reader, the one reader of record bodies) holds to its own
// contract: it decides every input, refusing with a `badRequest` whose message says what and where, or returning a
// record whose `jsonData()` reads back to the same record, with `text.plain` and `text.data` exact slices of the
// input bytes (the server stores that text and splices it into responses) that `JSONText.checkStringObject`
// accepts (the check a read makes before it splices stored text) and whose members, read by
// `JSONText.members(of:values:)`, are exactly `record.meta.plain` and `record.data`; `decodeJSON` returns the same record.
// The input as UTF-8 text also goes through `APITimestamp.parse`: a parsed value within the range the wire form
// can express (0001-…-9999, not before the epoch since `format` clamps) formats and parses back to the same
// microseconds.
import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import Foundation

private func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("FuzzAPIBodies invariant violated: \(message())") }
}

private func roundTrip<T: Codable & Equatable>(_ type: T.Type, _ data: Data) -> T? {
    guard let value = try? JSONDecoder().decode(T.self, from: data) else { return nil }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    let encoded: Data
    do { encoded = try encoder.encode(value) } catch { fatalError("a decoded \(T.self) does not encode: \(error)") }
    let again: T
    do { again = try JSONDecoder().decode(T.self, from: encoded) } catch {
        fatalError("the encoding of a decoded \(T.self) does not decode: \(error)")
    }
    require(again == value, "\(T.self) changed through encode and decode")
    require((try? encoder.encode(again)) == encoded, "the encoding of \(T.self) is not stable")
    return value
}

/// The latest instant the wire form `YYYY-MM-DDTHH:MM:SS.ffffffZ` can express.
private let lastFormattable: Int64 = 253_402_300_799_999_999

private func timestamp(_ text: String) {
    guard let micros = APITimestamp.parse(text) else { return }
    guard micros >= 0, micros <= lastFormattable else { return }
    let formatted = APITimestamp.format(micros: micros)
    require(APITimestamp.parse(formatted) == micros, "timestamp \(micros) does not reparse from \(formatted)")
}

/// The contract of the strict record reader (`decodeJSONKeepingText`): see the top of the file.
private func recordReader(_ data: Data) {
    let kept: (record: API.Record, text: ReceivedRecordText)
    do { kept = try API.Record.decodeJSONKeepingText(data) } catch {
        let saysWhere = error.message.contains(" at byte ") || error.message.contains(" has no member ")
        require(error.code == .badRequest && saysWhere, "a refusal that does not say what and where: \(error)")
        return
    }
    require((try? API.Record.decodeJSON(data)) == kept.record, "decodeJSON and decodeJSONKeepingText disagree")
    require(
        (try? API.Record.decodeJSON(kept.record.jsonData())) == kept.record,
        "jsonData() of a record does not read back to it")
    let input = [UInt8](data)
    func check(_ text: String?, _ map: RecordData?, _ name: String) {
        guard let text else {
            require(map == nil || name == "data" && map == [:], "\(name) has a value but no kept text")
            return
        }
        require(input.firstRange(of: Array(text.utf8)) != nil, "the kept text of \(name) is not a slice of the input")
        require(
            (try? JSONText.checkStringObject(text)) != nil,
            "the kept text of \(name) is refused by JSONText.checkStringObject")
        let members = try? JSONText.members(of: text, values: true)
        require(members?.count == map?.count, "the kept text of \(name) does not have the record's members")
        for member in members ?? [] {
            require(map?[member.name] == member.value, "the kept text of \(name) does not mean the record's map")
        }
    }
    check(kept.text.plain, kept.record.meta.plain, "plain")
    check(kept.text.data, kept.record.data, "data")
}

private let plainSample: RecordData = ["a": "1", "b": "2", "type": "x", "": "", "\u{e9}": "3"]

func fuzzAPIBodies(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let data = unsafe start.map { unsafe Data(bytes: $0, count: count) } ?? Data()
    recordReader(data)
    _ = roundTrip(API.RegistrationRequest.self, data)
    _ = roundTrip(API.PutAccessKeyRequest.self, data)
    _ = roundTrip(API.PolicyRequest.self, data)
    if let query = roundTrip(API.QueryRequest.self, data), let plain = query.plain {
        _ = plain.matches(plainSample)
    }
    if let plain = roundTrip(API.PlainQuery.self, data) { _ = plain.matches(plainSample) }
    _ = roundTrip(API.SearchRequest.self, data)
    _ = roundTrip(API.Note.self, data)
    timestamp(String(decoding: data, as: UTF8.self))
    return 0
}
