public import E3DBAPI
public import E3DBCanonicalJSON
import E3DBDocuments
import E3DBKeys
import E3DBPrimitives
public import Foundation
import HTTPTypes

extension E3DBClient {
    // MARK: Access keys

    func tuplePath(writer: UUID, user: UUID, reader: UUID, type: String) -> [String] {
        [writer.lowercasedString, user.lowercasedString, reader.lowercasedString, type]
    }

    /// The caller's EAKInfo for (writer, user, type), or nil when the server has none (404).
    func eakInfo(writer: UUID, user: UUID, type: String) async throws -> EAKInfo? {
        let (body, response) = try await send(
            API.Endpoints.readAccessKey, tuplePath(writer: writer, user: user, reader: clientID, type: type),
            operation: "access key read", expect: [404])
        if response.status == .notFound { return nil }
        do { return try EAKInfo(jsonData: body) } catch {
            throw E3DBError(
                .invalidResponse, "the server's EAKInfo does not parse: \(error.message)",
                context: .init(part: "access key read"))
        }
    }

    /// The access key to read (writer, user, type), cached; `.notFound` when the caller has none.
    func readerAccessKey(writer: UUID, user: UUID, type: String) async throws -> (AccessKey, EAKInfo?) {
        let key = AccessKeyCache.Key(writerID: writer, userID: user, readerID: clientID, type: type)
        if let ak = accessKeys.accessKey(for: key) { return (ak, nil) }
        guard let info = try await eakInfo(writer: writer, user: user, type: type) else {
            throw E3DBError(
                .notFound, "no access key for type \(type.prefix(80)) is shared with this client",
                context: .init(part: "access key read", actual: 404))
        }
        // This client's own key (writer = user = reader = itself) is wrapped by itself alone: a key wrapped by
        // anyone else (a server that substituted one it knows) would have this client encrypt for them.
        if writer == clientID, user == clientID, info.authorizerPublicKey != identity.publicKey {
            throw E3DBError(
                .invalidResponse,
                "the server's access key for this client's own type \(type.prefix(80)) "
                    + "is not wrapped by this client", context: .init(part: "access key read"))
        }
        let ak = try info.unwrap(with: identity.boxKey)
        accessKeys.store(ak, for: key)
        return (ak, info)
    }

    /// This client's own access key for `type`, created and stored (wrapped for itself) on first use.
    ///
    /// Concurrent first writes of a type (in this process or another holding the same credentials) may each make a
    /// key; the server keeps the first one stored and refuses the others (409), and a refused writer takes the
    /// stored key instead of its own, so every record of the type is written under the one key readers get.
    func ownAccessKey(type: String) async throws -> AccessKey {
        do {
            return try await readerAccessKey(writer: clientID, user: clientID, type: type).0
        } catch let error as E3DBError where error.code == .notFound {
            let ak = AccessKey()
            let created = try await putAccessKey(
                ak, writer: clientID, user: clientID, reader: clientID,
                readerKey: identity.publicKey, type: type)
            if !created { return try await readerAccessKey(writer: clientID, user: clientID, type: type).0 }
            accessKeys.store(ak, for: .init(writerID: clientID, userID: clientID, readerID: clientID, type: type))
            return ak
        }
    }

    /// Wraps `ak` for `reader` (this client is the authorizer) and stores it; an existing key (409) is kept.
    /// - Returns: whether `ak` was stored (false: the server already had a key for the tuple).
    @discardableResult
    func putAccessKey(
        _ ak: AccessKey, writer: UUID, user: UUID, reader: UUID, readerKey: Box.PublicKey,
        type: String
    ) async throws -> Bool {
        let eak = try EncryptedAccessKey.wrap(ak, for: readerKey, by: identity.boxKey)
        let (_, response) = try await send(
            API.Endpoints.putAccessKey, tuplePath(writer: writer, user: user, reader: reader, type: type),
            json: API.PutAccessKeyRequest(eak: eak.description), operation: "access key write",
            expect: [409])
        return response.status != .conflict
    }

    // MARK: Records

    func decrypt(_ record: API.Record) async throws -> ClientRecord {
        guard let writer = UUID(uuidString: record.meta.writerID), let user = UUID(uuidString: record.meta.userID)
        else {
            throw E3DBError(.invalidResponse, "a record's writer_id or user_id is not a UUID")
        }
        let (ak, _) = try await readerAccessKey(writer: writer, user: user, type: record.meta.type)
        let meta = ClientMeta(
            writerID: writer, userID: user, type: record.meta.type,
            plain: record.meta.plain ?? RecordData())
        let document = EncryptedDocument(meta: meta, data: record.data, recordSignature: record.recSig)
        var options = verification
        // rec_sig is checked against the writer's own registered signing key (looked up once and pinned), never
        // the EAKInfo's signer_signing_key: that is the key of whoever stored the access key, an authorizer
        // sharing on the writer's behalf or anyone the server names. With the writer's own key, the EAK's
        // signer_id has no say in whether the record is the writer's, so that check is not made here.
        options.requireWriterIsSigner = false
        var key: Ed25519.PublicKey?
        if record.recSig != nil, options.policy != .ignore {
            key = try await signingKey(of: writer)
            if key == nil {
                throw E3DBError(
                    .missingKey,
                    "the record is signed, but its writer \(writer.lowercasedString) "
                        + "registered no signing key to verify rec_sig with",
                    context: .init(field: "signing_key", item: record.meta.recordID))
            }
        }
        let plain = try document.decrypt(accessKey: ak, verifyingKey: key, verification: options)
        return ClientRecord(meta: record.meta, data: plain.data, signatureStatus: plain.signatureStatus)
    }

