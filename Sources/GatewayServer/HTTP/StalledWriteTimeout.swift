import NIOCore
import NIOHTTPTypes

/// Closes a connection whose answers have stopped leaving: the socket stays unwritable
/// (its client reads nothing) for `timeout`. Hummingbird's idle timer does not run while
/// a request is being answered, and a client that pipelines requests and never reads its
/// answers has one being answered for ever: each such connection held a descriptor until
/// the gateway ran out of them and answered no one.
final class StalledWriteTimeout: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            disarm()
        } else if timer == nil {
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            timer = context.eventLoop.scheduleTask(in: timeout) {
                let context = bound.value
                // Still nothing leaving: what is queued is dropped with the connection.
                if !context.channel.isWritable { context.close(promise: nil) }
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }
}
