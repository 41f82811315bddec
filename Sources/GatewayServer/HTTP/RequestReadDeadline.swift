import GatewayCore
import Hummingbird
import NIOCore
import HTTPTypes
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
///
/// A request that nothing has answered yet gets ``BodyReader``'s `408` from here before the
/// connection closes: the reader looks at its clock only when a chunk arrives, and on a
/// busy machine the next chunk may not reach it before this deadline.
///
/// A new connection has `firstHeadTimeout` to send its first request's head, and is
/// closed without an answer otherwise: the idle timeout alone let a client hold thousands
/// of silent connections, each reopened as it expired, for far longer than any real client
/// takes to send one.
final class RequestReadDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// When this handler's clock started for the request (NIO's uptime clock, in
    /// nanoseconds); whatever a client sends under this name is replaced or removed.
    static let headArrived = HTTPField.Name("X-Gateway-Head-Arrived")!

    let timeout: TimeAmount
    let firstHeadTimeout: TimeAmount
    private var timer: Scheduled<Void>?
    /// A request's head has arrived on this connection: the first-head clock is done.
    private var sawHead = false
    /// Requests whose head was read and whose answer has not ended yet.
    private var unanswered = 0
    /// The request being read started behind an unanswered one; its clock starts later.
    private var waitingToArm = false
    /// An answer's head is written and its end is not.
    private var answering = false
    /// The request being read's `X-Request-Id`, when it sent a sane one.
    private var requestID: String?

    init(timeout: TimeAmount, firstHeadTimeout: TimeAmount) {
        self.timeout = timeout
        self.firstHeadTimeout = firstHeadTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { armFirstHead(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        armFirstHead(context)
        context.fireChannelActive()
    }

    private func armFirstHead(_ context: ChannelHandlerContext) {
        guard !sawHead, timer == nil else { return }
        arm(context, in: firstHeadTimeout)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var data = data
        switch unwrapInboundIn(data) {
        case .head(var head):
            // The id is given here, before routing, when the caller sent none: a `408` this
            // handler answers must carry the id the request's log lines carry.
            if let given = RequestIDMiddleware<GatewayRequestContext>.callersID(in: head.headerFields) {
                requestID = given
            } else {
                let made = RequestID().description
                requestID = made
                head.headerFields[RequestIDMiddleware<GatewayRequestContext>.header] = made
            }
            sawHead = true
            unanswered += 1
            // The body reader's clock starts when this one does: started when the route began
            // to read, on a busy machine it had not run out when this one closed the
            // connection, and the request was logged `400` while the client was answered
            // `408`. Behind an unanswered request, the reader starts its own, no sooner than this.
            if unanswered == 1 {
                arm(context)
                head.headerFields[Self.headArrived] = "\(NIODeadline.now().uptimeNanoseconds)"
            } else {
                waitingToArm = true
                head.headerFields[Self.headArrived] = nil
            }
            data = wrapInboundOut(.head(head))
        case .end:
            disarm()
            waitingToArm = false
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head:
            answering = true
        case .end:
            answering = false
            unanswered = max(0, unanswered - 1)
            // The answers before the request being read are out: now its clock runs.
            if waitingToArm, unanswered == 1 {
                waitingToArm = false
                arm(context)
            }
        case .body:
            break
        }
        context.write(data, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    private func arm(_ context: ChannelHandlerContext, in delay: TimeAmount? = nil) {
        disarm()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: delay ?? timeout) {
            let (handler, context) = bound.value
            handler.expire(context)
        }
    }

    /// Answers `408` when the request being read is the only one unanswered and nothing of
    /// its answer is written yet (not to a connection that never sent a head), and closes
    /// the connection in any case. The close does not
    /// wait for the answer to be sent: a client that reads nothing must not keep its
    /// connection by leaving the answer stuck in the socket (it is then dropped).
    private func expire(_ context: ChannelHandlerContext) {
        if unanswered == 1, !answering {
            _ = ChannelErrorAnswer.write(
                BodyReader.tooSlow, requestID: requestID ?? RequestID().description, to: context)
        }
        context.close(promise: nil)
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }
}
