import Logging
internal import NIOCore
internal import NIOPosix
internal import PostgresNIO
import Synchronization

/// The PostgreSQL backend's record reads: the reads of concurrent requests grouped into one statement
/// (`PostgresStatements.ReadableRecords`), one group at a time, on a PostgreSQL connection of their own, driven
/// on that connection's event loop with postgres-nio's event-loop API. There is no Swift task, pool lease or async
/// row sequence per group: a group is sent from the event loop, each row is decoded where it arrives, and each
/// read's completion is called there.
///
/// A read submitted while no group runs starts one at once; reads submitted while a group runs form the next group
/// (at most ``maxBatch``), sent as soon as the running one ends. PostgreSQL's cost is mostly per statement, so one
/// group at a time takes every read that arrived meanwhile (docs/performance.md, "PostgreSQL record reads on an
/// event loop").
///
/// The connection (`application_name` `e3dbkit-record-reads`) is opened by the first read and again after it
/// failed. A group that has not ended within the operation timeout closes the connection, which fails the group
/// with `StorageError(.unavailable)`, so that a database that stopped answering cannot hold reads forever. A group
/// that failed fast (a connection that broke, or a statement PostgreSQL no longer accepts after a schema change)
/// is read once more on a new connection.
final class PostgresReadGroups: Sendable {
    /// Called once with a read's outcome (`nil`: missing or not readable by its reader), on the connection's
    /// event loop.
    typealias Completion = @Sendable (Result<RecordRow?, any Error>) -> Void
    private typealias Pending = (read: RecordRead, completion: Completion)
    private typealias Prepared = (connection: PostgresConnection, statement: PreparedQuery)

    private struct State {
        var queue: [Pending] = []
        /// A group is being read (or a connection opened for it); no read waits while none is.
        var running = false
        var connection: Prepared?
        var closed = false
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    private let eventLoop: any EventLoop
    private let configuration: PostgresConnection.Configuration
    private let logger: Logger
    private let timeout: Duration
    /// The URL without its password, for errors.
    private let url: String
    /// Most reads in one statement.
    let maxBatch: Int

    /// - Parameters:
    ///   - configuration: how to connect (the pool's server, user, password and database).
    ///   - url: the URL without its password, for errors.
    ///   - timeout: how long one group (opening a connection included) may take.
    ///   - maxBatch: most reads in one statement.
    ///   - eventLoop: the connection's event loop.
    ///   - logger: receives postgres-nio's connection events; never the password.
    init(configuration: PostgresConnection.Configuration, url: String, timeout: Duration, maxBatch: Int = 256,
         eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next(), logger: Logger) {
        var configuration = configuration
        configuration.options.additionalStartupParameters.append(("application_name", "e3dbkit-record-reads"))
        configuration.options.connectTimeout = min(configuration.options.connectTimeout, Self.amount(timeout))
        self.configuration = configuration
        self.url = url
        self.timeout = timeout
        self.maxBatch = max(1, maxBatch)
        self.eventLoop = eventLoop
        self.logger = logger
    }

    deinit {
        state.withLock { $0.connection }?.connection.close().whenComplete { _ in }
    }

    /// Reads `read` with whatever else is submitted meanwhile.
    /// - Parameters:
    ///   - read: the record and its reader.
    ///   - completion: called once, on the connection's event loop (at once, on the caller's thread, when the
    ///     storage is closed).
    func submit(_ read: RecordRead, completion: @escaping Completion) {
        let starts = state.withLock { state -> Bool? in
            if state.closed { return nil }
            state.queue.append((read, completion))
            if state.running { return false }
            state.running = true
            return true
        }
        switch starts {
        case nil: completion(.failure(StorageError(.unavailable, "the PostgreSQL storage at \(url) is closed")))
        case true?:
            if eventLoop.inEventLoop { next() } else { eventLoop.execute { self.next() } }
        case false?: break
        }
    }

    /// As ``submit(_:completion:)``, for a caller that can suspend.
    func submit(_ read: RecordRead) async throws -> RecordRow? {
        try await withCheckedThrowingContinuation { continuation in
            submit(read) { continuation.resume(with: $0) }
        }
    }

