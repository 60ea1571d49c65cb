import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import NIOCore
import Synchronization

/// The work one request may do, in steps, charged as it goes: a search charges every comparison of its matchers
/// and every record it scans (``SearchTerm``, ``CompiledClause``). Past the limit the request is refused with 400, so
/// no input can make a request run longer than about the limit's worth of steps (plus one comparison, which is
/// itself bounded by ``SearchTerm/maxPatternBytes`` and ``SearchTerm/maxMatchedValueBytes``).
struct WorkBudget {
    let limit: Int
    private(set) var used = 0

    init(limit: Int) { self.limit = limit }

    /// The steps left.
    var remaining: Int { max(0, limit - used) }

    /// Charges `steps`; throws the 400 once the total passes the limit.
    mutating func charge(_ steps: Int) throws(E3DBError) {
        used += steps
        guard used <= limit else {
            throw E3DBError(
                .badRequest,
                "the search needs more work than this server allows (\(limit) steps): narrow it with fewer or "
                    + "simpler terms, a type, a writer or a time range")
        }
    }
}

/// Whose request body bytes are held: a registered client's (after authentication) or anyone's (before it:
/// registration, tokens, anonymous notes).
enum BodyOwner: Hashable, Sendable {
    case anonymous
    case client(ClientID)
}

/// The request body bytes that requests hold in memory, bounded twice: all registered clients together
/// (``ServerConfiguration/maxBodyBytesInFlight``), each client at most twice the largest body, and all
/// unauthenticated requests together a sixteenth of the total, so that no account is needed to exhaust the share
/// of registered clients and no client exhausts the others'.
final class BodyBudget: Sendable {
    private struct State {
        var clients: Int
        var anonymous: Int
        var perClient: [ClientID: Int] = [:]
    }
    private let state: Mutex<State>
    private let perClientLimit: Int

    init(bytes: Int, perClient: Int) {
        state = Mutex(State(clients: bytes, anonymous: max(bytes / 16, 1)))
        perClientLimit = perClient
    }

    /// Takes `count` bytes for `owner`, or returns `false` when its pool or its share has fewer left.
    func take(_ count: Int, for owner: BodyOwner) -> Bool {
        state.withLock { state in
            switch owner {
            case .anonymous:
                guard count <= state.anonymous else { return false }
                state.anonymous -= count
            case .client(let id):
                let held = state.perClient[id, default: 0]
                guard count <= state.clients, held + count <= perClientLimit else { return false }
                state.clients -= count
                state.perClient[id] = held + count
            }
            return true
        }
    }

    func give(_ count: Int, for owner: BodyOwner) {
        state.withLock { state in
            switch owner {
            case .anonymous: state.anonymous += count
            case .client(let id):
                state.clients += count
                let left = state.perClient[id, default: 0] - count
                state.perClient[id] = left > 0 ? left : nil
            }
        }
    }

    /// What is left for registered clients and for unauthenticated requests (for tests).
    var remaining: (clients: Int, anonymous: Int) { state.withLock { ($0.clients, $0.anonymous) } }
}

/// The bytes one request took from the ``BodyBudget``, given back when the request is answered.
final class BodyReservation: Sendable {
    private let budget: BodyBudget
    private let held = Mutex<[BodyOwner: Int]>([:])

    init(_ budget: BodyBudget) { self.budget = budget }

    /// Takes `count` more bytes for this request on behalf of `owner`, or refuses the request with 503.
    func take(_ count: Int, for owner: BodyOwner) throws(E3DBError) {
        guard budget.take(count, for: owner) else {
            throw E3DBError(
                .serviceUnavailable,
                "the server holds too many request bodies at the moment; retry shortly")
        }
        held.withLock { $0[owner, default: 0] += count }
    }

    /// Gives back everything this request took.
    func release() {
        let taken = held.withLock { held in
            defer { held = [:] }
            return held
        }
        for (owner, count) in taken { budget.give(count, for: owner) }
    }
}

/// At most `permits` callers inside ``withPermit(_:)`` at once; the others wait in arrival order, at most
/// `maxWaiting` of them (503 for more).
final class AsyncLimiter: Sendable {
    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>
    private let maxWaiting: Int

    init(permits: Int, maxWaiting: Int = 64) {
        state = Mutex(State(free: max(1, permits)))
        self.maxWaiting = maxWaiting
    }

    func withPermit<T>(_ body: () async throws -> T) async throws -> T {
        try await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async throws(E3DBError) {
        let acquired = state.withLock { state -> Bool? in
            if state.free > 0 {
                state.free -= 1
                return true
            }
            return state.waiting.count < maxWaiting ? false : nil
        }
        guard let acquired else {
            throw E3DBError(.serviceUnavailable, "too many searches are waiting; retry shortly")
        }
        if acquired { return }
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()  // the permit passes to it
        }
        next?.resume()
    }
}

/// Open connections per client address, bounded (``ServerConfiguration/maxConnectionsPerAddress``).
final class AddressConnections: Sendable {
    private let limit: Int
    private let open = Mutex<[String: Int]>([:])

    init(limit: Int) { self.limit = limit }

    /// What connections are counted by: the IPv4 address, or the IPv6 /64 (one host commonly has a whole /64, so
    /// counting single IPv6 addresses would bound nothing); `nil` for other kinds of socket.
    static func key(_ address: SocketAddress) -> String? {
        switch address {
        case .v4: return address.ipAddress
        case .v6(let v6):
            let bytes = unsafe withUnsafeBytes(of: v6.address.sin6_addr) { unsafe Array($0.prefix(8)) }  // copied out
            if bytes == [0, 0, 0, 0, 0, 0, 0, 0] { return address.ipAddress }  // ::1, v4-mapped: the whole address
            return bytes.map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
        default: return nil
        }
    }

    /// Counts one more connection from `address`, or returns `false` when it already has `limit`.
    func open(_ address: String) -> Bool {
        open.withLock { counts in
            let now = counts[address, default: 0]
            guard now < limit else { return false }
            counts[address] = now + 1
            return true
        }
    }

    func close(_ address: String) {
        open.withLock { counts in
            let now = counts[address, default: 0]
            if now <= 1 { counts[address] = nil } else { counts[address] = now - 1 }
        }
    }
}
