import Foundation
import GatewayCore
import Hummingbird

/// Reads a request body up to the configured limit, answering `413` as soon as the
/// limit is passed instead of buffering whatever a client sends.
enum BodyReader {
    static func collect(_ request: Request, limit: Int) async throws -> Data {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw tooLarge(limit)
        }
        var collected = ByteBuffer()
        for try await chunk in request.body {
            guard collected.readableBytes + chunk.readableBytes <= limit else { throw tooLarge(limit) }
            var chunk = chunk
            collected.writeBuffer(&chunk)
        }
        return Data(collected.readableBytesView)
    }

    static func tooLarge(_ limit: Int) -> GatewayError {
        GatewayError(.payloadTooLarge, "the body is larger than server.max_body_bytes (\(limit) bytes)")
    }
}
