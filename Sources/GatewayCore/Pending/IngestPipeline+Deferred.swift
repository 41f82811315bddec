import Foundation

extension IngestPipeline {
    /// Writes a round of attempts at pending work in one transaction: finished work is
    /// enriched, routed and stored in place of its pending row, the rest is rescheduled.
    /// Wakes the sinks that got new outbox rows.
    public func settle(_ attempts: [(work: PendingWork, step: ResolutionStep)], now: Date) async throws {
        var settlements: [PendingSettlement] = []
        for (work, step) in attempts {
            switch step {
            case .finished(var records):
                for enricher in enrichers where !records.isEmpty {
                    records = await enricher.enrich(records)
                }
                let routed = records.map { RoutedRecord(record: $0, sinks: router.sinks(for: $0)) }
                settlements.append(.finished(recordID: work.recordID, records: routed))
            case .retry(let delay, let error, let state):
                settlements.append(
                    .retry(
                        recordID: work.recordID, state: state, attempts: work.attempts + 1,
                        at: now.addingTimeInterval(delay / .seconds(1)), error: error))
            }
        }
        let results = try await store.settlePending(settlements)
        var woken: Set<String> = []
        for case .finished(let recordID, let routed) in settlements {
            for (item, result) in zip(routed, results[recordID] ?? []) {
                switch result {
                case .stored:
                    metrics.stored(provider: item.record.provider)
                    woken.formUnion(item.sinks)
                case .duplicate:
                    metrics.duplicate(provider: item.record.provider)
                }
            }
        }
        if !woken.isEmpty { onStored(woken) }
    }
}
