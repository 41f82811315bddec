import Foundation
import GatewayCore
import GatewayPostgres
import PostgresNIO
import Testing

/// The PostgreSQL server that `scripts/with-postgres` starts for the tests
/// (`GATEWAY_TEST_POSTGRES_URL`), a new database for each test that asks.
public enum TestPostgres {
    public static let url = ProcessInfo.processInfo.environment["GATEWAY_TEST_POSTGRES_URL"]

    /// Whether this run has PostgreSQL cases: always under CI, where a missing server
    /// fails them rather than skipping them; elsewhere, when a server was started.
    public static var expected: Bool { url != nil || ProcessInfo.processInfo.environment["CI"] != nil }

    /// How long the tests' gateways wait for the server (`storage.postgres.timeout_ms`):
    /// a test runs beside hundreds of others on a shared machine, and asserts what the
    /// gateway does, not how fast the server answers.
    public static let timeoutMs = 120_000

    /// A new, empty database on the test server, by its URL, with ``timeoutMs``.
    public static func newDatabase() async throws -> PostgresURL {
        let url = try #require(url, "GATEWAY_TEST_POSTGRES_URL is not set: run the tests through scripts/with-postgres")
        let server = try PostgresURL(url)
        let database = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await withClient(server) { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"))
        }
        var target = server
        target.database = database
        target.timeout = .milliseconds(timeoutMs)
        return target
    }

    /// Runs `body` with a client of the database at `url`, running while it does.
    @discardableResult
    public static func withClient<T: Sendable>(
        _ url: PostgresURL, _ body: (PostgresClient) async throws -> T
    ) async throws -> T {
        let client = PostgresClient(configuration: url.clientConfiguration(poolSize: 2))
        let runner = client.runInBackground()
        defer { runner.cancel() }
        return try await body(client)
    }

    /// Runs one statement on the server's own database (as the superuser the tests have).
    public static func administer(_ sql: String) async throws {
        let server = try PostgresURL(try #require(url))
        try await withClient(server) { client in try await client.query(PostgresQuery(unsafeSQL: sql)) }
    }
}
