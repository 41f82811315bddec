import Foundation

extension IngestPipeline {
    /// Enriches, routes and stores the records that finish `work`, removing the work in
    /// the same transaction, and wakes the sinks that got new outbox rows.
    public func complete(_ work: PendingWork, records: [AttributionRecord]) async throws -> [IngestResult] {
        var fresh = records
        for enricher in enrichers where !fresh.isEmpty {
            fresh = await enricher.enrich(fresh)
        }
        let routed = fresh.map { RoutedRecord(record: $0, sinks: router.sinks(for: $0)) }
        let results = try await store.completePending(recordID: work.recordID, records: routed)
        var woken: Set<String> = []
        for (item, result) in zip(routed, results) {
            switch result {
            case .stored:
                metrics.stored(provider: item.record.provider)
                woken.formUnion(item.sinks)
            case .duplicate:
                metrics.duplicate(provider: item.record.provider)
            }
        }
        if !woken.isEmpty { onStored(woken) }
        return results
    }
}
