#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
internal import CE3DBSodium

/// Cryptographically secure random bytes from libsodium (`randombytes_buf`, `getrandom` on Linux).
public enum SecureRandom {
    /// Returns `count` random bytes.
    public static func bytes(count: Int) -> Data {
        precondition(count >= 0, "count must not be negative")
        var data = Data(count: count)
        unsafe data.withUnsafeMutableBytes { unsafe fill($0) }
        return data
    }

    /// Fills `buffer` with random bytes. One call is one system call, so batch small requests.
    @unsafe
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        Sodium.ensure()
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        unsafe randombytes_buf(base, buffer.count)
    }
}

/// Comparisons whose running time does not depend on the contents.
public enum ConstantTime {
    /// True when `a` and `b` have the same length and bytes (`sodium_memcmp`). Only the lengths may leak.
    public static func equals(_ a: some DataProtocol, _ b: some DataProtocol) -> Bool {
        guard a.count == b.count else { return false }
        Sodium.ensure()
        return unsafe withBytes(a) { l in
            unsafe withBytes(b) { r in
                guard let lp = l.baseAddress, let rp = r.baseAddress else { return true }
                return unsafe sodium_memcmp(lp, rp, l.count) == 0
            }
        }
    }
}
