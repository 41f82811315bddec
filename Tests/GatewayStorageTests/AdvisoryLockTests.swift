import Foundation
import GatewayPostgres
import GatewayTestSupport
import Logging
import PostgresNIO
import Testing

/// The advisory lock replicas take turns under at start, against a real server.
@Suite(.enabled(if: TestPostgres.expected)) struct AdvisoryLockTests {
    /// A replica waiting for the lock must not hold a snapshot the holder's
    /// `CREATE INDEX CONCURRENTLY` waits for (a view sink's indexes): each would wait for
    /// the other, and PostgreSQL would end the deadlock by failing one replica's start.
    @Test func aReplicaWaitingForTheLockLetsTheHoldersConcurrentIndexFinish() async throws {
        let url = try await TestPostgres.newDatabase()
        let logger = Logger(label: "test")
        try await TestPostgres.withClient(url) { client in
            try await client.query("CREATE TABLE t (x int)")
            let (held, holding) = AsyncStream<Void>.makeStream()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    try await client.withConnection { holder in
                        try await withAdvisoryLock(42, on: holder, logger: logger) {
                            holding.yield()
                            // Until the other has asked for the lock (its statement is the
                            // last its session ran, waiting or done).
                            while try await Self.count(
                                """
                                SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                                AND pid <> pg_backend_pid() AND query LIKE '%advisory_lock%'
                                """, on: holder) == 0
                            {
                                try await Task.sleep(for: .milliseconds(20))
                            }
                            try await holder.query("CREATE INDEX CONCURRENTLY t_x ON t (x)", logger: logger)
                        }
                    }
                }
                group.addTask {
                    for await _ in held { break }
                    try await client.withConnection { waiter in
                        // It runs only holding the lock, not after a wait that failed.
                        let holds = try await withAdvisoryLock(42, on: waiter, logger: logger) {
                            try await Self.count(
                                """
                                SELECT count(*) FROM pg_locks
                                WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()
                                """, on: waiter)
                        }
                        #expect(holds == 1)
                    }
                }
                try await group.waitForAll()
            }
            #expect(
                try await client.withConnection {
                    try await Self.count("SELECT count(*) FROM pg_indexes WHERE indexname = 't_x'", on: $0)
                } == 1)
        }
    }

    static func count(_ sql: String, on connection: PostgresConnection) async throws -> Int64 {
        for try await count in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "test"))
            .decode(Int64.self)
        {
            return count
        }
        return 0
    }
}
