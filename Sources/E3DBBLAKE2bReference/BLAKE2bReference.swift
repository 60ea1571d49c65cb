internal import CE3DBBlake2
public import E3DBPrimitives

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// libb2's BLAKE2b: an independent implementation that the tests, the vector checks and a fuzz target compare
/// `E3DBPrimitives.BLAKE2b` against. It lives in its own module so that importing `E3DBPrimitives` needs only
/// libsodium; nothing in the library products depends on it.
///
/// Use `BLAKE2b` in production: libsodium's is faster here. libb2's BLAKE2bp is deliberately not exposed:
/// Debian's OpenMP build returns wrong, run-to-run different digests with fewer than four threads.
public enum BLAKE2bReference: Sendable {
    /// Hashes `data` with libb2's `blake2b()`.
    /// - Throws: As `BLAKE2b.hash(data:outputByteCount:key:)`; `invalidParameter` if libb2
    ///   reports a failure.
    public static func hash(
        data: some DataProtocol,
        outputByteCount: Int = BLAKE2b.defaultOutputByteCount,
        key: SecureBytes? = nil
    ) throws(E3DBError) -> Data {
        try BLAKE2b.validate(outputByteCount: outputByteCount, key: key)
        var out = Data(count: outputByteCount)
        let input = Array(data)
        let status: Int32 = unsafe input.withUnsafeBytes { d in
            unsafe out.withUnsafeMutableBytes { o in
                if let key {
                    return unsafe key.withUnsafeBytes { k in
                        unsafe blake2b(o.baseAddress, d.baseAddress, k.baseAddress, o.count, d.count, k.count)
                    }
                }
                return unsafe blake2b(o.baseAddress, d.baseAddress, nil, o.count, d.count, 0)
            }
        }
        guard status == 0 else { throw E3DBError(.invalidParameter, "libb2 blake2b failed") }
        return out
    }
}
