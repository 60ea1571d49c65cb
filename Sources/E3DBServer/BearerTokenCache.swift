import Foundation
import Synchronization

/// Bearer token → client, kept briefly in memory so that an authenticated request costs no database read.
///
/// Safe because what it caches does not change: a token row is never updated (it only expires), and the client
/// members a request uses (id, keys) are fixed at registration. An entry is used only before its token's expiry
/// and for at most ``lifetime`` microseconds after it was read, so a token or client removed from the database
/// by other means (an operator deleting rows, another process of a deployment) is refused at most that long later.
final class BearerTokenCache: Sendable {
    private struct Entry {
        var client: ClientRow
        var tokenExpires: Int64
        var cachedUntil: Int64
    }

    private let entries = Mutex<[Data: Entry]>([:])
    /// How long an entry is used after it was read, microseconds.
    let lifetime: Int64
    /// Most entries kept; when full, the cache starts over.
    let capacity: Int

    /// A cache keeping entries `lifetime` microseconds (default 1 s), at most `capacity` of them.
    init(lifetime: Int64 = 1_000_000, capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// The client of the token with SHA-256 `hash` when cached and still valid at `now`.
    func client(hash: Data, now: Int64) -> ClientRow? {
        entries.withLock { entries in
            guard let entry = entries[hash] else { return nil }
            guard now < entry.tokenExpires, now < entry.cachedUntil else {
                entries[hash] = nil
                return nil
            }
            return entry.client
        }
    }

    /// Caches a token read from storage at `now`.
    func insert(hash: Data, client: ClientRow, tokenExpires: Int64, now: Int64) {
        guard tokenExpires > now else { return }
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[hash] = Entry(client: client, tokenExpires: tokenExpires, cachedUntil: now + lifetime)
        }
    }
}
