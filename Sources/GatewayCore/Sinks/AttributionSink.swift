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
    /// As ``deliver(_:)``, telling `progress` before each record is sent and as each is
    /// answered, for a sink that sends records one by one to a destination that counts
    /// every copy: each answer is then written as it comes, and a crash mid-batch sends
    /// none of the batch's answered records again. By default, ``deliver(_:)``.
    func deliver(_ records: [AttributionRecord], progress: DeliveryProgress) async throws -> [DeliveryOutcome]
    /// The outcome of a record the sink was sending when the gateway stopped, before its
    /// answer was written: the destination may have it. By default, a retry.
    func interruptedSend(of record: AttributionRecord) -> DeliveryOutcome
    /// Deletes what the destination holds of the user the request names. Throwing is a
    /// retry, as for `deliver`. By default, not supported: a sink that keeps or sends
    /// anything of a user must say how it forgets them.
    func forget(_ request: ForgetRequest) async throws -> ForgetOutcome
}

extension AttributionSink {
    public func shutdown() async {}
    public var countsEveryCopy: Bool { false }
    public func deliver(_ records: [AttributionRecord], progress: DeliveryProgress) async throws -> [DeliveryOutcome] {
        try await deliver(records)
    }
    public func interruptedSend(of record: AttributionRecord) -> DeliveryOutcome {
        .retry(reason: "the gateway stopped while it was being sent")
    }
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        .notSupported(reason: "this sink cannot be asked to forget a user")
    }
}

/// What a sink tells its worker while it delivers a batch: the records (by their index in
/// the batch) it is about to send, and each answer as it comes.
public struct DeliveryProgress: Sendable {
    /// Durably marks the record as being sent; the sink must not send it if this throws.
    public var sending: @Sendable (Int) async throws -> Void
    /// Writes the record's outcome at once (the sink still returns it with the batch's).
    public var answered: @Sendable (Int, DeliveryOutcome) async -> Void

    public init(
        sending: @escaping @Sendable (Int) async throws -> Void,
        answered: @escaping @Sendable (Int, DeliveryOutcome) async -> Void
    ) {
        self.sending = sending
        self.answered = answered
    }

    /// Tells no one: the batch's outcomes are written when it ends.
    public static let none = DeliveryProgress(sending: { _ in }, answered: { _, _ in })
}

/// What happened to one record offered to a sink.
public enum DeliveryOutcome: Sendable, Equatable {
    /// The destination has it.
    case delivered
    /// Try again later; `after` is the destination's `Retry-After`, when it gave one, or
    /// `.zero` when the destination refused as a whole (a `429` or `5xx`) without naming
    /// a wait: either way the destination, not the record, is why (a batch so answered
    /// whole pauses its worker). Nil: this record's own retry (a device not known yet).
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
    /// The destination took it and works on it (a deletion that takes days): asked again
    /// after `after`, no attempt counted, and nothing said of the destination's health.
    case checkLater(reason: String, after: Duration)
}
