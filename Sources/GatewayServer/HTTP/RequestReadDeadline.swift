import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request has not fully arrived (head to end) within the
/// deadline. ``BodyReader`` answers `408` to a body still dripping in at its deadline,
/// but Hummingbird then drains the rest of that body before the next request, and each
/// byte resets the idle timer: without this, a client sending a byte every few seconds
/// would hold its connection as long as it liked.
final class RequestReadDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            timer?.cancel()
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: timeout) { bound.value.close(promise: nil) }
        case .end:
            timer?.cancel()
            timer = nil
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }
}