    /// Refuses a record the server sent in answer to a request for another: `meta.record_id`, and where the caller
    /// knows them, `writer_id` and `type` must be the ones asked for. (`rec_sig` does not cover `record_id`: a
    /// server can still answer an id with another signed record of the same writer and type that it rewrote.)
    static func checkAnswer(
        _ meta: API.Meta, id: UUID, writer: UUID? = nil, type: String? = nil,
        operation: String
    ) throws(E3DBError) {
        let asked = id.lowercasedString
        guard meta.recordID.flatMap(UUID.init(uuidString:)) == id else {
            throw E3DBError(
                .invalidResponse,
                "\(operation): the server answered record \(asked) with another record "
                    + "(\(meta.recordID?.prefix(40) ?? "no record_id"))",
                context: .init(field: "record_id", part: operation, item: asked))
        }
        if let writer, UUID(uuidString: meta.writerID) != writer {
            throw E3DBError(
                .invalidResponse,
                "\(operation): record \(asked) came back with writer_id "
                    + "\(meta.writerID.prefix(40)), not \(writer.lowercasedString)",
                context: .init(field: "writer_id", part: operation, item: asked))
        }
        if let type, meta.type != type {
            throw E3DBError(
                .invalidResponse, "\(operation): record \(asked) came back with another type",
                context: .init(field: "type", part: operation, item: asked))
        }
    }

    func encryptedBody(type: String, data: RecordData, plain: RecordData, ak: AccessKey) throws -> API.Record {
        let document: EncryptedDocument
        if let sk = identity.signingKey {
            document = EncryptedDocument.encrypt(
                type: type, data: data, plain: plain, writerID: clientID,
                accessKey: ak, signingKey: sk)
        } else {
            document = EncryptedDocument(
                meta: ClientMeta(writerID: clientID, userID: clientID, type: type, plain: plain),
                data: FieldCipher.encrypt(data, accessKey: ak), recordSignature: nil)
        }
        let id = clientID.lowercasedString
        return API.Record(
            meta: API.Meta(writerID: id, userID: id, type: type, plain: plain), data: document.data,
            recSig: document.recordSignature)
    }

    /// Encrypts and writes a record (signed with `rec_sig` when the identity has a signing key).
    /// - Parameters:
    ///   - type: the record type (plaintext).
    ///   - data: the fields to encrypt (at least one).
    ///   - plain: plaintext, searchable metadata.
    /// - Returns: the record as stored, decrypted.
    /// - Throws: `E3DBError` from the server (`.badRequest` for empty data) or the transport.
    public func write(type: String, data: RecordData, plain: RecordData = RecordData()) async throws -> ClientRecord {
        let ak = try await ownAccessKey(type: type)
        let body = try encryptedBody(type: type, data: data, plain: plain, ak: ak)
        let echoed = try await call(
            API.Endpoints.writeRecord, json: body, operation: "record write", idempotent: false)
        return try await echoedOrDecrypted(echoed, sent: body, data: data)
    }

    /// The record the server echoed after a signed write. When it carries exactly the ciphertext, plain metadata, writer,
    /// user, type and `rec_sig` that were sent, its data is the plaintext just encrypted, and a signature made
    /// over those members verifies (Ed25519 verification is deterministic), so neither is redone; anything else is
    /// decrypted and verified in full like a read (so is an unsigned write).
    func echoedOrDecrypted(_ echoed: API.Record, sent: API.Record, data: RecordData) async throws -> ClientRecord {
        guard sent.recSig != nil, verification.order == .utf16, echoed.data == sent.data, echoed.recSig == sent.recSig,
            echoed.meta.writerID == sent.meta.writerID,
            echoed.meta.userID == sent.meta.userID, echoed.meta.type == sent.meta.type,
            (echoed.meta.plain ?? RecordData()) == (sent.meta.plain ?? RecordData())
        else {
            return try await decrypt(echoed)
        }
        return ClientRecord(
            meta: echoed.meta, data: data,
            signatureStatus: verification.policy == .ignore ? .notChecked : .verified)
    }

