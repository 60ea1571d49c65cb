import E3DBAPI
import Foundation
@testable import E3DBServer
import HTTPTypes
import Testing

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
        #expect(AccessRules.mayChangeRecord(caller: "a", writer: "a"))
        #expect(!AccessRules.mayChangeRecord(caller: "b", writer: "a"))
    }

    @Test("a work budget refuses the step that passes it, and not before")
    func workBudget() throws {
        var budget = WorkBudget(limit: 10)
        try budget.charge(4)
        try budget.charge(6)
        #expect(throws: HTTPFailure.self) { try budget.charge(1) }
        var terms = WorkBudget(limit: 1_000_000)
        let star = try SearchTerm("*" + String(repeating: "a", count: 100) + "b", .wildcard)
        #expect(try !star.matches(String(repeating: "a", count: 1000), budget: &terms))
        #expect(terms.used > 50_000, "the glob's backtracking is charged: \(terms.used)")
        let regex = try SearchTerm("(a|b)*c", .regexp)
        var small = WorkBudget(limit: 100)
        #expect(throws: HTTPFailure.self) { _ = try regex.matches(String(repeating: "a", count: 1000), budget: &small) }
    }

    @Test("the body budget: bytes taken by a request come back when it is answered; past it, 503")
    func bodyBudget() throws {
        let budget = BodyBudget(bytes: 100)
        let first = BodyReservation(budget), second = BodyReservation(budget)
        try first.take(60)
        try second.take(40)
        #expect(budget.remaining == 0)
        #expect(throws: HTTPFailure.self) { try second.take(1) }
        first.release()
        first.release()  // once only
        #expect(budget.remaining == 60)
        second.release()
        #expect(budget.remaining == 100)
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

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func add(_ n: Int) -> Int { lock.withLock { value += n; return value } }
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
        #expect(PostgresStorage.kind(sqlState: "22021") == .invalidInput)
        #expect(PostgresStorage.kind(sqlState: "22P02") == .invalidInput)
        #expect(PostgresStorage.kind(sqlState: "23505") == .conflict)
        for state in ["08006", "57P01", "53300", "58030"] {
            #expect(PostgresStorage.kind(sqlState: state) == .unavailable, "\(state)")
        }
        for state in ["23502", "42P01", "40001", "XX000"] {
            #expect(PostgresStorage.kind(sqlState: state) == .failed, "\(state)")
        }
    }
}
