import E3DBPrimitives
import Synchronization

/// Group commit: items submitted concurrently are written together, in one statement or transaction, on one task
/// per lane at a time.
///
/// A submitter that finds a lane free writes its own item at once, on its own task; whatever arrives while every
/// lane is busy waits and forms the next batch (at most ``maxBatch`` items), written by a drain task, so there is
/// no added delay or thread hop when writes do not overlap and one statement per batch when they do. With one lane
/// batches run one after the other (record inserts on both backends); with more, up to that many at once. When a batch fails, its items are retried one at a time, so that one bad item fails only its own
/// caller, unless the backend is unavailable, which fails the whole batch at once. A submitter cancelled while its
/// item waits leaves the queue (``submit(_:)``).
///
/// The drain task is unstructured on purpose: it writes other callers' items, so no one caller can own it (a caller
/// that waited for it would wait for everyone's writes). It runs only while items wait, ends when the queue is
/// empty, and ``idle()``, which a storage awaits before it closes, waits for it.
final class GroupCommit<Item: Sendable, Output: Sendable>: Sendable {
    /// Resumes a waiting submitter once with its item's outcome.
    private typealias Waiter = @Sendable (Result<Output, any Error>) -> Void
    private struct Queued {
        let id: UInt64
        let item: Item
        let waiter: Waiter
    }
    private struct State {
        var queue: [Queued] = []
        /// Lanes writing now (at most `lanes`); no item waits while none is.
        var busy = 0
        /// Callers of ``idle()``, resumed when the last lane finishes.
        var idleWaiters: [CheckedContinuation<Void, Never>] = []

        /// Frees a lane; returns the callers of `idle()` to resume (outside the lock) when it was the last.
        mutating func release() -> [CheckedContinuation<Void, Never>] {
            busy -= 1
            guard busy == 0, !idleWaiters.isEmpty else { return [] }
            defer { idleWaiters = [] }
            return idleWaiters
        }
    }

    private let state = Mutex(State())
    /// The id of the next queued item (to find it again when its submitter is cancelled).
    private let nextID = Atomic<UInt64>(0)
    /// Most items in one batch.
    let maxBatch: Int
    /// Most batches written at once.
    let lanes: Int
    private let write: @Sendable ([Item]) async throws -> [Output]

    /// - Parameters:
    ///   - maxBatch: most items in one batch.
    ///   - lanes: most batches written at once (1: one after the other).
    ///   - write: writes (or reads) the items in one statement or transaction, returning one output per item in
    ///     order.
    init(maxBatch: Int = 256, lanes: Int = 1, write: @escaping @Sendable ([Item]) async throws -> [Output]) {
        self.maxBatch = max(1, maxBatch)
        self.lanes = max(1, lanes)
        self.write = write
    }

    /// Writes `item` with whatever else is submitted meanwhile.
    ///
    /// A submitter whose task is cancelled while its item waits in the queue leaves it at once with
    /// `CancellationError`, its item never written; once its item is in a batch being written, it waits for that
    /// batch's outcome (the write is not undone).
    /// - Parameter item: the item.
    /// - Returns: its output once its transaction committed.
    /// - Throws: the error of its own write; `CancellationError` when cancelled while waiting in the queue.
    func submit(_ item: Item) async throws -> Output {
        let leads = state.withLock { state in
            if state.busy >= lanes { return false }
            state.busy += 1
            return true
        }
        if leads { return try await writeAlone(item) }
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Output, any Error>) in
                enqueue(Queued(id: id, item: item) { continuation.resume(with: $0) })
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                // Not found: not queued yet (`enqueue` then sees the cancellation) or already in a batch.
                guard let index = state.queue.firstIndex(where: { $0.id == id }) else { return nil }
                return state.queue.remove(at: index).waiter
            }
            waiter?(.failure(CancellationError()))
        }
    }

    /// Queued items and the lanes writing now (for tests).
    var snapshot: (queued: Int, busy: Int) { state.withLock { ($0.queue.count, $0.busy) } }

    /// Returns once nothing is being written and nothing waits: every item submitted before has its outcome. A
    /// storage awaits it before closing, so that a group still being written does not race the close.
    func idle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if state.busy == 0 { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Queues `entry`, unless its task is cancelled already: the cancellation handler, which runs once the task is
    /// marked cancelled, takes the same lock, so either it finds the entry queued or the entry is never queued.
    private func enqueue(_ entry: Queued) {
        let lead = state.withLock { state -> Bool? in
            if Task.isCancelled { return nil }
            state.queue.append(entry)
            if state.busy >= lanes { return false }
            state.busy += 1
            return true
        }
        switch lead {
        case nil: entry.waiter(.failure(CancellationError()))
        case true?: Task { await self.drain() }
        case false?: break
        }
    }

    /// A lane was free: the caller writes its own item at once on its own task (no drain task and no hop
    /// to it), then leaves whatever arrived meanwhile to a drain task, so it does not wait for others' writes.
    private func writeAlone(_ item: Item) async throws -> Output {
        let result: Result<Output, any Error>
        do {
            let outputs = try await write([item])
            guard outputs.count == 1, let output = outputs.first else {
                throw E3DBError(.storageCorrupted, "a write of one item returned \(outputs.count) results")
            }
            result = .success(output)
        } catch {
            result = .failure(error)
        }
        let (more, idle) = state.withLock { state in
            state.queue.isEmpty ? (false, state.release()) : (true, [])
        }
        for waiter in idle { waiter.resume() }
        if more { Task { await self.drain() } }
        return try result.get()
    }

    private func drain() async {
        while true {
            let (batch, idle) = state.withLock { state -> ([Queued], [CheckedContinuation<Void, Never>]) in
                guard !state.queue.isEmpty else { return ([], state.release()) }
                let n = min(maxBatch, state.queue.count)
                let batch = Array(state.queue.prefix(n))
                state.queue.removeFirst(n)
                return (batch, [])
            }
            if batch.isEmpty {
                for waiter in idle { waiter.resume() }
                return
            }
            let outputs: [Output]
            do {
                outputs = try await write(batch.map(\.item))
            } catch {
                // Only when the backend is down or timed out (`.unavailable`: a connection-class error) would every
                // item fail the same way, each after its own timeout, so the whole group fails now. Any other
                // failure (one item's value, a duplicate) is retried one item at a time, so that it fails only
                // the item that caused it.
                if batch.count == 1 || (error as? E3DBError)?.code == .storageUnavailable {
                    for entry in batch { entry.waiter(.failure(error)) }
                    continue
                }
                for entry in batch {
                    do {
                        let outputs = try await write([entry.item])
                        guard let output = outputs.first else {
                            throw E3DBError(.storageCorrupted, "a grouped write returned no result")
                        }
                        entry.waiter(.success(output))
                    } catch {
                        entry.waiter(.failure(error))
                    }
                }
                continue
            }
            guard outputs.count == batch.count else {
                let error = E3DBError(
                    .storageCorrupted, "a grouped write returned \(outputs.count) results for \(batch.count) items")
                for entry in batch { entry.waiter(.failure(error)) }
                continue
            }
            for (entry, output) in zip(batch, outputs) { entry.waiter(.success(output)) }
        }
    }
}
