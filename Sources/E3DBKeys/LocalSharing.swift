public import E3DBPrimitives

extension EAKInfo {
    /// Creates a writer key locally: a new random access key wrapped for the identity itself
    /// (authorizer = reader = signer = the identity), as an SDK does the first time it writes a record type.
    /// - Parameter identity: the writer; needs a client ID. Its signing key, if any, becomes the signer key.
    /// - Returns: the access key and its EAKInfo.
    /// - Throws: `E3DBError` `.missingKey` without a client ID.
    public static func makeWriterKey(for identity: ClientIdentity) throws(E3DBError) -> (
        accessKey: AccessKey, eakInfo: EAKInfo
    ) {
        let id = try identity.requireClientID()
        let ak = AccessKey()
        let eak = try EncryptedAccessKey.wrap(ak, for: identity.publicKey, by: identity.boxKey)
        let info = EAKInfo(
            eak: eak, authorizerID: id, authorizerPublicKey: identity.publicKey,
            signerID: identity.signingKey == nil ? nil : id, signerSigningKey: identity.publicSigningKey)
        return (ak, info)
    }

    /// Re-wraps this EAK's access key for another reader (local sharing), without touching any record.
    ///
    /// The identity must be able to open this EAKInfo (it is the reader of `self`); it becomes the authorizer of
    /// the new EAK. The signer members are kept, so the new reader verifies documents against the same writer.
    /// - Parameters:
    ///   - reader: the new reader's Curve25519 public key.
    ///   - identity: the identity that can unwrap `self`; needs a client ID.
    /// - Returns: an EAKInfo for the new reader.
    /// - Throws: `E3DBError` `.authenticationFailed` when the identity cannot unwrap `self`; `.missingKey`
    ///   without a client ID.
    public func share(with reader: Box.PublicKey, as identity: ClientIdentity) throws(E3DBError) -> EAKInfo {
        let id = try identity.requireClientID()
        let ak = try unwrap(with: identity.boxKey)
        let eak = try EncryptedAccessKey.wrap(ak, for: reader, by: identity.boxKey)
        return EAKInfo(
            eak: eak, authorizerID: id, authorizerPublicKey: identity.publicKey, signerID: signerID,
            signerSigningKey: signerSigningKey)
    }
}
