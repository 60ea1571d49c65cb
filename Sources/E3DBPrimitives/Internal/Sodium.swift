internal import CE3DBSodium

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One-time libsodium initialisation. Every entry point that calls libsodium touches `Sodium.ready` first.
enum Sodium {
    /// `sodium_init()` result, evaluated once (thread-safe `static let`).
    static let ready: Void = {
        let status = sodium_init()
        // sodium_init fails only when the system has no usable randomness source; nothing can work then.
        precondition(status >= 0, "libsodium failed to initialise (sodium_init returned \(status))")
        precondition(
            sodium_library_version_major() > 10
                || (sodium_library_version_major() == 10 && sodium_library_version_minor() >= 3),
            "libsodium 1.0.18 or newer is required"
        )
    }()

    @inline(__always) static func ensure() { _ = ready }
}

// Safety: the bytes (the collection's own storage, or a local array) are lent for the closure only; `body` must not
// keep the pointer, which every caller in this module respects.
/// Runs `body` over the bytes of `data`, without copying when they are contiguous.
///
/// `@inlinable` so that public generic entry points that call it specialise in the caller's module (for `Data`
/// and `[UInt8]` the contiguous path is then a direct call instead of an unspecialised generic dispatch).
@inlinable
func withBytes<D: Sequence<UInt8>, R>(_ data: D, _ body: (UnsafeRawBufferPointer) -> R) -> R {
    if let result = data.withContiguousStorageIfAvailable({ buffer in unsafe body(UnsafeRawBufferPointer(buffer)) }) {
        return result
    }
    let copy = Array(data)
    return unsafe copy.withUnsafeBytes { unsafe body($0) }
}

/// A valid address for empty buffers: libsodium's parameters are declared non-null even when the length is 0.
/// Nothing ever reads or writes through it with a non-zero length.
enum EmptyBuffer {
    // nonisolated(unsafe): allocated once, never freed, never dereferenced (every use passes a length of 0).
    nonisolated(unsafe) static let address = UnsafeMutablePointer<UInt8>.allocate(capacity: 16)
}

// Safety: `@unsafe`: the pointer is valid as long as the buffer it came from; callers pass it straight to libsodium
// with that buffer's count. An empty buffer gets `EmptyBuffer.address`, which is never read through with a non-zero
// length. Bytes are trivially bound, so viewing them as `UInt8` is sound.
extension UnsafeRawBufferPointer {
    /// The base address as a byte pointer; ``EmptyBuffer/address`` for an empty buffer.
    @unsafe @inline(__always) var u8: UnsafePointer<UInt8> {
        unsafe baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(EmptyBuffer.address)
    }
}

// Safety: as for `UnsafeRawBufferPointer.u8` above.
extension UnsafeMutableRawBufferPointer {
    /// The base address as a mutable byte pointer; ``EmptyBuffer/address`` for an empty buffer.
    @unsafe @inline(__always) var u8: UnsafeMutablePointer<UInt8> {
        unsafe baseAddress?.assumingMemoryBound(to: UInt8.self) ?? EmptyBuffer.address
    }
}

// Safety: `pointer` is `count` fresh bytes, lent to `body` (which initialises all of them) and then owned by the
// `Data`, whose deallocator frees it. For `count == 0`, `body` gets `EmptyBuffer.address` with a count of 0, through
// which nothing is read or written.
/// `Data` of `count` bytes written by `body`, without zero-filling the buffer first (`Data(count:)` does).
/// `body` must initialise all `count` bytes; the storage is freed with the `Data`.
func uninitializedData(count: Int, _ body: (UnsafeMutableRawBufferPointer) -> Void) -> Data {
    guard count > 0 else {
        unsafe body(UnsafeMutableRawBufferPointer(start: EmptyBuffer.address, count: 0))
        return Data()
    }
    let pointer = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 16)
    unsafe body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    return unsafe Data(
        bytesNoCopy: pointer, count: count, deallocator: .custom { pointer, _ in unsafe pointer.deallocate() })
}
