import Foundation
import GatewayConfig
import GatewayCore
import Hummingbird
import NIOCore

/// Reads a request body up to `server.max_body_bytes`, answering `413` as soon as the
/// limit is passed instead of buffering whatever a client sends, and `408` when the body
/// is still arriving after `server.body_timeout_ms`: a client dripping bytes cannot hold
/// a request open for long. The clock is read per chunk, so the common case costs nothing
/// extra; a body that stops arriving altogether gets the same `408` from
/// ``RequestReadDeadline`` a second later.
struct BodyReader: Sendable {
    let limit: Int
    let timeout: Duration

    /// Which setting or rule `limit` comes from, for the 413's message.
    let limitSource: String

    init(_ settings: ServerSettings) {
        limit = settings.maxBodyBytes
        timeout = .milliseconds(settings.bodyTimeoutMs)
        limitSource = "server.max_body_bytes"
    }

    private init(limit: Int, timeout: Duration, limitSource: String) {
        self.limit = limit
        self.timeout = timeout
        self.limitSource = limitSource
    }

    /// This reader for a route that reads at most `routeLimit` bytes, if that is less.
    func forRoute(limit routeLimit: Int?) -> BodyReader {
        guard let routeLimit, routeLimit < limit else { return self }
        return BodyReader(limit: routeLimit, timeout: timeout, limitSource: "this route's limit")
    }

    func collect(_ request: Request) async throws -> Data {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw tooLarge
        }
        // Per chunk, from when the route reads: the server's own delay is not the client's.
        let deadline = ContinuousClock.now + timeout
        // For a connection closed mid-body, ``RequestReadDeadline``'s clock, from the head:
        // on a busy machine the reader starts late, and took that handler's close (and its
        // `408`) for the client hanging up, and logged `400`.
        let closedLate = request.headers[RequestReadDeadline.headArrived].flatMap(UInt64.init).map {
            NIODeadline.uptimeNanoseconds($0) + .milliseconds(Int64(timeout / .milliseconds(1)))
        }
        var collected = ByteBuffer()
        do {
            for try await chunk in request.body {
                guard collected.readableBytes + chunk.readableBytes <= limit else { throw tooLarge }
                guard ContinuousClock.now < deadline else { throw Self.tooSlow }
                var chunk = chunk
                collected.writeBuffer(&chunk)
            }
        } catch let error as GatewayError {
            throw error
        } catch {
            // The connection closed mid-body: by ``RequestReadDeadline`` past the deadline
            // (the client was answered 408), or by the client. Either is the client's
            // doing, not an internal error to log, count and alert on.
            let late = closedLate.map { NIODeadline.now() >= $0 } ?? (ContinuousClock.now >= deadline)
            throw late ? Self.tooSlow : Self.incomplete
        }
        return Data(collected.readableBytesView)
    }

    var tooLarge: GatewayError {
        GatewayError(.payloadTooLarge, "the body is larger than \(limitSource) (\(limit) bytes)")
    }

    static let incomplete = GatewayError(.incompleteBody, "the connection closed before the body arrived whole")

    /// Also what ``RequestReadDeadline`` answers when no chunk reached the reader in time.
    static let tooSlow = GatewayError(.requestTimeout, "the body took longer than server.body_timeout_ms to arrive")
}
