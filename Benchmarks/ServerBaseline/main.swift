// The baseline of scripts/server-benchmark.sh: a Hummingbird server with one route, GET /fixed, that returns a fixed
// JSON body, with the HTTP configuration of `e3dbkit-server run` (HTTP/1.1, 120 s idle timeout). The E3DB server's
// record routes are measured against it in the same run.
//
//   ServerBaseline [BODY_FILE]     # the body to serve (default: a ~700-byte record-like JSON object)
//
// Binds 127.0.0.1 on a free port and prints "listening on http://HOST:PORT" on standard error.
import Foundation
import Hummingbird
import Logging

/// A record-shaped JSON object of about the size of a `GET /v1/storage/records/{id}` response.
let defaultBody = #"""
{"meta":{"record_id":"5f1c1a6e-2a55-4a55-9b1e-3f6a2f9c0d11","writer_id":"0a8b4b62-4d1f-4b8e-8a53-6c3e2d1b0a99","user_id":"0a8b4b62-4d1f-4b8e-8a53-6c3e2d1b0a99","type":"bench","plain":{"n":"1"},"created":"2026-11-25T12:00:00.000000Z","last_modified":"2026-11-25T12:00:00.000000Z","version":"9c3e7f55-1a2b-4c3d-8e9f-0a1b2c3d4e5f"},"data":{"a":"4c2hYb3Vq0n6n0t8dLx2Q0cZb8w1a5Yx7l3m9pQ.u7mW4kS8a1bQ9c2dE5fG6hJ7kL8mN9pQ.yK3n7bF2cV5xZ8aS1dF4gH7j.9rT2wE5rY8uI1oP4aS7dF0gH3jK6l","b":"8m9vQ2xT5nW0zR3yU6iO1pA4sD7fG0hJ.k3L6zX9cV2bN5mQ8wE1rT4yU7iO0pA.b5N8mQ1wE4rT7yU0iO3pA6sD9f.2gH5jK8lZ1xC4vB7nM0qW3eR6tY9u"},"rec_sig":null}
"""#

let body: ByteBuffer
if CommandLine.arguments.count > 1 {
    do {
        body = ByteBuffer(bytes: try Data(contentsOf: URL(fileURLWithPath: CommandLine.arguments[1])))
    } catch {
        FileHandle.standardError.write(Data("ServerBaseline: cannot read the body file: \(error)\n".utf8))
        exit(66)
    }
} else {
    body = ByteBuffer(string: defaultBody.trimmingCharacters(in: .whitespacesAndNewlines))
}

var logger = Logger(label: "server-baseline")
logger.logLevel = .warning
let router = Router()
router.get("fixed") { _, _ in
    Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
}
let app = Application(
    router: router,
    server: .http1(configuration: .init(idleTimeout: .seconds(120))),
    configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: nil),
    onServerRunning: { channel in
        FileHandle.standardError.write(Data("listening on http://127.0.0.1:\(channel.localAddress?.port ?? 0)\n".utf8))
    },
    logger: logger)
try await app.runService()
