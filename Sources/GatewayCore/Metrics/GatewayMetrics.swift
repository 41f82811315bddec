import CoreMetrics

/// The gateway's counters, made through one factory so that each running gateway (and
/// each test) has its own registry instead of the process-wide one.
public struct GatewayMetrics: Sendable {
    let factory: any MetricsFactory

    public init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// Discards everything: for offline commands.
    public static let none = GatewayMetrics(factory: NOOPMetricsHandler.instance)

    func counter(_ label: String, _ dimensions: [(String, String)]) -> Counter {
        Counter(label: label, dimensions: dimensions, factory: factory)
    }

    /// Creates at zero the series that alerts watch with `increase()`, which sees no rise
    /// in a series that first appears above zero: the first dead letter or forged
    /// postback after each start would otherwise go unnoticed. `postbackProviders` are
    /// those whose records carry a signature verdict.
    public func registerAtZero(
        providers: [String], postbackProviders: [String], deferredProviders: [String] = [], enrichers: [String] = [],
        sinks: [String]
    ) {
        for provider in providers {
            for label in [
                "gateway_records_received_total", "gateway_records_stored_total", "gateway_records_duplicate_total",
            ] {
                counter(label, [("provider", provider)]).increment(by: 0)
            }
            // The gateway's own faults, which `IngestFailing` watches: the first outage
            // after a start would otherwise begin its series above zero, and read as none.
            for code in ["storage_unavailable", "internal_error"] {
                counter("gateway_records_rejected_total", [("provider", provider), ("code", code)]).increment(by: 0)
            }
        }
        for provider in postbackProviders {
            for verdict in ["verified", "invalid", "unverifiable"] {
                for version in Self.postbackVersions + ["other"] {
                    counter(
                        "gateway_signature_verdicts_total",
                        [("provider", provider), ("verdict", verdict), ("version", version)]
                    ).increment(by: 0)
                }
            }
            counter("gateway_records_rejected_total", [("provider", provider), ("code", "invalid_signature")])
                .increment(by: 0)
            counter("gateway_quarantine_dropped_total", [("provider", provider)]).increment(by: 0)
        }
        counter("gateway_malformed_requests_total", []).increment(by: 0)
        counter("gateway_forget_requests_total", []).increment(by: 0)
        for what in ["raw", "records"] {
            counter("gateway_retention_removed_total", [("what", what)]).increment(by: 0)
        }
        for result in ["applied", "rejected"] {
            counter("gateway_config_reloads_total", [("result", result)]).increment(by: 0)
        }
        for limit in ["per_key", "per_ip", "open_routes_per_ip", "connections_per_ip"] {
            counter("gateway_rate_limited_total", [("limit", limit)]).increment(by: 0)
        }
        for sink in sinks {
            for outcome in ["delivered", "declined", "retry", "postponed", "dead_letter", "inline_fallback"] {
                counter("gateway_deliveries_total", [("sink", sink), ("outcome", outcome)]).increment(by: 0)
            }
        }
        // `KeywordNamesLate` watches `late`; the others, so that every rate starts at zero.
        for enricher in enrichers {
            for outcome in ["hit", "fetched", "stale", "unknown", "late"] {
                counter("gateway_enrichment_lookups_total", [("enricher", enricher), ("outcome", outcome)]).increment(
                    by: 0)
            }
        }
        for provider in deferredProviders {
            for outcome in Resolution.allCases.filter({ $0 != .pending }).map(\.rawValue) + ["retry"] {
                counter("gateway_resolution_attempts_total", [("provider", provider), ("outcome", outcome)]).increment(
                    by: 0)
            }
        }
    }

    /// A reload of config.yaml (`SIGHUP`, or the file watcher): `applied`, or `rejected`
    /// (the file had a mistake, or lacked what runs), when nothing changed.
    public func configReload(result: String) {
        counter("gateway_config_reloads_total", [("result", result)]).increment()
    }

    /// A request the HTTP parser could not read, answered `400 malformed_http` before any
    /// route (so no provider's rejection counter sees it).
    public func malformedRequest() {
        counter("gateway_malformed_requests_total", []).increment()
    }

