import E3DBPrimitives
import Synchronization
import Testing

/// The holders at once, the most at once, and the permits granted, of `racingCancellations`.
private final class Counts: Sendable {
    let holding = Atomic<Int>(0)
    let most = Atomic<Int>(0)
    let granted = Atomic<Int>(0)
}

/// How the callers of `cancelledCallers` ended.
private final class Outcomes: Sendable {
    let cancelled = Atomic<Int>(0)
    let granted = Atomic<Int>(0)
    let ended = Atomic<Int>(0)
}

/// The package's one counting semaphore (`AsyncPermits`): its bookkeeping after cancellations at every point.
@Suite("E3DBPrimitives: AsyncPermits")
struct AsyncPermitsTests {
    /// Polls `condition` every millisecond for at most five seconds.
    static func eventually(_ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(1))
        }
        return true
    }

    @Test("a cancelled waiter leaves the queue holding nothing; a cancellation after the permit changes nothing")
    func cancellationAtEachPoint() async throws {
        let permits = AsyncPermits<Int>(1)
        try await permits.acquire()
        let waiter = Task { try await permits.acquire(owner: 7) }
        #expect(try await Self.eventually { permits.snapshot.waiting == 1 })
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(permits.snapshot == (0, 0) && permits.arrivingCount == 0)
        // Already cancelled before it asks: refused at once, nothing recorded.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await permits.acquire()
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(permits.arrivingCount == 0)
        // Granted, then cancelled while holding it: the holder keeps the permit until release().
        permits.release()
        let holder = Task { () -> Bool in
            try await permits.acquire()
            withUnsafeCurrentTask { $0?.cancel() }
            let held = permits.snapshot == (0, 0)
            permits.release()
            return held
        }
        #expect(try await holder.value)
        #expect(permits.snapshot == (1, 0) && permits.arrivingCount == 0)
    }

    /// Starts `count` callers of `permits`, whose only permit is held and never released, cancelling each right
    /// after it starts when `cancel` is true. Returns how many threw `CancellationError` and how many were left
    /// waiting, once all ended or after five seconds; a caller left waiting is then let through (a release, which
    /// each such caller passes on) so that the test ends either way.
    static func cancelledCallers(
        _ permits: AsyncPermits<Int>, count: Int, cancel: Bool
    ) async throws -> (cancelled: Int, leftWaiting: Int) {
        let outcomes = Outcomes()
        var tasks: [Task<Void, Never>] = []
        for _ in 0..<count {
            let task = Task {
                do {
                    try await permits.acquire()
                    outcomes.granted.add(1, ordering: .relaxed)
                    permits.release()
                } catch is CancellationError {
                    outcomes.cancelled.add(1, ordering: .relaxed)
                } catch {}
                outcomes.ended.add(1, ordering: .relaxed)
            }
            if cancel { task.cancel() }
            tasks.append(task)
        }
        let allEnded = try await eventually { outcomes.ended.load(ordering: .relaxed) == count }
        let leftWaiting = permits.snapshot.waiting
        if !allEnded { permits.release() }
        for task in tasks { await task.value }
        return (outcomes.cancelled.load(ordering: .relaxed), leftWaiting)
    }

    @Test("a cancellation that comes while a caller arrives (after its id, before its request) refuses it")
    func cancelledWhileArriving() async throws {
        let armed = Atomic<Bool>(false)
        // Deterministic: each caller cancels its own task at that very point (the handler runs at once).
        let permits = AsyncPermits<Int>(1) {
            if armed.load(ordering: .relaxed) { withUnsafeCurrentTask { $0?.cancel() } }
        }
        try await permits.acquire()
        armed.store(true, ordering: .relaxed)
        let (cancelled, leftWaiting) = try await Self.cancelledCallers(permits, count: 200, cancel: false)
        #expect(cancelled == 200, "every caller cancelled while arriving throws CancellationError")
        #expect(leftWaiting == 0, "no cancelled caller is left queued")
        #expect(permits.arrivingCount == 0)
    }

    @Test("callers cancelled right after they start all throw CancellationError, and none is left waiting")
    func cancelledRightAfterStarting() async throws {
        let permits = AsyncPermits<Int>(1)
        try await permits.acquire()
        let (cancelled, leftWaiting) = try await Self.cancelledCallers(permits, count: 300, cancel: true)
        #expect(cancelled == 300, "every cancelled caller throws CancellationError")
        #expect(leftWaiting == 0 && permits.snapshot == (0, 0), "the waiting count returns to 0")
        #expect(permits.arrivingCount == 0)
    }

    @Test("under cancellations that race the hand-over no permit is lost or doubled and nothing is left recorded")
    func racingCancellations() async throws {
        let permits = AsyncPermits<Int>(3)
        let counts = Counts()
        await withTaskGroup(of: Void.self) { group in
            for round in 0..<400 {
                let task = Task {
                    try await permits.acquire(owner: round % 5)
                    let now = counts.holding.add(1, ordering: .relaxed).newValue
                    _ = counts.most.max(now, ordering: .relaxed)
                    counts.granted.add(1, ordering: .relaxed)
                    await Task.yield()
                    counts.holding.subtract(1, ordering: .relaxed)
                    permits.release()
                }
                group.addTask {
                    if round % 2 == 0 { task.cancel() }
                    _ = try? await task.value
                }
            }
        }
        #expect(counts.most.load(ordering: .relaxed) <= 3, "never more holders than permits")
        #expect(counts.granted.load(ordering: .relaxed) >= 200, "every uncancelled caller got a permit")
        #expect(permits.snapshot == (3, 0), "every permit came back")
        #expect(permits.arrivingCount == 0, "no cancellation is left recorded")
    }
}
