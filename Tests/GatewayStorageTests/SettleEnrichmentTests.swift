import Foundation
import GatewayCore
import GatewayStorage
import Synchronization
import Testing

/// A round of resolved tokens is enriched together: one enricher call (and so one wait for
/// names) for the round, each record settled with its own enriched version.
@Suite struct SettleEnrichmentTests {
    /// Names each record by its user, and remembers how it was called.
    final class CountingEnricher: Enricher, Sendable {
        let name = "counting"
        let calls = Mutex<[[String]]>([])

        func enrich(_ records: [AttributionRecord]) async -> [AttributionRecord] {
            calls.withLock { $0.append(records.compactMap(\.appUserID)) }
            return records.map { record in
                var named = record
                named.keyword = "keyword of \(record.appUserID ?? "")"
                return named
            }
        }
    }

    @Test func aRoundOfFinishedWorkIsEnrichedOnceAndEachRecordKeepsItsOwnVersion() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("settle-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try SQLiteStore(path: path, durability: .normal)
        let enricher = CountingEnricher()
        let pipeline = IngestPipeline(
            store: store, router: RecordRouter(routes: [Route(sinks: ["local"])]), enrichers: [enricher])
        let now = Date()
        var attempts: [(work: PendingWork, step: ResolutionStep)] = []
        for user in ["u1", "u2", "u3", "u4"] {
            let work = PendingWork(
                provider: "adservices", dedupeKey: "adservices:\(user)", appID: "1", receivedAt: now, state: Data())
            _ = try await store.addPending(work, now: now)
            var record = AttributionRecord(
                provider: "adservices", kind: .install, dedupeKey: work.dedupeKey, receivedAt: now, attributed: true,
                recordID: work.recordID)
            record.appUserID = user
            // One token still waits for Apple: it is not enriched, and is retried.
            attempts.append(
                (work, user == "u3" ? .retry(after: .seconds(5), error: "later", state: Data()) : .finished([record])))
        }
        try await pipeline.settle(attempts, now: now)
        #expect(enricher.calls.withLock { $0 } == [["u1", "u2", "u4"]])
        for (work, step) in attempts {
            let stored = try await store.record(id: work.recordID)
            if case .finished = step {
                #expect(stored?.keyword == "keyword of \(stored?.appUserID ?? "?")" && stored?.appUserID != nil)
            } else {
                #expect(stored == nil)
            }
        }
    }
}
