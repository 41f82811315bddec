import Logging
import PostgresNIO

/// Runs `body` on `connection` while it holds a session advisory lock: schema changes that
/// replicas starting together would otherwise race on, run by one while the others wait.
public func withAdvisoryLock<T: Sendable>(
    _ key: Int64, on connection: PostgresConnection, logger: Logger,
    _ body: () async throws -> T
) async throws -> T {
    _ = try await connection.query("SELECT pg_advisory_lock(\(key))", logger: logger)
    let value: T
    do {
        value = try await body()
    } catch {
        _ = try? await connection.query("SELECT pg_advisory_unlock(\(key))", logger: logger)
        throw error
    }
    _ = try await connection.query("SELECT pg_advisory_unlock(\(key))", logger: logger)
    return value
}
