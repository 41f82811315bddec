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
