import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request has not fully arrived (head to end) within the
/// deadline. ``BodyReader`` answers `408` to a body still dripping in at its deadline,
/// but Hummingbird then drains the rest of that body before the next request, and each
/// byte resets the idle timer: without this, a client sending a byte every few seconds
/// would hold its connection as long as it liked.
///
/// Requests are answered one at a time, so with pipelining a request's clock starts only
/// when the answers before it are written: time spent queued behind a slow answer is the
/// server's, not the client's.
final class RequestReadDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let timeout: TimeAmount
    private var timer: Scheduled<Void>?
    /// Requests whose head was read and whose answer has not ended yet.
    private var unanswered = 0
    /// The request being read started behind an unanswered one; its clock starts later.
    private var waitingToArm = false

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            unanswered += 1
            if unanswered == 1 {
                arm(context)
            } else {
                waitingToArm = true
            }
        case .end:
            disarm()
            waitingToArm = false
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            unanswered = max(0, unanswered - 1)
            // The answers before the request being read are out: now its clock runs.
            if waitingToArm, unanswered == 1 {
                waitingToArm = false
                arm(context)
            }
        }
        context.write(data, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    private func arm(_ context: ChannelHandlerContext) {
        disarm()
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) { bound.value.close(promise: nil) }
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }
}
