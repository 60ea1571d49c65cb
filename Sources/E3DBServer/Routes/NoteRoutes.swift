import E3DBAPI
import E3DBCanonicalJSON
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird

extension E3DBService {
    /// Notes (`/v2/storage/notes`), addressed by signing keys: every request carries a TSV1 header.
    func addNoteRoutes(to router: Router<E3DBRequestContext>) {
        router.group().add(middleware: Authentication(service: self, requirement: .tsv1))
            .on(API.Endpoints.writeNote) { try await self.writeNote($0) }
            .on(API.Endpoints.readNote) { try await self.readNote($0) }
            .on(API.Endpoints.replaceNote) { try await self.replaceNote($0) }
            .on(API.Endpoints.deleteNote) { try await self.deleteNote($0, id: $0.parameter("id")) }
    }

    /// Builds the stored row of a note written by a verified TSV1 caller (spec api §7); `client` is the registered
    /// client the header proved to be (``noteCaller(_:)``), `nil` for an anonymous writer.
    func noteRow(_ note: API.Note, verified: TSV1.VerifiedRequest, client: ClientRow?) throws -> NoteRow {
        guard note.writerSigningKey == verified.signingKey.base64URLEncoded else {
            throw E3DBError(.forbidden, "the TSV1 key must be the note's writer_signing_key")
        }
        // An extended access control policy (email or TozOTP challenge, last access) needs Tozny's identity
        // service to enforce it. Storing one unenforced would serve the note to anyone with the recipient's key,
        // so it is refused (docs/server.md, "Where the SDKs disagree").
        switch note.eacp {
        case nil, .null: break
        case .object(let members) where members.isEmpty: break
        default:
            throw E3DBError(
                .badRequest,
                "this server does not enforce note access control policies (eacp); write the note without one")
        }
        guard Self.validKey(note.recipientSigningKey), Self.validKey(note.writerSigningKey),
            Self.validKey(note.writerEncryptionKey)
        else {
            throw E3DBError(.badRequest, "the note's keys must be base64url 32-byte keys")
        }
        guard !note.data.isEmpty else { throw E3DBError(.badRequest, "a note needs at least one data field") }
        let now = clock.now()
        var stored = note
        let noteID = NoteID.random()
        stored.noteID = noteID.text
        // Names are a registered client's feature: an anonymous note is returned with id_string "".
        let name = client == nil ? nil : (note.idString?.isEmpty == false ? note.idString : nil)
        stored.idString = name ?? ""
        // Only a verified client is named as the writer: an anonymous body's client_id is not believed.
        stored.clientID = client?.clientID.text
        stored.createdAt = APITimestamp.format(micros: now)
        stored.views = nil
        stored.plain = note.plain ?? [:]
        var expiresAt: Int64?
        if note.expires == true {
            // A note asked to expire is never stored as one that does not: an expiration that is missing, null, not
            // a string or not an RFC 3339 time (or a date that does not exist, such as 2026-02-31) is refused. The
            // one exception is Go's zero time (`0001-01-01T00:00:00Z`, what the SDKs send for "no expiration"):
            // at or before it, the note never expires, as before.
            guard let text = note.expiration, let t = APITimestamp.parse(text) else {
                throw E3DBError(
                    .badRequest, "expiration must be an RFC 3339 timestamp when expires is true",
                    context: .init(field: "expiration"))
            }
            if t > APITimestamp.goZeroTime { expiresAt = t }
        }
        let maxViews = note.maxViews.flatMap { $0 > 0 ? $0 : nil }
        let body = String(decoding: try JSONEncoders.wire().encode(stored), as: UTF8.self)
        // A note is stored only if every read can answer it (`StoredNote.read(_:refusal:)`).
        _ = try StoredNote.read(body) { problem in
            // The one integer of a note: beyond 2^53 the parser's message would name only a byte.
            let member = note.maxViews.map { $0.magnitude > 1 << 53 } == true ? " (max_views must be at most 2^53)" : ""
            return E3DBError(.badRequest, "the note cannot be stored: its body \(problem)\(member)")
        }
        return NoteRow(
            noteID: noteID, idString: name, writerClientID: client?.clientID,
            recipientSigningKey: note.recipientSigningKey, writerSigningKey: note.writerSigningKey, maxViews: maxViews,
            views: 0, expiresAt: expiresAt, created: now, bodyJSON: body)
    }

