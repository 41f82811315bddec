import Foundation

extension IngestPipeline {
    /// Writes a round of attempts at pending work in one transaction: finished work is
    /// enriched, routed and stored in place of its pending row, the rest is rescheduled.
    /// Wakes the sinks that got new outbox rows.
    public func settle(_ attempts: [(work: PendingWork, step: ResolutionStep)], now: Date) async throws {
        // The round's records are enriched together: one wait for names however many
        // tokens finished, not one each after the other (a slow Apple Ads held a round of
        // 32 tokens 32 waits).
        var finished: [AttributionRecord] = []
        for case (_, .finished(let records)) in attempts { finished += records }
        for enricher in enrichers where !finished.isEmpty {
            finished = await enricher.enrich(finished)
        }
        var enriched = finished[...]
        var settlements: [PendingSettlement] = []
        for (work, step) in attempts {
            switch step {
            case .finished(let records):
                let routed = enriched.prefix(records.count).map {
                    RoutedRecord(record: $0, sinks: router.sinks(for: $0))
                }
                enriched = enriched.dropFirst(records.count)
                settlements.append(.finished(recordID: work.recordID, records: routed))
            case .retry(let delay, let error, let state):
                settlements.append(
                    .retry(
                        recordID: work.recordID, state: state, attempts: work.attempts + 1,
                        at: now.addingTimeInterval(delay / .seconds(1)), error: error))
            }
        }
        try await commit(settlements)
    }
}
