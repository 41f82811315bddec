import Foundation
import Logging
import ServiceLifecycle

/// Keeps the store's report index up with its records while the server runs, so that a
/// report or a dashboard sums facts already kept instead of indexing first. A batch is a
/// write transaction of its own; between batches ingest has its turn.
public final class ReportIndexer: Service, Sendable {
    let store: any ReportIndexStore
    let batchSize: Int
    let idle: Duration
    let pause: Duration
    let logger: Logger

    public init(
        store: any ReportIndexStore, batchSize: Int = ReportIndexBatch.standardSize, idle: Duration = .seconds(1),
        pause: Duration = .milliseconds(5), logger: Logger
    ) {
        self.store = store
        self.batchSize = batchSize
        self.idle = idle
        self.pause = pause
        self.logger = logger
    }

    public func run() async throws {
        var failing = false
        // A store just upgraded, or filled by `import`, has much to index: said at the start
        // and at the end, so that an operator knows why the first reports wait.
        var catchingUp = false
        if let queue = try? await store.reportIndexQueue(), queue.waiting > batchSize {
            logger.info("indexing stored records for the reports", metadata: ["records": "\(queue.waiting)"])
            catchingUp = true
        }
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            var wait = idle
            do {
                let started = ContinuousClock.now
                if try await store.indexReport(limit: batchSize) != nil {
                    // At least as long as the batch took: a batch holds the store's writer
                    // (SQLite) and a large group makes it long, so ingest gets at least
                    // half the writer's time.
                    wait = max(pause, min(ContinuousClock.now - started, .seconds(1)))
                } else if catchingUp {
                    logger.info("report index up to date")
                    catchingUp = false
                }
                if failing { logger.info("report index updated again") }
                failing = false
            } catch {
                // Once per outage: the records wait in the queue and are indexed later.
                if !failing { logger.warning("report index not updated", metadata: ["error": "\(error)"]) }
                failing = true
            }
            let sleep = wait
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: sleep) }
        }
    }
}
