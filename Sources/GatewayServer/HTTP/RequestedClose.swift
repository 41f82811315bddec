import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Ends the connection after answering a request that asked for it to end: `Connection:
/// close` in any spelling or among other tokens, or HTTP/1.0 without `keep-alive`, and says
/// so in the answer's `Connection: close`. Hummingbird ends a connection only on the exact
/// lowercase `close`, so such a client that reads until the connection ends (HTTP/1.0's way)
/// waited for the idle timeout.
///
/// It sits in front of the HTTP types codec, because the request's version and the parser's
/// keep-alive verdict are lost in the conversion; ``install()`` puts it there.
final class RequestedClose: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// For each request read and not yet answered, in order: whether it asked to close.
    private var closeAfter = CircularBuffer<Bool>()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data) {
            closeAfter.append(!head.isKeepAlive)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var head) where closeAfter.first == true:
            head.headers.replaceOrAdd(name: "connection", value: "close")
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .end:
            // An answer the server makes on its own (a malformed request's) answers no head.
            guard closeAfter.popFirst() == true else {
                context.write(data, promise: promise)
                return
            }
            let written = promise ?? context.eventLoop.makePromise()
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            written.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
            context.write(data, promise: written)
        case .head, .body:
            context.write(data, promise: promise)
        }
    }

    /// A handler for Hummingbird's `additionalChannelHandlers`, which come after the codec:
    /// it puts an ``ExpectContinue`` and a `RequestedClose` in front of the codec, in that
    /// order (the `100 Continue` is no answer to mark closing), then takes itself out.
    static func install(maxBodyBytes: Int) -> any RemovableChannelHandler { Installer(maxBodyBytes: maxBodyBytes) }

    private final class Installer: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = NIOAny
        let maxBodyBytes: Int

        init(maxBodyBytes: Int) {
            self.maxBodyBytes = maxBodyBytes
        }

        func handlerAdded(context: ChannelHandlerContext) {
            let pipeline = context.pipeline.syncOperations
            if let codec = try? pipeline.context(handlerType: HTTP1ToHTTPServerCodec.self) {
                try? pipeline.addHandler(ExpectContinue(maxBodyBytes: maxBodyBytes), position: .before(codec.handler))
                try? pipeline.addHandler(RequestedClose(), position: .before(codec.handler))
            }
            pipeline.removeHandler(context: context, promise: nil)
        }
    }
}
