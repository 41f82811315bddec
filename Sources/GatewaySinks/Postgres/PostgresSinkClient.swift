import GatewayCore
import GatewayPostgres
import Logging
import PostgresNIO

/// A sink's own PostgreSQL client, running from the sink's start until it shuts down or
/// is released.
///
/// Each statement waits for the database at most the URL's timeout, as the store's do: a
/// statement sent on a connection the server has just closed may never be answered, and
/// the sink's worker, with the shutdown behind it, would wait for it for good.
final class PostgresSinkClient: Sendable {
    private let client: PostgresClient
    private let url: PostgresURL
    private let runner: Task<Void, Never>

    /// Connects, and gives the client once `prepare` has made what the sink writes into.
    init(_ url: PostgresURL, logger: Logger, prepare: (PostgresClient) async throws -> Void) async throws {
        client = PostgresClient(configuration: url.clientConfiguration(poolSize: 2), backgroundLogger: logger)
        self.url = url
        runner = client.runInBackground()
        do {
            try await prepare(client)
        } catch let error as SinkSetupError {
            runner.cancel()
            throw error
        } catch {
            runner.cancel()
            throw SinkSetupError(reason: "PostgreSQL at \(url): \(PostgresStore.describe(error))")
        }
    }

    /// Runs one statement whose rows nobody reads, or fails once the timeout has passed.
    func execute(_ query: PostgresQuery, logger: Logger) async throws {
        try await answered(within: url.timeout, from: url) { [client] in
            _ = try await client.query(query, logger: logger)
        }
    }

    deinit {
        runner.cancel()
    }

    func shutdown() {
        runner.cancel()
    }
}
