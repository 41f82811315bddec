import Foundation
import GatewayCore
import Hummingbird

/// JSON bodies for every answer the gateway gives.
enum JSONResponse {
    static func make(status: HTTPResponse.Status, _ body: some Encodable) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(body)) ?? Data("{}".utf8)
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// `{"error": {"code", "message", "field"}}`, the one error shape of every route.
struct ErrorBody: Encodable {
    struct Detail: Encodable {
        let code: String
        let message: String
        let field: String?
    }
    let error: Detail

    init(_ error: GatewayError) {
        self.error = Detail(code: error.code.name, message: error.message, field: error.field)
    }
}

extension GatewayError: HTTPResponseError {
    public var status: HTTPResponse.Status { HTTPResponse.Status(code: code.httpStatus) }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        JSONResponse.make(status: status, ErrorBody(self))
    }
}