    /// The note as stored (the body `noteRow` built, with no `views`), with the row's `views` added
    /// (`StoredNote.withViews(_:views:refusal:)`): a row that is not what a stored note must be (edited by someone
    /// who can write the database) is `storageCorrupted` naming the note.
    func noteResponse(_ row: NoteRow, status: HTTPResponse.Status) throws -> Response {
        let bytes = try StoredNote.withViews(row.bodyJSON, views: row.views) { problem in
            E3DBError(.storageCorrupted, "notes.body of stored note \(row.noteID.text) \(problem)")
        }
        return Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// A note body, bounded by ``ServerConfiguration/maxAnonymousNoteSize`` when the writer is anonymous.
    func noteBody(_ r: APIRequest, client: ClientRow?) async throws -> API.Note {
        let owner = client.map { BodyOwner.client($0.clientID) } ?? .anonymous
        let limit = client == nil ? configuration.maxAnonymousNoteSize : nil
        return try JSONBody.decode(API.Note.self, from: try await body(r, for: owner, limit: limit), what: "note")
    }

    func writeNote(_ r: APIRequest) async throws -> Response {
        let (verified, client) = try r.noteCaller()
        let note = try await noteBody(r, client: client)
        let row = try noteRow(note, verified: verified, client: client)
        guard try await storage.insertNote(row) else {
            throw E3DBError(.conflict, "a note with this id_string already exists")
        }
        return try noteResponse(row, status: .created)
    }

    func readNote(_ r: APIRequest) async throws -> Response {
        let (verified, _) = try r.noteCaller()
        let ids = r.queryValues("note_id")
        let names = r.queryValues("id_string")
        guard ids.count + names.count == 1 else {
            throw E3DBError(.badRequest, "give exactly one of note_id and id_string")
        }
        let found: NoteRow?
        if let id = ids.first {
            guard let id = NoteID(id) else { throw E3DBError(.badRequest, "note_id is not a UUID") }
            found = try await storage.note(id: id)
        } else {
            found = try await storage.note(name: names[0])
        }
        guard let note = found else { throw E3DBError(.notFound, "no such note") }
        guard note.recipientSigningKey == verified.signingKey.base64URLEncoded else {
            throw E3DBError(.forbidden, "the TSV1 key is not the note's recipient_signing_key")
        }
        guard let viewed = try await storage.viewNote(id: note.noteID, now: clock.now()) else {
            throw E3DBError(.notFound, "no such note")
        }
        return try noteResponse(viewed, status: .ok)
    }

    func replaceNote(_ r: APIRequest) async throws -> Response {
        let (verified, client) = try r.noteCaller()
        var note = try await noteBody(r, client: client)
        guard client != nil, let name = note.idString, !name.isEmpty else {
            throw E3DBError(.badRequest, "replacing a note needs a registered client and an id_string")
        }
        if let existing = try await storage.note(name: name) {
            guard existing.writerSigningKey == verified.signingKey.base64URLEncoded else {
                throw E3DBError(.forbidden, "only the note's writer may replace it")
            }
            // A limit the body does not state (no `max_views`; no `expires` and no `expiration`) is the current
            // note's: a replaced note never loses its read limit or expiry by omission. Stating one (-1 or 0 for
            // unlimited views, `expires: false`) changes it.
            if note.maxViews == nil { note.maxViews = existing.maxViews }
            if note.expires == nil, note.expiration == nil, let expiresAt = existing.expiresAt {
                note.expires = true
                note.expiration = APITimestamp.format(micros: expiresAt)
            }
        }
        let row = try noteRow(note, verified: verified, client: client)
        try await storage.replaceNote(row)
        return try noteResponse(row, status: .ok)
    }

    func deleteNote(_ r: APIRequest, id: String) async throws -> Response {
        let (verified, _) = try r.noteCaller()
        guard let id = NoteID(id) else { throw E3DBError(.badRequest, "the note id is not a UUID") }
        guard let note = try await storage.note(id: id) else { throw E3DBError(.notFound, "no such note") }
        guard note.writerSigningKey == verified.signingKey.base64URLEncoded else {
            throw E3DBError(.forbidden, "only the note's writer may delete it")
        }
        guard try await storage.deleteNote(id: id) else { throw E3DBError(.notFound, "no such note") }
        return Response(status: .noContent)
    }
}

/// What the text of a stored note (`notes.body`) must be: one JSON object without `views`, read by the strict JSON
/// parser at its default limits (`ParseLimits.default`: 1,048,576 values, 64 MiB). The one check, made before a
/// note is stored (a refusal is the writer's 400) and whenever one is read back (a refusal is a 503 naming the
/// note), so a note the server accepts is a note it can answer with: the request is read by `JSONDecoder`, which
/// takes more values and integers beyond 2^53.
enum StoredNote {
    /// Checks `text` and returns where its object closes and whether it has members.
    /// - Parameter refusal: the error for a problem, given as the rest of a sentence about the body (`is not
    ///   JSON: tooManyValues at byte 2097170: …`).
    static func read(
        _ text: String, refusal: (String) -> E3DBError
    ) throws(E3DBError) -> (close: String.UTF8View.Index, empty: Bool) {
        let utf8 = text.utf8
        let parsed: JSONValue
        do { parsed = try CanonicalJSON.parse(utf8) } catch { throw refusal("is not JSON: \(error.description)") }
        guard case .object(let members) = parsed, members["views"] == nil,
            let close = utf8.lastIndex(of: UInt8(ascii: "}"))
        else { throw refusal("is not a JSON object without views") }
        return (close, members.isEmpty)
    }

    /// `text`, checked by `read(_:refusal:)`, with `"views":views` as its last member: the stored bytes are
    /// spliced, never decoded into an `API.Note` and encoded again.
    static func withViews(_ text: String, views: Int, refusal: (String) -> E3DBError) throws(E3DBError) -> [UInt8] {
        let (close, empty) = try read(text, refusal: refusal)
        var w = JSONTextWriter(capacity: text.utf8.count + 24)
        w.json(utf8: text.utf8[..<close])
        w.raw(empty ? #""views":"# : #","views":"#)
        w.json(String(views))
        w.byte(UInt8(ascii: "}"))
        return w.bytes
    }
}
