import Foundation
@testable import GatewayCore
import Logging
import Synchronization
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

    /// A late version is the record as it was routed; the stored one may have changed
    /// since (a purchase credited when Apple answered). Written whole, the late version
    /// undid that change; only its names are taken.
    @Test func aLateVersionBringsItsNamesAndUndoesNothingStoredSince() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("late-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try SQLiteStore(path: path, durability: .normal)
        let pipeline = IngestPipeline(store: store, router: RecordRouter(routes: [Route(sinks: ["local"])]))
        let writer = LateRecordWriter(enricher: LateNames(), pipeline: pipeline, logger: Logger(label: "test"))

        var record = AttributionRecord(
            provider: "adservices", kind: .purchase, dedupeKey: "asa:p:1", receivedAt: Date())
        record.resolution = .pending
        record.keywordID = 87_675_432
        _ = try await pipeline.ingest([record])
        var credited = record
        credited.resolution = .resolved
        credited.campaignID = 542_370_539
        _ = try await store.replaceRecords([RoutedRecord(record: credited, sinks: ["local"])], now: Date())

        var named = record
        named.keyword = "meditation app"
        named.enrichedAt = Date()
        #expect(await writer.write([named]).isEmpty)
        let stored = try #require(try await store.record(id: record.recordID))
        #expect(stored.keyword == "meditation app")
        #expect(stored.resolution == .resolved && stored.campaignID == 542_370_539)
        // The same names again change nothing and are not queued again.
        let queued = try await store.dueEntries(sink: "local", now: .distantFuture, limit: 10, laneOrdered: false).count
        #expect(await writer.write([named]).isEmpty)
        #expect(
            try await store.dueEntries(sink: "local", now: .distantFuture, limit: 10, laneOrdered: false).count
                == queued)
    }

    /// A late version gets no new outbox row on a sink that counts every copy it is sent (a
    /// vendor): one that had the record already would count it twice. Such a sink is left
    /// out; its own row, if still waiting, reads
    /// the record as it is when it goes.
    @Test func aLateVersionIsNotQueuedAgainForASinkThatCountsEveryCopy() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("late-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try SQLiteStore(path: path, durability: .normal)
        let router = RecordRouter(routes: [Route(sinks: ["local", "vendor"])], countingEveryCopy: ["vendor"])
        let pipeline = IngestPipeline(store: store, router: router)
        let writer = LateRecordWriter(enricher: LateNames(), pipeline: pipeline, logger: Logger(label: "test"))

        var record = AttributionRecord(
            provider: "adservices", kind: .purchase, dedupeKey: "asa:p:2", receivedAt: Date())
        record.appID = "1"
        record.keywordID = 87_675_432
        _ = try await pipeline.ingest([record])
        func queued(_ sink: String) async throws -> [OutboxEntry] {
            try await store.dueEntries(sink: sink, now: .distantFuture, limit: 10, laneOrdered: false)
        }
        let sent = try #require(try await queued("vendor").first)
        try await store.resolve(sink: "vendor", [.delivered(id: sent.id)], now: Date())

        var named = record
        named.keyword = "meditation app"
        named.enrichedAt = Date()
        #expect(await writer.write([named]).isEmpty)
        #expect(try await queued("local").map { $0.record.keyword } == ["meditation app"])
        #expect(try await queued("vendor").isEmpty)
    }

    /// Owes names to records another process left in the store, and says which it resumed.
    final class OwedElsewhere: LateEnricher, Sendable {
        let name = "owed_elsewhere"
        let lateRecords = AsyncStream<[AttributionRecord]>.makeStream().stream
        let owed = Mutex<[String]>([])
        let resumed = Mutex<[String]>([])

        func enrich(_ records: [AttributionRecord]) async -> [AttributionRecord] { records }
        let forgotten = Mutex<[String]>([])
        let scans = Mutex(0)
        func recordsLeftWaiting() async -> [String] {
            let ids = owed.withLock { $0 }
            scans.withLock { $0 += 1 }
            return ids
        }
        func forget(_ recordIDs: [String]) async { forgotten.withLock { $0 += recordIDs } }
        func resume(_ records: [AttributionRecord]) async {
            resumed.withLock { $0 += records.map(\.recordID) }
            owed.withLock { $0.removeAll() }
        }
    }

    /// `import` stores records whose names Apple Ads did not give in time and exits; only
    /// a restart of `serve` used to read them back. A running one now does, on its own.
    @Test func namesOwedToRecordsAnotherProcessStoredAreAskedForWithoutARestart() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("late-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try SQLiteStore(path: path, durability: .normal)
        let pipeline = IngestPipeline(store: store, router: RecordRouter(routes: [Route(sinks: ["local"])]))
        let enricher = OwedElsewhere()
        let writer = LateRecordWriter(
            enricher: enricher, pipeline: pipeline, logger: Logger(label: "test"), rescanEvery: .milliseconds(20))
        let running = Task { try await writer.run() }
        defer { running.cancel() }

        let record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "iad:1:imported", receivedAt: Date())
        _ = try await pipeline.ingest([record])
        // Past the start's read: what follows is found by the reads while serving.
        let started = ContinuousClock.now + .seconds(30)
        while enricher.scans.withLock({ $0 }) == 0 && ContinuousClock.now < started {
            try await Task.sleep(for: .milliseconds(5))
        }
        // The other is owed before its record's commit has ended: while serving, that is no
        // reason to let it go, or the next start would not know it.
        enricher.owed.withLock { $0 = [record.recordID, "committing-meanwhile"] }
        let deadline = ContinuousClock.now + .seconds(30)
        while enricher.resumed.withLock({ $0.isEmpty }) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(enricher.resumed.withLock { $0 } == [record.recordID])
        #expect(enricher.forgotten.withLock { $0 }.isEmpty)
    }
}
