import AsyncHTTPClient
import E3DBClient
import E3DBPrimitives
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// A local listener whose every connection is forwarded over TLS to one server, for public key pinning:
/// AsyncHTTPClient 1.37 makes its TLS connections itself and shows no certificate, so a pinned server is reached
/// through this forwarder instead (plain HTTP over a Unix domain socket, then TLS that this forwarder verifies).
///
/// Per connection it connects to the server, lets NIOSSL verify the chain against the configured CAs and the host
/// name, checks the certificate's public key against the pins, and only then reads from the local side and
/// passes bytes both ways. A failure closes the local connection before any byte of the request leaves the
/// machine, and is kept, with its time, for ``reporting(_:_:)`` to throw instead of AsyncHTTPClient's "connection
/// closed" to a request that was under way when it happened and failed right after it (``FailureSlot``). The
/// outbound connection, the proxy's `CONNECT` and the TLS handshake together have ``handshakeTimeout``; a local
/// connection that closes first has its outbound side closed too.
///
/// Only this user can reach the listener: it is a Unix domain socket in a new directory of mode 0700
/// (``privateDirectory()``), which other users cannot enter, so they cannot connect to it (through a loopback TCP
/// port, any local user could reach the pinned server from this process's network position and through its
/// proxy, with its proxy credentials). It forwards only to its one server (through the proxy with `CONNECT`, if
/// one is configured); forwarders live as long as the process (one per server, TLS options and proxy), and their
/// directories are removed when it exits (``removeSocketDirectories()``; not after a crash or `kill -9`: the
/// directory then stays, empty but for the dead socket, in the temporary directory).
final class PinnedTunnel: Sendable {
    /// The Unix domain socket to send plain HTTP to.
    let socketPath: String
    /// The most recent failure to reach the server, for the request that saw its connection closed.
    private let failure: FailureSlot

    private init(socketPath: String, failure: FailureSlot) {
        self.socketPath = socketPath
        self.failure = failure
    }

    /// How long connecting to the server (through the proxy, if any) and its TLS handshake may take.
    static let handshakeTimeout: Duration = .seconds(15)

    /// Where a connection's failure waits for its request. A failure is reported only to a request that started
    /// before it, on a connection accepted before the request failed, and within ``window`` of the request's
    /// failure: the request whose loopback connection it closed gets it, while a request failing later (a timeout,
    /// hours after an old pin mismatch) gets its own error. A request can see its loopback connection close before
    /// the forwarder has its verdict on that connection (which side notices first is up to the scheduler), so a
    /// failing request first waits for the verdicts of the connections accepted before it failed (each bounded by
    /// ``handshakeTimeout``).
    final class FailureSlot: Sendable {
        /// How far from a request's failure a forwarder's failure is taken to be its cause.
        static let window: Duration = .seconds(5)
        private typealias Instant = ContinuousClock.Instant
        private struct State {
            /// The latest failure: when it happened and when its connection was accepted.
            var last: (error: any Error, at: Instant, accepted: Instant)?
            /// Connections whose verdict is not in yet, by number, with when they were accepted.
            var pending: [UInt64: Instant] = [:]
            var next: UInt64 = 0
            /// Failing requests waiting for verdicts, with the time they failed.
            var waiters: [(failed: Instant, resume: CheckedContinuation<Void, Never>)] = []

            /// Whether a connection accepted by `time` has no verdict yet.
            func holds(_ time: Instant) -> Bool { pending.values.contains { $0 <= time } }

            /// Removes and returns the waiters that no pending connection holds back any more.
            mutating func released() -> [CheckedContinuation<Void, Never>] {
                let pendingSince = pending.values.min()
                let ready = waiters.filter { waiter in pendingSince.map { $0 > waiter.failed } ?? true }
                waiters.removeAll { waiter in pendingSince.map { $0 > waiter.failed } ?? true }
                return ready.map(\.resume)
            }
        }
        private let state = Mutex(State())

        /// A connection was accepted at `time`: its verdict is pending until ``settle(_:with:at:)``.
        /// - Returns: its number.
        func accept(at time: ContinuousClock.Instant = .now) -> UInt64 {
            state.withLock { state in
                state.next += 1
                state.pending[state.next] = time
                return state.next
            }
        }

        /// The verdict on connection `number` at `time`: `error` when it failed (kept in place of any earlier
        /// failure), nil when its bytes flow to the server.
        func settle(_ number: UInt64, with error: (any Error)?, at time: ContinuousClock.Instant = .now) {
            let ready = state.withLock { state in
                let accepted = state.pending.removeValue(forKey: number) ?? time
                if let error { state.last = (error, time, accepted) }
                return state.released()
            }
            for waiter in ready { waiter.resume() }
        }

