@testable import E3DBServer
import Testing

/// The watchdog behind the PostgreSQL storage-call timeout.
@Suite("Storage call deadlines")
struct CallDeadlinesTests {
    @Test("a call past its deadline is cancelled and reported; one that ends in time is not")
    func expiredCallsAreCancelled() async throws {
        let deadlines = CallDeadlines(tick: .milliseconds(20))
        let slow = Task { try await Task.sleep(for: .seconds(30)) }
        let slowTicket = deadlines.begin(timeout: .milliseconds(50)) { slow.cancel() }
        let fast = Task { try await Task.sleep(for: .seconds(3600)) }
        // An hour: far beyond any test run, however starved, so only a bug can expire it.
        let fastTicket = deadlines.begin(timeout: .seconds(3600)) { fast.cancel() }
        await #expect(throws: CancellationError.self) { try await slow.value }
        #expect(deadlines.end(slowTicket), "the slow call is reported as expired")
        #expect(!deadlines.end(slowTicket), "and only once")
        #expect(!deadlines.end(fastTicket))
        #expect(!fast.isCancelled, "a call within its deadline is left alone")
        fast.cancel()
        deadlines.stop()
    }
}
