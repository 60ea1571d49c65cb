import Foundation
import HTTPTypes
import Synchronization

/// The work one request may do, in steps, charged as it goes: a search charges every comparison of its matchers
/// and every record it scans (``SearchTerm``, ``CompiledClause``). Past the limit the request is refused with 400, so
/// no input can make a request run longer than about the limit's worth of steps (plus one comparison, which is
/// itself bounded by ``SearchTerm/maxPatternBytes`` and ``SearchTerm/maxMatchedValueBytes``).
struct WorkBudget {
    let limit: Int
    private(set) var used = 0

    init(limit: Int) { self.limit = limit }

    /// Charges `steps`; throws the 400 once the total passes the limit.
    mutating func charge(_ steps: Int) throws(HTTPFailure) {
        used += steps
        guard used <= limit else {
            throw HTTPFailure.badRequest(
                "the search needs more work than this server allows (\(limit) steps): narrow it with fewer or "
                + "simpler terms, a type, a writer or a time range")
        }
    }
}

/// The request body bytes that all requests together hold in memory, bounded (``ServerConfiguration/maxBodyBytesInFlight``).
final class BodyBudget: Sendable {
    private let available: Mutex<Int>

    init(bytes: Int) { available = Mutex(bytes) }

    /// Takes `count` bytes, or returns `false` when fewer are left.
    func take(_ count: Int) -> Bool {
        available.withLock { left in
            guard count <= left else { return false }
            left -= count
            return true
        }
    }

    func give(_ count: Int) { available.withLock { $0 += count } }

    /// What is left (for tests).
    var remaining: Int { available.withLock { $0 } }
}

/// The bytes one request took from the ``BodyBudget``, given back when the request is answered.
final class BodyReservation: Sendable {
    private let budget: BodyBudget
    private let held = Mutex(0)

    init(_ budget: BodyBudget) { self.budget = budget }

    /// Takes `count` more bytes for this request, or refuses the request with 503.
    func take(_ count: Int) throws(HTTPFailure) {
        guard budget.take(count) else {
            throw HTTPFailure(.serviceUnavailable,
                              "the server holds too many request bodies at the moment; retry shortly")
        }
        held.withLock { $0 += count }
    }

    /// Gives back everything this request took.
    func release() {
        let count = held.withLock { count in
            defer { count = 0 }
            return count
        }
        if count > 0 { budget.give(count) }
    }
}

/// At most `permits` callers inside ``withPermit(_:)`` at once; the others wait in arrival order.
final class AsyncLimiter: Sendable {
    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(permits: Int) { state = Mutex(State(free: max(1, permits))) }

    func withPermit<T>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        let acquired = state.withLock { state -> Bool in
            guard state.free > 0 else { return false }
            state.free -= 1
            return true
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
