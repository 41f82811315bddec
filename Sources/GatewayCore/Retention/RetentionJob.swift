import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// `storage.retention`: removes the raw payload from records once they are `raw_days` old,
/// in small batches with a pause between them, so that a pass over a large store never
/// holds ingest up. A pass runs at start and then every `interval`; each goes on from where
/// the last one stopped, in the order records were received.
///
/// Replicas sharing a store each run it; the work is the same whoever does it, and a body
/// changed meanwhile is left for the next pass.
public final class RetentionJob: Service, Sendable {
    let store: any RetentionStore
    let rawDays: Int
    let interval: Duration
    let pause: Duration
    let batchSize: Int
    let now: @Sendable () -> Date
    let metrics: GatewayMetrics
    let logger: Logger
    private let cursor = Mutex(RetentionCursor.start)

    public init(
        store: any RetentionStore, rawDays: Int, interval: Duration = .seconds(3600),
        pause: Duration = .milliseconds(20),
        batchSize: Int = 200, now: @escaping @Sendable () -> Date = { Date() }, metrics: GatewayMetrics,
        logger: Logger
    ) {
        self.store = store
        self.rawDays = rawDays
        self.interval = interval
        self.pause = pause
        self.batchSize = batchSize
        self.now = now
        self.metrics = metrics
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            await pass()
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: self.interval) }
        }
    }

    /// One pass over what became old since the last one; returns how many payloads it removed.
    @discardableResult
    public func pass() async -> Int {
        let before = now().addingTimeInterval(-Double(rawDays) * 86_400)
        var total = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let from = cursor.withLock { $0 }
            do {
                let (dropped, next) = try await store.dropRawPayloads(
                    receivedBefore: before, after: from, limit: batchSize)
                total += dropped
                metrics.retentionRemoved(what: "raw", count: dropped)
                guard let next else { break }
                cursor.withLock { $0 = next }
            } catch {
                logger.warning("cannot remove old raw payloads; trying again later", metadata: ["error": "\(error)"])
                break
            }
            try? await Task.sleep(for: pause)
        }
        if total > 0 {
            logger.info(
                "removed raw payloads past storage.retention.raw_days",
                metadata: ["records": "\(total)", "raw_days": "\(rawDays)"])
        }
        return total
    }
}
