import Foundation
import Logging
import Synchronization

/// Takes a raw payload the whole way to durable outbox rows: normalise, dedupe, enrich,
/// route, store. When `accept` returns, the records are on disk; delivery happens later,
/// in each sink's worker.
public struct IngestPipeline: Sendable {
    public let store: any AttributionStore
    /// The router and enrichers as they stand; shared by every copy of the pipeline, so
    /// that a reload's swap reaches the routes, resolvers and late writers holding one.
    private let stages: PipelineStages
    public let metrics: GatewayMetrics
    /// Called with the sinks that newly stored records were routed to, to wake their
    /// workers (a store may have delivered some of them already, see `onQueued`).
    let onStored: @Sendable (Set<String>) -> Void
    /// Called with the sinks that got outbox rows outside an ingest (late versions of
    /// records), which always go through the outbox.
    let onQueued: @Sendable (Set<String>) -> Void
    /// Called when quarantined records were stored, to keep the quarantine within its cap.
    let onQuarantined: @Sendable () -> Void

    public init(
        store: any AttributionStore,
        router: RecordRouter,
        enrichers: [any Enricher] = [],
        metrics: GatewayMetrics = .none,
        onStored: @escaping @Sendable (Set<String>) -> Void = { _ in },
        onQueued: (@Sendable (Set<String>) -> Void)? = nil,
        onQuarantined: @escaping @Sendable () -> Void = {}
    ) {
        self.store = store
        stages = PipelineStages(.init(router: router, enrichers: enrichers))
        self.metrics = metrics
        self.onStored = onStored
        self.onQueued = onQueued ?? onStored
        self.onQuarantined = onQuarantined
    }

    /// The router that routes the next record.
    public var router: RecordRouter { stages.current.router }
    /// The enrichers that enrich the next records.
    public var enrichers: [any Enricher] { stages.current.enrichers }

    /// Routes and enriches with `router` and `enrichers` from the next ingest on; an ingest
    /// under way finishes with those it started with.
    public func swap(router: RecordRouter, enrichers: [any Enricher]) {
        stages.replace(with: .init(router: router, enrichers: enrichers))
    }

    /// Normalises `payload` with `provider` and stores what comes out. `authorize` sees
    /// the app of every record before anything is stored and throws to refuse the whole
    /// payload: first the apps the payload claims, when the provider can read them without
    /// verifying signatures, so that a caller may not spend that work on other apps' data;
    /// then the apps of the records themselves. Refusals are counted by the HTTP route that
    /// answers them, with the ones it makes itself (authentication, body limits).
    /// `beforeStoring` sees the admitted records before any sink's worker can, for a caller
    /// that will wait for what a sink's delivery of them answers.
    public func accept(
        _ payload: IngestPayload, provider: any AttributionProvider,
        authorize: (_ appID: String?) throws -> Void = { _ in },
        beforeStoring: ([AttributionRecord]) async -> Void = { _ in }
    ) async throws -> [IngestOutcome] {
        // A payload that names no app is for `normalize` to refuse (a missing field, `422`),
        // not a `403` about an app it never named; a record without one is refused below.
        try provider.claimedAppIDs(payload)?.compactMap(\.self).forEach(authorize)
        let records = try provider.normalize(payload)
        try records.map(\.appID).forEach(authorize)
        metrics.received(provider: provider.name, count: records.count)
        await beforeStoring(records)
        return try await ingest(records)
    }