        /// The failure to report for a request that started at `started` and failed at `failed`, if any, once
        /// every connection accepted by then has its verdict.
        /// - Parameters:
        ///   - started: when the request started.
        ///   - failed: when it failed.
        func reason(requestStarted started: ContinuousClock.Instant, failedAt failed: ContinuousClock.Instant = .now)
            async -> (any Error)?
        {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wait = state.withLock { state in
                    guard state.holds(failed) else { return false }
                    state.waiters.append((failed, continuation))
                    return true
                }
                if !wait { continuation.resume() }
            }
            return state.withLock { state in
                guard let last = state.last, last.at >= started, last.accepted <= failed else { return nil }
                let gap = last.at > failed ? failed.duration(to: last.at) : last.at.duration(to: failed)
                return gap <= Self.window ? last.error : nil
            }
        }
    }

    private struct Key: Hashable {
        let host: String
        let port: Int
        let tls: ClientTLSOptions
        let proxy: HTTPProxy?
    }

    private static let tunnels = Mutex<[Key: Task<PinnedTunnel, any Error>]>([:])

    /// The process's forwarder to `host:port` with `tls` (through `proxy`, if any), started on first use.
    static func shared(host: String, port: Int, tls: ClientTLSOptions, proxy: HTTPProxy?) async throws -> PinnedTunnel {
        let key = Key(host: host, port: port, tls: tls, proxy: proxy)
        let task = tunnels.withLock { tunnels in
            if let existing = tunnels[key] { return existing }
            let started = Task { try await start(host: host, port: port, tls: tls, proxy: proxy) }
            tunnels[key] = started
            return started
        }
        do { return try await task.value } catch {
            _ = tunnels.withLock { $0.removeValue(forKey: key) }
            throw error
        }
    }

    /// Runs `body` (a request through `tunnel`); when it fails and the forwarder could not reach the server,
    /// throws the forwarder's reason instead.
    static func reporting<T>(_ tunnel: PinnedTunnel?, _ body: () async throws -> T) async throws -> T {
        let started = ContinuousClock.now
        do { return try await body() } catch {
            if let tunnel, let reason = await tunnel.failure.reason(requestStarted: started) { throw reason }
            throw error
        }
    }

    private static func start(host: String, port: Int, tls: ClientTLSOptions, proxy: HTTPProxy?) async throws
        -> PinnedTunnel
    {
        let context = try NIOSSLContext(configuration: tls.nioConfiguration)
        let pins = Set(tls.pins)
        let group = HTTPClient.defaultEventLoopGroup
        let failure = FailureSlot()
        let directory = try privateDirectory()
        let socketPath = directory + "/forwarder.sock"
        do {
            _ = try await ServerBootstrap(group: group)
                .childChannelOption(.autoRead, value: false)
                .childChannelInitializer { inbound in
                    forward(
                        inbound, host: host, port: port, proxy: proxy, context: context, pins: pins, failure: failure)
                }
                .bind(unixDomainSocketPath: socketPath).get()
        } catch {
            removeSocketDirectory(directory)
            throw E3DBError(
                .tlsHandshakeFailed, "the pinning forwarder could not listen on a Unix domain socket in \(directory)")
        }
        return PinnedTunnel(socketPath: socketPath, failure: failure)
    }

    /// The directories of this process's forwarders, removed at exit.
    private static let socketDirectories = Mutex<[String]>([])
    private static let removalAtExit: Void = { atexit { PinnedTunnel.removeSocketDirectories() } }()

    /// A new directory of mode 0700 for a forwarder's socket, in the temporary directory (`TMPDIR`; `/tmp` when
    /// that path is too long for a socket address), owned by this user: no other user can enter it, so none can
    /// connect to a socket in it. Removed at exit.
    static func privateDirectory() throws(E3DBError) -> String {
        _ = removalAtExit
        var base = FileManager.default.temporaryDirectory.path
        if base.utf8.count > 60 { base = "/tmp" }  // a socket address holds at most 107 bytes
        var template = Array((base + "/e3dbkit-pin-XXXXXX").utf8CString)
        // Safety: mkdtemp rewrites the X's of the NUL-terminated template in place, inside the closure.
        let made = unsafe template.withUnsafeMutableBufferPointer { buffer in
            guard let start = buffer.baseAddress else { return false }
            return unsafe mkdtemp(start) != nil
        }
        guard made else {
            throw E3DBError(
                .tlsHandshakeFailed, "the pinning forwarder could not create its directory in \(base) (errno \(errno))")
        }
        let directory = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        socketDirectories.withLock { $0.append(directory) }
        return directory
    }

    /// Removes the forwarders' sockets and directories (at exit).
    static func removeSocketDirectories() {
        for directory in socketDirectories.withLock({ $0 }) { removeSocketDirectory(directory) }
    }

    private static func removeSocketDirectory(_ directory: String) {
        unsafe unlink(directory + "/forwarder.sock")
        unsafe rmdir(directory)
    }

    /// Connects `inbound` to the server once its TLS is verified and pinned; records the failure otherwise.
    private static func forward(
        _ inbound: any Channel, host: String, port: Int, proxy: HTTPProxy?,
        context: NIOSSLContext, pins: Set<PublicKeyPin>, failure: FailureSlot
    )
        -> EventLoopFuture<Void>
    {
        let connection = failure.accept()
        let verified = handshake(host: host, port: port, proxy: proxy, context: context, on: inbound.eventLoop)
            .flatMapThrowing { pair -> any Channel in
                let (channel, certificate) = pair
                let seen = certificate.flatMap { certificate in
                    (try? certificate.extractPublicKey().toSPKIBytes()).map(PublicKeyPin.init(subjectPublicKeyInfo:))
                }
                if let seen, pins.contains(seen) { return channel }
                channel.close(promise: nil)
                let expected = pins.map(\.description).sorted().joined(separator: ", ")
                throw E3DBError(
                    .pinMismatch,
                    "TLS with \(host) failed: the public key of its certificate (\(seen?.description ?? "none")) is "
                        + "not one of the pinned keys (\(expected))",
                    context: .init(part: "pin"))
            }
        verified.whenComplete { result in
            if case .failure(let error) = result {
                failure.settle(connection, with: error)
                inbound.close(promise: nil)
            } else {
                failure.settle(connection, with: nil)
            }
        }
        // The local side closing (before the pin check, or after: the splice closes it then too) closes the
        // outbound side.
        inbound.closeFuture.whenComplete { _ in verified.whenSuccess { $0.close(promise: nil) } }
        verified.whenSuccess { outbound in
            let (toServer, toClient) = Splice.pair()
            do {
                try outbound.pipeline.syncOperations.addHandler(toClient)
                try inbound.pipeline.syncOperations.addHandler(toServer)
            } catch {
                inbound.close(promise: nil)
                outbound.close(promise: nil)
                return
            }
            // Reads start now, through the splice (which reads only while the other side can write).
            inbound.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in inbound.close(promise: nil) }
        }
        return inbound.eventLoop.makeSucceededVoidFuture()
    }
}

