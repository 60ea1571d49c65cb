import E3DBAPI
public import E3DBCanonicalJSON
public import E3DBDocuments
public import E3DBKeys
public import E3DBPrimitives
public import Foundation

/// Local encryption, decryption, signing and verification: documents that never go through the server, under
/// the same keys as the records (the old Swift SDK's `createWriterKey`, `getReaderKey`, `encrypt`, `decrypt`,
/// `sign` and `verify`).
///
/// The keys are `EAKInfo`s: an access key wrapped for this client, safe to store beside the documents. Fetching
/// them is the only networked step; ``encrypt(type:data:plain:eakInfo:)`` and ``decrypt(_:eakInfo:)`` work
/// offline afterwards.
extension E3DBClient {
    /// This client's writer key for `type`: the access key its records of that type are written under (created and
    /// stored on the server on first use), wrapped for this client.
    /// - Parameter type: the record type.
    /// - Returns: the EAKInfo (safe to store; only this client's private key opens it).
    /// - Throws: `E3DBError` from the server or the transport.
    public func writerKey(type: String) async throws -> EAKInfo {
        _ = try await ownAccessKey(type: type)
        guard let info = try await eakInfo(writer: clientID, user: clientID, type: type) else {
            throw E3DBError(
                .invalidResponse, "the server has no access key for type \(type.prefix(80)) just stored",
                context: .init(part: "access key read", actual: 404))
        }
        return info
    }

    /// The reader key for records of `type` written by `writer` (about `user`, by default the writer) and shared
    /// with this client.
    /// - Parameters:
    ///   - writer: the writer's client id.
    ///   - user: the user the records are about (default: the writer).
    ///   - type: the record type.
    /// - Returns: the EAKInfo (safe to store).
    /// - Throws: `E3DBError` `.notFound` when nothing of that type is shared with this client.
    public func readerKey(writer: UUID, user: UUID? = nil, type: String) async throws -> EAKInfo {
        guard let info = try await eakInfo(writer: writer, user: user ?? writer, type: type) else {
            throw E3DBError(
                .notFound, "no access key for type \(type.prefix(80)) is shared with this client",
                context: .init(part: "access key read", actual: 404))
        }
        return info
    }

    /// Encrypts a document locally under a writer key, signed with this client's signing key (`rec_sig`), as
    /// ``write(type:data:plain:)`` would store it. No network.
    /// - Parameters:
    ///   - type: the record type.
    ///   - data: the fields to encrypt.
    ///   - plain: plaintext metadata.
    ///   - eakInfo: a key from ``writerKey(type:)``.
    /// - Returns: the encrypted document (E3DB record JSON through `jsonData()`).
    /// - Throws: `E3DBError` `.missingKey` without a signing key, `.authenticationFailed` for a key that is not
    ///   this client's.
    public func encrypt(type: String, data: RecordData, plain: RecordData = RecordData(), eakInfo: EAKInfo)
        throws(E3DBError) -> EncryptedDocument
    {
        try EncryptedDocument.encrypt(type: type, data: data, plain: plain, identity: identity, eakInfo: eakInfo)
    }

    /// Decrypts a document locally with a writer or reader key, checking `rec_sig` with ``verification``: against
    /// this client's own signing key for its own documents, else the key's signer. No network.
    /// - Parameters:
    ///   - document: the encrypted document.
    ///   - eakInfo: a key from ``writerKey(type:)`` or ``readerKey(writer:user:type:)``.
    /// - Returns: the decrypted document and its `signatureStatus`.
    /// - Throws: `E3DBError` `.authenticationFailed` for a changed ciphertext or a key that does not open it,
    ///   `.invalidSignature` and the policy's errors.
    public func decrypt(_ document: EncryptedDocument, eakInfo: EAKInfo) throws(E3DBError) -> DecryptedDocument {
        let own = document.meta.writerID == clientID ? identity.publicSigningKey : nil
        return try document.decrypt(
            identity: identity, eakInfo: eakInfo, verifyingKey: own,
            verification: verification)
    }

    /// Signs any `Signable` value with this client's signing key.
    /// - Parameter document: what to sign (its canonical serialization is what is signed).
    /// - Returns: the document with its signature.
    /// - Throws: `E3DBError` `.missingKey` without a signing key.
    public func sign<D: Signable & Sendable>(_ document: D) throws(E3DBError) -> SignedDocument<D> {
        SignedDocument(signing: document, with: try identity.requireSigningKey())
    }

    /// Verifies a signed document against a signing key (another client's, from ``clientInfo(_:)``, or this
    /// client's own when omitted).
    /// - Parameters:
    ///   - signed: the signed document.
    ///   - publicSigningKey: the signer's public key (default: this client's).
    /// - Throws: `E3DBError` `.invalidSignature` when it does not verify, `.missingKey` without a key.
    public func verify<D: Signable & Sendable>(
        _ signed: SignedDocument<D>,
        publicSigningKey: Ed25519.PublicKey? = nil
    ) throws(E3DBError) {
        guard let key = publicSigningKey ?? identity.publicSigningKey else {
            throw E3DBError(
                .missingKey, "verifying needs a public signing key", context: .init(field: "public_signing_key"))
        }
        try signed.verify(with: key)
    }
}
