import Foundation

/// A store that writes some sinks' deliveries in the transaction that stores a record,
/// instead of through their outboxes: the SQLite sink's rows in the store's file, a view
/// sink's list on either backend. A record routed to such a sink is delivered the moment
/// its answer is `2xx`.
public protocol InlineDeliveryStore: AttributionStore {
    /// The sinks written inline, whose workers need no wake-up for new records.
    var inlineSinkNames: Set<String> { get }
    /// Writes `sink`'s records to its outbox from now on (a reload removed or changed it);
    /// a commit under way writes its rows as it started.
    func stopDeliveringInline(sink: String)
    /// Tells `observer` after each commit what the inline sinks did.
    func observeInline(_ observer: any InlineDeliveryObserver)
}

/// Told after each commit what the inline sinks did: for metrics, logs and wake-ups.
public protocol InlineDeliveryObserver: Sendable {
    /// `records` were written to `sink`'s rows with their records, in the commit that
    /// queued them.
    func delivered(sink: String, records: [(record: AttributionRecord, queuedAt: Date)])
    /// `count` records of `sink` could not be written with their records and went to its
    /// outbox instead (its worker must be woken).
    func fellBack(sink: String, count: Int)
}
