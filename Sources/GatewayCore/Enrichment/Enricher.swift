/// Fills what a payload lacks (keyword names, decoded conversion values) before routing.
///
/// An enricher must not fail a record: when its source is down it leaves the fields as
/// they are and the record is routed with what it has. It returns the same records, in
/// the same order.
public protocol Enricher: Sendable {
    /// The name under `enrichers:` in config.yaml.
    var name: String { get }
    func enrich(_ records: [AttributionRecord]) async -> [AttributionRecord]
}

/// An enricher whose answers can arrive after a record was routed without them (a
/// keyword name Apple sent after the wait). It hands back the records it could complete
/// late; the gateway stores them in place of the first version and delivers them again to
/// the same sinks, which write by `record_id` (SQLite upserts, Mixpanel `$set`).
public protocol LateEnricher: Enricher {
    var lateRecords: AsyncStream<[AttributionRecord]> { get }
}
