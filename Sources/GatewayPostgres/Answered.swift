import GatewayCore

/// Runs `work`, or throws ``StoreNotReady`` once `timeout` has passed without an answer:
/// while the database cannot be reached, postgres-nio's pool waits for a connection without
/// end, and a request must get its `503` instead, a readiness check its failure.
///
/// A statement already sent that the server never answers is left to end by itself
/// (``withinLimit(_:else:_:)``). What it commits after the limit stays committed, as when a
/// client gives up on a request; the client's retry is answered as a duplicate.
public func answered<T: Sendable>(
    within timeout: Duration, from url: PostgresURL, _ work: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withinLimit(
        timeout, else: { StoreNotReady(reason: "PostgreSQL at \(url) did not answer within \(timeout)") }, work)
}
