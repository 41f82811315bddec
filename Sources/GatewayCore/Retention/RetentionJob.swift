import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// `storage.retention`: removes the raw payload from records once they are `raw_days` old,
/// and the records themselves once they are `records_days` old and no sink waits for them,
/// in small batches with a pause between them, so that a pass over a large store never
/// holds ingest up. A pass runs at start and then every `interval`; the raw payloads' part
/// goes on from where the last pass stopped, in the order records were received.
///
/// Replicas sharing a store each run it; the work is the same whoever does it, and a body
/// changed meanwhile is left for the next pass.
public final class RetentionJob: Service, Sendable {
    /// A limit of 0 days keeps things for ever.
    public struct Limits: Sendable {
        public var rawDays: Int
        public var recordsDays: Int

        public init(rawDays: Int, recordsDays: Int) {
            self.rawDays = rawDays
            self.recordsDays = recordsDays
        }
    }

    let store: any RetentionStore
    let limits: Limits
    let interval: Duration
    let pause: Duration
    let batchSize: Int
    let now: @Sendable () -> Date
    let metrics: GatewayMetrics
    let logger: Logger
    private let cursor = Mutex(RetentionCursor.start)

    public init(
        store: any RetentionStore, limits: Limits, interval: Duration = .seconds(3600),
        pause: Duration = .milliseconds(20), batchSize: Int = 200, now: @escaping @Sendable () -> Date = { Date() },
        metrics: GatewayMetrics, logger: Logger
    ) {
        self.store = store
        self.limits = limits
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

    /// One pass; returns how many raw payloads and how many records it removed.
    @discardableResult
    public func pass() async -> (raw: Int, records: Int) {
        var removed = (raw: 0, records: 0)
        if limits.recordsDays > 0 {
            removed.records = await deleteRecords(before: cutoff(days: limits.recordsDays))
        }
        if limits.rawDays > 0 {
            removed.raw = await dropRawPayloads(before: cutoff(days: limits.rawDays))
        }
        if removed.raw > 0 || removed.records > 0 {
            logger.info(
                "removed what storage.retention keeps no longer",
                metadata: [
                    "raw_payloads": "\(removed.raw)", "records": "\(removed.records)",
                    "raw_days": "\(limits.rawDays)", "records_days": "\(limits.recordsDays)",
                ])
        }
        return removed
    }

    private func cutoff(days: Int) -> Date {
        now().addingTimeInterval(-Double(days) * 86_400)
    }

    private var running: Bool { !Task.isCancelled && !Task.isShuttingDownGracefully }

    private func dropRawPayloads(before: Date) async -> Int {
        var total = 0
        while running {
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
        return total
    }

    private func deleteRecords(before: Date) async -> Int {
        var total = 0
        while running {
            do {
                let deleted = try await store.deleteRecords(receivedBefore: before, limit: batchSize)
                total += deleted
                metrics.retentionRemoved(what: "records", count: deleted)
                guard deleted == batchSize else { break }
            } catch {
                logger.warning("cannot delete old records; trying again later", metadata: ["error": "\(error)"])
                break
            }
            try? await Task.sleep(for: pause)
        }
        return total
    }
}