/// Asks an HTTP proxy for a tunnel (`CONNECT host:port`) and leaves the pipeline once it answers 200.
private final class ProxyConnect: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let authority: String
    let credentials: String?
    let done: EventLoopPromise<Void>
    private var head = ByteBuffer()

    init(authority: String, credentials: String?, done: EventLoopPromise<Void>) {
        self.authority = authority
        self.credentials = credentials
        self.done = done
    }

    func channelActive(context: ChannelHandlerContext) {
        var request = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let credentials {
            request += "Proxy-Authorization: Basic \(Data(credentials.utf8).base64EncodedString())\r\n"
        }
        request += "\r\n"
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: request)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var chunk = unwrapInboundIn(data)
        head.writeBuffer(&chunk)
        let text = String(buffer: head)
        guard let end = text.range(of: "\r\n\r\n") else {
            if head.readableBytes > 16 << 10 { refuse(context, "the proxy's answer to CONNECT is too long") }
            return
        }
        let statusLine = text[..<end.lowerBound].prefix { $0 != "\r" }
        let status = statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        guard status == 200 else {
            refuse(context, "the proxy refused the tunnel to \(authority) (HTTP \(status.map(String.init) ?? "?"))")
            return
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        done.succeed()
    }

    private func refuse(_ context: ChannelHandlerContext, _ message: String) {
        done.fail(E3DBError(.transportFailed, message, context: .init(part: "proxy")))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        done.fail(
            E3DBError(
                .transportFailed, "the proxy closed the connection before it answered CONNECT",
                context: .init(part: "proxy")))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        done.fail(error)
        context.close(promise: nil)
    }
}

/// Waits for the TLS handshake and hands over the server's certificate (or the handshake's failure), then leaves
/// the pipeline.
private final class PeerCertificate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    let handshake: EventLoopPromise<NIOSSLCertificate?>

    init(_ handshake: EventLoopPromise<NIOSSLCertificate?>) { self.handshake = handshake }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case TLSUserEvent.handshakeCompleted = event else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        let certificate = try? context.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self).peerCertificate
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        handshake.succeed(certificate ?? nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        handshake.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        handshake.fail(NIOSSLError.handshakeFailed(.sslError([.eofDuringHandshake])))
        context.fireChannelInactive()
    }
}

