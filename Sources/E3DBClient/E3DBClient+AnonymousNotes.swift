public import E3DBAPI
public import E3DBCanonicalJSON
public import E3DBDocuments
public import E3DBKeys
public import E3DBPrimitives
public import Foundation

/// The options of a note write: its global name, its view limit and its expiration.
public struct NoteOptions: Sendable, Hashable {
    /// A global name (`id_string`) to read the note by. The server keeps names only for registered writers: an
    /// anonymous note is stored unnamed (`id_string` `""`), as Tozny's service does.
    public var name: String?
    /// How many reads before the server deletes the note (nil, 0 or -1: unlimited).
    public var maxViews: Int?
    /// When the server stops serving the note (nil: never).
    public var expiration: Date?
    /// Sends "unlimited" and "never" for a nil `maxViews` and `expiration` instead of leaving them out (a replace
    /// that leaves a limit out keeps the current note's).
    var statesEveryLimit = false

    /// Options for a note write.
    public init(name: String? = nil, maxViews: Int? = nil, expiration: Date? = nil) {
        self.name = name
        self.maxViews = maxViews
        self.expiration = expiration
    }
}

/// The key pairs of a note writer or reader that need not be a registered client: a Curve25519 key pair (the
/// note's access key is wrapped with it) and an Ed25519 key pair (it signs the fields and the TSV1 requests).
/// The private keys stay in the core's wiped key types.
public struct NoteKeyPairs: Sendable, CustomStringConvertible {
    /// The Curve25519 key pair.
    public var boxKey: Box.PrivateKey
    /// The Ed25519 key pair.
    public var signingKey: Ed25519.PrivateKey

    /// Key pairs from existing keys.
    public init(boxKey: Box.PrivateKey, signingKey: Ed25519.PrivateKey) {
        self.boxKey = boxKey
        self.signingKey = signingKey
    }

    /// The key pairs of an identity (a credential file, or a key file with only the four key members).
    /// - Throws: `E3DBError` `.missingKey` when the identity has no signing key.
    public init(_ identity: ClientIdentity) throws(E3DBError) {
        self.init(boxKey: identity.boxKey, signingKey: try identity.requireSigningKey())
    }

    /// New random key pairs.
    public static func generate() -> NoteKeyPairs {
        NoteKeyPairs(boxKey: Box.PrivateKey(), signingKey: Ed25519.PrivateKey())
    }

    /// The Curve25519 public key.
    public var publicKey: Box.PublicKey { boxKey.publicKey }
    /// The Ed25519 public key.
    public var publicSigningKey: Ed25519.PublicKey { signingKey.publicKey }

    /// The public keys only.
    public var description: String {
        "NoteKeyPairs(public_key: \(publicKey.base64URLEncoded), public_signing_key: \(publicSigningKey.base64URLEncoded))"
    }
}

extension E3DBClient {
    /// Writes a note without a registered client, as the Python SDK's `write_anonymous_note` does: the note is
    /// encrypted and TFSP1-signed with the writer's key pairs and sent with TSV1 signed by the writer's Ed25519 key
    /// and an empty `uid`.
    /// - Parameters:
    ///   - data: the fields.
    ///   - recipientEncryptionKey: the recipient's Curve25519 public key.
    ///   - recipientSigningKey: the recipient's Ed25519 public key (it reads the note with it).
    ///   - writer: the writer's key pairs (``NoteKeyPairs/generate()`` for throwaway ones).
    ///   - apiURL: the server.
    ///   - options: view limit and expiration; a name is dropped by the server for an anonymous writer.
    ///   - transport: how requests reach the server (`AsyncHTTPClientTransport`, `URLSessionTransport` or your own).
    ///   - timeout: per exchange (default 30 s).
    /// - Returns: the stored note (with its `note_id`).
    /// - Throws: `E3DBError` `.invalidParameter` for a `maxViews` below -1, the server's (`.badRequest`,
    ///   `.forbidden`), `.transportFailed`.
    public static func writeAnonymousNote(
        _ data: RecordData, recipientEncryptionKey: Box.PublicKey, recipientSigningKey: Ed25519.PublicKey,
        writer: NoteKeyPairs, apiURL: String, options: NoteOptions = NoteOptions(),
        transport: any E3DBTransport, timeout: Duration = .seconds(30)
    ) async throws -> API.Note {
        let body = try noteBody(
            data, recipientEncryptionKey: recipientEncryptionKey, recipientSigningKey: recipientSigningKey,
            writerBoxKey: writer.boxKey, writerSigningKey: writer.signingKey, writerID: nil, options: options)
        let (r, _) = try await sendTSV1(
            API.Endpoints.writeNote, apiURL: trimmed(apiURL), body: body,
            signingKey: writer.signingKey, uid: "", transport: transport, timeout: timeout,
            operation: "note write")
        return try decodeNote(r, operation: "note write")
    }

    /// Reads a note without a registered client, as the Python SDK's `read_anonymous_note_by_id` and
    /// `read_anonymous_note_by_name` do: TSV1 signed by the reader's Ed25519 key (it must be the note's
    /// `recipient_signing_key`) with an empty `uid`, then the access key is unwrapped with the reader's Curve25519
    /// key and every field decrypted and verified.
    /// - Parameters:
    ///   - id: the note id (exactly one of `id` and `name`).
    ///   - name: the note's `id_string` (notes written by registered clients keep their names).
    ///   - reader: the reader's key pairs.
    ///   - apiURL: the server.
    ///   - options: strictness (default: every field signed; pin the writer with `expectedWriterSigningKey`).
    ///   - transport: how requests reach the server (`AsyncHTTPClientTransport`, `URLSessionTransport` or your own).
    ///   - timeout: per exchange (default 30 s).
    /// - Returns: the note and its fields.
    /// - Throws: `E3DBError` `.notFound` (unknown, deleted, past its expiration or views used up: the server
    ///   answers 404 for all), `.forbidden` (the reader's signing key is not the note's recipient key), the TFSP1
    ///   and decryption errors.
    public static func readAnonymousNote(
        id: UUID? = nil, name: String? = nil, reader: NoteKeyPairs, apiURL: String,
        options: NoteDecryptionOptions = .init(), transport: any E3DBTransport,
        timeout: Duration = .seconds(30)
    ) async throws -> ClientNote {
        try await readNote(
            id: id, name: name, boxKey: reader.boxKey, signingKey: reader.signingKey, uid: "",
            apiURL: trimmed(apiURL), transport: transport, timeout: timeout, options: options)
    }

    /// The API URL without a trailing slash.
    static func trimmed(_ apiURL: String) -> String {
        apiURL.hasSuffix("/") ? String(apiURL.dropLast()) : apiURL
    }
}
