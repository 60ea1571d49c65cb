internal import E3DBCanonicalJSON
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif

extension E3DBError.Code {
    /// An encrypted access key string is not `b64u(ciphertext).b64u(nonce)` (wrong number of `.`-separated parts).
    public static let invalidEAK = Self("invalidEAK", category: .malformedInput)
    /// An EAKInfo JSON object is malformed; `context.field` names the member.
    public static let invalidEAKInfo = Self("invalidEAKInfo", category: .malformedInput)
    /// A client credential (identity) JSON object is malformed or inconsistent; `context.field` names the member.
    public static let invalidClientConfig = Self("invalidClientConfig", category: .malformedInput)
    /// An operation needs a key the identity or EAKInfo does not carry (for example no signing key).
    public static let missingKey = Self("missingKey", category: .invalidArgument)
}

/// How base64url text from another SDK is decoded.
///
/// Every E3DB SDK *writes* unpadded URL-safe base64. Readers differ: libsodium (old Swift) and Go reject
/// anything else, while Python, Node and Java also accept `=` padding and the standard `+` `/` alphabet.
public enum Base64Decoding: Sendable, Hashable {
    /// Unpadded URL-safe base64 only (the default).
    case strict
    /// Also accepts `=` padding and the standard alphabet, as the Python, Node and Java SDKs do.
    case lenient

    /// Decodes `text`, naming `part` in the error.
    /// - Throws: `E3DBError` `.invalidBase64` with `context.part` set to `part` and `context.offset` the offset of
    ///   the first bad character in `text` (never the character itself).
    package func decode(_ text: some StringProtocol, part: String, field: String? = nil) throws(E3DBError) -> Data {
        do {
            switch self {
            case .strict: return try Base64URL.decode(text)
            case .lenient: return try Base64URL.decodeLenient(text)
            }
        } catch {
            throw E3DBError(
                .invalidBase64, "\(part) is not valid base64url" + (field.map { " (field \"\($0)\")" } ?? ""),
                context: .init(field: field, part: part, offset: error.context.offset))
        }
    }
}

extension E3DBError {
    /// A copy of this error with `context.field` set (when not already set).
    package func naming(field: String) -> E3DBError {
        var context = self.context
        if context.field == nil { context.field = field }
        let suffix = message.contains("\"\(field)\"") ? "" : " (field \"\(field)\")"
        return E3DBError(code, message + suffix, context: context)
    }

    /// A copy of this error with `context.part` set.
    package func naming(part: String) -> E3DBError {
        var context = self.context
        context.part = part
        return E3DBError(code, message, context: context)
    }
}

extension ObjectParseError {
    /// The typed error for a strict-parse failure of `what` (an identity or EAKInfo): the parser's code and byte
    /// offset, and the top-level member when it is one of `knownMembers`. Never the parser's message, which may
    /// quote an input character (possibly key text), and never an unknown member name.
    func keysError(_ code: E3DBError.Code, what: String, knownMembers: Set<String>) -> E3DBError {
        let reason = error.code.rawValue
        guard let member, knownMembers.contains(member) else {
            return E3DBError(
                code, "the \(what) is not a strict JSON object (\(reason))", context: .init(offset: error.offset))
        }
        let why = error.code == .duplicateKey ? "appears more than once" : "is not strict JSON (\(reason))"
        return E3DBError(
            code, "\(what) member \"\(member)\" \(why)", context: .init(field: member, offset: error.offset))
    }
}
