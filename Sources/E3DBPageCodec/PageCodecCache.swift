public import E3DBPrimitives
internal import Synchronization

/// Codecs by key, salt and settings, so that a passphrase is stretched once per database and process, not once per
/// connection (a GRDB pool opens several, each PBKDF2 with 256,000 rounds would cost a visible fraction of a
/// second).
///
/// Entries are found by a fingerprint of the key: HMAC-SHA256 under a random key made at process start, so the
/// table holds no value that could be tested against a guessed passphrase outside this process. The derived keys
/// themselves stay in the codecs (in wiped storage, wiped when the codec is released). A codec an open
/// database uses is always found (a weak reference); the most recently used ``capacity`` codecs are kept besides,
/// for databases that open again; ``removeAll()`` forgets them all.
public final class PageCodecCache: Sendable {
    /// The process-wide cache.
    public static let shared = PageCodecCache()

    /// How many codecs are kept when no open database uses them.
    public let capacity: Int
    // Safety: the random key's bytes are lent for the closure; `KeyedHMAC` keys its own wiped states from them.
    private let fingerprintMAC: KeyedHMAC = {
        let key = SecureBytes(randomCount: 32)
        return unsafe key.withUnsafeBytes { unsafe KeyedHMAC(hash: .sha256, key: $0) }
    }()
    private let state = Mutex(State())
    private let derivationCounts = Mutex<[[UInt8]: Int]>([:])

    /// Codecs in use (held by open databases, found through weak references, never evicted while used) and the
    /// most recently used ones (kept for a connection that opens again).
    private struct State {
        var live: [[UInt8]: WeakCodec] = [:]
        var recent: [(id: [UInt8], codec: PageCodec)] = []

        mutating func touch(_ id: [UInt8], _ codec: PageCodec, capacity: Int) {
            recent.removeAll { $0.id == id }
            recent.append((id, codec))
            if recent.count > capacity { recent.removeFirst(recent.count - capacity) }
            live[id] = WeakCodec(codec: codec)
            if live.count > 4 * capacity { live = live.filter { $0.value.codec != nil } }
        }
    }

    private struct WeakCodec {
        weak var codec: PageCodec?
    }

    public init(capacity: Int = 16) {
        self.capacity = max(capacity, 1)
    }

    /// The codec for `key` over `salt`: the one an open database or a recent open uses, or a new one (deriving the
    /// keys) that is then cached.
    /// - Throws: what ``PageCodec/init(key:salt:settings:)`` throws.
    public func codec(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) throws(E3DBError) -> PageCodec {
        let id = fingerprint(key: key, salt: salt, settings: settings)
        let capacity = capacity
        if let hit = state.withLock({ state -> PageCodec? in
            guard let codec = state.live[id]?.codec else { return nil }
            state.touch(id, codec, capacity: capacity)
            return codec
        }) {
            return hit
        }
        // Derived outside the lock: two threads may both derive the first time, and the first result is kept.
        let codec = try PageCodec(key: key, salt: salt, settings: settings)
        derivationCounts.withLock { $0[id, default: 0] += 1 }
        return state.withLock { state in
            let kept = state.live[id]?.codec ?? codec
            state.touch(id, kept, capacity: capacity)
            return kept
        }
    }

    /// Forgets every cached codec (their keys are wiped once no open database uses them).
    public func removeAll() {
        state.withLock { $0 = State() }
    }

    /// The number of codecs kept for recent use.
    public var count: Int { state.withLock { $0.recent.count } }

    /// How many times this cache derived the keys of `key` over `salt` (tests: a pool's connections share one).
    package func derivations(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) -> Int {
        let id = fingerprint(key: key, salt: salt, settings: settings)
        return derivationCounts.withLock { $0[id] ?? 0 }
    }

    // Safety: the prefix's and the secret's bytes are lent for their closures, and the tag is written into a local
    // array of exactly the HMAC's 32 bytes, what `authenticate` allows.
    /// HMAC-SHA256 under this process's random key of the key form, the lengths, the salt, the settings and the
    /// secret last (each length given, so no two inputs share an encoding), keyed once (no allocation of hash
    /// states: an open pays for this on every connection).
    private func fingerprint(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) -> [UInt8] {
        let tag: UInt8
        let secret: SecureBytes
        switch key {
        case .passphrase(let value): (tag, secret) = (1, value)
        case .rawKey(let value): (tag, secret) = (2, value)
        case .rawKeyAndSalt(let value, _): (tag, secret) = (3, value)
        }
        var prefix = [tag]
        for length in [secret.count, salt.count] {
            prefix += (0..<8).map { UInt8(truncatingIfNeeded: UInt64(length) >> (8 * $0)) }
        }
        prefix += salt
        prefix += Array(settings.description.utf8)
        var tagBytes = [UInt8](repeating: 0, count: KeyedHMAC.Hash.sha256.byteCount)
        unsafe prefix.withUnsafeBytes { prefix in
            unsafe secret.withUnsafeBytes { secret in
                unsafe tagBytes.withUnsafeMutableBytes { unsafe fingerprintMAC.authenticate(prefix, secret, into: $0) }
            }
        }
        return tagBytes
    }
}