    /// A request answered `429` by `limit` (`per_key`, `per_ip`, `open_routes_per_ip`, or a
    /// connection refused by `connections_per_ip`), before any route: no
    /// provider's rejection counter sees it.
    public func rateLimited(limit: String) {
        counter("gateway_rate_limited_total", [("limit", limit)]).increment()
    }

    /// Quarantined records dropped, oldest first, to keep the provider's quarantine within
    /// its cap.
    public func quarantineDropped(provider: String, count: Int) {
        guard count > 0 else { return }
        counter("gateway_quarantine_dropped_total", [("provider", provider)]).increment(by: count)
    }

    public func received(provider: String, count: Int = 1) {
        counter("gateway_records_received_total", [("provider", provider)]).increment(by: count)
    }

    public func rejected(provider: String, code: String) {
        counter("gateway_records_rejected_total", [("provider", provider), ("code", code)]).increment()
    }

    public func stored(provider: String) {
        counter("gateway_records_stored_total", [("provider", provider)]).increment()
    }

    public func duplicate(provider: String) {
        counter("gateway_records_duplicate_total", [("provider", provider)]).increment()
    }

    /// A stored postback's signature verdict (`verified`, `invalid`, `unverifiable`) by
    /// its version. The postback names its version, on routes anyone may post to, so any
    /// version the gateway does not verify is `other`: a forger cannot mint series.
    public func verdict(provider: String, verdict: String, version: String?) {
        let version = version.flatMap { Self.postbackVersions.contains($0) ? $0 : nil } ?? "other"
        counter(
            "gateway_signature_verdicts_total", [("provider", provider), ("verdict", verdict), ("version", version)]
        )
        .increment()
    }

    /// The postback versions the gateway verifies: SKAdNetwork's and AdAttributionKit's.
    public static let postbackVersions = ["1.0", "2.0", "2.1", "2.2", "3.0", "4.0", "aak"]

    /// Names an enricher looked up: `hit` (cached), `fetched` (in time), `unknown` (the
    /// source has no such id), `late` (the record went on without it).
    public func enrichment(enricher: String, outcome: String, count: Int) {
        guard count > 0 else { return }
        counter("gateway_enrichment_lookups_total", [("enricher", enricher), ("outcome", outcome)])
            .increment(by: count)
    }

    /// From the record's arrival to the sink's acceptance.
    public func deliveryLatency(sink: String, seconds: Double) {
        Timer(label: "gateway_delivery_latency_seconds", dimensions: [("sink", sink)], factory: factory)
            .recordNanoseconds(Int64(max(0, seconds) * 1_000_000_000))
    }

    /// A forget request accepted.
    public func forgetRequested() {
        counter("gateway_forget_requests_total", []).increment()
    }

    /// What `storage.retention` removed: `raw` payloads, or `records`.
    public func retentionRemoved(what: String, count: Int) {
        guard count > 0 else { return }
        counter("gateway_retention_removed_total", [("what", what)]).increment(by: count)
    }

    public func delivery(sink: String, outcome: String, count: Int) {
        guard count > 0 else { return }
        counter("gateway_deliveries_total", [("sink", sink), ("outcome", outcome)]).increment(by: count)
    }

    /// One attempt at pending work: `retry`, or the finished record's resolution.
    public func resolutionAttempt(provider: String, outcome: String) {
        counter("gateway_resolution_attempts_total", [("provider", provider), ("outcome", outcome)]).increment()
    }

    public func pending(provider: String, depth: Int) {
        Gauge(label: "gateway_pending_depth", dimensions: [("provider", provider)], factory: factory).record(depth)
    }

    public func outbox(sink: String, depth: Int, oldestAgeSeconds: Double) {
        Gauge(label: "gateway_outbox_depth", dimensions: [("sink", sink)], factory: factory).record(depth)
        Gauge(label: "gateway_outbox_oldest_age_seconds", dimensions: [("sink", sink)], factory: factory)
            .record(oldestAgeSeconds)
    }
}