    /// Refuses later reads, waits for those submitted before and closes the connection.
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                state.closed = true
                if !state.running { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
        let connection = state.withLock { state in
            defer { state.connection = nil }
            return state.connection
        }
        try? await connection?.connection.close().get()
    }

    /// On the event loop: reads the next group, or marks the reader idle when none waits.
    private func next() {
        let (batch, idle) = state.withLock { state -> ([Pending], [CheckedContinuation<Void, Never>]) in
            guard !state.queue.isEmpty else {
                state.running = false
                defer { state.idleWaiters = [] }
                return ([], state.idleWaiters)
            }
            let n = min(maxBatch, state.queue.count)
            defer { state.queue.removeFirst(n) }
            return (Array(state.queue.prefix(n)), [])
        }
        guard !batch.isEmpty else {
            for waiter in idle { waiter.resume() }
            return
        }
        let count = batch.count
        let timedOut = NIOLoopBoundBox(false, eventLoop: eventLoop)
        let deadline = eventLoop.scheduleTask(in: Self.amount(timeout)) {
            timedOut.value = true
            self.state.withLock { $0.connection }?.connection.close().whenComplete { _ in }
        }
        attempt(batch.lazy.map(\.read), retry: count > 1, started: .now, timedOut: timedOut) { result in
            deadline.cancel()
            switch result {
            case .success(let rows):
                for (pending, row) in zip(batch, rows) { pending.completion(.success(row)) }
            case .failure(let error):
                let error = timedOut.value
                    ? StorageError(.unavailable, "PostgreSQL at \(self.url) did not complete reading \(count) record(s) within \(self.timeout)")
                    : PostgresStorage.storageError(error, what: "reading \(count) record(s)", at: self.url)
                for pending in batch { pending.completion(.failure(error)) }
            }
            self.next()
        }
    }

    /// On the event loop: reads a group on the open connection (opening and preparing one first when there is
    /// none); when it fails fast and `retry` allows, once more on a new connection.
    private func attempt(_ reads: some Collection<RecordRead> & Sendable, retry: Bool, started: ContinuousClock.Instant,
                         timedOut: NIOLoopBoundBox<Bool>,
                         done: @escaping @Sendable (Result<[RecordRow?], any Error>) -> Void) {
        prepared().whenComplete { opened in
            let prepared: Prepared
            switch opened {
            case .success(let value): prepared = value
            case .failure(let error): return done(.failure(error))
            }
            let count = reads.count
            let rows = NIOLoopBoundBox([RecordRow?](repeating: nil, count: count), eventLoop: self.eventLoop)
            prepared.statement.execute(PostgresStatements.ReadableRecords.binds(reads)) { row in
                let (position, record) = try PostgresStatements.ReadableRecords.decode(row, count: count)
                rows.value[position - 1] = record
            }.whenComplete { result in
                switch result {
                case .success:
                    done(.success(rows.value))
                case .failure(let error):
                    if error is StorageError { return done(.failure(error)) }  // a row that did not decode
                    self.discard(prepared.connection)
                    if retry, !timedOut.value, ContinuousClock.now - started < self.timeout / 2 {
                        self.logger.warning("grouped record read failed fast; reading once more on a new connection",
                                            metadata: ["reads": "\(count)"])
                        return self.attempt(reads, retry: false, started: started, timedOut: timedOut, done: done)
                    }
                    done(.failure(error))
                }
            }
        }
    }

    /// The open connection with the statement prepared on it, or a new one.
    private func prepared() -> EventLoopFuture<Prepared> {
        if let open = state.withLock({ $0.connection }), !open.connection.isClosed {
            return eventLoop.makeSucceededFuture(open)
        }
        return PostgresConnection.connect(on: eventLoop, configuration: configuration, id: 1, logger: logger)
            .flatMap { connection in
                connection.prepare(query: PostgresStatements.ReadableRecords.sql)
                    .map { (connection, $0) }
                    .flatMapError { error in connection.close().flatMapThrowing { throw error } }
            }
            .map { prepared in
                self.state.withLock { $0.connection = prepared }
                return prepared
            }
    }

    /// Closes a connection whose statement failed, and forgets it, so that the next group opens a new one.
    private func discard(_ connection: PostgresConnection) {
        state.withLock { state in
            if state.connection?.connection === connection { state.connection = nil }
        }
        connection.close().whenComplete { _ in }
    }

    private static func amount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
