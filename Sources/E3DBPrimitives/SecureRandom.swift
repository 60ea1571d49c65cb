internal import CE3DBSodium

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

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
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        Sodium.ensure()
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        unsafe randombytes_buf(base, buffer.count)
    }
}
