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
/// for databases that open again; ``removeAll()`` forgets them all, `removeAll(keeping:)` all but the open
/// databases' codecs of some keys.
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

    /// Codecs in use (held by open databases, found through weak references, never evicted while used) and the
    /// most recently used ones (kept for a connection that opens again).
    /// Each entry also holds the fingerprint of the key alone (`keyID`), for `removeAll(keeping:)`. `derivations`
    /// counts the derivations of the entries in `live` (tests), and is pruned with it.
    private struct State {
        var live: [[UInt8]: WeakCodec] = [:]
        var recent: [(id: [UInt8], keyID: [UInt8], codec: PageCodec)] = []
        var derivations: [[UInt8]: Int] = [:]

        mutating func touch(_ id: [UInt8], keyID: [UInt8], _ codec: PageCodec, capacity: Int) {
            recent.removeAll { $0.id == id }
            recent.append((id, keyID, codec))
            if recent.count > capacity { recent.removeFirst(recent.count - capacity) }
            live[id] = WeakCodec(codec: codec, keyID: keyID)
            if live.count > 4 * capacity { keepLive { _ in true } }
        }

        /// Keeps the `live` entries whose codec is still in use and whose key ID passes `keep`, and their counts.
        mutating func keepLive(_ keep: ([UInt8]) -> Bool) {
            live = live.filter { $0.value.codec != nil && keep($0.value.keyID) }
            derivations = derivations.filter { live[$0.key] != nil }
        }
    }

    private struct WeakCodec {
        weak var codec: PageCodec?
        let keyID: [UInt8]
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
            guard let entry = state.live[id], let codec = entry.codec else { return nil }
            state.touch(id, keyID: entry.keyID, codec, capacity: capacity)
            return codec
        }) {
            return hit
        }
        // Derived outside the lock: two threads may both derive the first time, and the first result is kept.
        let codec = try PageCodec(key: key, salt: salt, settings: settings)
        let keyID = fingerprint(key: key)
        return state.withLock { state in
            state.derivations[id, default: 0] += 1
            let kept = state.live[id]?.codec ?? codec
            state.touch(id, keyID: keyID, kept, capacity: capacity)
            return kept
        }
    }

    /// Forgets every cached codec (their keys are wiped once no open database uses them).
    public func removeAll() {
        state.withLock { $0 = State() }
    }

    /// Forgets every cached codec except those an open database still uses that were derived from one of `keys`
    /// (whatever the salt and settings): what E3DBSQLite's `forgetAllKeys()` keeps for the keys other owners still
    /// hold, so that their open databases' next connections do not derive them again. Nothing is kept for recent
    /// use: a codec no open database holds goes, whoever registered its key (its keys are wiped as it goes).
    package func removeAll(keeping keys: [SQLCipherKey]) {
        let kept = Set(keys.map { fingerprint(key: $0) })
        state.withLock { state in
            // The codecs only `recent` held are released here, so `keepLive` sees those open databases hold.
            state.recent = []
            state.keepLive { kept.contains($0) }
        }
    }

    /// The number of codecs kept for recent use.
    public var count: Int { state.withLock { $0.recent.count } }

    /// Whether a codec for `key` over `salt` is kept for recent use or held by an open database (tests).
    package func contains(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) -> Bool {
        let id = fingerprint(key: key, salt: salt, settings: settings)
        return state.withLock { state in state.live[id]?.codec != nil || state.recent.contains { $0.id == id } }
    }

    /// How many times this cache derived the keys of `key` over `salt` since the entry was last forgotten (tests: a
    /// pool's connections share one).
    package func derivations(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) -> Int {
        let id = fingerprint(key: key, salt: salt, settings: settings)
        return state.withLock { $0.derivations[id] ?? 0 }
    }

    /// HMAC-SHA256 under this process's random key of the key form, the lengths, the salt, the settings and the
    /// secret last (each length given, so no two inputs share an encoding), keyed once (no allocation of hash
    /// states: an open pays for this on every connection).
    private func fingerprint(key: SQLCipherKey, salt: [UInt8], settings: SQLCipherSettings) -> [UInt8] {
        let (tag, secret) = Self.form(key)
        var prefix = [tag]
        for length in [secret.count, salt.count] {
            prefix += (0..<8).map { UInt8(truncatingIfNeeded: UInt64(length) >> (8 * $0)) }
        }
        prefix += salt
        prefix += Array(settings.description.utf8)
        return fingerprint(prefix: prefix, secret: secret)
    }

    /// The fingerprint of the key alone (its form and secret; the tag's high bit keeps it apart from an entry's).
    private func fingerprint(key: SQLCipherKey) -> [UInt8] {
        let (tag, secret) = Self.form(key)
        return fingerprint(
            prefix: [tag | 0x80] + (0..<8).map { UInt8(truncatingIfNeeded: UInt64(secret.count) >> (8 * $0)) },
            secret: secret)
    }

    /// The key's form (1 passphrase, 2 raw key, 3 raw key and salt) and its secret.
    private static func form(_ key: SQLCipherKey) -> (tag: UInt8, secret: SecureBytes) {
        switch key {
        case .passphrase(let value): (1, value)
        case .rawKey(let value): (2, value)
        case .rawKeyAndSalt(let value, _): (3, value)
        }
    }

    // Safety: the prefix's and the secret's bytes are lent for their closures, and the tag is written into a local
    // array of exactly the HMAC's 32 bytes, what `authenticate` allows.
    /// HMAC-SHA256 under this process's random key of `prefix` then `secret`.
    private func fingerprint(prefix: [UInt8], secret: SecureBytes) -> [UInt8] {
        var tagBytes = [UInt8](repeating: 0, count: KeyedHMAC.Hash.sha256.byteCount)
        unsafe prefix.withUnsafeBytes { prefix in
            unsafe secret.withUnsafeBytes { secret in
                unsafe tagBytes.withUnsafeMutableBytes { unsafe fingerprintMAC.authenticate(prefix, secret, into: $0) }
            }
        }
        return tagBytes
    }
}
