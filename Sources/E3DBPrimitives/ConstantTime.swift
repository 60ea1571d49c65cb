internal import CE3DBSodium

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Comparisons whose running time does not depend on the contents.
public enum ConstantTime {
    /// True when `a` and `b` have the same length and bytes (`sodium_memcmp`). Only the lengths may leak.
    public static func equals(_ a: some DataProtocol, _ b: some DataProtocol) -> Bool {
        guard a.count == b.count else { return false }
        Sodium.ensure()
        // Safety: both buffers are lent for their closures and have the same count (checked above), the length
        // `sodium_memcmp` reads from each.
        return unsafe withBytes(a) { l in
            unsafe withBytes(b) { r in
                guard let lp = l.baseAddress, let rp = r.baseAddress else { return true }
                return unsafe sodium_memcmp(lp, rp, l.count) == 0
            }
        }
    }
}
