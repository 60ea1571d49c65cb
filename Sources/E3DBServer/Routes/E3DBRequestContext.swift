import E3DBAPI
import E3DBPrimitives
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The request context of the E3DB routes: Hummingbird's core context (route parameters, logger), what
/// ``RequestBoundary`` prepared for every request (its share of the body budget, the decoded query), and who sent
/// it once ``Authentication`` found out.
struct E3DBRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// This request's share of the server's body budget (``E3DBService/body(_:for:limit:)`` takes from it).
    var bodyBytes: BodyReservation?
    /// The query parameters, percent-decoded (`+` as a space), in order.
    var query: [(String, String)] = []
    /// The registered, enabled client that sent the request (``Authentication``): Bearer, TSV1 naming it, or HTTP
    /// Basic with its API key pair on the token endpoint.
    var caller: ClientRow?
    /// The request's verified TSV1 header, when it had one (note endpoints address notes by its key).
    var tsv1: TSV1.VerifiedRequest?

    init(source: ApplicationRequestContextSource) { coreContext = .init(source: source) }

    /// A context for a request answered in process (``E3DBRequestHandler``), without a channel.
    init(logger: Logger) { coreContext = .init(source: InProcess(logger: logger)) }

    private struct InProcess: RequestContextSource { let logger: Logger }
}

/// A request as the routes see it: the request, its context, and the raw path and query (TSV1 signs them as sent).
struct APIRequest {
    let request: Request
    let context: E3DBRequestContext

    init(_ request: Request, _ context: E3DBRequestContext) {
        self.request = request
        self.context = context
    }

    var method: HTTPRequest.Method { request.method }
    var rawPath: String { request.uri.path }
    var rawQuery: String { request.uri.query ?? "" }

    func queryValues(_ name: String) -> [String] { context.query.filter { $0.0 == name }.map(\.1) }

    func header(_ name: HTTPField.Name) -> String? { request.headers[name] }

    /// The route parameter `name`, percent-decoded (``RequestBoundary`` refused paths that do not decode).
    func parameter(_ name: String) -> String {
        let raw = context.parameters.get(name) ?? ""
        return TSV1.percentDecoded(raw) ?? raw
    }

    /// The authenticated caller (``Authentication`` in ``Authentication/Requirement/client`` mode put it there).
    func caller() throws -> ClientRow {
        guard let caller = context.caller else {
            throw E3DBError(.unauthorized, "this endpoint needs a registered client")
        }
        return caller
    }

    /// The caller of a note endpoint: its verified TSV1 header, with the client it names when that checked out.
    func noteCaller() throws -> (verified: TSV1.VerifiedRequest, client: ClientRow?) {
        guard let verified = context.tsv1 else {
            throw E3DBError(.unauthorized, "this endpoint needs a TSV1 Authorization header")
        }
        return (verified, context.caller)
    }
}

/// The first middleware of every request, matched or not: it checks what every route relies on (a path whose
/// segments percent-decode and hold no U+0000, a query without U+0000, no `Expect` but `100-continue`, which
/// ``ExpectContinueHandler`` already answered and removed), holds the request's share of the body budget until
/// the response is made, turns every error into a refusal (``E3DBService/refusal(_:route:)``, answered as
/// `HTTPResponseError`) but those of a client that went away (``E3DBService/clientLeft(_:route:)``, counted as
/// 499), and counts and logs the request under its route template.
struct RequestBoundary: RouterMiddleware {
    let service: E3DBService

    func handle(
        _ request: Request, context: E3DBRequestContext,
        next: (Request, E3DBRequestContext) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        let route = context.endpointPath ?? "unmatched"
        let bodyBytes = BodyReservation(service.bodyBudget)
        defer { bodyBytes.release() }
        let response: Response
        do {
            var context = context
            context.bodyBytes = bodyBytes
            context.query = try Self.checked(request)
            if request.headers[.expect] != nil {
                throw E3DBError(.expectationFailed, "only Expect: 100-continue is supported")
            }
            response = try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {  // no route: the router's own refusal
            let segments = request.uri.path.split(separator: "/").prefix(3).map {
                TSV1.percentDecoded(String($0)) ?? ""
            }
            response = try E3DBError(
                .notFound, "no such endpoint: \(request.method.rawValue) \(segments.joined(separator: "/"))"
            )
            .response(from: request, context: context)
        } catch  where service.clientLeft(error, route: route) {
            response = Response(status: E3DBService.clientClosedRequest)
        } catch {
            response = try service.refusal(error, route: route).response(from: request, context: context)
        }
        service.finished(method: request.method, route: route, status: response.status, started: started)
        return response
    }

    /// The query of `request`, decoded; refuses (400) a path segment with a malformed percent escape or one that
    /// holds U+0000, and a query parameter that holds U+0000: no string the server stores or matches may hold it
    /// (PostgreSQL's text cannot).
    static func checked(_ request: Request) throws -> [(String, String)] {
        for (index, segment) in request.uri.path.split(separator: "/", omittingEmptySubsequences: true).enumerated() {
            guard let decoded = TSV1.percentDecoded(String(segment)) else {
                throw E3DBError(.badRequest, "the request path has a malformed percent escape")
            }
            guard !decoded.utf8.contains(0) else {
                throw E3DBError(.badRequest, "path segment \(index + 1) holds U+0000, which the server refuses")
            }
        }
        let rawQuery = request.uri.query ?? ""
        return try rawQuery.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func dec(_ s: Substring) -> String {
                TSV1.percentDecoded(s.replacingOccurrences(of: "+", with: " ")) ?? String(s)
            }
            let (name, value) = (dec(kv[0]), kv.count > 1 ? dec(kv[1]) : "")
            guard !name.utf8.contains(0), !value.utf8.contains(0) else {
                throw E3DBError(
                    .badRequest,
                    "query parameter \(name.prefix(40).filter { $0 != "\0" }) holds U+0000, which the server refuses")
            }
            return (name, value)
        }
    }
}
