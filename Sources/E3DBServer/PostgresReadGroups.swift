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
/// The connection (`application_name` `e3dbkit-record-reads`; one per process besides the pool) is opened by the
/// first read, again after it broke, and closed after a minute without reads. A group that has not ended within the
/// operation timeout (opening and preparing a connection included) fails with `StorageError(.unavailable)` and its
/// connection is closed, so that a database that stopped answering or a lock cannot hold reads forever. A group
/// whose connection broke fast (terminated, lost, or a statement PostgreSQL no longer accepts after a schema
/// change) is read once more on a new connection; reads change nothing, so reading twice is safe.
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
        /// When the last group ended.
        var lastUsed = NIODeadline.now()
    }

    private let state = Mutex(State())
    private let eventLoop: any EventLoop
    private let configuration: PostgresConnection.Configuration
    private let logger: Logger
    private let timeout: Duration
    /// ``timeout`` as the event loop's deadline of a group.
    private let groupDeadline: TimeAmount
    /// The URL without its password, for errors.
    private let url: String
    /// Most reads in one statement.
    let maxBatch: Int
    private let idleChecks = Mutex<RepeatedTask?>(nil)

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
        let (seconds, attoseconds) = timeout.components
        groupDeadline = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        configuration.options.connectTimeout = min(configuration.options.connectTimeout, groupDeadline)
        self.configuration = configuration
        self.url = url
        self.timeout = timeout
        self.maxBatch = max(1, maxBatch)
        self.eventLoop = eventLoop
        self.logger = logger
        let task = eventLoop.scheduleRepeatedTask(initialDelay: Self.idleCheck, delay: Self.idleCheck) {
            [weak self] _ in self?.closeIfIdle()
        }
        idleChecks.withLock { $0 = task }
    }

    deinit {
        idleChecks.withLock { $0 }?.cancel()
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
        idleChecks.withLock { $0 }?.cancel()
        let connection = state.withLock { state in
            defer { state.connection = nil }
            return state.connection
        }
        try? await connection?.connection.close().get()
    }

    /// One group's progress, touched only on the event loop.
    private final class Group: @unchecked Sendable {
        let reads: [Pending]
        /// The connection it uses, once connected (closed by the deadline).
        var connection: PostgresConnection?
        var deadline: Scheduled<Void>?
        /// Its reads have their outcome (it succeeded, failed or timed out); later results are dropped.
        var ended = false
        init(_ reads: [Pending]) { self.reads = reads }
    }

    /// On the event loop: reads the next group, or marks the reader idle when none waits.
    private func next() {
        let (batch, idle) = state.withLock { state -> ([Pending], [CheckedContinuation<Void, Never>]) in
            guard !state.queue.isEmpty else {
                state.running = false
                state.lastUsed = .now()
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
        let group = Group(batch)
        group.deadline = eventLoop.scheduleTask(in: groupDeadline) {
            if let connection = group.connection { self.discard(connection) }
            self.end(group, .failure(StorageError(
                .unavailable, "PostgreSQL at \(self.url) did not complete reading \(batch.count) record(s) within \(self.timeout)")))
        }
        attempt(group, retry: true, started: .now)
    }

    /// On the event loop: gives each read of `group` its outcome (once) and goes on with the next group.
    private func end(_ group: Group, _ result: Result<[RecordRow?], any Error>) {
        eventLoop.assertInEventLoop()
        guard !group.ended else { return }
        group.ended = true
        group.deadline?.cancel()
        switch result {
        case .success(let rows):
            for (pending, row) in zip(group.reads, rows) { pending.completion(.success(row)) }
        case .failure(let error):
            let error = PostgresStorage.storageError(error, what: "reading \(group.reads.count) record(s)", at: url)
            for pending in group.reads { pending.completion(.failure(error)) }
        }
        next()
    }

    /// On the event loop: reads `group` on the open connection (opening and preparing one first when there is
    /// none); when the connection broke fast and `retry` allows, once more on a new one.
    private func attempt(_ group: Group, retry: Bool, started: ContinuousClock.Instant) {
        eventLoop.assertInEventLoop()
        prepared(for: group).whenComplete { opened in
            guard !group.ended else { return }
            let prepared: Prepared
            switch opened {
            case .success(let value): prepared = value
            case .failure(let error): return self.end(group, .failure(error))
            }
            let count = group.reads.count
            let rows = NIOLoopBoundBox([RecordRow?](repeating: nil, count: count), eventLoop: self.eventLoop)
            let binds = PostgresStatements.ReadableRecords.binds(group.reads.lazy.map(\.read))
            prepared.statement.execute(binds) { row in
                let (position, record) = try PostgresStatements.ReadableRecords.decode(row, count: count)
                rows.value[position - 1] = record
            }.whenComplete { result in
                guard !group.ended else { return }
                switch result {
                case .success:
                    self.end(group, .success(rows.value))
                case .failure(let error):
                    guard Self.brokeConnection(error) || prepared.connection.isClosed else {
                        return self.end(group, .failure(error))  // a refusal or a row that did not decode
                    }
                    self.discard(prepared.connection)
                    if retry, ContinuousClock.now - started < self.timeout / 2 {
                        self.logger.warning("a grouped record read failed fast on its connection; reading it once more on a new one",
                                            metadata: ["reads": "\(count)"])
                        return self.attempt(group, retry: false, started: started)
                    }
                    self.end(group, .failure(error))
                }
            }
        }
    }

    /// Whether a failed statement says its connection is unusable: postgres-nio lost it or the protocol broke, or
    /// PostgreSQL reported a connection exception (class 08), operator intervention (57P: terminated, shutting
    /// down) or a prepared statement it no longer accepts (0A000 after a schema change, 26000). The event-loop API
    /// reports server errors as `PostgresError.server`; anything but a row that did not decode
    /// (`StorageError`) or a server error of another class is taken for a broken connection.
    static func brokeConnection(_ error: any Error) -> Bool {
        func unusable(_ state: String?) -> Bool {
            guard let state else { return true }
            return state.hasPrefix("08") || state.hasPrefix("57P") || state == "0A000" || state == "26000"
        }
        switch error {
        case is StorageError: return false
        case let error as PSQLError: return unusable(error.serverInfo?[.sqlState])
        case PostgresError.server(let message): return unusable(message.fields[.sqlState])
        default: return true
        }
    }

    /// On the event loop: the open connection with the statement prepared on it, or a new one.
    private func prepared(for group: Group) -> EventLoopFuture<Prepared> {
        if let open = state.withLock({ $0.connection }), !open.connection.isClosed {
            group.connection = open.connection
            return eventLoop.makeSucceededFuture(open)
        }
        return PostgresConnection.connect(on: eventLoop, configuration: configuration, id: 1, logger: logger)
            .flatMap { connection -> EventLoopFuture<Prepared> in
                guard !group.ended else {  // the group timed out while the connection was being opened
                    return connection.close().flatMapThrowing {
                        throw StorageError(.unavailable, "the grouped read timed out while connecting")
                    }
                }
                group.connection = connection
                // One generic plan for every group size. With custom plans (the default for a prepared statement
                // whose generic plan looks dearer), PostgreSQL plans each execution again: about 300 µs of its CPU
                // for a lone read, against about 40 µs with the generic plan (an index scan per id). Before
                // PostgreSQL 12 the setting does not exist and the default stays.
                return connection.query("SET plan_cache_mode = force_generic_plan", logger: self.logger)
                    .map { _ in }
                    .recover { _ in }
                    .flatMap { connection.prepare(query: PostgresStatements.ReadableRecords.sql) }
                    .map { (connection, $0) }
                    .flatMapError { error in connection.close().flatMapThrowing { throw error } }
            }
            .map { prepared in
                if group.ended {  // the group timed out meanwhile: its deadline closed the connection
                    self.discard(prepared.connection)
                } else {
                    self.state.withLock { $0.connection = prepared }
                }
                return prepared
            }
    }

    /// Closes a connection that broke, timed out or idled, and forgets it, so that the next group opens a new one.
    private func discard(_ connection: PostgresConnection) {
        state.withLock { state in
            if state.connection?.connection === connection { state.connection = nil }
        }
        connection.close().whenComplete { _ in }
    }

    /// On the event loop, every ``idleCheck``: closes the connection when no group has run for ``idleLimit``, as
    /// postgres-nio's pool does with its idle connections, so that a connection a firewall dropped is not the one
    /// the next read waits on.
    private func closeIfIdle() {
        let idle = state.withLock { state -> PostgresConnection? in
            guard !state.running, let open = state.connection, .now() - state.lastUsed >= Self.idleLimit else {
                return nil
            }
            return open.connection
        }
        if let idle { discard(idle) }
    }

    /// How often ``closeIfIdle()`` looks, and how long a connection may stay unused.
    static let idleCheck = TimeAmount.seconds(30)
    static let idleLimit = TimeAmount.seconds(60)
}
