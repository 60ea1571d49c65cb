public import Foundation
public import E3DBAPI
public import E3DBDocuments
public import E3DBPrimitives
import E3DBCanonicalJSON
import E3DBKeys

/// A note as read: the server's members and the decrypted, verified fields.
public struct ClientNote: Sendable, Hashable {
    /// The stored note (`note_id`, `id_string`, `views`, `max_views`, keys, …).
    public var note: API.Note
    /// The plaintext fields (empty for a note this client only wrote).
    public var data: RecordData
}

extension E3DBClient {
    /// A TSV1-signed request to the notes API, signed with this client's signing key over the path and query as
    /// sent.
    func sendTSV1(_ method: String, path: String, query: [(String, String)] = [], body: Data? = nil,
                  operation: String, expect: Set<Int>? = nil) async throws -> TransportResponse {
        let signingKey = try identity.requireSigningKey()
        let base = URLComponents(string: apiURL)?.percentEncodedPath ?? ""
        let fullPath = (base.hasSuffix("/") ? String(base.dropLast()) : base) + path
        let rawQuery = query.map { Self.escapeQuery($0.0) + "=" + Self.escapeQuery($0.1) }.joined(separator: "&")
        let header = try TSV1.authorization(path: fullPath, query: rawQuery, method: method, clientID: clientID,
                                            signingKey: signingKey)
        var headers = [("Authorization", header)]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let url = apiURL + path + (rawQuery.isEmpty ? "" : "?" + rawQuery)
        return try await Self.exchange(transport, TransportRequest(method: method, url: url, headers: headers, body: body),
                                       operation: operation, idempotent: false, timeout: timeout, expect: expect)
    }

    /// Encrypts and signs a note (TFSP1 field signatures) for a recipient's keys and stores it.
    /// - Parameters:
    ///   - data: the fields.
    ///   - recipientEncryptionKey: the recipient's Curve25519 public key.
    ///   - recipientSigningKey: the recipient's Ed25519 public key (it reads the note with it).
    ///   - name: a global name (`id_string`) to read it by; `.conflict` when taken.
    ///   - maxViews: how many reads before the server deletes it (nil: unlimited).
    /// - Returns: the stored note (with its `note_id`).
    /// - Throws: `E3DBError` `.missingKey` without a signing key, `.conflict` for a taken name, the server's.
    public func writeNote(
        _ data: RecordData, recipientEncryptionKey: Box.PublicKey, recipientSigningKey: Ed25519.PublicKey,
        name: String? = nil, maxViews: Int? = nil
    ) async throws -> API.Note {
        let encrypted = try EncryptedNote.encrypt(
            data: data, recipientEncryptionKey: recipientEncryptionKey, recipientSigningKey: recipientSigningKey,
            writerBoxKey: identity.boxKey, writerSigningKey: try identity.requireSigningKey())
        var note = try JSONDecoder().decode(API.Note.self, from: encrypted.jsonData())
        note.idString = name
        note.maxViews = maxViews
        note.clientID = clientID.uuidString.lowercased()
        note.type = ""
        note.plain = [:]
        let r = try await sendTSV1("POST", path: "/v2/storage/notes", body: try JSONEncoder().encode(note),
                                   operation: "note write")
        return try Self.decode(API.Note.self, r, operation: "note write")
    }

    /// Reads a note addressed to this client by id or by name, then decrypts and verifies every field.
    /// - Parameters:
    ///   - id: the note id (exactly one of `id` and `name`).
    ///   - name: the note's `id_string`.
    ///   - options: strictness (default: every field signed).
    /// - Returns: the note and its fields.
    /// - Throws: `E3DBError` `.notFound`, `.forbidden` (not the recipient), the TFSP1 and decryption errors.
    public func readNote(id: UUID? = nil, name: String? = nil, options: NoteDecryptionOptions = .init())
        async throws -> ClientNote {
        guard (id == nil) != (name == nil) else {
            throw E3DBError(.invalidParameter, "give exactly one of a note id and a note name")
        }
        let query = id.map { [("note_id", $0.uuidString.lowercased())] } ?? [("id_string", name ?? "")]
        let r = try await sendTSV1("GET", path: "/v2/storage/notes", query: query, operation: "note read")
        let note = try Self.decode(API.Note.self, r, operation: "note read")
        let encrypted = try EncryptedNote(jsonData: r.body)
        return ClientNote(note: note, data: try encrypted.decrypt(readerKey: identity.boxKey, options: options))
    }

    /// Deletes a note this client wrote.
    /// - Throws: `E3DBError` `.notFound`, `.forbidden` (another writer's note).
    public func deleteNote(_ id: UUID) async throws {
        _ = try await sendTSV1("DELETE", path: "/v2/storage/notes/" + id.uuidString.lowercased(),
                               operation: "note delete")
    }
}
