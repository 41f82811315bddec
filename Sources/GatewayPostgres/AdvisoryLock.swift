import Logging
import PostgresNIO

/// Runs `body` on `connection` while it holds a session advisory lock: schema changes that
/// replicas starting together would otherwise race on, run by one while the others wait.
///
/// The others wait by asking again, not in `pg_advisory_lock`: a session waiting inside that
/// statement holds a snapshot, and the holder's `CREATE INDEX CONCURRENTLY` (a view sink's
/// indexes) waits for every older snapshot to end, so each waited for the other and
/// PostgreSQL broke the deadlock by failing a replica's start.
///
/// Each statement's rows are read: PostgreSQL reports a failed lock (a deadlock it broke)
/// with them, and a wait whose rows were dropped ran `body` without the lock.
public func withAdvisoryLock<T: Sendable>(
    _ key: Int64, on connection: PostgresConnection, logger: Logger,
    _ body: () async throws -> T
) async throws -> T {
    while true {
        let rows = try await connection.query("SELECT pg_try_advisory_lock(\(key))", logger: logger)
        var taken = false
        for try await (granted) in rows.decode(Bool.self) { taken = granted }
        if taken { break }
        try await Task.sleep(for: .milliseconds(200))
    }
    let value: T
    do {
        value = try await body()
    } catch {
        try? await unlock(key, on: connection, logger: logger)
        throw error
    }
    try await unlock(key, on: connection, logger: logger)
    return value
}

/// Read to its end: a statement's error comes with its rows, and one whose rows are never
/// read is never seen (a lock not given back would stay with the pooled connection).
private func unlock(_ key: Int64, on connection: PostgresConnection, logger: Logger) async throws {
    for try await _ in try await connection.query("SELECT pg_advisory_unlock(\(key))", logger: logger) {}
}
