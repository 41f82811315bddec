import Foundation
import GatewayCore
import Logging
import Testing

/// `storage.retention`, on every backend: raw payloads go once records are old enough, and
/// nothing else of a record changes.
@Suite struct RetentionConformanceTests {
    static func install(_ user: String, at date: Date, raw: Bool = true) -> AttributionRecord {
        var record = StoreConformanceTests.install(user, at: date)
        if raw {
            record.raw = .object([
                "app_user_id": .string(user), "Version3.1": .object(["iad-attribution": .string("true")]),
                // A nested key of the same name is the payload's own, not the record's.
                "raw": .string("kept only inside the payload"),
            ])
        }
        return record
    }

    @Test(arguments: StoreBackend.available)
    func rawPayloadsOlderThanTheCutoffGoAndEverythingElseStays(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let day: TimeInterval = 86_400
        let now = clock.now
        // Stored in an order other than the one they were received in (an import of history).
        let records = [
            Self.install("recent", at: now - day), Self.install("old-b", at: now - 40 * day),
            Self.install("no-raw", at: now - 50 * day, raw: false), Self.install("old-a", at: now - 45 * day),
            Self.install("old-c", at: now - 31 * day),
        ]
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: ["a"]) })

        // Two records a call: the cursor goes on through the old ones only, oldest first.
        var cursor = RetentionCursor.start
        var dropped = 0
        var calls = 0
        while true {
            let (count, next) = try await store.dropRawPayloads(receivedBefore: now - 30 * day, after: cursor, limit: 2)
            dropped += count
            calls += 1
            guard let next else { break }
            cursor = next
        }
        #expect(dropped == 3)
        #expect(calls == 3)
        for record in records {
            let stored = try #require(try await store.record(id: record.recordID))
            var expected = record
            if record.receivedAt < now - 30 * day { expected.raw = nil }
            #expect(stored == expected, "\(record.appUserID ?? "")")
        }
        // A later pass from the same place finds nothing more; from the start, nothing to change.
        #expect(try await store.dropRawPayloads(receivedBefore: now - 30 * day, after: cursor, limit: 2).dropped == 0)
        #expect(
            try await store.dropRawPayloads(receivedBefore: now - 30 * day, after: .start, limit: 10).dropped == 0)
        // The outbox still offers every record, without the raw payloads removed.
        let due = try await store.dueEntries(sink: "a", now: clock.now, limit: 10)
        #expect(due.count == 5)
        #expect(due.filter { $0.record.raw != nil }.map(\.record.appUserID) == ["recent"])
    }
}

extension RetentionConformanceTests {
    @Test(arguments: StoreBackend.available)
    func oldRecordsGoOnceNoSinkWaitsForThemAndTheirKeysWithThem(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let day: TimeInterval = 86_400
        let now = clock.now
        let delivered = (0..<3).map { Self.install("delivered-\($0)", at: now - Double(100 + $0) * day) }
        let waiting = Self.install("waiting", at: now - 120 * day)
        let failed = Self.install("failed", at: now - 110 * day)
        let recent = Self.install("recent", at: now - 10 * day)
        // An ASA SDK user's attribution: their purchases to come are credited by it.
        let sdkAttribution = Self.install("sdk-user", at: now - 130 * day)
        _ = try await store.ingest(
            (delivered + [waiting, failed, recent]).map { RoutedRecord(record: $0, sinks: ["a"]) }
                + [RoutedRecord(record: sdkAttribution, sinks: [])])
        let user = try await store.createSDKUser(now: now - 130 * day)
        try await store.setSDKUserAttribution(userID: user.id, recordID: sdkAttribution.recordID)
        let due = try await store.dueEntries(sink: "a", now: now, limit: 10)
        let ids = Dictionary(uniqueKeysWithValues: due.map { ($0.record.recordID, $0.id) })
        try await store.resolve(
            sink: "a",
            delivered.map { .delivered(id: ids[$0.recordID]!) } + [
                .deadLetter(id: ids[failed.recordID]!, attempts: 5, error: "refused"),
                .delivered(id: ids[recent.recordID]!),
            ], now: now)

        // Two a call, until a call deletes fewer.
        #expect(try await store.deleteRecords(receivedBefore: now - 90 * day, limit: 2) == 2)
        #expect(try await store.deleteRecords(receivedBefore: now - 90 * day, limit: 2) == 1)
        #expect(try await store.deleteRecords(receivedBefore: now - 90 * day, limit: 2) == 0)
        for record in delivered { #expect(try await store.record(id: record.recordID) == nil) }
        // Still waited for by its sink, dead-lettered, an SDK user's, or not old enough: kept.
        for record in [waiting, failed, sdkAttribution, recent] {
            #expect(try await store.record(id: record.recordID) != nil)
        }
        #expect(try await store.outboxStats()["a"]?.depth == 1)
        // The key went with the record: the same payload again is a new record.
        let again = Self.install("delivered-0", at: now)
        #expect(
            try await store.ingest([RoutedRecord(record: again, sinks: [])]) == [.stored(recordID: again.recordID)])
    }
}