    /// Reads and decrypts a record (own, or shared with this client).
    /// - Parameters:
    ///   - id: the record id.
    ///   - fields: only these fields (all when nil).
    ///   - writer: when known, the writer the record must have.
    ///   - type: when known, the type the record must have.
    /// - Returns: the record, its signature checked per ``verification``. With `fields`, the whole record is
    ///   fetched, decrypted and verified as any read (`rec_sig` covers every field), and only then are the other
    ///   fields dropped: the selected fields are as verified as a whole read's.
    /// - Throws: `E3DBError` `.notFound` (unknown or not shared), `.invalidResponse` when the server answers
    ///   with a record of another id (or writer or type), the decryption and verification errors
    ///   (`.missingSignature` for an unsigned record under the default policy).
    public func read(_ id: UUID, fields: [String]? = nil, writer: UUID? = nil, type: String? = nil) async throws
        -> ClientRecord
    {
        let record = try await call(API.Endpoints.readRecord, [id.lowercasedString], operation: "record read")
        try Self.checkAnswer(record.meta, id: id, writer: writer, type: type, operation: "record read")
        var read = try await decrypt(record)
        if let fields, !fields.isEmpty {
            // By code units, as the server filters: "é" and "e\u{301}" name two fields.
            let selected = Set(fields.map(CodeUnitKey.init))
            read.data = try RecordData(
                read.data.filter { selected.contains(CodeUnitKey($0.key)) }.map { ($0.key, $0.value) })
        }
        return read
    }

    /// Replaces a record's data (and plain metadata) if its version is still `record.meta.version`.
    /// - Parameters:
    ///   - record: the record with new `data` (and `meta.plain`); `meta.record_id` and `meta.version` name it.
    /// - Returns: the updated record with its new version.
    /// - Throws: `E3DBError` `.conflict` when someone updated it first, `.forbidden` when it is not this client's.
    public func update(_ record: ClientRecord) async throws -> ClientRecord {
        guard let id = record.meta.recordID, let version = record.meta.version else {
            throw E3DBError(
                .missingKey, "updating needs meta.record_id and meta.version", context: .init(field: "version"))
        }
        let ak = try await ownAccessKey(type: record.meta.type)
        let body = try encryptedBody(
            type: record.meta.type, data: record.data,
            plain: record.meta.plain ?? RecordData(), ak: ak)
        var updated = try await call(
            API.Endpoints.updateRecord, [id, version], json: body, operation: "record update", idempotent: false)
        if updated.meta.plain == nil { updated.meta.plain = body.meta.plain }
        return try await echoedOrDecrypted(updated, sent: body, data: record.data)
    }

    /// Deletes a record if its version is still `version`.
    /// - Throws: `E3DBError` `.conflict` for a stale version, `.forbidden` for another's or an unknown record.
    public func delete(_ id: UUID, version: String) async throws {
        _ = try await send(
            API.Endpoints.deleteRecordVersion, [id.lowercasedString, version],
            operation: "record delete", idempotent: false)
    }

    // MARK: Sharing

    /// Shares this client's records of `type` with `reader`: wraps the access key for the reader's public key
    /// (checked against ``knownKeys``; compare its fingerprint out of band) and grants `read`. Sharing again is not
    /// an error.
    /// - Throws: `E3DBError` `.notFound` for an unknown reader, `.keyChanged` when the server gives the reader
    ///   another key than the one pinned.
    public func share(type: String, with reader: UUID) async throws {
        let info = try await clientInfo(reader)
        let readerKey = try Box.PublicKey(base64URLEncoded: info.publicKey.curve25519)
        let ak = try await ownAccessKey(type: type)
        try await putAccessKey(ak, writer: clientID, user: clientID, reader: reader, readerKey: readerKey, type: type)
        try await putPolicy(reader: reader, type: type, API.PolicyRequest(allow: [["read": .object([:])]]))
    }

    /// Revokes `reader`'s access to this client's records of `type` (policy first, then the key).
    public func revoke(type: String, from reader: UUID) async throws {
        try await putPolicy(reader: reader, type: type, API.PolicyRequest(deny: [["read": .object([:])]]))
        _ = try await send(
            API.Endpoints.deleteAccessKey, tuplePath(writer: clientID, user: clientID, reader: reader, type: type),
            operation: "access key delete")
    }

    func putPolicy(reader: UUID, type: String, _ policy: API.PolicyRequest) async throws {
        try await putPolicy(writer: clientID, reader: reader, type: type, policy)
    }

    /// Who this client shares with (`GET /v1/storage/policy/outgoing`).
    public func outgoingSharing() async throws -> [API.OutgoingSharing] {
        try await call(API.Endpoints.outgoingSharing, operation: "outgoing sharing")
    }

    /// Who shares with this client (`GET /v1/storage/policy/incoming`).
    public func incomingSharing() async throws -> [API.IncomingSharing] {
        try await call(API.Endpoints.incomingSharing, operation: "incoming sharing")
    }
}
