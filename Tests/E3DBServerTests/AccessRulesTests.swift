import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Testing

@testable import E3DBServer

/// The sharing rule's table, cell by cell, and the budgets that bound a request's work.
@Suite("Access rules and work budgets")
struct AccessRulesTests {
    /// The allowed cells of docs/security.md's table, written out one by one (not derived from the rule).
    static let allowed: Set<String> = [
        "readAccessKey writer caller", "readAccessKey authorizer caller", "readAccessKey other caller",
        "putAccessKey writer caller", "putAccessKey writer writer", "putAccessKey writer authorizer",
        "putAccessKey writer reader", "putAccessKey authorizer reader",
        "deleteAccessKey writer caller", "deleteAccessKey writer writer", "deleteAccessKey writer authorizer",
        "deleteAccessKey writer reader", "deleteAccessKey authorizer reader",
        "changeRead writer caller", "changeRead writer writer", "changeRead writer authorizer",
        "changeRead writer reader", "changeRead authorizer reader",
        "changeAuthorizer writer caller", "changeAuthorizer writer writer", "changeAuthorizer writer authorizer",
        "changeAuthorizer writer reader",
        "removeAuthorizers writer caller", "removeAuthorizers writer writer", "removeAuthorizers writer authorizer",
        "removeAuthorizers writer reader",
    ]

    @Test("every cell of caller role × operation × target matches the written table")
    func everyCell() {
        var cells = 0
        for operation in AccessRules.Operation.allCases {
            for caller in AccessRules.CallerRole.allCases {
                for target in AccessRules.TargetRole.allCases {
                    let name = "\(operation) \(caller) \(target)"
                    let decided = AccessRules.decide(operation, caller: caller, target: target)
                    #expect(decided == Self.allowed.contains(name), "\(name)")
                    if !decided {
                        let refusal = AccessRules.refusal(operation, caller: caller, target: target)
                        #expect(refusal.status == .forbidden)
                        #expect(refusal.message.hasPrefix("not allowed to"))
                    }
                    cells += 1
                }
            }
        }
        #expect(cells == 72)
        let (a, b) = (ClientID.random(), ClientID.random())
        #expect(AccessRules.mayChangeRecord(caller: a, writer: a))
        #expect(!AccessRules.mayChangeRecord(caller: b, writer: a))
    }

    @Test("a work budget refuses the step that passes it, and not before")
    func workBudget() throws {
        var budget = WorkBudget(limit: 10)
        try budget.charge(4)
        try budget.charge(6)
        #expect(throws: E3DBError.self) { try budget.charge(1) }
        var terms = WorkBudget(limit: 1_000_000)
        let star = try SearchTerm("*" + String(repeating: "a", count: 100) + "b", .wildcard)
        #expect(try !star.matches(String(repeating: "a", count: 1000), budget: &terms))
        #expect(terms.used > 50_000, "the glob's backtracking is charged: \(terms.used)")
        // A glob stops where the budget ends, not after its whole O(n·m) run.
        var tiny = WorkBudget(limit: 1000)
        #expect(throws: E3DBError.self) { _ = try star.matches(String(repeating: "a", count: 16_000), budget: &tiny) }
        #expect(tiny.used < 20_000, "\(tiny.used) steps charged for a budget of 1000")
        // A class is charged per range it tests.
        let ranges = (0..<200).map { "\(Character(Unicode.Scalar(0x4E00 + 2 * $0)!))" }.joined()
        var classes = WorkBudget(limit: .max)
        _ = try SearchTerm("[^\(ranges)]*", .regexp).matches("abc", budget: &classes)
        #expect(classes.used >= 4 * 200, "\(classes.used)")
        let regex = try SearchTerm("(a|b)*c", .regexp)
        var small = WorkBudget(limit: 100)
        #expect(throws: E3DBError.self) { _ = try regex.matches(String(repeating: "a", count: 1000), budget: &small) }
    }

