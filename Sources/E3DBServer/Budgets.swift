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

    /// Rows scanned and the steps used when ``checkCancellation()`` last looked.
    private var rowsSinceCheck = 0
    private var usedAtCheck = 0

    /// Called once per scanned row: throws `CancellationError` when the request was cancelled (its client closed
    /// the connection), looking every ``cancellationRows`` rows or ``cancellationSteps`` steps, whichever comes first.
    mutating func checkCancellation() throws {
        rowsSinceCheck += 1
        guard rowsSinceCheck >= Self.cancellationRows || used - usedAtCheck >= Self.cancellationSteps else { return }
        rowsSinceCheck = 0
        usedAtCheck = used
        try Task.checkCancellation()
    }

    static let cancellationRows = 256
    static let cancellationSteps = 1 << 20

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

/// At most `permits` callers inside ``withPermit(owner:_:)`` at once; the others wait in arrival order, at most
/// `maxWaiting` of them in all and `maxWaitingPerOwner` of one owner (a client), so that one client cannot take
/// every place (503 for more). The queue is the package's one counting semaphore (`AsyncPermits`, E3DBPrimitives);
/// this adds the server's answers: a refusal is a 503, and a body never starts in a cancelled task.
///
/// A waiter whose task is cancelled (its client closed the connection: ``E3DBChildChannel``) leaves the queue at
/// once and its body never runs; when the permit is handed to it as it is cancelled, ``withPermit(owner:_:)`` gives
/// the permit back before throwing, so no permit is lost either way.
final class AsyncLimiter: Sendable {
    private let permits: AsyncPermits<ClientID>
    private let maxWaitingPerOwner: Int

    init(permits: Int, maxWaiting: Int = 64, maxWaitingPerOwner: Int = 2) {
        self.permits = AsyncPermits(permits, maxWaiting: maxWaiting, maxWaitingPerOwner: maxWaitingPerOwner)
        self.maxWaitingPerOwner = maxWaitingPerOwner
    }

    /// Runs `body` holding a permit, once one is free.
    /// - Parameters:
    ///   - owner: whose call it is (nil: uncounted), for ``maxWaitingPerOwner``.
    ///   - body: the work.
    /// - Throws: `E3DBError` `.serviceUnavailable` when the waiting room, or the owner's share of it, is full;
    ///   `CancellationError` when the task is cancelled before `body` starts; what `body` throws.
    func withPermit<T>(owner: ClientID? = nil, _ body: () async throws -> T) async throws -> T {
        do {
            try await permits.acquire(owner: owner)
        } catch AsyncPermits<ClientID>.Refusal.queueFull {
            throw E3DBError(.serviceUnavailable, "too many searches are waiting; retry shortly")
        } catch AsyncPermits<ClientID>.Refusal.ownerQueueFull {
            throw E3DBError(
                .serviceUnavailable,
                "this client already has \(maxWaitingPerOwner) searches waiting; retry once they are answered")
        }
        defer { permits.release() }
        try Task.checkCancellation()  // granted as it was cancelled
        return try await body()
    }

    /// The free permits and the callers waiting (for tests).
    var snapshot: (free: Int, waiting: Int) { permits.snapshot }
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
            // Safety: `sin6_addr` is 16 bytes, lent for the closure; its first 8 (the /64) are copied into an array.
            let bytes = unsafe withUnsafeBytes(of: v6.address.sin6_addr) { unsafe Array($0.prefix(8)) }
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
