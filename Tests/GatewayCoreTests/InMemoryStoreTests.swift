import Foundation
import GatewayCore
import Synchronization
import Testing

/// The in-memory store keeps the contract tests rely on it for, as the SQLite store keeps it.
@Suite struct InMemoryStoreTests {
    final class Clock: Sendable {
        let value = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { value.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    let clock = Clock()
    let store: InMemoryStore

    init() {
        let clock = clock
        store = InMemoryStore(now: { clock.now })
    }

    /// An event of one device (app `1`, IDFV `A`), received long before it is stored.
    func event(_ key: String) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "s2s", kind: .event, dedupeKey: key, receivedAt: Date(timeIntervalSince1970: 1_700_000_000))
        record.appID = "1"
        record.idfv = "A"
        return record
    }

    @Test func aRecordAndItsRowsAreStoredAndDue() async throws {
        let record = event("k1")
        let results = try await store.ingest([RoutedRecord(record: record, sinks: ["a", "b"])])
        #expect(results == [.stored(recordID: record.recordID)])
        for sink in ["a", "b"] {
            let due = try await store.dueEntries(sink: sink, now: clock.now, limit: 10)
            #expect(due.map(\.record) == [record])
            // Queued when stored, not when received.
            #expect(due.first?.queuedAt == clock.now)
        }
        #expect(try await store.record(id: record.recordID) == record)
        #expect(try await store.outboxStats()["a"] == OutboxStats(depth: 1, oldest: clock.now))
        let page = try await store.readableRecords(matching: ReplayFilter(), after: 0, limit: 10)
        #expect(page.records.map(\.recordID) == [record.recordID] && page.cursor == 1)
    }

    @Test func aDedupeKeyIsStoredOnce() async throws {
        let first = event("k1")
        _ = try await store.ingest([RoutedRecord(record: first, sinks: ["a"])])
        let results = try await store.ingest([RoutedRecord(record: event("k1"), sinks: ["a"])])
        #expect(results == [.duplicate(of: first.recordID)])
        #expect(try await store.dueEntries(sink: "a", now: clock.now, limit: 10).count == 1)
        // Keys compare by bytes, as in SQLite: an "é" spelt two ways is two keys.
        let (composed, decomposed) = (event("caf\u{E9}"), event("cafe\u{301}"))
        let stored = try await store.ingest([composed, decomposed].map { RoutedRecord(record: $0, sinks: []) })
        #expect(stored == [.stored(recordID: composed.recordID), .stored(recordID: decomposed.recordID)])
    }

    @Test func aRetriedRowIsNotDueBeforeItsTime() async throws {
        _ = try await store.ingest([RoutedRecord(record: event("k1"), sinks: ["a"])])
        let entry = try #require(try await store.dueEntries(sink: "a", now: clock.now, limit: 10).first)
        let later = clock.now.addingTimeInterval(60)
        try await store.resolve(sink: "a", [.retry(id: entry.id, attempts: 1, at: later, error: "503")], now: clock.now)
        #expect(try await store.dueEntries(sink: "a", now: clock.now, limit: 10).isEmpty)
        #expect(try await store.nextDueDate(sink: "a") == later)
        let due = try await store.dueEntries(sink: "a", now: later, limit: 10)
        #expect(due.map(\.id) == [entry.id] && due.first?.attempts == 1)
    }

    @Test func aDevicesLaterRowWaitsBehindItsRetriedHead() async throws {
        let (first, second) = (event("k1"), event("k2"))
        _ = try await store.ingest([first, second].map { RoutedRecord(record: $0, sinks: ["vendor"]) })
        let head = try #require(try await store.dueEntries(sink: "vendor", now: clock.now, limit: 1).first)
        let later = clock.now.addingTimeInterval(60)
        try await store.resolve(
            sink: "vendor", [.retry(id: head.id, attempts: 1, at: later, error: "x")], now: clock.now)
        #expect(try await store.dueEntries(sink: "vendor", now: clock.now, limit: 10, laneOrdered: true).isEmpty)
        let unordered = try await store.dueEntries(sink: "vendor", now: clock.now, limit: 10)
        #expect(unordered.map(\.record.recordID) == [second.recordID])
        #expect(try await store.nextDueDate(sink: "vendor", laneOrdered: true) == later)
    }

    @Test func aDeadLetterIsListedAndRetriedBackToItsOutbox() async throws {
        let record = event("k1")
        _ = try await store.ingest([RoutedRecord(record: record, sinks: ["a"])])
        let entry = try #require(try await store.dueEntries(sink: "a", now: clock.now, limit: 10).first)
        try await store.resolve(sink: "a", [.deadLetter(id: entry.id, attempts: 5, error: "gone")], now: clock.now)
        #expect(try await store.dueEntries(sink: "a", now: clock.now, limit: 10).isEmpty)
        let letters = try await store.deadLetters(sink: nil, limit: 10)
        #expect(letters.map(\.recordID) == [record.recordID] && letters.first?.error == "gone")
        #expect(try await store.deadLetterCounts(ids: nil) == ["a": 1])
        // Another sink's filter leaves it where it is.
        #expect(try await store.retryDeadLetters(ids: nil, sink: "b", now: clock.now) == 0)
        #expect(try await store.retryDeadLetters(ids: nil, sink: "a", now: clock.now) == 1)
        #expect(try await store.deadLetters(sink: nil, limit: 10).isEmpty)
        let due = try await store.dueEntries(sink: "a", now: clock.now, limit: 10)
        #expect(due.map(\.record.recordID) == [record.recordID] && due.first?.attempts == 0)
    }

    @Test func settledPendingWorkBecomesAStoredRecord() async throws {
        let work = PendingWork(
            provider: "adservices", dedupeKey: "token", appID: "1", receivedAt: clock.now, state: Data("s".utf8))
        #expect(try await store.addPending(work, now: clock.now) == .accepted(recordID: work.recordID))
        #expect(try await store.addPending(work, now: clock.now) == .duplicate(of: work.recordID, resolved: false))
        let claim = {
            try await store.claimPending(provider: "adservices", now: clock.now, lease: .seconds(30), limit: 10)
        }
        #expect(try await claim() == [work])
        // Claimed: hidden until the lease ends.
        #expect(try await claim().isEmpty)
        clock.advance(30)
        #expect(try await claim() == [work])

        var record = event("token")
        record.recordID = work.recordID
        let results = try await store.settlePending([
            .finished(recordID: work.recordID, records: [RoutedRecord(record: record, sinks: ["a"])])
        ])
        #expect(results == [work.recordID: [.stored(recordID: work.recordID)]])
        #expect(try await store.isPending(recordID: work.recordID) == false)
        #expect(try await store.pendingCounts().isEmpty)
        #expect(try await store.waitingWork(after: nil, limit: 10).isEmpty)
        #expect(try await store.record(id: work.recordID) == record)
        #expect(try await store.dueEntries(sink: "a", now: clock.now, limit: 10).map(\.record) == [record])
        #expect(try await store.addPending(work, now: clock.now) == .duplicate(of: work.recordID, resolved: true))
    }

    @Test func anUnavailableStoreFailsEveryCall() async throws {
        store.setUnavailable(true)
        await #expect(throws: StoreUnavailable.self) { try await store.ping() }
        await #expect(throws: StoreUnavailable.self) { try await store.ingest([]) }
        store.setUnavailable(false)
        try await store.ping()
    }
}
