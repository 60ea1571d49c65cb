internal import CE3DBSodium

#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif

// Safety: (`@safe`) the object owns `pointer`: `capacity` (at least 1) bytes allocated and zeroed in `init`, wiped and
// freed only in `deinit`, so every pointer made from it below is valid while the object lives. `count <= capacity`, and
// the buffers lent out cover `0..<count`. The bytes are lent only inside closures, except through the `@unsafe`
// `unsafeBytes`, whose callers keep the object alive.
/// Heap storage for secret bytes that is wiped with `sodium_memzero` over its whole capacity when released.
///
/// Every secret in E3DBKit (private keys, access keys, data keys, derived seeds) lives in a `SecureBytes`.
/// The bytes leave only through ``withUnsafeBytes(_:)``; `description`, `debugDescription` and the mirror are
/// redacted.
///
/// - Important: Wiping is best effort. Copies that *you* make (into `Data`, `[UInt8]` or `String`, for example
///   with ``Box/PrivateKey/base64URLEncoded``) are ordinary memory and are not wiped. Swift may also leave
///   transient copies in registers or on the stack.
@safe
public final class SecureBytes: @unchecked Sendable {
    // @unchecked Sendable: the storage is written only during initialisation, then only read. Scratch memory that
    // is written in place (chunk buffers, reservoirs) is a ``WipedBuffer`` instead.
    private let pointer: UnsafeMutableRawPointer
    private let capacity: Int
    /// The number of secret bytes.
    public let count: Int

    /// Allocates `count` bytes and lets `initializer` fill all of them.
    /// - Parameters:
    ///   - count: The number of bytes (0 or more).
    ///   - initializer: Writes the bytes. If it throws, the partial contents are wiped and the error rethrown.
    public init<E: Error>(
        count: Int,
        initializer: (UnsafeMutableRawBufferPointer) throws(E) -> Void
    ) throws(E) {
        precondition(count >= 0, "SecureBytes count must not be negative")
        Sodium.ensure()
        let capacity = max(count, 1)
        let pointer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        unsafe pointer.initializeMemory(as: UInt8.self, repeating: 0, count: capacity)
        do {
            try unsafe initializer(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        } catch {
            unsafe sodium_memzero(pointer, capacity)
            unsafe pointer.deallocate()
            throw error
        }
        unsafe self.pointer = pointer
        self.capacity = capacity
        self.count = count
    }

    /// Allocates `count` random bytes from the system CSPRNG (`randombytes_buf`).
    public convenience init(randomCount count: Int) {
        unsafe self.init(count: count) { unsafe SecureRandom.fill($0) }
    }

    /// Copies `bytes` into wiped storage.
    /// - Note: The source is read in place when it is contiguous; otherwise it is gathered into a temporary
    ///   buffer that is wiped before this initialiser returns.
    public convenience init(copying bytes: some Sequence<UInt8>) {
        if let count = bytes.withContiguousStorageIfAvailable({ $0.count }) {
            // Safety: `buffer` is `count` bytes, the count of `bytes`' contiguous storage, which the inner closure
            // copies in full; `gathered` is wiped through its own count.
            unsafe self.init(count: count) { buffer in
                _ = bytes.withContiguousStorageIfAvailable {
                    unsafe buffer.copyMemory(from: UnsafeRawBufferPointer($0))
                }
            }
        } else {
            var gathered = Array(bytes)
            defer { unsafe gathered.withUnsafeMutableBytes { unsafe sodium_memzero($0.baseAddress, $0.count) } }
            unsafe self.init(count: gathered.count) { buffer in
                unsafe gathered.withUnsafeBytes { unsafe buffer.copyMemory(from: $0) }
            }
        }
    }

    deinit {
        unsafe sodium_memzero(pointer, capacity)
        unsafe pointer.deallocate()
    }

    /// The secret bytes, valid only while this object lives (the caller holds it, for example with
    /// `withExtendedLifetime`): for per-page codecs, which must not make a generic closure call per page.
    @unsafe package var unsafeBytes: UnsafeRawBufferPointer {
        unsafe UnsafeRawBufferPointer(start: pointer, count: count)
    }

    /// Calls `body` with the secret bytes. Do not let the pointer escape.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try unsafe body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Constant-time equality of the contents (`sodium_memcmp`); false when the lengths differ.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        return unsafe sodium_memcmp(pointer, other.pointer, count) == 0
    }
}

extension SecureBytes {
    /// Calls `body` with a temporary `Data` copy of the secret bytes, wiped when `body` returns: for APIs that read
    /// only `Data` (`JSONDecoder`). Do not keep the `Data`: a copy that outlives the call is not wiped.
    package func withTemporaryData<R, E: Error>(_ body: (Data) throws(E) -> R) throws(E) -> R {
        // Safety: `Data($0)` copies the `count` bytes lent for the closure.
        var data = unsafe withUnsafeBytes { unsafe Data($0) }
        defer { data.wipe() }
        return try body(data)
    }
}

extension Data {
    /// Overwrites the bytes with zeros (`sodium_memzero`): for plaintext that has to pass through `Data` (a
    /// `JSONEncoder`'s output, a sink's buffer). Only storage this value does not share is wiped in place; wipe a
    /// value once the copies that shared its storage are gone.
    package mutating func wipe() {
        // Safety: wipes exactly the bytes `Data` lends for the closure.
        unsafe withUnsafeMutableBytes { unsafe sodium_memzero($0.baseAddress, $0.count) }
    }
}

extension SecureBytes: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "SecureBytes(\(count) bytes, redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
