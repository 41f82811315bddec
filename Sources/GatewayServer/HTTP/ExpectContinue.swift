import NIOCore
import NIOHTTP1

/// Answers `100 Continue` to a request that asks for it (`Expect: 100-continue`), as curl
/// does for bodies over 1 KiB and Java's and PHP's libcurl clients are told to. Left
/// unanswered, curl waits a second before each such body, and a client that waits for
/// the `100` waits for good. A body declared larger than any route takes is
/// not asked for: the route's `413` answers it at once.
///
/// It sits in front of ``RequestedClose`` and the HTTP types codec, where the request's
/// version is known and an informational answer can be written; the pipelining handler
/// before it holds a request back until the answers before it are written, so a `100`
/// never cuts into another answer.
final class ExpectContinue: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// The largest body any route takes.
    let maxBodyBytes: Int

    init(maxBodyBytes: Int) {
        self.maxBodyBytes = maxBodyBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data), head.version.major == 1, head.version.minor >= 1,
            head.headers["expect"].contains(where: {
                $0.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue"
            }),
            head.headers.first(name: "content-length").flatMap(Int.init).map({ $0 <= maxBodyBytes }) ?? true
        {
            context.writeAndFlush(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
        }
        context.fireChannelRead(data)
    }
}
