import Foundation
import GatewayCore
import GatewayPostgres
import Logging
import PostgresNIO

/// A small pool to the gateway's PostgreSQL database for tables an enricher owns (names,
/// spend), created at start under an advisory lock of their own: replicas starting
/// together would race on the catalogue.
final class EnricherPostgres: Sendable {
    let url: PostgresURL
    let client: PostgresClient
    let logger: Logger
    private let runner: Task<Void, Never>

    /// Opens the pool and runs `schema` (`CREATE … IF NOT EXISTS` statements) holding `lock`.
    init(url: PostgresURL, logger: Logger, lock: Int64, schema: [String]) async throws {
        self.url = url
        self.logger = logger
        let client = PostgresClient(configuration: url.clientConfiguration(poolSize: 2), backgroundLogger: logger)
        self.client = client
        runner = client.runInBackground()
        do {
            try await answered(within: .seconds(10), from: url) {
                try await client.withConnection { connection in
                    try await withAdvisoryLock(lock, on: connection, logger: logger) {
                        for statement in schema {
                            _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                    }
                }
            }
        } catch {
            runner.cancel()
            throw StoreNotReady(reason: "PostgreSQL at \(url.shown): \(PostgresStore.describe(error))")
        }
    }

    deinit {
        runner.cancel()
    }

    /// `work` on the pool, failing when the database has not answered within `timeout`.
    func run<T: Sendable>(within timeout: Duration, _ work: @escaping @Sendable (PostgresClient) async throws -> T)
        async throws -> T
    {
        try await answered(within: timeout, from: url) { [client] in try await work(client) }
    }
}
