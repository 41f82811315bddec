import GatewayCore
import Hummingbird
import NIOCore
import NIOHTTPTypes

/// The gateway's JSON error, written straight to a connection by the channel handlers that
/// answer what no route sees (``MalformedHTTPAnswer``, ``RequestReadDeadline``), with
/// `Connection: close`: the caller closes the connection after it.
enum ChannelErrorAnswer {
    /// Writes `error` as its status with the JSON body and `X-Request-Id: requestID`;
    /// returns when the answer's end is flushed.
    static func write(
        _ error: GatewayError, requestID: String, retryAfter: Int? = nil, to context: ChannelHandlerContext
    ) -> EventLoopFuture<Void> {
        let body = ByteBuffer(bytes: ErrorBody(error).json.compactUTF8)
        var head = HTTPResponse(
            status: HTTPResponse.Status(code: error.code.httpStatus),
            headerFields: [
                .contentType: JSONResponse.contentType, .contentLength: "\(body.readableBytes)", .connection: "close",
                RequestIDMiddleware<GatewayRequestContext>.header: requestID,
            ])
        if let retryAfter { head.headerFields[.retryAfter] = String(retryAfter) }
        context.write(NIOAny(HTTPResponsePart.head(head)), promise: nil)
        context.write(NIOAny(HTTPResponsePart.body(body)), promise: nil)
        return context.writeAndFlush(NIOAny(HTTPResponsePart.end(nil)))
    }
}