/// The job `serve` runs for `storage.retention.raw_days`.
@Suite struct RetentionJobTests {
    @Test func aPassRemovesWhatBecameOldSinceTheLastOne() async throws {
        let clock = TestClock()
        let store = InMemoryStore(now: { clock.now })
        let day: TimeInterval = 86_400
        let start = clock.now
        let records = (0..<5).map { RetentionConformanceTests.install("u\($0)", at: start - Double(10 - $0) * day) }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: ["a"]) })
        let job = RetentionJob(
            store: store, limits: .init(rawDays: 7, recordsDays: 0), pause: .zero, batchSize: 2, now: { clock.now },
            metrics: .none, logger: Logger(label: "test"))

        // Received 10, 9 and 8 days ago: past 7 days.
        #expect(await job.pass() == (raw: 3, records: 0))
        #expect(try await store.record(id: records[3].recordID)?.raw != nil)
        // Two days on, the next two are old enough, and the first three are not read again.
        clock.advance(2 * day)
        #expect(await job.pass() == (raw: 2, records: 0))
        for record in records { #expect(try await store.record(id: record.recordID)?.raw == nil) }
        #expect(await job.pass() == (raw: 0, records: 0))
    }

    @Test func recordsPastRecordsDaysGoInBatchesAndTheirRawPayloadsWithThem() async throws {
        let clock = TestClock()
        let store = InMemoryStore(now: { clock.now })
        let day: TimeInterval = 86_400
        let records = (0..<5).map { RetentionConformanceTests.install("u\($0)", at: clock.now - Double(50 - $0) * day) }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        let job = RetentionJob(
            store: store, limits: .init(rawDays: 30, recordsDays: 47), pause: .zero, batchSize: 2,
            now: { clock.now }, metrics: .none, logger: Logger(label: "test"))
        // Received 50, 49 and 48 days ago go whole; the other two lose their raw payloads.
        #expect(await job.pass() == (raw: 2, records: 3))
        #expect(try await store.countRecords(matching: ReplayFilter()) == 2)
    }

    @Test func aStoreThatFailsIsTriedAgainAtTheNextPass() async throws {
        let clock = TestClock()
        let store = InMemoryStore(now: { clock.now })
        let old = RetentionConformanceTests.install("u", at: clock.now - 40 * 86_400)
        _ = try await store.ingest([RoutedRecord(record: old, sinks: ["a"])])
        let job = RetentionJob(
            store: store, limits: .init(rawDays: 30, recordsDays: 0), pause: .zero, now: { clock.now },
            metrics: .none, logger: Logger(label: "test"))
        store.setUnavailable(true)
        #expect(await job.pass() == (raw: 0, records: 0))
        store.setUnavailable(false)
        #expect(await job.pass() == (raw: 1, records: 0))
        #expect(try await store.record(id: old.recordID)?.raw == nil)
    }
}
