public import Hummingbird
public import Logging

/// The E3DB API as a plain request → response function, without a socket: embed it in an application's own
/// Hummingbird router (mount ``respond(to:)`` behind a route, or wrap it in a `CallbackResponder`), drive it from
/// tests, or fuzz it in process. `e3dbkit-server run` serves the same service over HTTP/1.1.
///
/// ```swift
/// let backend = try StorageBackend.sqlite(directory: dataDirectory)
/// let files = try FileBodyBackend.local(directory: dataDirectory.appendingPathComponent("files"))
/// try await backend.running {  // the backend's background work (PostgreSQL: its pool) beside the handler
///     let handler = try await E3DBRequestHandler(configuration: configuration, backend: backend, files: files)
///     let responder = CallbackResponder<BasicRequestContext> { request, _ in await handler.respond(to: request) }
///     // … serve with `responder` until done
/// }
/// ```
///
/// Every refusal is a 4xx response with a JSON `{"error": "<message>"}` body; a storage failure is a 503 with the
/// same shape. The handler never throws.
public struct E3DBRequestHandler: Sendable {
    private let responder: RouterResponder<E3DBRequestContext>
    private let logger: Logger

    /// Checks that `files` can be used (an object store: its bucket and credentials), migrates `backend` and reads
    /// (creating on first use) its server secret, which keys capability URLs.
    /// - Parameters:
    ///   - configuration: limits, token and TSV1 lifetimes and the public URL; `host`/`port` only shape
    ///     capability URLs when `publicURL` is unset and a request has no `Host`. Its data directory, PostgreSQL
    ///     URL and object store are not read: `backend` and `files` say where things are.
    ///   - backend: where the server's state lives, its background work running: use the handler inside
    ///     ``StorageBackend/running(_:)``, which also closes the backend after the last request (the handler does
    ///     not).
    ///   - files: where file bodies live.
    ///   - logger: structured request logs (never a secret, a token or a ciphertext); none by default.
    /// - Throws: `E3DBError` `.invalidParameter` at once for a PostgreSQL backend outside its `running`, the file
    ///   store's refusal (`E3DBError`: a missing bucket, refused credentials, an unreachable
    ///   store), or a storage failure (`E3DBError`, `isStorageFailure`) when the backend cannot be migrated or its
    ///   secret read.
    public init(
        configuration: ServerConfiguration, backend: StorageBackend, files: FileBodyBackend,
        logger: Logger = Logger(label: "e3db.server", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws {
        try backend.checkAnswering()
        try await self.init(configuration: configuration, storage: backend.storage, files: files.store, logger: logger)
    }

    /// The handler over a storage and a file store of this package's own (tests and fuzz harnesses): as
    /// `init(configuration:backend:files:logger:)`.
    package init(
        configuration: ServerConfiguration, storage: any ServerStorage, files: any FileBodyStore,
        logger: Logger = Logger(label: "e3db.server", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws {
        try await files.check()
        try await storage.migrate()
        let service = E3DBService(
            storage: storage, files: files, configuration: configuration,
            secret: try await storage.serverSecret(), logger: logger)
        responder = service.router().buildResponder()
        self.logger = logger
    }

    /// Answers one request: routing, authentication (Bearer, TSV1 with replay protection, HTTP Basic on the token
    /// endpoint, capability URLs), body limits and decoding, storage.
    /// - Parameter request: the request; its body is read at most once.
    /// - Returns: the response; never a 5xx but 503 for a failing backend; 499 when the calling task was cancelled
    ///   (or the body stream failed as a closed connection does), as the server counts a client that left.
    public func respond(to request: Request) async -> Response {
        do {
            return try await responder.respond(to: request, context: E3DBRequestContext(logger: logger))
        } catch {  // RequestBoundary answers every error; this is not reached
            return JSONBody.error(.internalServerError, "the request could not be answered")
        }
    }
}