    @Test("the body budget: shares per client and for unauthenticated requests; bytes come back when answered")
    func bodyBudget() throws {
        let budget = BodyBudget(bytes: 160, perClient: 60)
        let first = BodyReservation(budget)
        let second = BodyReservation(budget)
        let third = BodyReservation(budget)
        let (a, b, c) = (ClientID.random(), ClientID.random(), ClientID.random())
        try first.take(60, for: .client(a))
        #expect(throws: E3DBError.self) { try first.take(1, for: .client(a)) }  // a's share
        try second.take(60, for: .client(b))
        try third.take(40, for: .client(c))
        #expect(budget.remaining.clients == 0)
        #expect(throws: E3DBError.self) { try third.take(1, for: .client(c)) }  // the clients' pool
        // Unauthenticated requests have their own pool (a sixteenth): exhausting it leaves the clients' alone.
        try third.take(10, for: .anonymous)
        #expect(throws: E3DBError.self) { try second.take(1, for: .anonymous) }
        first.release()
        first.release()  // once only
        #expect(budget.remaining.clients == 60)
        try first.take(60, for: .client(a))
        first.release()
        second.release()
        third.release()
        #expect(budget.remaining == (160, 10))
    }

    @Test("the search limiter lets `permits` callers in at once")
    func limiter() async throws {
        let limiter = AsyncLimiter(permits: 2)
        let most = try await withThrowingTaskGroup(of: Int.self) { group in
            let inside = Counter()
            for _ in 0..<10 {
                group.addTask {
                    try await limiter.withPermit {
                        let now = inside.add(1)
                        try await Task.sleep(for: .milliseconds(20))
                        _ = inside.add(-1)
                        return now
                    }
                }
            }
            return try await group.reduce(0) { max($0, $1) }
        }
        #expect(most == 2)
    }

    @Test("the search limiter refuses callers past its waiting room with 503")
    func limiterQueueIsBounded() async throws {
        let limiter = AsyncLimiter(permits: 1, maxWaiting: 1)
        let release = AsyncStream<Void>.makeStream()
        let holder = Task { try await limiter.withPermit { for await _ in release.stream { break } } }
        try await Task.sleep(for: .milliseconds(50))
        let waiter = Task { try await limiter.withPermit { 1 } }
        try await Task.sleep(for: .milliseconds(50))
        await #expect(throws: E3DBError.self) { try await limiter.withPermit { 2 } }
        release.continuation.yield()
        try await holder.value
        #expect(try await waiter.value == 1)
        #expect(try await limiter.withPermit { 3 } == 3)
    }

