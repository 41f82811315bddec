import GatewayCore

/// Runs `work`, or throws ``StoreNotReady`` once `timeout` has passed without an answer:
/// while the database cannot be reached, postgres-nio's pool waits for a connection without
/// end, and a request must get its `503` instead, a readiness check its failure.
public func answered<T: Sendable>(
    within timeout: Duration, from url: PostgresURL, _ work: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await work() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw StoreNotReady(reason: "PostgreSQL at \(url) did not answer within \(timeout)")
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
