/// One entry of `routes:` in config.yaml: which sinks get which records.
public struct Route: Sendable, Equatable {
    public var sinks: [String]
    public var filter: RecordFilter

    public init(sinks: [String], filter: RecordFilter = RecordFilter()) {
        self.sinks = sinks
        self.filter = filter
    }
}

/// The `where:` of a route. Every condition given must hold; a list means any of its
/// values. Without `is_test`, a route takes no test payloads (Apple's developer-mode ids).
public struct RecordFilter: Sendable, Equatable {
    public var providers: [String]?
    public var appIDs: [String]?
    public var attributed: Bool?
    public var kinds: [RecordKind]?
    public var isTest: Bool?
    /// Postbacks whose signature did not verify, kept for audit.
    public var quarantined: Bool?
    /// App Tracking Transparency statuses (0–3); a record without one matches none.
    public var attStatuses: [Int]?
    /// Whether the record has tracking consent as ``AttributionRecord/hasTrackingConsent``
    /// reads it: a vendor's `require_consent`.
    public var trackingConsent: Bool?

    public init(
        providers: [String]? = nil, appIDs: [String]? = nil, attributed: Bool? = nil,
        kinds: [RecordKind]? = nil, isTest: Bool? = nil
    ) {
        self.providers = providers
        self.appIDs = appIDs
        self.attributed = attributed
        self.kinds = kinds
        self.isTest = isTest
    }

    public func matches(_ record: AttributionRecord) -> Bool {
        if let providers, !providers.contains(record.provider) { return false }
        if let appIDs, !appIDs.contains(where: { $0 == record.appID }) { return false }
        if let attributed, record.attributed != attributed { return false }
        if let kinds, !kinds.contains(record.kind) { return false }
        if let attStatuses, !attStatuses.contains(where: { $0 == record.attStatus }) { return false }
        if let trackingConsent, record.hasTrackingConsent != trackingConsent { return false }
        // Apple's test payloads and quarantined postbacks stay out of every route that
        // does not ask for them. Quarantined: any postback whose signature did not
        // verify, `unverifiable` (an unknown version, key or algorithm) as much as
        // `invalid`, since anyone can claim an unknown version on Apple's open routes.
        // A quarantine route takes what did not verify whatever it claims to be: "test"
        // is read from unsigned fields, so a forgery marked so would otherwise reach no
        // audit sink that did not also ask for tests.
        if let isTest {
            if record.isTest != isTest { return false }
        } else if record.isTest && quarantined != true {
            return false
        }
        if record.isQuarantined != (quarantined ?? false) { return false }
        return true
    }
}

/// Decides, for each record, the set of sinks whose outboxes receive it.
public struct RecordRouter: Sendable {
    public let routes: [Route]
    /// Sinks whose destination counts every copy it is sent (the S2S vendors).
    public let countingEveryCopy: Set<String>

    public init(routes: [Route], countingEveryCopy: Set<String> = []) {
        self.routes = routes
        self.countingEveryCopy = countingEveryCopy
    }

    /// The sinks a later version of a stored record goes to: its routes' sinks but those
    /// counting every copy, which were sent the record once already, or will be (their
    /// outbox row reads the record as it is when it goes), and would count it twice.
    public func sinksForLateVersion(of record: AttributionRecord) -> [String] {
        sinks(for: record).filter { !countingEveryCopy.contains($0) }
    }

    /// The sinks of every matching route, each once, in the order the config names them.
    public func sinks(for record: AttributionRecord) -> [String] {
        var chosen: [String] = []
        for route in routes where route.filter.matches(record) {
            for sink in route.sinks where !chosen.contains(sink) {
                chosen.append(sink)
            }
        }
        return chosen
    }
}
