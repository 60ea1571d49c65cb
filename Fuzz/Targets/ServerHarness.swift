// What the three server targets (FuzzServerRequests, FuzzAuthHeaders, FuzzSearchCost) share: running the
// in-process request handler from libFuzzer's synchronous callback, building requests and reading replies.
import E3DBPrimitives
import E3DBServer
import Foundation
import HTTPTypes
import Hummingbird

private final class Box<T>: @unchecked Sendable { var value: T? }

/// Runs async work to completion from libFuzzer's synchronous callback (the work runs on the cooperative pool;
/// the callback's thread is libFuzzer's own, not one of the pool's).
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let box = Box<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        box.value = await body()
        done.signal()
    }
    done.wait()
    guard let value = box.value else { fatalError("no result") }
    return value
}

private final class Sink: @unchecked Sendable { var bytes = Data() }

private struct Collector: ResponseBodyWriter {
    let sink: Sink
    mutating func write(_ buffer: ByteBuffer) async throws { sink.bytes.append(contentsOf: buffer.readableBytesView) }
    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

/// A response with its body read to the end.
struct Reply {
    var status: Int
    var contentType: String?
    var body: Data
}

/// Sends `request` through `handler` and reads the whole response.
func send(_ handler: E3DBRequestHandler, _ request: Request) async -> Reply {
    let response = await handler.respond(to: request)
    let sink = Sink()
    do { try await response.body.write(Collector(sink: sink)) } catch {
        fatalError("writing a response body failed: \(error)")
    }
    return Reply(status: response.status.code, contentType: response.headers[.contentType], body: sink.bytes)
}

/// A request to the in-process server.
func makeRequest(method: HTTPRequest.Method, path: String, headers: HTTPFields, body: Data) -> Request {
    let head = HTTPRequest(
        method: method, scheme: "http", authority: "localhost:8000", path: path,
        headerFields: headers)
    return Request(head: head, body: RequestBody(buffer: ByteBuffer(bytes: body)))
}

/// A request with an optional Authorization header and Content-Type.
func makeRequest(
    method: HTTPRequest.Method, path: String, authorization: String? = nil, contentType: String? = nil,
    body: Data = Data()
) -> Request {
    var fields = HTTPFields()
    if let authorization { fields[.authorization] = authorization }
    if let contentType { fields[.contentType] = contentType }
    return makeRequest(method: method, path: path, headers: fields, body: body)
}

/// A set-up response's JSON object (the set-up must succeed; the fuzzed requests are checked by the targets).
func setUpJSON(_ data: Data) -> [String: Any] {
    guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
        fatalError("set-up response is not a JSON object: \(String(decoding: data, as: UTF8.self))")
    }
    return object
}

/// A server in process over SQLite in a new temporary directory, with one unlimited registration token.
struct InProcessServer {
    let configuration: ServerConfiguration
    let storage: SQLiteStorage
    let files: LocalFileBodyStore
    let handler: E3DBRequestHandler
    let registrationToken: String
}

/// Makes an ``InProcessServer`` in a directory named after `label`; `configure` adjusts the configuration (the body
/// limit is 1 MiB unless it says otherwise).
func makeInProcessServer(
    _ label: String, configure: (inout ServerConfiguration) -> Void = { _ in }
) async throws -> InProcessServer {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-\(label)-\(UUID().uuidString)")
    var configuration = ServerConfiguration(dataDirectory: directory)
    configuration.maxBodySize = 1 << 20
    configure(&configuration)
    let storage = try SQLiteStorage(directory: directory)
    try await storage.migrate()
    let registrationToken = UUID().uuidString
    try await storage.createRegistrationToken(hash: Hashes.sha256(Data(registrationToken.utf8)), uses: nil, created: 0)
    let files = try LocalFileBodyStore(directory: directory.appendingPathComponent("files"))
    let handler = try await E3DBRequestHandler(configuration: configuration, storage: storage, files: files)
    return InProcessServer(
        configuration: configuration, storage: storage, files: files, handler: handler,
        registrationToken: registrationToken)
}

/// Registers a client named `name` on `server` (with `signingKey`'s public key when given) and gets its Bearer
/// token: set-up shared by the server targets, which must succeed.
/// - Returns: the client's id and its token.
func registerClient(on server: InProcessServer, name: String, signingKey: Ed25519.PrivateKey? = nil) async -> (
    id: String, token: String
) {
    let pk = Base64URL.encode(Data(repeating: 7, count: 32))
    let sk = signingKey.map { #","signing_key":{"ed25519":"\#($0.publicKey.base64URLEncoded)"}"# } ?? ""
    let body =
        #"{"token":"\#(server.registrationToken)","client":{"name":"\#(name)","public_key":{"curve25519":"\#(pk)"}\#(sk)}}"#
    let registered = await send(
        server.handler,
        makeRequest(
            method: .post, path: "/v1/account/e3db/clients/register", contentType: "application/json",
            body: Data(body.utf8)))
    guard registered.status == 201 else { fatalError("set-up: registration of \(name) failed: \(registered.status)") }
    let client = setUpJSON(registered.body)
    let id = client["client_id"] as? String ?? ""
    let keyID = client["api_key_id"] as? String ?? ""
    let secret = client["api_secret"] as? String ?? ""
    let basic = "Basic " + Data("\(keyID):\(secret)".utf8).base64EncodedString()
    let issued = await send(
        server.handler,
        makeRequest(
            method: .post, path: "/v1/auth/token", authorization: basic,
            body: Data("grant_type=client_credentials".utf8)))
    guard issued.status == 200 else { fatalError("set-up: a token for \(name) failed: \(issued.status)") }
    return (id, setUpJSON(issued.body)["access_token"] as? String ?? "")
}
