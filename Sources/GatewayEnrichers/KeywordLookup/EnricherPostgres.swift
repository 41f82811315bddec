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
            try await answered(within: url.timeout, from: url) {
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

extension EnricherPostgres {
    /// The most rows one multi-row statement carries (PostgreSQL takes at most 65,535
    /// parameters).
    static let rowsPerStatement = 1000

    /// Writes `rows` in one transaction, after the statements `clearing`, a statement per
    /// ``rowsPerStatement`` of them: `statement` gets the `VALUES` list, each row `columns`
    /// parameters (the last cast to `lastCast` when given), and `bind` appends one row's
    /// values in order.
    func insert<Row>(
        _ rows: [Row], columns: Int, lastCast: String? = nil, after clearing: [PostgresQuery] = [],
        statement: @escaping @Sendable (String) -> String,
        bind: @escaping @Sendable (inout PostgresBindings, Row) -> Void
    ) async throws where Row: Sendable {
        guard !rows.isEmpty || !clearing.isEmpty else { return }
        let logger = logger
        try await client.withTransaction(logger: logger) { connection in
            for query in clearing { _ = try await connection.query(query, logger: logger) }
            for start in stride(from: 0, to: rows.count, by: Self.rowsPerStatement) {
                let chunk = rows[start..<min(start + Self.rowsPerStatement, rows.count)]
                var bindings = PostgresBindings(capacity: chunk.count * columns)
                for row in chunk { bind(&bindings, row) }
                let values = (0..<chunk.count).map { row in
                    "("
                        + (1...columns).map { column in
                            "$\(row * columns + column)" + (column == columns ? lastCast.map { "::\($0)" } ?? "" : "")
                        }.joined(separator: ", ") + ")"
                }
                _ = try await connection.query(
                    PostgresQuery(unsafeSQL: statement(values.joined(separator: ", ")), binds: bindings), logger: logger
                )
            }
        }
    }
}
