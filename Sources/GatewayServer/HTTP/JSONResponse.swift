import Foundation
import GatewayCore
import Hummingbird

/// JSON bodies for every answer the gateway gives.
enum JSONResponse {
    /// The `Content-Type` of every JSON answer, including those written below the router.
    static let contentType = "application/json; charset=utf-8"

    static func make(status: HTTPResponse.Status, _ body: some Encodable) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(body)) ?? Data("{}".utf8)
        return make(status: status, bytes: ByteBuffer(bytes: data))
    }

    /// The answers given on every request (ingest, errors, the no-op route) are written
    /// without Codable; the text is the same as the Encodable overload's.
    static func make(status: HTTPResponse.Status, _ body: JSONValue) -> Response {
        make(status: status, bytes: ByteBuffer(bytes: body.compactUTF8))
    }

    /// A contributed route's answer.
    static func make(_ answer: RouteAnswer) -> Response {
        make(status: HTTPResponse.Status(code: answer.status), bytes: ByteBuffer(bytes: answer.json))
    }

    private static func make(status: HTTPResponse.Status, bytes: ByteBuffer) -> Response {
        Response(
            status: status, headers: [.contentType: contentType],
            body: .init(byteBuffer: bytes))
    }
}

/// A JSON object's members, leaving absent values out as Codable's synthesized
/// `encodeIfPresent` does.
func jsonObject(_ members: [(String, JSONValue?)]) -> JSONValue {
    var object: [String: JSONValue] = [:]
    object.reserveCapacity(members.count)
    for case (let key, let value?) in members { object[key] = value }
    return .object(object)
}

/// `{"error": {"code", "message", "field"}}`, the one error shape of every route: `field`
/// is null when the error is about no one field (a body that is not JSON, a missing key).
struct ErrorBody: Encodable {
    let error: GatewayErrorDetail

    init(_ error: GatewayError) {
        self.error = GatewayErrorDetail(error)
    }

    var json: JSONValue {
        jsonObject([
            (
                "error",
                jsonObject([
                    ("code", .string(error.code)), ("message", .string(error.message)),
                    ("field", error.field.map(JSONValue.string) ?? .null),
                ])
            )
        ])
    }
}

extension GatewayError: HTTPResponseError {
    public var status: HTTPResponse.Status { HTTPResponse.Status(code: code.httpStatus) }

    /// The gateway's one error shape; a contributed route may answer in its own
    /// (``RouteErrorAnswers``).
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        JSONResponse.make(status: status, ErrorBody(self).json)
    }
}
