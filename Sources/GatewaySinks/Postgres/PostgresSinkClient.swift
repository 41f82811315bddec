import GatewayCore
import GatewayPostgres
import Logging
import PostgresNIO
import Synchronization

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
    private let prepare: @Sendable (PostgresClient) async throws -> Void
    /// The sink's preparation under way or done; nil once one failed, for the next write to
    /// start again. Never cancelled: cut short, it could leave its advisory lock held.
    private let preparing = Mutex<Task<Void, any Error>?>(nil)
    private let prepared = Mutex(false)

    /// Connects, and makes what the sink writes into with `prepare`. A database that does
    /// not answer within the URL's timeout (down, not taking connections, a lock held)
    /// does not stop the sink: the preparation goes on, or starts again, before its next
    /// write, and its records wait in its outbox meanwhile, as for any sink's outage; a
    /// start or a reload is not held up by it. A database that answers that the settings
    /// cannot work (``refusesTheSetup(_:)``, a table of another shape) fails the setup.
    init(
        _ url: PostgresURL, logger: Logger, prepare: @escaping @Sendable (PostgresClient) async throws -> Void
    ) async throws {
        client = PostgresClient(configuration: url.clientConfiguration(poolSize: 2), backgroundLogger: logger)
        self.url = url
        self.prepare = prepare
        runner = client.runInBackground()
        do {
            try await awaitPrepared()
        } catch let error as SinkSetupError {
            runner.cancel()
            throw error
        } catch let error as PSQLError where Self.refusesTheSetup(error) {
            runner.cancel()
            throw failure(error)
        } catch {
            logger.warning(
                "the sink's database does not answer; its records wait until it does",
                metadata: ["database": "\(url)", "error": "\(PostgresStore.describe(error))"])
        }
    }

    /// The server answered that the sink's settings cannot work: a right or an object
    /// missing or of another shape (class 42), credentials refused (28), no such database
    /// (3D). Any other failure (no answer, a database not taking connections now) is an
    /// outage the sink waits out.
    static func refusesTheSetup(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return ["42", "28", "3D"].contains { state.hasPrefix($0) }
    }

    /// Waits at most the timeout for the preparation, starting it if none runs.
    private func awaitPrepared() async throws {
        if prepared.withLock({ $0 }) { return }
        let task = preparing.withLock { current in
            if let current { return current }
            // One that fails makes way for the next write's; one still running is waited for.
            let started = Task { [client, prepare, weak self] in
                do {
                    try await prepare(client)
                } catch {
                    self?.preparing.withLock { $0 = nil }
                    throw error
                }
            }
            current = started
            return started
        }
        try await answered(within: url.timeout, from: url) { try await task.value }
        prepared.withLock { $0 = true }
    }

    /// `error` with the database it came from, in words a log can show.
    private func failure(_ error: any Error) -> SinkSetupError {
        SinkSetupError(reason: "PostgreSQL at \(url): \(PostgresStore.describe(error))")
    }

    /// Runs one statement whose rows nobody reads, or fails once the timeout has passed;
    /// first the sink's preparation, if the database has not answered it yet. A failed
    /// preparation fails the batch, which is retried, rather than any row.
    func execute(_ query: PostgresQuery, logger: Logger) async throws {
        do {
            try await awaitPrepared()
        } catch let error as StoreNotReady {
            // Names the database already.
            throw SinkSetupError(reason: error.reason)
        } catch {
            throw failure(error)
        }
        do {
            try await answered(within: url.timeout, from: url) { [client] in
                _ = try await client.query(query, logger: logger)
            }
        } catch let error as PSQLError where error.code != .server {
            // Its own description is a placeholder; the worker logs and shows this one.
            throw failure(error)
        }
    }

    deinit {
        runner.cancel()
    }

    func shutdown() {
        runner.cancel()
    }
}
