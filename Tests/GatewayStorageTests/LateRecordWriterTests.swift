import Foundation
@testable import GatewayCore
import Logging
import Testing

import GatewayStorage

/// Names that arrive late must reach the stored record even when they arrive before the
/// ingest that gave up waiting for them has committed it.
@Suite struct LateRecordWriterTests {
    /// Hands back late versions when the test says so.
    final class LateNames: LateEnricher, Sendable {
        let name = "late_names"
        let lateRecords: AsyncStream<[AttributionRecord]>
        let continuation: AsyncStream<[AttributionRecord]>.Continuation

        init() { (lateRecords, continuation) = AsyncStream.makeStream() }

        func enrich(_ records: [AttributionRecord]) async -> [AttributionRecord] { records }
    }

    @Test func aLateVersionThatArrivesBeforeItsRecordIsWrittenOnceTheRecordIs() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("late-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try SQLiteStore(path: path, durability: .normal)
        let names = LateNames()
        let pipeline = IngestPipeline(store: store, router: RecordRouter(routes: [Route(sinks: ["local"])]))
        let writer = LateRecordWriter(
            enricher: names, pipeline: pipeline, logger: Logger(label: "test"), retryDelays: [.seconds(1)])

        var record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "iad:1:u", receivedAt: Date())
        record.appID = "1"
        record.keywordID = 87_675_432
        var named = record
        named.keyword = "meditation app"
        named.enrichedAt = Date()
        // The name came before the ingest that gave up waiting for it had committed.
        var later: [(LateRecordWriter.Batch, Duration)] = []
        await writer.handle(([named], 0)) { later.append(($0, $1)) }
        #expect(later.map(\.0.records.first?.recordID) == [record.recordID])
        #expect(later.map(\.0.tries) == [1])
        #expect(try await store.record(id: record.recordID) == nil)

        _ = try await pipeline.ingest([record])
        let retry = try #require(later.first?.0)
        later = []
        await writer.handle(retry) { later.append(($0, $1)) }
        #expect(later.isEmpty)
        #expect(try await store.record(id: record.recordID)?.keyword == "meditation app")
        let queued = try await store.dueEntries(sink: "local", now: .distantFuture, limit: 10, laneOrdered: false)
        #expect(queued.map { $0.record.keyword } == ["meditation app"])
    }
}
