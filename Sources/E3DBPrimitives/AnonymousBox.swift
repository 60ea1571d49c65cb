internal import CE3DBSodium

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Anonymous public-key encryption: libsodium sealed boxes (`crypto_box_seal`).
///
/// The sender uses an ephemeral key pair, so the recipient learns nothing about who sealed the message.
/// The output is `ephemeral_pk(32) || box(…)`, 48 bytes longer than the message.
public enum AnonymousBox: Sendable {
    /// 48: bytes added to the message.
    public static let overheadByteCount = 48

    // Safety: `out` is `message.count + 48` bytes, what `crypto_box_seal` writes; the public key is 32 bytes (its type
    // checks). All buffers are lent for their closures only.
    /// Seals `message` for `recipient`.
    /// - Throws: ``E3DBError/Code/weakPublicKey`` when `recipient` is a low-order point (libsodium refuses it,
    ///   since the shared secret would be all zeros); nothing is returned then.
    public static func seal(_ message: some DataProtocol, to recipient: Box.PublicKey) throws(E3DBError) -> Data {
        Sodium.ensure()
        var out = Data(count: message.count + overheadByteCount)
        let status: Int32 = unsafe withBytes(message) { m in
            unsafe out.withUnsafeMutableBytes { c in
                unsafe recipient.rawRepresentation.withUnsafeBytes { pk in
                    unsafe crypto_box_seal(c.u8, m.u8, UInt64(m.count), pk.u8)
                }
            }
        }
        guard status == 0 else {
            throw E3DBError(
                .weakPublicKey, "the recipient public key is a low-order point; a sealed box to it would not be secret",
                context: .init(part: "recipient"))
        }
        return out
    }

    /// Opens a sealed box with the recipient's key pair.
    /// - Throws: ``E3DBError/Code/invalidLength`` when shorter than 48 bytes,
    ///   ``E3DBError/Code/authenticationFailed`` when it does not open.
    public static func open(_ sealed: some DataProtocol, recipient: Box.PrivateKey) throws(E3DBError) -> Data {
        guard sealed.count >= overheadByteCount else {
            throw E3DBError.length(
                .invalidLength, "sealed box (at least)", expected: overheadByteCount, actual: sealed.count)
        }
        Sodium.ensure()
        var out = Data(count: sealed.count - overheadByteCount)
        // Safety: `sealed` holds at least the 48 bytes of overhead (checked above) and `out` is `sealed.count - 48`
        // bytes, what `crypto_box_seal_open` writes; the keys are 32 bytes. All buffers are lent for their closures
        // only.
        let status: Int32 = unsafe withBytes(sealed) { c in
            unsafe out.withUnsafeMutableBytes { m in
                unsafe recipient.publicKey.rawRepresentation.withUnsafeBytes { pk in
                    unsafe recipient.storage.withUnsafeBytes { sk in
                        unsafe crypto_box_seal_open(m.u8, c.u8, UInt64(c.count), pk.u8, sk.u8)
                    }
                }
            }
        }
        guard status == 0 else { throw E3DBError(.authenticationFailed, "sealed box authentication failed") }
        return out
    }
}
