import HummingbirdCore
import Logging
import NIOCore

/// The server's child channel: Hummingbird's HTTP/1.1 channel (`base`, possibly inside TLS) behind a limit on open
/// connections per client address. Everything else is Hummingbird's own.
struct E3DBChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    /// Open connections per client address: a connection past the limit is closed before anything is read.
    let connections: AddressConnections

    struct TooManyConnections: Error {}

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        if let address = channel.remoteAddress.flatMap(AddressConnections.key) {
            guard connections.open(address) else {
                logger.notice("connection refused: too many from one address", metadata: ["address": .string(address)])
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(TooManyConnections())
            }
            let connections = self.connections
            channel.closeFuture.whenComplete { _ in connections.close(address) }
        }
        return base.setup(channel: channel, logger: logger)
    }

    /// Serves the connection in a task of its own that is cancelled when the channel closes (the client reset it,
    /// or it failed). Hummingbird 2.28 runs a connection's requests in the task that calls this and does
    /// not cancel it when the channel closes, so a request whose client has gone (a search waiting for a place in
    /// the limiter, or scanning) would run to its end; cancelled, it stops (``AsyncLimiter``,
    /// ``WorkBudget/checkCancellation()``). A half-close (the client shut down its sending side, which is also how
    /// a plain `close()` looks until the server writes) is not a close: HTTP/1.1 lets a client do that and still
    /// read the answer.
    func handle(value: Value, logger: Logger) async {
        let base = self.base
        let connection = Task { await base.handle(value: value, logger: logger) }
        value.channel.closeFuture.whenComplete { _ in connection.cancel() }
        await withTaskCancellationHandler {
            await connection.value
        } onCancel: {
            connection.cancel()
        }
    }
}
