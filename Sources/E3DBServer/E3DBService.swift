import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Prometheus

/// The E3DB API over a ``ServerStorage`` and a ``FileBodyStore``: its state (configuration, capability secret, token
/// cache, budgets) and what every route shares; the routes themselves are in `Routes/` (``router()``). It stores
/// what clients send (ciphertext, plaintext metadata, encrypted access keys, policies) and has no code that could
/// open any of it.
final class E3DBService: Sendable {
    let storage: any ServerStorage
    let files: any FileBodyStore
    let configuration: ServerConfiguration
    let secret: SecureBytes
    let clock = MonotonicClock()
    let bearerTokens = BearerTokenCache()
    let logger: Logger
    /// The Prometheus registry when `/metrics` is served.
    let metrics: PrometheusCollectorRegistry?
    /// Request body bytes held in memory by all requests (``ServerConfiguration/maxBodyBytesInFlight``).
    let bodyBudget: BodyBudget
    /// Searches running at once (``ServerConfiguration/concurrentSearches``).
    let searches: AsyncLimiter
    /// The largest file body a file record may declare: ``ServerConfiguration/maxFileSize``, or the file store's
    /// own limit when smaller (one S3 PUT: 5 GiB).
    let maxFileSize: Int64

    init(
        storage: any ServerStorage, files: any FileBodyStore, configuration: ServerConfiguration, secret: Data,
        logger: Logger, metrics: PrometheusCollectorRegistry? = nil
    ) {
        self.storage = storage
        self.files = files
        self.configuration = configuration
        self.secret = SecureBytes(copying: secret)
        self.logger = logger
        self.metrics = metrics
        bodyBudget = BodyBudget(bytes: configuration.maxBodyBytesInFlight, perClient: 2 * configuration.maxBodySize)
        searches = AsyncLimiter(permits: configuration.concurrentSearches)
        maxFileSize = min(configuration.maxFileSize, files.maxBodySize ?? .max)
    }

    // MARK: Maintenance

    /// Partial uploads not written to for this long are removed (``FileBodyStore/removeAbandonedUploads(idle:)``).
    static let abandonedUploadIdle: TimeInterval = 300

    /// The safety margin of ``expiryRetention(_:)``: an hour, seconds.
    static let expirySafetyMargin: Int64 = 3600

    /// How long after their expiry TSV1 nonces (and access tokens and notes, purged at the same time) are kept,
    /// microseconds: the TSV1 window, the largest clock skew the server accepts
    /// (``ServerConfiguration/maximumClockSkew``) and ``expirySafetyMargin``. A node whose clock runs ahead of
    /// another's by `d` purges a nonce `d` early while the other still accepts its timestamp: a replay would pass
    /// once `d` exceeds what the nonce is kept past its expiry, and this keeps it well past the skew the server
    /// accepts. Expired tokens and notes are refused by their expiry meanwhile.
    static func expiryRetention(_ configuration: ServerConfiguration) -> Int64 {
        var seconds: Int64 = 0
        for part in [configuration.tsv1Window, configuration.maximumClockSkew, expirySafetyMargin] {
            let sum = seconds.addingReportingOverflow(max(0, part))
            seconds = sum.overflow ? .max : sum.partialValue
        }
        let micros = seconds.multipliedReportingOverflow(by: 1_000_000)
        return micros.overflow ? .max : micros.partialValue
    }

    /// One maintenance pass: on PostgreSQL first this node's clock against the database's (above
    /// ``ServerConfiguration/maximumClockSkew`` the pass is skipped and logged); then expired TSV1 nonces, tokens
    /// and notes (``expiryRetention(_:)`` after their expiry), pending files past their lifetime (their ids go to
    /// the deletion outbox), the outbox drained (``drainBodyDeletions(only:now:)``), and abandoned partial uploads.
    /// Failures are logged; the next pass tries again.
    /// - Parameter nodeClock: this node's wall clock, microseconds (tests pass a skewed one).
    func maintain(nodeClock: @Sendable () -> Int64 = APITimestamp.nowMicros) async {
        do {
            try await ClockCheck.read(storage, now: nodeClock)?.verify(
                maximumSkew: configuration.maximumClockSkew, logger: logger)
        } catch let error as E3DBError where error.code == .clockSkew {
            logger.error("maintenance skipped", metadata: ["error": .string(error.message)])
            return
        } catch {
            logger.warning("maintenance failed", metadata: ["error": .string("\(error)")])
            return
        }
        let now = clock.now()
        let lifetime = configuration.pendingFileLifetime.multipliedReportingOverflow(by: 1_000_000)
        let expired = now.subtractingReportingOverflow(Self.expiryRetention(configuration))
        do {
            let stale = try await storage.purgeExpired(
                now: expired.overflow ? .min : expired.partialValue,
                pendingCreatedBefore: lifetime.overflow
                    ? Int64.min : now.subtractingReportingOverflow(lifetime.partialValue).partialValue)
            let removed = try await drainBodyDeletions()
            let abandoned = files.removeAbandonedUploads(idle: Self.abandonedUploadIdle)
            if !stale.isEmpty || removed > 0 || abandoned > 0 {
                logger.info(
                    "maintenance",
                    metadata: [
                        "expired_pending_files": .stringConvertible(stale.count),
                        "removed_file_bodies": .stringConvertible(removed),
                        "abandoned_uploads": .stringConvertible(abandoned),
                    ])
            }
        } catch {
            logger.warning("maintenance failed", metadata: ["error": .string("\(error)")])
        }
    }

