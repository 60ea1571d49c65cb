import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Answers `Expect: 100-continue` with an interim `100 Continue`, so that clients that wait for it before
/// sending a body (Node's http module, used by the js SDK for file uploads) do not hang. The header is then
/// removed and the request passed on unchanged. An `Expect` with any other value is refused with 417 by the
/// service (RFC 9110 §10.1.1).
final class ExpectContinueHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), let expect = head.headerFields[.expect] else {
            context.fireChannelRead(data)
            return
        }
        if expect.lowercased() == "100-continue" {
            head.headerFields[.expect] = nil
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponse(status: .continue))), promise: nil)
            context.fireChannelRead(wrapInboundOut(.head(head)))
        } else {
            context.fireChannelRead(data)
        }
    }
}