extension PinnedTunnel {
    /// Connects to `host:port` (through `proxy` with `CONNECT`, if any) and completes a TLS handshake with
    /// `context`; the server's certificate, or the failure. The channel stays open for the caller.
    static func handshake(host: String, port: Int, proxy: HTTPProxy?, context: NIOSSLContext, on loop: any EventLoop)
        -> EventLoopFuture<(any Channel, NIOSSLCertificate?)>
    {
        let handshake = loop.makePromise(of: NIOSSLCertificate?.self)
        let tunnelled = loop.makePromise(of: Void.self)
        // NIOSSL checks an IP address against the certificate's IP SANs when given no server name.
        let serverHostname = (try? SocketAddress(ipAddress: host, port: 0)) != nil ? nil : host
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let connected = ClientBootstrap(group: loop)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                guard let proxy else {
                    tunnelled.succeed()
                    return loop.makeSucceededVoidFuture()
                }
                do {
                    try channel.pipeline.syncOperations.addHandler(
                        ProxyConnect(authority: authority, credentials: proxy.credentials, done: tunnelled))
                    return loop.makeSucceededVoidFuture()
                } catch {
                    tunnelled.fail(error)
                    return loop.makeFailedFuture(error)
                }
            }
            .connect(host: proxy?.host ?? host, port: proxy?.port ?? port)
        connected.whenFailure { tunnelled.fail($0) }
        tunnelled.futureResult.whenFailure { handshake.fail($0) }
        // TLS starts once the connection (or the proxy's tunnel) is up: NIOSSL begins when added to an active channel.
        connected.and(tunnelled.futureResult).whenSuccess { pair in
            let channel = pair.0
            do {
                let ssl = try NIOSSLClientHandler(context: context, serverHostname: serverHostname)
                try channel.pipeline.syncOperations.addHandlers([ssl, PeerCertificate(handshake)])
            } catch {
                handshake.fail(error)
            }
        }
        handshake.futureResult.whenFailure { _ in connected.whenSuccess { $0.close(promise: nil) } }
        let timeout = loop.scheduleTask(in: .seconds(handshakeTimeout.components.seconds)) {
            let failure = E3DBError(
                .tlsHandshakeFailed,
                "TLS with \(host) failed: no connection and TLS handshake within "
                    + "\(handshakeTimeout.components.seconds) s", context: .init(part: "tls"))
            tunnelled.fail(failure)
            handshake.fail(failure)
        }
        handshake.futureResult.whenComplete { _ in timeout.cancel() }
        return connected.and(handshake.futureResult)
    }

    /// Why the certificate `host:port` presents failed verification, when its dates say so (BoringSSL reports an
    /// expired certificate as any other failed verification): `.certificateExpired`, or nil. Looks at the
    /// certificate without trusting it, then closes the connection; nothing is sent.
    static func validityFailure(host: String, port: Int, proxy: HTTPProxy?) async -> E3DBError? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .none
        guard let context = try? NIOSSLContext(configuration: configuration),
            let (channel, certificate) = try? await handshake(
                host: host, port: port, proxy: proxy, context: context,
                on: HTTPClient.defaultEventLoopGroup.next()
            ).get()
        else { return nil }
        try? await channel.close()
        guard let certificate else { return nil }
        let now = time(nil)
        func date(_ t: time_t) -> String { UTCTimestamp.format(seconds: Int64(t), fraction: 0, fractionDigits: 3) }
        if certificate.notValidAfter < now {
            return E3DBError(
                .certificateExpired,
                "TLS with \(host) failed: the server's certificate expired at "
                    + date(certificate.notValidAfter), context: .init(part: "certificate"))
        }
        if certificate.notValidBefore > now {
            return E3DBError(
                .certificateExpired,
                "TLS with \(host) failed: the server's certificate is not valid "
                    + "before \(date(certificate.notValidBefore)) (is this machine's clock right?)",
                context: .init(part: "certificate"))
        }
        return nil
    }
}

/// One side of a splice between two channels on the same event loop: what one reads, the other writes; a side
/// reads only while the other can write (no unbounded buffering), and closing one closes the other.
private final class Splice: ChannelDuplexHandler, @unchecked Sendable {
    // @unchecked: both sides live on one event loop and touch each other only there.
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private var partner: Splice?
    private var context: ChannelHandlerContext?
    private var pendingRead = false

    static func pair() -> (Splice, Splice) {
        let a = Splice()
        let b = Splice()
        a.partner = b
        b.partner = a
        return (a, b)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    private var isWritable: Bool { context?.channel.isWritable ?? false }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let peer = partner?.context else { return }
        peer.write(data, promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) { partner?.context?.flush() }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.context?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let partner, partner.pendingRead, let peer = partner.context {
            partner.pendingRead = false
            peer.read()
        }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if partner?.isWritable ?? false {
            context.read()
        } else {
            pendingRead = true
        }
    }
}