    /// How long a drain leases the outbox rows it claims: 60 s, microseconds. A body whose removal failed (the
    /// store unreachable) stays leased this long, the backoff before another drain tries it again.
    static let bodyDeletionLease: Int64 = 60_000_000
    /// Outbox rows one claim takes, and claims one drain makes at most (a bounded pass).
    static let bodyDeletionBatch = 100
    static let bodyDeletionBatchesPerDrain = 10

    /// Drains the deletion outbox: claims a batch (a lease, ``bodyDeletionLease``), removes each body from the
    /// store outside any transaction, then deletes the rows whose body is gone. At the first failed removal the
    /// drain stops: that row and the rest of the batch stay leased and are tried again after the lease. Returns how
    /// many bodies it removed.
    /// - Parameters:
    ///   - only: just this id (the request that deleted its record drains it at once).
    ///   - now: this node's clock, microseconds (tests pass a later one to find a lease over).
    /// - Throws: a storage failure; a failed removal is logged, not thrown.
    @discardableResult
    func drainBodyDeletions(only: RecordID? = nil, now: Int64? = nil) async throws -> Int {
        var removed = 0
        for _ in 0..<Self.bodyDeletionBatchesPerDrain {
            let start = now ?? clock.now()
            let claimed = try await storage.claimBodyDeletions(
                now: start, leaseUntil: start.addingReportingOverflow(Self.bodyDeletionLease).partialValue,
                limit: Self.bodyDeletionBatch, only: only)
            var done: [RecordID] = []
            var failed = false
            for id in claimed {
                do {
                    try await files.remove(id: id)
                    done.append(id)
                } catch {
                    logger.warning(
                        "removing a file body failed; the deletion outbox keeps it for a later pass",
                        metadata: ["error": .string("\(error)")])
                    failed = true
                    break
                }
            }
            try await storage.finishBodyDeletions(done)
            removed += done.count
            if failed || claimed.count < Self.bodyDeletionBatch { break }
        }
        return removed
    }

    /// Right after a file record's delete, drains its body (best effort: the outbox keeps it when this fails).
    func drainDeletedBody(_ id: RecordID) async {
        do {
            try await drainBodyDeletions(only: id)
        } catch {
            logger.warning("draining a deleted file body failed", metadata: ["error": .string("\(error)")])
        }
    }

    /// Runs ``maintain()`` now and then every ``ServerConfiguration/maintenanceInterval`` seconds until cancelled.
    func maintainUntilCancelled() async {
        while !Task.isCancelled {
            await maintain()
            try? await Task.sleep(for: .seconds(configuration.maintenanceInterval))
        }
    }

    /// The refusal a request that failed with `error` gets: the error itself when it is a refusal of the API, else
    /// the one that stands for it (logged when it is not the client's fault). The one place where what storage and
    /// the framework throw becomes an answer.
    func refusal(_ error: any Error, route: String) -> E3DBError {
        switch error {
        case let error as E3DBError where API.httpStatus(of: error.code) != nil:
            return error
        case let error as E3DBError where error.code == .storageRejectedValue:
            logger.notice(
                "storage refused a value", metadata: ["route": .string(route), "error": .string(error.message)])
            return E3DBError(.badRequest, "a value of the request cannot be stored")
        case let error as E3DBError where error.code.isStorageFailure:
            logger.error("storage failure", metadata: ["route": .string(route), "error": .string(error.message)])
            return E3DBError(.serviceUnavailable, "the storage backend failed; try again")
        case let error as HTTPError where error.status == .contentTooLarge:
            return E3DBError(.contentTooLarge, "the request body is larger than the server accepts")
        default:
            logger.error("request failed", metadata: ["route": .string(route), "error": .string("\(type(of: error))")])
            return E3DBError(.badRequest, "the request could not be processed")
        }
    }

    /// The status a request is counted and logged with when its client went away before the answer
    /// (``clientLeft(_:route:)``): 499, "client closed request", as nginx counts it. No client reads it.
    static let clientClosedRequest = HTTPResponse.Status(code: 499, reasonPhrase: "Client Closed Request")

