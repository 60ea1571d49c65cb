internal import CE3DBSodium

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Shared helpers for fixed-size key and nonce types.
enum FixedBytes {
    /// Copies exactly `count` bytes from `bytes` into wiped storage, or throws a length error.
    static func secret(
        _ bytes: some Sequence<UInt8>,
        count: Int,
        code: E3DBError.Code,
        what: String
    ) throws(E3DBError) -> SecureBytes {
        let storage = SecureBytes(copying: bytes)
        guard storage.count == count else {
            throw E3DBError.length(code, what, expected: count, actual: storage.count)
        }
        return storage
    }

    /// Copies exactly `count` public bytes into `Data`, or throws a length error.
    static func data(
        _ bytes: some Sequence<UInt8>,
        count: Int,
        code: E3DBError.Code,
        what: String
    ) throws(E3DBError) -> Data {
        let data = Data(bytes)
        guard data.count == count else {
            throw E3DBError.length(code, what, expected: count, actual: data.count)
        }
        return data
    }
}

/// Redacted descriptions shared by every secret type.
protocol RedactedSecret: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    static var redactedName: String { get }
}

extension RedactedSecret {
    public var description: String { "\(Self.redactedName)(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
