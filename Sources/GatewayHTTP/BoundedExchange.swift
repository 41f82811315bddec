import AsyncHTTPClient
import NIOCore

/// An outbound request and its answer read whole, both within one timeout.
///
/// AsyncHTTPClient's `timeout` ends when the answer's head arrives, and nothing bounds its
/// body after that: a receiver that sent `200` and then stalled, or dripped a byte a
/// second, held its sink's worker for as long as it liked, with no retry, no log line and
/// no circuit breaker. Every outbound call goes through this instead.
public struct BoundedExchange: Sendable {
    public let response: HTTPClientResponse
    /// The answer's body, or why it could not be read in time or within the limit. The
    /// head has arrived either way: a sink decides whether a body cut short matters.
    public let body: Result<ByteBuffer, any Error>

    /// The body did not arrive within the request's timeout.
    public struct BodyTimeout: Error, CustomStringConvertible {
        public var description: String { "the answer's body did not arrive in time" }
    }
}

extension HTTPClient {
    /// Sends `request`, then reads up to `bodyLimit` bytes of the answer, giving up on the
    /// whole once `timeout` has passed since it was sent (the connection with it).
    public func exchange(_ request: HTTPClientRequest, timeout: Duration, bodyLimit: Int) async throws
        -> BoundedExchange
    {
        let deadline = ContinuousClock.now + timeout
        let response = try await execute(request, timeout: .nanoseconds(Self.nanoseconds(timeout)))
        let body = await Result(catching: { try await Self.collect(response.body, upTo: bodyLimit, until: deadline) })
        return BoundedExchange(response: response, body: body)
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    private static func collect(
        _ body: HTTPClientResponse.Body, upTo limit: Int, until deadline: ContinuousClock.Instant
    ) async throws -> ByteBuffer {
        try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask { try await body.collect(upTo: limit) }
            group.addTask {
                try await _Concurrency.Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            // The loser is cancelled: a body still arriving ends its request, and the
            // client closes that connection rather than reuse it.
            defer { group.cancelAll() }
            guard let first = try await group.next(), let collected = first else { throw BoundedExchange.BodyTimeout() }
            return collected
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
