import GatewayCore
import GatewayPostgres
import Logging
import PostgresNIO

/// A sink's own PostgreSQL client, running from the sink's start until it shuts down or
/// is released.
final class PostgresSinkClient: Sendable {
    let client: PostgresClient
    private let runner: Task<Void, Never>

    /// Connects, and gives the client once `prepare` has made what the sink writes into.
    init(_ url: PostgresURL, logger: Logger, prepare: (PostgresClient) async throws -> Void) async throws {
        client = PostgresClient(configuration: url.clientConfiguration(poolSize: 2), backgroundLogger: logger)
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

    deinit {
        runner.cancel()
    }

    func shutdown() {
        runner.cancel()
    }
}