    /// Dedupes, enriches, routes and stores already normalised records, in order.
    public func ingest(_ records: [AttributionRecord]) async throws -> [IngestOutcome] {
        guard !records.isEmpty else { return [] }
        // Taken once: a record accepted before a reload is routed as the configuration of
        // that moment says, even if the swap comes while it is enriched.
        let stages = stages.current
        let enrichers = stages.enrichers
        // Known keys are looked up first only so that duplicates skip enrichment (which
        // can call outside APIs); without enrichers the insert itself finds them, and the
        // request saves a round trip to the database.
        // Keyed by bytes, as the store compares keys: see `DedupeKey.Bytes`.
        var known: [DedupeKey.Bytes: String] = [:]
        if !enrichers.isEmpty {
            do {
                known = try await store.existingRecordIDs(dedupeKeys: records.map(\.dedupeKey))
            } catch {
                throw GatewayError.storageUnavailable(cause: error)
            }
        }
        // Enrichment can call outside APIs, so duplicates skip it.
        var fresh = records.filter { known[DedupeKey.Bytes($0.dedupeKey)] == nil }
        for enricher in enrichers where !fresh.isEmpty {
            fresh = await enricher.enrich(fresh)
        }
        let routed = fresh.map { RoutedRecord(record: $0, sinks: stages.router.sinks(for: $0)) }
        let results: [IngestResult]
        do {
            results = try await commit(routed)
        } catch {
            throw GatewayError.storageUnavailable(cause: error)
        }
        let freshOutcomes = zip(routed, results).map { item, result in
            switch result {
            case .stored(let id):
                IngestOutcome(recordID: id, duplicateOf: nil, record: item.record, sinks: item.sinks)
            case .duplicate(let original):
                IngestOutcome(recordID: original, duplicateOf: original, record: item.record, sinks: [])
            }
        }

        // `fresh` kept the order of `records`, so its outcomes fill the gaps between known ones.
        var nextFresh = freshOutcomes.makeIterator()
        return records.map { record in
            if let original = known[DedupeKey.Bytes(record.dedupeKey)] {
                metrics.duplicate(provider: record.provider)
                return IngestOutcome(recordID: original, duplicateOf: original, record: record, sinks: [])
            }
            return nextFresh.next()!
        }
    }
}

// MARK: the commit path

extension IngestPipeline {
    /// Stores routed records with their outbox rows, counts what was stored and what was a
    /// duplicate, and wakes the workers of the sinks that got rows: the one path from the
    /// router to the store, for ingests and imports.
    public func commit(_ routed: [RoutedRecord]) async throws -> [IngestResult] {
        let results = try await store.ingest(routed)
        committed(zip(routed, results))
        return results
    }

    /// Writes a round of pending work's outcomes (see `settle`); finished work's records
    /// are counted and their sinks woken as `commit` does.
    func commit(_ settlements: [PendingSettlement]) async throws {
        let results = try await store.settlePending(settlements)
        var pairs: [(RoutedRecord, IngestResult)] = []
        for case .finished(let recordID, let routed) in settlements {
            pairs += zip(routed, results[recordID] ?? [])
        }
        committed(pairs)
    }

    /// Replaces stored records by newer versions and queues them again for `routed`'s sinks,
    /// waking their workers. Returns how many records were replaced.
    public func commitNewVersions(_ routed: [RoutedRecord], now: Date = Date()) async throws -> Int {
        let replaced = try await store.replaceRecords(routed, now: now)
        if replaced > 0 { onQueued(Set(routed.flatMap(\.sinks))) }
        return replaced
    }

    private func committed(_ pairs: some Sequence<(RoutedRecord, IngestResult)>) {
        var woken: Set<String> = []
        var quarantined = false
        for (item, result) in pairs {
            switch result {
            case .stored:
                metrics.stored(provider: item.record.provider)
                quarantined = quarantined || item.record.isQuarantined
                if let verdict = item.record.signature {
                    metrics.verdict(provider: item.record.provider, verdict: verdict, version: item.record.skanVersion)
                }
                woken.formUnion(item.sinks)
            case .duplicate:
                metrics.duplicate(provider: item.record.provider)
            }
        }
        if !woken.isEmpty { onStored(woken) }
        if quarantined { onQuarantined() }
    }
}

/// The parts of the pipeline a reload swaps, read whole.
final class PipelineStages: Sendable {
    struct Stages: Sendable {
        var router: RecordRouter
        var enrichers: [any Enricher]
    }

    private let stages: Mutex<Stages>

    init(_ stages: Stages) {
        self.stages = Mutex(stages)
    }

    var current: Stages { stages.withLock { $0 } }

    func replace(with stages: Stages) {
        self.stages.withLock { $0 = stages }
    }
}

/// What happened to one record of an accepted payload.
public struct IngestOutcome: Sendable {
    /// The stored record's id; for a duplicate, the original's.
    public var recordID: String
    /// Set when the record was already stored under the same dedupe key.
    public var duplicateOf: String?
    public var record: AttributionRecord
    /// The sinks whose outboxes received it.
    public var sinks: [String]

    public var isDuplicate: Bool { duplicateOf != nil }
}
