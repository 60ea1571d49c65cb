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

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
