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
        // Safety: `fill` writes exactly the `count` bytes `Data` lends for the closure.
        unsafe data.withUnsafeMutableBytes { unsafe fill($0) }
        return data
    }

    // Safety: `@unsafe`: the caller lends `buffer` for the call; `randombytes_buf` writes exactly `buffer.count` bytes
    // at its base.
    /// Fills `buffer` with random bytes. One call is one system call, so batch small requests.
    @unsafe
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        Sodium.ensure()
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        unsafe randombytes_buf(base, buffer.count)
    }
}
