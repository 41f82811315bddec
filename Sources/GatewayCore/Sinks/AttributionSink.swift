/// A destination for records: receives batches and classifies each record's fate.
///
/// The sink only classifies; the delivery worker owns retries, backoff, attempt limits
/// and the dead-letter queue. `deliver` returns exactly one outcome per record, in order.
/// Throwing means the whole batch failed in a retryable way (the endpoint is down).
/// Delivery is at-least-once: after a crash a batch may be offered again, so a sink
/// should write idempotently by `record_id`.
public protocol AttributionSink: Sendable {
    /// The largest batch the destination accepts.
    var maxBatchSize: Int { get }
    func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome]
    /// Called once its worker has stopped (the gateway shutting down): release what the
    /// sink holds outside the process (a program it started). Nothing by default.
    func shutdown() async
    /// Whether the destination counts a record sent to it twice as two (an S2S vendor;
    /// none deduplicates). The first start on a store restored from a backup moves such a
    /// sink's outbox to the dead letters, to be checked before `dlq retry`, rather than
    /// send again what the original store may have delivered after the backup.
    var countsEveryCopy: Bool { get }
}

extension AttributionSink {
    public func shutdown() async {}
    public var countsEveryCopy: Bool { false }
}

/// What happened to one record offered to a sink.
public enum DeliveryOutcome: Sendable, Equatable {
    /// The destination has it.
    case delivered
    /// Try again later; `after` is the destination's `Retry-After`, when it gave one.
    case retry(reason: String, after: Duration? = nil)
    /// The destination will never take it; it goes to the dead-letter queue.
    case reject(reason: String)
    /// The sink did not try (its circuit is open): offered again after `after`, with no
    /// attempt counted, so that a sink's own pause never moves a record nearer the
    /// dead-letter queue.
    case postponed(reason: String, after: Duration)
    /// The destination answered, by design, that it keeps nothing of this record (a
    /// device that opted out): final like `delivered`, but counted apart, so that a
    /// sink's `delivered` is what its destination holds. Not a fault, so no dead letter.
    case declined(reason: String)
}
