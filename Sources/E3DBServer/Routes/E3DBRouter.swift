import E3DBAPI
import HTTPTypes
import Hummingbird
import NIOCore
import Prometheus

extension E3DBService {
    /// The E3DB API as one Hummingbird router: ``RequestBoundary`` around every request, then one group of routes
    /// per resource, each behind ``Authentication`` where it needs a caller. The server (`e3dbkit-server run`) and
    /// ``E3DBRequestHandler`` (in process) answer through it alike.
    func router() -> Router<E3DBRequestContext> {
        let router = Router(context: E3DBRequestContext.self)
        router.add(middleware: RequestBoundary(service: self))
        addTokenRoutes(to: router)
        addClientRoutes(to: router)
        addAccessKeyRoutes(to: router)
        addPolicyRoutes(to: router)
        addRecordRoutes(to: router)
        addFileRoutes(to: router)
        addSearchRoutes(to: router)
        addNoteRoutes(to: router)
        router.get("healthz") { _, _ in JSONBody.raw(#"{"status":"ok"}"#) }
        if let metrics {
            router.get("metrics") { _, _ in
                Response(
                    status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                    body: .init(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
            }
        }
        return router
    }
}

extension RouterMethods where Context == E3DBRequestContext {
    /// Adds a route whose handler takes the request and its context as one ``APIRequest``.
    @discardableResult
    func on(
        _ path: RouterPath, _ method: HTTPRequest.Method,
        _ handler: @escaping @Sendable (APIRequest) async throws -> Response
    ) -> Self {
        on(path, method: method) { request, context in try await handler(APIRequest(request, context)) }
    }

    /// Adds the route of `endpoint` (its method and path template, as E3DBAPI writes them for the client too).
    @discardableResult
    func on<Body: APIBody, Answer: APIBody>(
        _ endpoint: API.Endpoint<Body, Answer>,
        _ handler: @escaping @Sendable (APIRequest) async throws -> Response
    ) -> Self {
        on(RouterPath(endpoint.template), HTTPRequest.Method(rawValue: endpoint.method) ?? .get, handler)
    }
}
