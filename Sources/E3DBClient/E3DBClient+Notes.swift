public import E3DBAPI
public import E3DBCanonicalJSON
public import E3DBDocuments
import E3DBKeys
public import E3DBPrimitives
public import Foundation
import HTTPTypes

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
    func sendTSV1<Body, Answer>(
        _ endpoint: API.Endpoint<Body, Answer>, _ parameters: [String] = [], query: [(String, String)] = [],
        body: Data? = nil, operation: String, expect: Set<Int>? = nil
    ) async throws -> (Data, HTTPResponse) {
        try await Self.sendTSV1(
            endpoint, parameters, apiURL: apiURL, query: query, body: body,
            signingKey: try identity.requireSigningKey(), uid: clientID.lowercasedString,
            transport: transport, timeout: timeout, operation: operation, expect: expect)
    }

    /// A TSV1-signed request to the notes API: `uid` is the caller's client id, or empty for an anonymous caller
    /// (a key pair that is not a registered client, as the Python SDK's anonymous notes sign).
    static func sendTSV1<Body, Answer>(
        _ endpoint: API.Endpoint<Body, Answer>, _ parameters: [String] = [], apiURL: String,
        query: [(String, String)] = [], body: Data? = nil, signingKey: Ed25519.PrivateKey, uid: String,
        transport: any E3DBTransport, timeout: Duration, operation: String, expect: Set<Int>? = nil
    ) async throws
        -> (Data, HTTPResponse)
    {
        let method = endpoint.method
        let path = "/" + endpoint.path(parameters).map(escapeSegment).joined(separator: "/")
        let base = URLComponents(string: apiURL)?.percentEncodedPath ?? ""
        let fullPath = (base.hasSuffix("/") ? String(base.dropLast()) : base) + path
        let rawQuery = query.map { escapeQuery($0.0) + "=" + escapeQuery($0.1) }.joined(separator: "&")
        let header = try TSV1.authorization(
            path: fullPath, query: TSV1.canonicalQuery(rawQuery), method: method,
            timestamp: Int64(Date().timeIntervalSince1970), nonce: UUID().lowercasedString, clientID: uid,
            signingKey: signingKey)
        var fields: [(HTTPField.Name, String)] = [(.authorization, header)]
        if body != nil { fields.append((.contentType, "application/json")) }
        let url = apiURL + path + (rawQuery.isEmpty ? "" : "?" + rawQuery)
        return try await exchange(
            transport, try request(method, url, fields, operation: operation), body: body, operation: operation,
            idempotent: false, timeout: timeout, expect: expect)
    }

    /// The JSON body of a note write or replace: the note encrypted and TFSP1-signed by the writer's key pairs,
    /// with the options the Python SDK sends (`client_id`, `id_string`, `max_views`, `expires`/`expiration`).
    static func noteBody(
        _ data: RecordData, recipientEncryptionKey: Box.PublicKey, recipientSigningKey: Ed25519.PublicKey,
        writerBoxKey: Box.PrivateKey, writerSigningKey: Ed25519.PrivateKey, writerID: UUID?, options: NoteOptions
    ) throws -> Data {
        if let maxViews = options.maxViews, maxViews < -1 {
            throw E3DBError(
                .invalidParameter, "max_views must be positive, or 0 or -1 for unlimited",
                context: .init(field: "max_views", actual: maxViews))
        }
        // The server refuses it too (its stored notes are read by a parser that holds integers up to 2^53).
        if let maxViews = options.maxViews, maxViews > 1 << 53 {
            throw E3DBError(
                .invalidParameter, "max_views must be at most 2^53",
                context: .init(field: "max_views", actual: maxViews))
        }
        // A note's fields travel in `API.Note`, a map by Swift `String`s, which the one grammar refuses to fill
        // from two names equal as Unicode text (a `RecordData` keeps them apart): refused here, before any work.
        var names = Set<String>()
        for (name, _) in data where !names.insert(name).inserted {
            throw E3DBError(
                .invalidParameter,
                "two note field names are equal as Unicode text (one of them \"\(name.prefix(40))\" in another "
                    + "normalization form); a note keeps field names apart only when they differ as text",
                context: .init(field: "data"))
        }
        let encrypted = try EncryptedNote.encrypt(
            data: data, recipientEncryptionKey: recipientEncryptionKey, recipientSigningKey: recipientSigningKey,
            writerBoxKey: writerBoxKey, writerSigningKey: writerSigningKey)
        var note = try API.Note.decodeBody(encrypted.jsonData())
        note.idString = options.name
        note.maxViews = options.maxViews
        note.clientID = writerID?.lowercasedString
        note.type = ""
        note.plain = [:]
        if let expiration = options.expiration {
            note.expires = true
            note.expiration = APITimestamp.format(
                micros: Int64((expiration.timeIntervalSince1970 * 1e6).rounded(.down)))
        } else if options.statesEveryLimit {
            note.expires = false
        }
        if options.statesEveryLimit, note.maxViews == nil { note.maxViews = -1 }
        return try note.encodeBody()
    }

    /// Reads a note by id or by name with TSV1 signed by `signingKey`, then decrypts and verifies it with
    /// `boxKey`.
    static func readNote(
        id: UUID?, name: String?, boxKey: Box.PrivateKey, signingKey: Ed25519.PrivateKey, uid: String,
        apiURL: String, transport: any E3DBTransport, timeout: Duration, options: NoteDecryptionOptions
    ) async throws -> ClientNote {
        guard (id == nil) != (name == nil) else {
            throw E3DBError(.invalidParameter, "give exactly one of a note id and a note name")
        }
        if let name, name.isEmpty { throw E3DBError(.invalidParameter, "a note name cannot be empty") }
        let query = id.map { [("note_id", $0.lowercasedString)] } ?? [("id_string", name ?? "")]
        let (r, _) = try await sendTSV1(
            API.Endpoints.readNote, apiURL: apiURL, query: query,
            signingKey: signingKey, uid: uid, transport: transport, timeout: timeout,
            operation: "note read")
        let note = try decodeNote(r, operation: "note read")
        let encrypted = try EncryptedNote(jsonData: r)
        return ClientNote(note: note, data: try encrypted.decrypt(readerKey: boxKey, options: options))
    }

    /// Encrypts and signs a note (TFSP1 field signatures) for a recipient's keys and stores it.
    /// - Parameters:
    ///   - data: the fields.
    ///   - recipientEncryptionKey: the recipient's Curve25519 public key.
    ///   - recipientSigningKey: the recipient's Ed25519 public key (it reads the note with it).
    ///   - name: a global name (`id_string`) to read it by; `.conflict` when taken.
    ///   - maxViews: how many reads before the server deletes it (nil, 0 or -1: unlimited).
    ///   - expiration: when the server stops serving it (nil: never).
    /// - Returns: the stored note (with its `note_id`).
    /// - Throws: `E3DBError` `.missingKey` without a signing key, `.invalidParameter` for a `maxViews` below -1,
    ///   `.conflict` for a taken name, the server's.
    public func writeNote(
        _ data: RecordData, recipientEncryptionKey: Box.PublicKey, recipientSigningKey: Ed25519.PublicKey,
        name: String? = nil, maxViews: Int? = nil, expiration: Date? = nil
    ) async throws -> API.Note {
        try await storeNote(
            API.Endpoints.writeNote, data, recipientEncryptionKey: recipientEncryptionKey,
            recipientSigningKey: recipientSigningKey,
            options: NoteOptions(name: name, maxViews: maxViews, expiration: expiration),
            operation: "note write")
    }

    /// Encrypts a note with this client's keys and POSTs (write) or PUTs (replace) it.
    private func storeNote(
        _ endpoint: API.Endpoint<API.Note, API.Note>, _ data: RecordData, recipientEncryptionKey: Box.PublicKey,
        recipientSigningKey: Ed25519.PublicKey, options: NoteOptions, operation: String
    ) async throws -> API.Note {
        let body = try Self.noteBody(
            data, recipientEncryptionKey: recipientEncryptionKey, recipientSigningKey: recipientSigningKey,
            writerBoxKey: identity.boxKey, writerSigningKey: try identity.requireSigningKey(), writerID: clientID,
            options: options)
        let (r, _) = try await sendTSV1(endpoint, body: body, operation: operation)
        return try Self.decodeNote(r, operation: operation)
    }

    /// Replaces the note named `name` (an upsert keyed by `id_string`, `PUT /v2/storage/notes`, as the Swift and
    /// js SDKs do): the server stores a new note under the name, with a new `note_id`, and may address it to
    /// another recipient. Only the writer of the current note may replace it; names are a registered client's
    /// feature, so there is no anonymous replace.
    /// - Parameters:
    ///   - name: the note's `id_string` (not empty).
    ///   - data: the new fields.
    ///   - recipientEncryptionKey: the recipient's Curve25519 public key.
    ///   - recipientSigningKey: the recipient's Ed25519 public key.
    ///   - maxViews: how many reads before the server deletes it (0 or -1: unlimited); views start at 0. Nil
    ///     keeps the current note's limit (e3dbkit-server; see docs/client.md), unless `resettingLimits`.
    ///   - expiration: when the server stops serving it. Nil keeps the current note's expiry, unless
    ///     `resettingLimits`.
    ///   - resettingLimits: a nil `maxViews` or `expiration` means unlimited reads and no expiry.
    /// - Returns: the stored note (a new `note_id`).
    /// - Throws: `E3DBError` `.invalidParameter` for an empty name, `.forbidden` when another writer holds the
    ///   name, the server's.
    public func replaceNote(
        named name: String, with data: RecordData, recipientEncryptionKey: Box.PublicKey,
        recipientSigningKey: Ed25519.PublicKey, maxViews: Int? = nil, expiration: Date? = nil,
        resettingLimits: Bool = false
    ) async throws -> API.Note {
        guard !name.isEmpty else { throw E3DBError(.invalidParameter, "a note name cannot be empty") }
        var options = NoteOptions(name: name, maxViews: maxViews, expiration: expiration)
        options.statesEveryLimit = resettingLimits
        return try await storeNote(
            API.Endpoints.replaceNote, data, recipientEncryptionKey: recipientEncryptionKey,
            recipientSigningKey: recipientSigningKey, options: options, operation: "note replace")
    }

    /// Reads a note addressed to this client by id or by name, then decrypts and verifies every field.
    /// - Parameters:
    ///   - id: the note id (exactly one of `id` and `name`).
    ///   - name: the note's `id_string`.
    ///   - options: strictness (default: every field signed).
    /// - Returns: the note and its fields.
    /// - Throws: `E3DBError` `.notFound` (also for a note past its expiration or whose views are used up: the
    ///   server answers 404 for both), `.forbidden` (not the recipient), the TFSP1 and decryption errors.
    public func readNote(id: UUID? = nil, name: String? = nil, options: NoteDecryptionOptions = .init())
        async throws -> ClientNote
    {
        try await Self.readNote(
            id: id, name: name, boxKey: identity.boxKey, signingKey: try identity.requireSigningKey(),
            uid: clientID.lowercasedString, apiURL: apiURL, transport: transport, timeout: timeout,
            options: options)
    }

    /// Deletes a note this client wrote.
    /// - Throws: `E3DBError` `.notFound`, `.forbidden` (another writer's note).
    public func deleteNote(_ id: UUID) async throws {
        _ = try await sendTSV1(API.Endpoints.deleteNote, [id.lowercasedString], operation: "note delete")
    }
}
