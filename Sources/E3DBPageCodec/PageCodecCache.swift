public import E3DBPrimitives
internal import Crypto
internal import Synchronization

/// Codecs by key, salt and settings, so that a passphrase is stretched once per database and process, not once per
/// connection (a GRDB pool opens several, each PBKDF2 with 256,000 rounds would cost a visible fraction of a
/// second).
///
/// Entries are found by a fingerprint of the key: HMAC-SHA256 under a random key made at process start, so the
/// table holds no value that could be tested against a guessed passphrase outside this process. The derived keys
/// themselves stay in the codecs (swift-crypto wipes a `SymmetricKey` when it is released). The cache keeps the
/// most recently used ``capacity`` codecs; ``removeAll()`` drops them all.
public final class PageCodecCache: Sendable {
    /// The process-wide cache.
    public static let shared = PageCodecCache()

    /// How many codecs are kept.
    public let capacity: Int
    private let fingerprintKey = SymmetricKey(size: .bits256)
    private let entries = Mutex<[(id: [UInt8], codec: PageCodec)]>([])
    private let derivationCounts = Mutex<[[UInt8]: Int]>([:])

    public init(capacity: Int = 16) {
        self.capacity = max(capacity, 1)
    }

    /// The codec for `key` over `salt`: the cached one, or a new one (deriving the keys) that is then cached.
    /// - Throws: what ``PageCodec/init(key:salt:settings:)`` throws.
    public func codec(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) throws(E3DBError) -> PageCodec {
        let id = fingerprint(key: key, salt: salt, settings: settings)
        if let hit = entries.withLock({ list -> PageCodec? in
            guard let index = list.firstIndex(where: { ConstantTime.equals($0.id, id) }) else { return nil }
            let entry = list.remove(at: index)
            list.append(entry)
            return entry.codec
        }) {
            return hit
        }
        // Derived outside the lock: two threads may both derive the first time, and one result is kept.
        let codec = try PageCodec(key: key, salt: salt, settings: settings)
        derivationCounts.withLock { $0[id, default: 0] += 1 }
        entries.withLock { list in
            if !list.contains(where: { ConstantTime.equals($0.id, id) }) { list.append((id, codec)) }
            if list.count > capacity { list.removeFirst(list.count - capacity) }
        }
        return codec
    }

    /// Forgets every cached codec (their keys are wiped once no open database uses them).
    public func removeAll() {
        entries.withLock { $0.removeAll() }
    }

    /// How many times this cache derived the keys of `key` over `salt` (tests: a pool's connections share one).
    package func derivations(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) -> Int {
        let id = fingerprint(key: key, salt: salt, settings: settings)
        return derivationCounts.withLock { $0[id] ?? 0 }
    }

    /// The number of cached codecs.
    public var count: Int { entries.withLock { $0.count } }

    private func fingerprint(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) -> [UInt8] {
        var mac = HMAC<SHA256>(key: fingerprintKey)
        let tag: UInt8
        let secret: SecureBytes
        switch key {
        case .passphrase(let value): (tag, secret) = (1, value)
        case .rawKey(let value): (tag, secret) = (2, value)
        case .rawKeyAndSalt(let value, _): (tag, secret) = (3, value)
        }
        var length = UInt64(secret.count).littleEndian
        mac.update(data: [tag])
        unsafe withUnsafeBytes(of: &length) { unsafe mac.update(data: $0) }
        unsafe secret.withUnsafeBytes { unsafe mac.update(data: $0) }
        mac.update(data: salt)
        mac.update(data: Array(settings.description.utf8))
        return Array(mac.finalize())
    }
}
