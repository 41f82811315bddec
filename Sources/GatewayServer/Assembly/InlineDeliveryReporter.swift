import Foundation
import GatewayCore
import GatewayStorage
import Logging

/// Counts inline sinks' rows as their workers' deliveries are counted, and hands rows
/// that fell back to the outbox to the sink's worker.
final class InlineDeliveryReporter: InlineDeliveryObserver {
    let metrics: GatewayMetrics
    let logger: Logger
    let wake: @Sendable (_ sink: String) -> Void
    private let fallbackWarnings = OncePerInterval(.seconds(60))

    init(metrics: GatewayMetrics, logger: Logger, wake: @escaping @Sendable (_ sink: String) -> Void) {
        self.metrics = metrics
        self.logger = logger
        self.wake = wake
    }

    func delivered(sink: String, records: [(record: AttributionRecord, queuedAt: Date)]) {
        metrics.delivery(sink: sink, outcome: "delivered", count: records.count)
        let now = Date()
        for (_, queuedAt) in records {
            metrics.deliveryLatency(sink: sink, seconds: now.timeIntervalSince(queuedAt))
        }
    }

    func fellBack(sink: String, count: Int) {
        // Counted, and logged at most once a minute: an inline row that keeps failing would
        // otherwise only show as a slower sink.
        metrics.delivery(sink: sink, outcome: "inline_fallback", count: count)
        if fallbackWarnings.allow() {
            logger.warning(
                "rows could not be written with their records; queued in the sink's outbox",
                metadata: ["sink": "\(sink)", "count": "\(count)"])
        }
        wake(sink)
    }
}