    /// Polls `condition` every 10 ms for up to `seconds`; whether it held.
    static func eventually(within seconds: Double = 2, _ condition: () -> Bool) async throws -> Bool {
        for _ in 0..<Int(seconds * 100) {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    @Test("L2: a cancelled waiter leaves the search limiter at once, its body never runs, and its place is free")
    func limiterWaiterCancellation() async throws {
        let limiter = AsyncLimiter(permits: 1, maxWaiting: 1)
        let release = AsyncStream<Void>.makeStream()
        let holder = Task { try await limiter.withPermit { for await _ in release.stream { break } } }
        #expect(try await Self.eventually { limiter.snapshot.free == 0 })
        let ran = Counter()
        let waiter = Task { try await limiter.withPermit { ran.add(1) } }
        #expect(try await Self.eventually { limiter.snapshot.waiting == 1 })
        waiter.cancel()
        // The place is given back at the cancellation, not when the holder leaves.
        #expect(try await Self.eventually { limiter.snapshot.waiting == 0 })
        let replacement = Task { try await limiter.withPermit { 7 } }
        #expect(try await Self.eventually { limiter.snapshot.waiting == 1 }, "the freed place takes a new waiter")
        release.continuation.yield()
        try await holder.value
        #expect(try await replacement.value == 7)
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(ran.add(0) == 0, "the cancelled waiter's body did not run")
        #expect(limiter.snapshot.free == 1 && limiter.snapshot.waiting == 0)
    }

    @Test("L2: a task cancelled before it asks, or while it is granted the permit, leaks no permit")
    func limiterCancellationRaces() async throws {
        let limiter = AsyncLimiter(permits: 1, maxWaiting: 8)
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await limiter.withPermit { 1 }
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        for _ in 0..<200 {
            let release = AsyncStream<Void>.makeStream()
            let holder = Task { try await limiter.withPermit { for await _ in release.stream { break } } }
            #expect(try await Self.eventually { limiter.snapshot.free == 0 })
            let waiter = Task { try await limiter.withPermit { 1 } }
            #expect(try await Self.eventually { limiter.snapshot.waiting == 1 })
            // The grant (the holder leaving) and the cancellation race.
            async let left: Void = { release.continuation.yield() }()
            waiter.cancel()
            await left
            try await holder.value
            _ = await waiter.result
            #expect(try await Self.eventually { limiter.snapshot.free == 1 }, "the permit came back")
            #expect(limiter.snapshot.waiting == 0)
        }
    }

    @Test("L2: one client may have at most `maxWaitingPerOwner` searches waiting; other clients still get places")
    func limiterPerClientQueue() async throws {
        let limiter = AsyncLimiter(permits: 1, maxWaiting: 8, maxWaitingPerOwner: 2)
        let (a, b) = (ClientID.random(), ClientID.random())
        let release = AsyncStream<Void>.makeStream()
        let holder = Task { try await limiter.withPermit(owner: a) { for await _ in release.stream { break } } }
        #expect(try await Self.eventually { limiter.snapshot.free == 0 })
        let queued = (0..<2).map { n in Task { try await limiter.withPermit(owner: a) { n } } }
        #expect(try await Self.eventually { limiter.snapshot.waiting == 2 })
        let refused = await #expect(throws: E3DBError.self) { try await limiter.withPermit(owner: a) { 9 } }
        #expect(refused?.code == .serviceUnavailable && refused?.message.contains("this client") == true)
        let other = Task { try await limiter.withPermit(owner: b) { 5 } }
        #expect(try await Self.eventually { limiter.snapshot.waiting == 3 }, "another client still gets a place")
        release.continuation.yield()
        try await holder.value
        let answers = [try await queued[0].value, try await queued[1].value, try await other.value]
        #expect(answers == [0, 1, 5])
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func add(_ n: Int) -> Int {
            lock.withLock {
                value += n
                return value
            }
        }
    }

    @Test("U+0000 in JSON is found only where it is U+0000")
    func escapedNUL() {
        #expect(JSONBody.escapedNUL(in: Data(#"{"a":"x\u0000"}"#.utf8)) == 7)
        #expect(JSONBody.escapedNUL(in: Data(#"{"a":"\\u0000"}"#.utf8)) == nil)
        #expect(JSONBody.escapedNUL(in: Data(#"{"a":"\\\u0000"}"#.utf8)) == 8)
        #expect(JSONBody.escapedNUL(in: Data(#"{"a":"\u00000"}"#.utf8)) == 6)
        #expect(JSONBody.escapedNUL(in: Data(#"{"a":"\u0001","b":"\u000"}"#.utf8)) == nil)
        #expect(JSONBody.escapedNUL(in: Data(#"{"\u0000":1}"#.utf8)) == 2)
    }

    @Test("PostgreSQL errors by SQLSTATE: data exceptions are the client's, connection errors unavailable")
    func sqlStates() {
        #expect(PostgresStorage.code(sqlState: "22021") == .storageRejectedValue)
        #expect(PostgresStorage.code(sqlState: "22P02") == .storageRejectedValue)
        #expect(PostgresStorage.code(sqlState: "23505") == .storageConflict)
        for state in ["08006", "57P01", "53300", "58030"] {
            #expect(PostgresStorage.code(sqlState: state) == .storageUnavailable, "\(state)")
        }
        for state in ["23502", "42P01", "40001", "XX000"] {
            #expect(PostgresStorage.code(sqlState: state) == .storageFailed, "\(state)")
        }
    }
}
