import GatewayCore
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Answers a request the HTTP parser cannot read (`curl -X FOOBAR`, a broken header) with
/// the gateway's JSON error, `400 malformed_http`, and closes the connection. Hummingbird's
/// own answer to it is a `400` with an empty body, the one answer of the server that was
/// not a JSON error.
///
/// Not while a request is still arriving (a body cut off, which the body reader and the
/// read deadline answer): that error goes on to Hummingbird as before. Bytes it cannot read
/// behind requests still being answered (pipelined) are answered once their answers end,
/// since writing sooner would cut into them.
///
/// No route sees such a request, so it is counted here (`gateway_malformed_requests_total`)
/// and, with the access log on, logged here in the access log's shape.
final class MalformedHTTPAnswer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let metrics: GatewayMetrics
    /// The access log, when `server.access_log` is on.
    let accessLog: Logger?

    init(metrics: GatewayMetrics, accessLog: Logger?) {
        self.metrics = metrics
        self.accessLog = accessLog
    }

    /// Request heads read whose answer has not ended.
    private var unanswered = 0
    /// A request's head is read and its end is not.
    private var reading = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            unanswered += 1
            reading = true
        case .end:
            reading = false
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    /// A parse error behind requests still being answered, answered once they are.
    private var waiting: HTTPParserError?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        unanswered = max(0, unanswered - 1)
        guard unanswered == 0, let error = waiting else {
            context.write(data, promise: promise)
            return
        }
        waiting = nil
        context.write(data, promise: promise)
        answer(error, context: context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? HTTPParserError, !reading else {
            context.fireErrorCaught(error)
            return
        }
        // Bytes behind a request that asked to close are no request: they go unanswered, as
        // HTTP/1.1 says, and ``RequestedClose`` ends the connection after that request's answer.
        guard error != .closedConnection else { return }
        // Hummingbird would answer it after the answers in flight with an empty 400; held
        // here instead, it never reaches Hummingbird, whose next read ends with the close.
        if unanswered > 0 {
            waiting = error
            return
        }
        answer(error, context: context)
    }

    private func answer(_ error: HTTPParserError, context: ChannelHandlerContext) {
        let answer = GatewayError(.malformedHTTP, "the request is not HTTP/1.1 this server can read (\(error))")
        let requestID = RequestID().description
        metrics.malformedRequest()
        // The parser stopped before a method and path it could trust, so the line has neither.
        accessLog?.info(
            "request",
            metadata: ["request_id": "\(requestID)", "status": "400", "code": "\(answer.code.name)"])
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        ChannelErrorAnswer.write(answer, requestID: requestID, to: context).whenComplete { _ in
            bound.value.close(promise: nil)
        }
    }
}
