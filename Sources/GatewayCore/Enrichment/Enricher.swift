import ServiceLifecycle

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
///
/// What it still owes outlives the process: at start, and every few minutes after, the
/// gateway asks for the records left waiting, reads them from the store and hands them to `resume`;
/// `stored` and `forget` say when a late version is stored, or its record never was.
public protocol LateEnricher: Enricher {
    var lateRecords: AsyncStream<[AttributionRecord]> { get }
    /// Ids of records that went on without an answer still owed, and that this enricher
    /// is not waiting on in memory: a stopped gateway's, an `import`'s, those past its limit.
    func recordsLeftWaiting() async -> [String]
    /// Those records, read from the store: completed now or later, through `lateRecords`.
    func resume(_ records: [AttributionRecord]) async
    /// These late versions are stored: what they still lack may yet be owed.
    func stored(_ records: [AttributionRecord]) async
    /// Nothing more is owed to these records: they were never stored.
    func forget(_ recordIDs: [String]) async
}

extension LateEnricher {
    public func recordsLeftWaiting() async -> [String] { [] }
    public func resume(_ records: [AttributionRecord]) async {}
    public func stored(_ records: [AttributionRecord]) async {}
    public func forget(_ recordIDs: [String]) async {}
}

/// An enricher with work of its own beside the records it is handed (`keyword_lookup`'s
/// daily spend fetch): `serve` runs its services with the server's and stops them with it;
/// an `import` builds the enricher without running them.
public protocol EnricherWithServices: Enricher {
    var services: [any Service] { get }
}
