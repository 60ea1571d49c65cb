import E3DBAPI
public import E3DBPrimitives
import Foundation
public import HTTPTypes
public import Hummingbird

/// A refusal answers with the HTTP status of its code (``API/httpStatus(of:)``) and the `{"error": message}` body.
/// Messages never hold a secret, a token or a ciphertext. The server's refusals are the codes of E3DBAPI's wire
/// contract (`.badRequest`, `.unauthorized`, …, `.serviceUnavailable`); any other error reaches a response only
/// through ``E3DBService/refusal(_:route:)``, which maps it to one of them.
extension E3DBError: HTTPResponseError {
    /// The HTTP status of the code (``API/httpStatus(of:)``); 400 for a code that is not a refusal of the API.
    public var status: HTTPResponse.Status { HTTPResponse.Status(code: API.httpStatus(of: code) ?? 400) }

    /// The `{"error": message}` response with ``status`` (a generic message for a code that is not a refusal).
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        JSONBody.error(status, API.httpStatus(of: code) == nil ? "the request could not be processed" : message)
    }
}

/// JSON in and out.
enum JSONBody {
    static func response(
        _ value: some Encodable, status: HTTPResponse.Status = .ok,
        headers extra: HTTPFields = [:]
    ) throws -> Response {
        var headers = extra
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: try buffer(value)))
    }

    /// `value` as JSON.
    static func buffer(_ value: some Encodable) throws -> ByteBuffer {
        ByteBuffer(bytes: try JSONEncoders.wire().encode(value))
    }

    static func raw(_ json: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: json)))
    }

    static func error(_ status: HTTPResponse.Status, _ message: String) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: errorBuffer(message)))
    }

    /// The `{"error": message}` body.
    static func errorBuffer(_ message: String) -> ByteBuffer {
        (try? buffer(API.ErrorBody(error: message))) ?? ByteBuffer(string: #"{"error":"error"}"#)
    }

    /// Decodes a request body whatever its Content-Type (the SDKs disagree), as a 400 with the decoder's reason
    /// (member names only, never values) when it does not fit.
    /// Every body is read with the one JSON grammar (`T.decodeBody`: the record reader, or `API.decodeChecked`
    /// before `JSONDecoder`): a byte order mark, a repeated name or two names equal as Swift `String`s (which
    /// `JSONDecoder` would merge, so that `{"plain":{"k":"1","k":"2"}}` filtered on one of them) are refused.
    static func decode<T: APIBody>(_ type: T.Type, from data: Data, what: String) throws -> T {
        try decode(data, what: what, T.decodeBody)
    }

    /// Decodes a request body with `decodeBody` after the checks and with the refusals of
    /// `decode(_:from:what:)`.
    static func decode<Body>(_ data: Data, what: String, _ decodeBody: (Data) throws -> Body) throws -> Body {
        // JSON is UTF-8 (RFC 8259 §8.1). JSONDecoder would also take UTF-16 and UTF-32, whose U+0000 and
        // structural characters hold 0x00 bytes, which UTF-8 JSON never has; one check refuses them all.
        if let offset = data.firstIndex(of: 0) {
            throw E3DBError(
                .badRequest, "the \(what) body is not UTF-8 JSON (a 0x00 byte at \(offset - data.startIndex))")
        }
        if data.starts(with: [0xFE, 0xFF]) || data.starts(with: [0xFF, 0xFE]) {
            throw E3DBError(.badRequest, "the \(what) body is not UTF-8 JSON (a UTF-16 byte order mark)")
        }
        if let offset = escapedNUL(in: data) {
            throw E3DBError(
                .badRequest, "the \(what) body holds U+0000 (\\u0000 at byte \(offset)), which the server refuses")
        }
        do {
            return try decodeBody(data)
        } catch let error as E3DBError {
            // The record reader's refusal: what is wrong and where (member names, never values).
            throw E3DBError(.badRequest, "the \(what) body is not valid: \(error.message)")
        } catch let error as DecodingError {
            throw E3DBError(.badRequest, "the \(what) body is not valid: \(describe(error))")
        } catch {
            throw E3DBError(.badRequest, "the \(what) body is not valid JSON")
        }
    }

    /// The offset of the first `\u0000` escape in JSON text, `nil` when there is none. JSON can hold U+0000 only
    /// as that escape (a raw control character is not JSON), and a backslash escapes the next character, so an
    /// escaped backslash followed by `u0000` is text, not U+0000.
    static func escapedNUL(in data: Data) -> Int? {
        // 0: outside an escape; 1: after a backslash; 2...5: after "\u" and (state - 2) zeros.
        var state = 0
        var offset = 0
        for byte in data {
            switch state {
            case 0: if byte == UInt8(ascii: "\\") { state = 1 }
            case 1: state = byte == UInt8(ascii: "u") ? 2 : 0
            default:
                if byte == UInt8(ascii: "0") {
                    state += 1
                    if state == 6 { return offset - 5 }
                } else {
                    state = byte == UInt8(ascii: "\\") ? 1 : 0
                }
            }
            offset += 1
        }
        return nil
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ p: [any CodingKey]) -> String {
            p.isEmpty
                ? "the top level" : p.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let ctx): return "missing member \(path(ctx.codingPath + [key]))"
        case .typeMismatch(_, let ctx): return "wrong type at \(path(ctx.codingPath))"
        case .valueNotFound(_, let ctx): return "null at \(path(ctx.codingPath))"
        case .dataCorrupted(let ctx):
            return ctx.codingPath.isEmpty ? "not JSON" : "bad value at \(path(ctx.codingPath))"
        @unknown default: return "not decodable"
        }
    }
}

/// `text` without leading and trailing whitespace (`CharacterSet.whitespaces`: tab and the space separators),
/// with an ASCII fast path (a bearer token is hex).
func trimmedWhitespace(_ text: Substring) -> String {
    let bytes = text.utf8
    guard bytes.allSatisfy({ $0 < 0x80 }) else { return String(text).trimmingCharacters(in: .whitespaces) }
    func blank(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 }
    guard let first = bytes.firstIndex(where: { !blank($0) }), let last = bytes.lastIndex(where: { !blank($0) }) else {
        return ""
    }
    return String(text[first...last])
}
