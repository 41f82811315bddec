import Foundation
import GatewayCore
import Logging
import PostgresNIO

/// The store on PostgreSQL, for several gateway replicas sharing one database: dedupe by
/// unique keys, outbox rows and pending work claimed with `FOR UPDATE SKIP LOCKED` under
/// a lease, every acknowledged write a committed transaction.
public final class PostgresStore: AttributionStore {
    public let url: PostgresURL
    let client: PostgresClient
    let logger: Logger
    /// How long a claimed outbox row is hidden from other replicas: the longest a batch may
    /// take before another replica may offer its rows again.
    public let outboxLease: Duration
    /// How long an operation may wait for the database before it fails (``PostgresURL/timeout``).
    public var timeout: Duration { url.timeout }
    /// When records' outbox rows are queued.
    let now: @Sendable () -> Date
    /// Sinks listed with each commit rather than through their outboxes.
    let inlineListings = InlineListings()
    private let runner: Task<Void, Never>

    /// Connects, checks that commits are durable, and upgrades the tables as needed.
    public init(
        url: PostgresURL, poolSize: Int = 8, outboxLease: Duration = .seconds(60),
        logger: Logger = Logger(label: "gateway.postgres"), now: @escaping @Sendable () -> Date = { Date() }
    ) async throws {
        self.url = url
        self.now = now
        self.logger = logger
        self.outboxLease = outboxLease
        let client = PostgresClient(
            configuration: url.clientConfiguration(poolSize: poolSize), backgroundLogger: logger)
        self.client = client
        runner = client.runInBackground()
        do {
            // The first contact is held to `timeout_ms`, as every command is: the pool
            // retries a refused connection for about a minute before it gives up.
            try await GatewayPostgres.answered(within: url.timeout, from: url) {
                try await Self.checkDurability(client, logger: logger)
            }
        } catch {
            runner.cancel()
            // The server's own reason, when a connection of our own is refused: the pool's
            // error names only itself, or the time it waited.
            if let refused = await url.connectionFailure(logger: logger) {
                throw StoreNotReady(reason: "PostgreSQL at \(url.shown): \(refused)")
            }
            if let error = error as? StoreNotReady { throw error }
            throw StoreNotReady(reason: "PostgreSQL at \(url.shown): \(Self.describe(error))")
        }
        do {
            // Not held to it: building an index on a large table takes its time.
            try await PostgresSchema.migrate(client, logger: logger)
        } catch {
            runner.cancel()
            throw StoreNotReady(reason: "PostgreSQL at \(url.shown): \(Self.describe(error))")
        }
    }

    deinit {
        runner.cancel()
    }

    /// A `2xx` must mean the commit reached the disk: with `synchronous_commit = off` the
    /// server acknowledges a commit it may still lose.
    private static func checkDurability(_ client: PostgresClient, logger: Logger) async throws {
        for try await setting in try await client.query("SHOW synchronous_commit", logger: logger).decode(String.self)
        where setting == "off" {
            throw StoreNotReady(
                reason: "synchronous_commit is off, so a commit the gateway acknowledges can be lost; "
                    + "set it on for the gateway's role (ALTER ROLE … SET synchronous_commit = on)")
        }
    }

    /// An error as a line for a person: the server's own message where there is one.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            // A connection that failed: the system's reason ("Connection refused").
            return error.underlying.map { "\(error.code): \($0)" } ?? "\(error.code)"
        }
        return "\(error)"
    }

    /// Answers within two seconds at most: a load balancer's readiness probe gives up sooner
    /// than a request would.
    public func ping() async throws {
        _ = try await answered(within: min(timeout, .seconds(2))) { try await self.client.query("SELECT 1") }
    }

    /// Runs `work`, or fails once `timeout` (or `limit`) has passed without an answer.
    func answered<T: Sendable>(
        within limit: Duration? = nil, _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await GatewayPostgres.answered(within: limit ?? timeout, from: url, work)
    }

    /// One statement on a pooled connection.
    func query(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        try await answered { try await self.client.query(query, logger: logger) }
    }

    /// Runs `body` on one pooled connection.
    func connection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await answered { try await self.client.withConnection { connection in try await body(connection) } }
    }

    /// Runs `body` in a transaction on one pooled connection.
    func transaction<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await connection { connection in
            try await connection.withTransaction(logger: self.logger) { connection in try await body(connection) }
        }
    }

    static func seconds(_ date: Date) -> Double { date.timeIntervalSince1970 }
    static func date(_ seconds: Double) -> Date { Date(timeIntervalSince1970: seconds) }
}
