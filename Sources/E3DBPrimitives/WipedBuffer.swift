internal import CE3DBSodium

// Safety: (`@safe`) the object owns `pointer`: `max(count, 1)` bytes allocated and zeroed in `init`, wiped and freed
// only in `deinit`. Every range lent or wiped goes through `checked`, which keeps it inside `0..<count`, and the
// pointers are lent only for the closures.
/// A fixed-size scratch buffer for secret bytes that are written and read in place (file chunk buffers, random
/// reservoirs, cipher scratch): zeroed when allocated, wiped with `sodium_memzero` on ``wipe()`` and when released.
///
/// It is the mutable sibling of ``SecureBytes`` (which is written only while it is initialised): a `WipedBuffer`
/// owns its allocation for its whole life and hands the bytes out only inside a `with…` closure, so no pointer
/// outlives the call. It is not `Sendable`: an owner that shares one across threads orders the accesses itself
/// (a lock, or semaphores) and says so where it declares `@unchecked Sendable`.
@safe
package final class WipedBuffer {
    private let pointer: UnsafeMutableRawPointer
    /// The number of bytes.
    package let count: Int

    /// Allocates `count` zeroed bytes aligned to `alignment`.
    package init(count: Int, alignment: Int = 16) {
        precondition(count >= 0, "WipedBuffer count must not be negative")
        Sodium.ensure()
        let pointer = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: alignment)
        unsafe pointer.initializeMemory(as: UInt8.self, repeating: 0, count: max(count, 1))
        unsafe self.pointer = pointer
        self.count = count
    }

    deinit {
        unsafe sodium_memzero(pointer, max(count, 1))
        unsafe pointer.deallocate()
    }

    /// Calls `body` with the bytes in `range` (all of them by default). Do not let the pointer escape.
    package func withUnsafeBytes<R, E: Error>(
        in range: Range<Int>? = nil, _ body: (UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        let range = checked(range)
        return try unsafe body(UnsafeRawBufferPointer(start: pointer + range.lowerBound, count: range.count))
    }

    /// Calls `body` with the bytes in `range` (all of them by default) writable. Do not let the pointer escape.
    package func withUnsafeMutableBytes<R, E: Error>(
        in range: Range<Int>? = nil, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        let range = checked(range)
        return try unsafe body(UnsafeMutableRawBufferPointer(start: pointer + range.lowerBound, count: range.count))
    }

    /// Overwrites the bytes in `range` (all of them by default) with zeros (`sodium_memzero`).
    package func wipe(_ range: Range<Int>? = nil) {
        let range = checked(range)
        unsafe sodium_memzero(pointer + range.lowerBound, range.count)
    }

    private func checked(_ range: Range<Int>?) -> Range<Int> {
        guard let range else { return 0..<count }
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "range outside the WipedBuffer")
        return range
    }
}