    /// Whether `error` means that the client went away mid-request: it reset the connection, or its input ended,
    /// while its body was arriving, or the connection closed while the request ran, which cancels the request's
    /// task (``E3DBChildChannel``): then whatever the cancelled work throws (a storage call interrupted, say)
    /// counts as the client's leaving. Such a request is not a failure of the server's: it is logged at `debug`
    /// (anyone can cut off as many requests as they like, so an `error` line each would let them flood the logs)
    /// and counted as ``clientClosedRequest``. Called from the request's task.
    func clientLeft(_ error: any Error, route: String) -> Bool {
        let left: Bool
        switch error {
        case _ where Task.isCancelled: left = true
        case is CancellationError: left = true
        case let error as IOError:
            left = [ECONNRESET, EPIPE, ECONNABORTED, ETIMEDOUT, ENOTCONN, ESHUTDOWN].contains(error.errnoCode)
        case let error as ChannelError:
            switch error {
            case .ioOnClosedChannel, .alreadyClosed, .eof, .inputClosed, .outputClosed: left = true
            default: left = false
            }
        case let error as HTTPParserError: left = error == .invalidEOFState  // the input ended inside the body
        default: left = false
        }
        if left {
            logger.debug(
                "request cancelled: the client closed the connection",
                metadata: ["route": .string(route), "error": .string("\(type(of: error))")])
        }
        return left
    }

    /// Counts and logs (at `info`) one answered request: route template, method, status and duration.
    func finished(
        method: HTTPRequest.Method, route: String, status: HTTPResponse.Status,
        started: ContinuousClock.Instant
    ) {
        let elapsed = ContinuousClock.now - started
        ServerMetrics.record(method: method.rawValue, route: route, status: status.code, elapsed: elapsed)
        logger.info(
            "request",
            metadata: [
                "method": .string(method.rawValue), "route": .string(route),
                "status": .stringConvertible(status.code),
                "ms": .string(
                    String(
                        format: "%.2f",
                        Double(elapsed.components.attoseconds) / 1e15
                            + Double(elapsed.components.seconds) * 1000)),
            ])
    }

    // MARK: Bodies

    /// The request body, at most `limit` bytes (default ``ServerConfiguration/maxBodySize``; 413 past it), each
    /// chunk taken from `owner`'s share of the ``BodyBudget`` as it arrives (503 when none is left), and all of it
    /// within ``ServerConfiguration/bodyTimeout`` of the first read (``TimedBody``: 408 at the chunk that arrives
    /// later; with the connection's idle timeout, a body trickled a byte at a time is dropped after both at most).
    func body(_ r: APIRequest, for owner: BodyOwner, limit: Int? = nil) async throws -> Data {
        let max = limit ?? configuration.maxBodySize
        if let declared = r.header(.contentLength).flatMap(Int.init), declared > max {
            throw E3DBError(.contentTooLarge, "the request body is larger than the \(max) bytes this endpoint accepts")
        }
        // Collected chunk by chunk, each taken from the server's budget of body bytes in memory first.
        var collected = Data()
        for try await chunk in timed(r.request.body) {
            guard collected.count + chunk.readableBytes <= max else {
                throw E3DBError(
                    .contentTooLarge, "the request body is larger than the \(max) bytes this endpoint accepts")
            }
            guard let reservation = r.context.bodyBytes else {  // every request passes RequestBoundary first
                throw E3DBError(.serviceUnavailable, "the request has no share of the body budget")
            }
            try reservation.take(chunk.readableBytes, for: owner)
            collected.append(contentsOf: chunk.readableBytesView)
        }
        return collected
    }

    /// The bytes per second a file upload may be slower than the network after ``ServerConfiguration/bodyTimeout``:
    /// an upload has `bodyTimeout` seconds plus one second per this many bytes of its declared size to arrive.
    static let slowestUploadBytesPerSecond: Int64 = 256 << 10

    /// `body` under the body deadline, from now: ``ServerConfiguration/bodyTimeout`` seconds, plus for a file
    /// upload of `uploadSize` bytes one second per ``slowestUploadBytesPerSecond``.
    func timed(_ body: RequestBody, uploadSize: Int64 = 0) -> TimedBody<RequestBody> {
        let seconds = Int64(configuration.bodyTimeout) + uploadSize / Self.slowestUploadBytesPerSecond
        return TimedBody(base: body, deadline: ContinuousClock.now + .seconds(seconds), seconds: seconds)
    }

    static func sha256(_ text: String) -> Data { Hashes.sha256(Data(text.utf8)) }
}

/// A request body whose chunks must all arrive by `deadline`: a chunk that arrives later ends it with 408
/// (`.requestTimeout`). The one body deadline, of JSON bodies and file uploads alike
/// (``E3DBService/timed(_:uploadSize:)``).
struct TimedBody<Base: AsyncSequence & Sendable>: AsyncSequence, Sendable where Base.Element == ByteBuffer {
    let base: Base
    let deadline: ContinuousClock.Instant
    /// The time allowed, for the message.
    let seconds: Int64

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: Base.AsyncIterator
        let deadline: ContinuousClock.Instant
        let seconds: Int64

        mutating func next() async throws -> ByteBuffer? {
            guard let chunk = try await base.next() else { return nil }
            guard ContinuousClock.now <= deadline else {
                throw E3DBError(.requestTimeout, "the request body took longer than \(seconds) s to arrive")
            }
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), deadline: deadline, seconds: seconds)
    }
}
