import Synchronization

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A thread-safe cache of access keys, keyed by `(writer, user, reader, record type)` like the E3DB
/// access-key endpoint. Safe to share between tasks and threads (guarded by a `Mutex`).
public final class AccessKeyCache: Sendable {
    /// The cache key: the four path components of `/v1/storage/access_keys/{writer}/{user}/{reader}/{type}`.
    public struct Key: Sendable, Hashable {
        /// The writer.
        public var writerID: UUID
        /// The user (normally the writer).
        public var userID: UUID
        /// The reader.
        public var readerID: UUID
        /// The record type.
        public var type: String

        /// A key from its parts.
        public init(writerID: UUID, userID: UUID, readerID: UUID, type: String) {
            self.writerID = writerID
            self.userID = userID
            self.readerID = readerID
            self.type = type
        }

        // Record types compare by code units, not by Unicode canonical equivalence.
        /// Equality by IDs and the record type's UTF-8 bytes.
        public static func == (a: Key, b: Key) -> Bool {
            a.writerID == b.writerID && a.userID == b.userID && a.readerID == b.readerID
                && a.type.utf8.elementsEqual(b.type.utf8)
        }

        /// Hashes the IDs and the record type's UTF-8 bytes.
        public func hash(into hasher: inout Hasher) {
            hasher.combine(writerID)
            hasher.combine(userID)
            hasher.combine(readerID)
            for byte in type.utf8 { hasher.combine(byte) }
        }
    }

    private let storage = Mutex<[Key: AccessKey]>([:])

    /// An empty cache.
    public init() {}

    /// The cached key, if any.
    public func accessKey(for key: Key) -> AccessKey? { storage.withLock { $0[key] } }

    /// Stores (or replaces) a key.
    public func store(_ accessKey: AccessKey, for key: Key) { storage.withLock { $0[key] = accessKey } }

    /// Removes one key (for example after revoking a reader).
    public func remove(_ key: Key) { storage.withLock { _ = $0.removeValue(forKey: key) } }

    /// Removes every key.
    public func removeAll() { storage.withLock { $0.removeAll() } }

    /// The number of cached keys.
    public var count: Int { storage.withLock { $0.count } }

    /// The cached key, or the result of `load`, which is then cached. `load` runs outside the lock, so two
    /// concurrent callers may both load; the first stored value wins and both get it.
    /// - Parameters:
    ///   - key: the cache key.
    ///   - load: produces the key (for example by unwrapping an EAKInfo).
    /// - Returns: the access key.
    /// - Throws: whatever `load` throws; nothing is cached then.
    public func accessKey<E: Error>(for key: Key, orLoad load: () throws(E) -> AccessKey) throws(E) -> AccessKey {
        if let cached = accessKey(for: key) { return cached }
        let loaded = try load()
        return storage.withLock { dict in
            if let existing = dict[key] { return existing }
            dict[key] = loaded
            return loaded
        }
    }
}
