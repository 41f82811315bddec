import Foundation
@testable import GatewayCore
import GatewaySinks
import GatewayStorage
import GRDB
import Logging
import Synchronization
import Testing

/// Delivery from a real SQLite store: the sink worker driven one batch at a time with a
/// clock and a random source the test controls (no sleeping, no `run()`), and the SQLite
/// sink's table.
@Suite struct DeliveryTests {
    final class Clock: Sendable {
        let value = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { value.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    struct Fixture {
        let path: String
        let store: SQLiteStore
        let sink: MemorySink
        let clock = Clock()

        init(sinkLimit: Int = 100) throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("delivery-\(UUID()).sqlite").path
            let clock = clock
            store = try SQLiteStore(path: path, durability: .normal, now: { clock.now })
            sink = MemorySink(maxBatchSize: sinkLimit)
        }

        func worker(
            sinkName: String = "memory", sink: (any AttributionSink)? = nil, store: (any OutboxStore)? = nil,
            batchSize: Int = 10, maxAttempts: Int = 3, random: Double = 0,
            logger: Logger = Logger(label: "gateway.delivery")
        ) -> SinkWorker {
            let clock = clock
            return SinkWorker(
                sinkName: sinkName, sink: sink ?? self.sink, store: store ?? self.store,
                settings: DeliverySettings(
                    batchSize: batchSize, maxAttempts: maxAttempts, backoffInitial: .seconds(1),
                    backoffMax: .seconds(10)),
                logger: logger, now: { clock.now }, random: { random })
        }

        /// `count` events of one device (app `1`, IDFV `A`), named `e0`, `e1`, ….
        func deviceEvents(_ count: Int) -> [AttributionRecord] {
            (0..<count).map { index in
                var record = AttributionRecord(
                    provider: "s2s", kind: .event, dedupeKey: "s2s:\(index)", receivedAt: clock.now)
                record.appID = "1"
                record.idfv = "A"
                record.eventName = "e\(index)"
                return record
            }
        }

        /// A worker delivering one record at a time, each device's in order.
        func inDeviceOrderWorker() -> SinkWorker {
            var settings = DeliverySettings(
                batchSize: 1, maxAttempts: 5, backoffInitial: .seconds(1), backoffMax: .seconds(10))
            settings.inDeviceOrder = true
            let clock = clock
            return SinkWorker(
                sinkName: "memory", sink: sink, store: store, settings: settings, now: { clock.now }, random: { 0 })
        }

        func records(_ count: Int, prefix: String = "u") -> [AttributionRecord] {
            (0..<count).map { index in
                var record = AttributionRecord(
                    provider: "iad", kind: .install, dedupeKey: "iad:1:\(prefix)\(index)", receivedAt: clock.now,
                    attributed: index.isMultiple(of: 2))
                record.appID = "1"
                record.appUserID = "\(prefix)\(index)"
                record.campaignID = Int64(index)
                return record
            }
        }

        @discardableResult
        func ingest(_ count: Int, prefix: String = "u", sinks: [String] = ["memory"]) async throws
            -> [AttributionRecord]
        {
            let records = records(count, prefix: prefix)
            let results = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: sinks) })
            #expect(results == records.map { .stored(recordID: $0.recordID) })
            return records
        }

        /// Failed attempts so far of every outbox entry of `sink`, due or not.
        func attempts(sink: String = "memory") async throws -> [Int] {
            try await store.dueEntries(sink: sink, now: .distantFuture, limit: 1000).map(\.attempts)
        }

        func remove() {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
    }

    // MARK: delivery

    @Test func ingestedRecordsAreDeliveredOnceAndLeaveTheOutbox() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(3)
        #expect(try await f.store.outboxStats()["memory"]?.depth == 3)

        let worker = f.worker()
        #expect(try await worker.drainOnce() == 3)
        // The sink got the records as they were ingested, every field intact.
        #expect(f.sink.delivered == records)
        #expect(try await f.store.outboxStats().isEmpty)

        #expect(try await worker.drainOnce() == 0)
        f.clock.advance(3600)
        #expect(try await worker.drainOnce() == 0)
        #expect(f.sink.batches.count == 1)
        #expect(f.sink.delivered.count == 3)
    }

    @Test func deliversInBatchesOfTheConfiguredSizeOldestFirst() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(25)
        let worker = f.worker(batchSize: 10)
        #expect(try await worker.drainOnce() == 10)
        #expect(try await worker.drainOnce() == 10)
        #expect(try await worker.drainOnce() == 5)
        #expect(try await worker.drainOnce() == 0)
        #expect(f.sink.batches.map(\.count) == [10, 10, 5])
        #expect(f.sink.delivered.map(\.recordID) == records.map(\.recordID))
        #expect(try await f.store.outboxStats().isEmpty)
    }

    @Test func theSinksOwnLimitCapsTheBatch() async throws {
        let f = try Fixture(sinkLimit: 4)
        defer { f.remove() }
        try await f.ingest(9)
        let worker = f.worker(batchSize: 100)
        while try await worker.drainOnce() > 0 {}
        #expect(f.sink.batches.map(\.count) == [4, 4, 1])
    }

    @Test func eachSinkHasItsOwnOutbox() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(2, sinks: ["memory", "down"])
        let down = MemorySink()
        down.failNextBatches(1)

        #expect(try await f.worker(sinkName: "down", sink: down).drainOnce() == 2)
        #expect(try await f.worker().drainOnce() == 2)
        #expect(f.sink.delivered.map(\.recordID) == records.map(\.recordID))
        #expect(down.delivered.isEmpty)
        #expect(try await f.store.outboxStats() == ["down": OutboxStats(depth: 2, oldest: f.clock.now)])
    }

    // MARK: retries

    @Test func aFailedBatchIsRetriedAfterTheBackoffWithItsAttemptsCounted() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(2)
        let worker = f.worker(maxAttempts: 5, random: 0.5)
        f.sink.failNextBatches(2)
        let start = f.clock.now

        // First failure: 1 s × (½ + ½ × 0.5) = 0.75 s.
        #expect(try await worker.drainOnce() == 2)
        #expect(try await f.attempts() == [1, 1])
        #expect(try await f.store.nextDueDate(sink: "memory") == start.addingTimeInterval(0.75))
        #expect(try await f.store.dueEntries(sink: "memory", now: start.addingTimeInterval(0.74), limit: 10).isEmpty)
        #expect(try await worker.drainOnce() == 0)
        let error = try await f.store.pool.read { db in
            try String.fetchOne(db, sql: "SELECT last_error FROM outbox WHERE sink = 'memory' LIMIT 1")
        }
        #expect(error?.contains("Unreachable") == true)

        // Second failure, 0.75 s later: 2 s × 0.75 = 1.5 s from then.
        f.clock.advance(0.75)
        #expect(try await worker.drainOnce() == 2)
        #expect(try await f.attempts() == [2, 2])
        #expect(try await f.store.nextDueDate(sink: "memory") == f.clock.now.addingTimeInterval(1.5))

        f.clock.advance(1.5)
        #expect(try await worker.drainOnce() == 2)
        #expect(f.sink.delivered.count == 2)
        #expect(try await f.store.outboxStats().isEmpty)
        #expect(try await f.store.deadLetters(sink: nil, limit: 10).isEmpty)
    }

    @Test func inDeviceOrderAWaitingRecordHoldsBackOnlyItsOwnDevice() async throws {
        let f = try Fixture()
        defer { f.remove() }
        // Device A: a session, then two events; device B: one event. Stored in that order.
        var records: [AttributionRecord] = []
        for (index, device) in ["A", "A", "B", "A"].enumerated() {
            var record = AttributionRecord(
                provider: "s2s", kind: index == 0 ? .session : .event, dedupeKey: "s2s:\(index)",
                receivedAt: f.clock.now)
            record.appID = "1"
            record.idfv = device
            record.eventName = "e\(index)"
            records.append(record)
        }
        _ = try await f.store.ingest(records.map { RoutedRecord(record: $0, sinks: ["memory"]) })
        // A's session fails once; everything else would go through at once.
        let failedOnce = Mutex(false)
        f.sink.addRule { record in
            guard record.eventName == "e0",
                !failedOnce.withLock({
                    let was = $0; $0 = true; return was
                })
            else { return nil }
            return .retry(reason: "503")
        }
        let clock = f.clock
        var settings = DeliverySettings(
            batchSize: 10, maxAttempts: 5, backoffInitial: .seconds(1), backoffMax: .seconds(10))
        settings.inDeviceOrder = true
        let worker = SinkWorker(
            sinkName: "memory", sink: f.sink, store: f.store, settings: settings, now: { clock.now }, random: { 0 })

        // One row per device is due: A's session (fails) and B's event (delivered).
        #expect(try await worker.drainOnce() == 2)
        #expect(f.sink.delivered.map(\.eventName) == ["e2"])
        // A's events wait for the session even though they were never tried.
        #expect(try await worker.drainOnce() == 0)
        #expect(try await f.store.nextDueDate(sink: "memory", laneOrdered: true) == clock.now.addingTimeInterval(0.5))
        // The rows behind the session wait until its retry too, so a blocked device's
        // queue is not even due (not scanned on every wake).
        #expect(try await f.store.nextDueDate(sink: "memory", laneOrdered: false) == clock.now.addingTimeInterval(0.5))
        f.clock.advance(0.5)
        while try await worker.drainOnce() > 0 {}
        #expect(f.sink.delivered.map(\.eventName) == ["e2", "e0", "e1", "e3"])
        #expect(try await f.attempts().isEmpty)
    }

    @Test func aLateVersionKeepsItsPlaceAndRequeuedRowsKeepTheirDevice() async throws {
        let f = try Fixture()
        defer { f.remove() }
        func record(_ name: String, _ offset: TimeInterval) -> AttributionRecord {
            var record = AttributionRecord(
                provider: "adservices", kind: .install, dedupeKey: "k:\(name)",
                receivedAt: f.clock.now.addingTimeInterval(offset))
            record.appID = "1"
            record.idfv = "A"
            record.eventName = name
            return record
        }
        let first = record("first", 0)
        _ = try await f.store.ingest([RoutedRecord(record: first, sinks: ["memory"])])
        _ = try await f.store.ingest([RoutedRecord(record: record("second", 1), sinks: ["memory"])])
        // Names arrive late for the first: its new row must still go before the second.
        var named = first
        named.keyword = "calm"
        _ = try await f.store.replaceRecords(
            [RoutedRecord(record: named, sinks: ["memory"])], now: f.clock.now.addingTimeInterval(5))
        let due = try await f.store.dueEntries(sink: "memory", now: .distantFuture, limit: 10, laneOrdered: true)
        #expect(due.map(\.record.eventName) == ["first"])
        #expect(due.first?.record.keyword == "calm")

        // Dead-lettered, then retried: the row comes back with its device.
        try await f.store.resolve(
            sink: "memory", [.deadLetter(id: due[0].id, attempts: 1, error: "x")], now: f.clock.now)
        _ = try await f.store.retryDeadLetters(ids: nil, sink: "memory", now: f.clock.now.addingTimeInterval(10))
        _ = try await f.store.enqueue(recordIDs: [first.recordID], sink: "replay", now: f.clock.now)
        let lanes = try await f.store.pool.read { db in
            try String?.fetchAll(db, sql: "SELECT lane FROM outbox ORDER BY id")
        }
        #expect(lanes == ["1|A", "1|A", "1|A"])
    }

    @Test func aLateVersionKeepsItsPlaceAmongRecordsQueuedAtTheSameMoment() async throws {
        let f = try Fixture()
        defer { f.remove() }
        // One payload of three events for one device: one commit, one queueing time.
        let events = f.deviceEvents(3)
        _ = try await f.store.ingest(events.map { RoutedRecord(record: $0, sinks: ["memory"]) })
        var named = events[0]
        named.keyword = "calm"
        _ = try await f.store.replaceRecords([RoutedRecord(record: named, sinks: ["memory"])], now: f.clock.now)

        let worker = f.inDeviceOrderWorker()
        while try await worker.drainOnce() > 0 {}
        #expect(f.sink.delivered.map(\.eventName) == ["e0", "e1", "e2"])
        #expect(f.sink.delivered.first?.keyword == "calm")
    }

    /// A sink holding something outside the process (an exec plugin) is told when its
    /// worker stops, so that it can let go of it.
    @Test func aStoppedWorkerShutsItsSinkDown() async throws {
        final class Recording: AttributionSink, Sendable {
            let maxBatchSize = 10
            let stopped = Mutex(false)
            func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
                records.map { _ in .delivered }
            }
            func shutdown() async { stopped.withLock { $0 = true } }
        }
        let f = try Fixture()
        defer { f.remove() }
        let sink = Recording()
        let worker = f.worker(sink: sink)
        let running = Task { try await worker.run() }
        running.cancel()
        try await running.value
        #expect(sink.stopped.withLock { $0 })
    }

    /// A device's events go in the order they were queued, whatever the wall clock did
    /// meanwhile: stepped back 30 s between them, the later one still goes second.
    @Test func aLaneKeepsItsQueueOrderWhenTheClockStepsBack() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let events = f.deviceEvents(2)
        _ = try await f.store.ingest([RoutedRecord(record: events[0], sinks: ["memory"])])
        _ = try await f.store.ingest([RoutedRecord(record: events[1], sinks: ["memory"])])
        try await f.store.pool.write { db in
            try db.execute(
                sql: "UPDATE outbox SET created_at = created_at - 30 WHERE record_id = ?",
                arguments: [events[1].recordID])
        }
        let worker = f.inDeviceOrderWorker()
        while try await worker.drainOnce() > 0 {}
        #expect(f.sink.delivered.map(\.eventName) == ["e0", "e1"])
    }

    /// As if written by a version whose bodies this one no longer reads, or damaged: bytes
    /// that are not UTF-8, a number (read as text, either stopped the process, at every
    /// start).
    @Test(arguments: [#"'{"kind":"nonsense"}'"#, "x'ff00'", "42"])
    func aStoredRecordThatCannotBeReadIsDeadLetteredAndTheRestDelivered(body: String) async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(3)
        try await f.store.pool.write { db in
            try db.execute(
                sql: "UPDATE records SET body = \(body) WHERE record_id = ?", arguments: [records[1].recordID])
        }
        await #expect(throws: (any Error).self) { _ = try await f.store.record(id: records[1].recordID) }
        #expect(try await f.worker().drainOnce() == 3)
        #expect(f.sink.delivered.map(\.recordID) == [records[0].recordID, records[2].recordID])
        let dead = try await f.store.deadLetters(sink: "memory", limit: 10)
        #expect(dead.map(\.recordID) == [records[1].recordID])
        #expect(dead.first?.error.contains("cannot be read") == true)
        #expect(try await f.attempts().isEmpty)
    }

    /// The sink took the batch, then the store could not record that (a full disk, a lock
    /// held): the same batch went to the sink again at every poll for the whole outage.
    /// Its answers are kept and written first; nothing is offered meanwhile.
    @Test func answersTheStoreCouldNotTakeAreWrittenBeforeTheBatchIsOfferedAgain() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(3)
        try await f.store.pool.write { db in
            try db.execute(
                sql:
                    "CREATE TRIGGER refuse BEFORE DELETE ON outbox BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
            )
        }
        let worker = f.worker()
        for _ in 0..<3 {
            await #expect(throws: (any Error).self) { try await worker.drainOnce() }
        }
        #expect(f.sink.delivered.map(\.recordID) == records.map(\.recordID))
        try await f.store.pool.write { db in try db.execute(sql: "DROP TRIGGER refuse") }
        // The answers are written, nothing more is offered, and the outbox is empty.
        while try await worker.drainOnce() > 0 {}
        #expect(f.sink.delivered.map(\.recordID) == records.map(\.recordID))
        #expect(try await f.attempts().isEmpty)
    }

    @Test func aSinksRetryAfterIsAFloorOnTheBackoff() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(2)
        f.sink.addRule { record in
            record.appUserID == "u0"
                ? .retry(reason: "429", after: .seconds(30)) : .retry(reason: "503", after: .milliseconds(100))
        }
        #expect(try await f.worker(maxAttempts: 5).drainOnce() == 2)
        let due = try await f.store.dueEntries(sink: "memory", now: .distantFuture, limit: 10)
        let dueAt = try await f.store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT record_id, next_attempt_at FROM outbox").reduce(into: [String: Double]())
            {
                $0[$1["record_id"]] = $1["next_attempt_at"]
            }
        }
        let byUser = Dictionary(uniqueKeysWithValues: due.map { ($0.record.appUserID ?? "", $0.record.recordID) })
        let now = f.clock.now.timeIntervalSince1970
        // Longer than the backoff: honoured. Shorter: the backoff (0.5 s at random 0) wins.
        #expect(dueAt[byUser["u0"] ?? ""] == now + 30)
        #expect(dueAt[byUser["u1"] ?? ""] == now + 0.5)
        #expect(due.allSatisfy { $0.attempts == 1 })
    }

    @Test func aRetryAfterPastAnyClockWaitsADayAndStopsNothing() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(1)
        // As a receiver answered it: before, the schedule's milliseconds overflowed and the
        // process stopped, again at every start, since the record was offered again.
        let huge = try #require(RetryAfter.parse("10000000000000000"))
        #expect(huge == RetryAfter.longest)
        #expect(RetryAfter.parse("99999999999999999999999") == RetryAfter.longest)
        #expect(RetryAfter.parse("Fri, 31 Dec 9999 23:59:59 GMT") == RetryAfter.longest)
        #expect(RetryAfter.parse(" 7 ") == .seconds(7))
        #expect(RetryAfter.parse("-1") == nil && RetryAfter.parse("soon") == nil)
        f.sink.addRule { _ in .retry(reason: "503", after: huge) }
        #expect(try await f.worker(maxAttempts: 5).drainOnce() == 1)
        let dueAt = try await f.store.pool.read { db in
            try Double.fetchOne(db, sql: "SELECT next_attempt_at FROM outbox")
        }
        #expect(dueAt == f.clock.now.timeIntervalSince1970 + 86_400)
    }

    /// Waits until shutdown cuts the batch short, then answers: by default the first record
    /// delivered and `retry` for the rest, as the exec sink does with what its plugin
    /// acknowledged.
    final class PartlyAnswering: AttributionSink, Sendable {
        let maxBatchSize = 10
        let started = Mutex(false)
        let answers: @Sendable (Int) -> [DeliveryOutcome]

        init(
            answers: @escaping @Sendable (Int) -> [DeliveryOutcome] = { count in
                [.delivered] + Array(repeating: .retry(reason: "cut short"), count: count - 1)
            }
        ) {
            self.answers = answers
        }

        func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
            started.withLock { $0 = true }
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
            return answers(records.count)
        }
    }

    @Test func aBatchShutdownCutsShortAfterPartialAnswersKeepsThemAndCountsNoAttempt() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(3)
        let sink = PartlyAnswering()
        let worker = f.worker(sink: sink)
        let drain = Task { try await worker.drainOnce() }
        try #require(try await eventually { sink.started.withLock { $0 } })
        drain.cancel()
        _ = try await drain.value
        let rows = try f.store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT record_id, attempts, next_attempt_at FROM outbox ORDER BY id")
        }
        // The first is delivered; the others wait as they were, due now, no attempt counted.
        #expect(rows.map { $0["record_id"] as String } == records.dropFirst().map(\.recordID))
        #expect(rows.allSatisfy { ($0["attempts"] as Int) == 0 })
        #expect(rows.allSatisfy { ($0["next_attempt_at"] as Double) <= f.clock.now.timeIntervalSince1970 })
    }

    /// A destination that quotes what it was sent in its refusal (a vendor's 400 echoing
    /// the event): the record's ids do not reach the dead letter, nor the log line.
    @Test func aRefusalThatQuotesTheRecordKeepsNoneOfItsIds() async throws {
        struct Echoing: AttributionSink {
            let maxBatchSize = 10
            func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
                records.map { record in
                    .reject(
                        reason: #"Bad request: {"customer_user_id":"\#(record.appUserID ?? "")","ip":"198.51.100.20"}"#)
                }
            }
        }
        let f = try Fixture()
        defer { f.remove() }
        var record = f.records(1, prefix: "alice@example.com-")[0]
        record.raw = .object(["ip": .string("198.51.100.20")])
        _ = try await f.store.ingest([RoutedRecord(record: record, sinks: ["memory"])])
        _ = try await f.worker(sink: Echoing()).drainOnce()
        let letter = try #require(try await f.store.deadLetters(sink: "memory", limit: 10).first)
        #expect(letter.error == #"Bad request: {"customer_user_id":"<user id>","ip":"<user id>"}"#, "\(letter.error)")
    }

    /// The fixture's store, noting the calls a worker makes that write what it decided.
    final class NotingStore: OutboxStore {
        let inner: SQLiteStore
        /// `resolve` and `unclaim` calls in order, each with the outbox ids it named.
        let calls = Mutex<[(name: String, ids: [Int64])]>([])
        /// Whether `unclaim` waits, as a statement the database never answers would, until
        /// `released`, whatever cancels it.
        let holdsUnclaim: Bool
        let released = Mutex(false)

        init(_ inner: SQLiteStore, holdsUnclaim: Bool = false) {
            self.inner = inner
            self.holdsUnclaim = holdsUnclaim
        }

        func dueEntries(sink: String, now: Date, limit: Int, laneOrdered: Bool) async throws -> [OutboxEntry] {
            try await inner.dueEntries(sink: sink, now: now, limit: limit, laneOrdered: laneOrdered)
        }
        func nextDueDate(sink: String, laneOrdered: Bool) async throws -> Date? {
            try await inner.nextDueDate(sink: sink, laneOrdered: laneOrdered)
        }
        func resolve(sink: String, _ resolutions: [OutboxResolution], now: Date) async throws {
            let ids = resolutions.map { resolution -> Int64 in
                switch resolution {
                case .delivered(let id), .retry(let id, _, _, _), .deadLetter(let id, _, _): id
                }
            }
            calls.withLock { $0.append(("resolve", ids)) }
            try await inner.resolve(sink: sink, resolutions, now: now)
        }
        func unclaim(sink: String, _ entries: [OutboxEntry]) async throws {
            calls.withLock { $0.append(("unclaim", entries.map(\.id))) }
            while holdsUnclaim && !released.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(10)) }
            try await inner.unclaim(sink: sink, entries)
        }
        func markSending(id: Int64, now: Date) async throws { try await inner.markSending(id: id, now: now) }
        func holdLanes(sink: String, behind heads: [(id: Int64, until: Date)]) async throws {
            try await inner.holdLanes(sink: sink, behind: heads)
        }
        func outboxStats() async throws -> [String: OutboxStats] { try await inner.outboxStats() }
        func enqueue(recordIDs: [String], sink: String, now: Date) async throws -> Int {
            try await inner.enqueue(recordIDs: recordIDs, sink: sink, now: now)
        }
    }

    /// A stop gives the other replicas, after the answers are written, only the records no
    /// one asked to wait: one the destination or the circuit asked to wait keeps its lease.
    @Test func aBatchCutShortGivesBackAfterItsAnswersOnlyWhatNoOneAskedToWait() async throws {
        let f = try Fixture()
        defer { f.remove() }
        _ = try await f.ingest(4)
        let store = NotingStore(f.store)
        // Delivered, retried for want of time, retried after the destination's
        // `Retry-After`, held back by the sink's open circuit.
        let sink = PartlyAnswering { _ in
            [
                .delivered, .retry(reason: "cut short"), .retry(reason: "503", after: .seconds(30)),
                .postponed(reason: "circuit open", after: .seconds(30)),
            ]
        }
        let worker = f.worker(sink: sink, store: store)
        let ids = try await f.store.dueEntries(sink: "memory", now: f.clock.now, limit: 10).map(\.id)
        let drain = Task { try await worker.drainOnce() }
        try #require(try await eventually { sink.started.withLock { $0 } })
        drain.cancel()
        _ = try await drain.value
        let calls = store.calls.withLock { $0 }
        #expect(calls.map(\.name) == ["resolve", "unclaim"])
        #expect(calls.first?.ids == [ids[0]])
        #expect(calls.last?.ids == [ids[1]])
    }

    /// A store that does not take the give-back holds the stop only for the give-back's
    /// limit, not for the store's own timeout: the batch then waits for its lease.
    @Test func aGiveBackTheStoreDoesNotTakeHoldsTheStopOnlyForItsLimit() async throws {
        let f = try Fixture()
        defer { f.remove() }
        _ = try await f.ingest(2)
        let store = NotingStore(f.store, holdsUnclaim: true)
        let sink = PartlyAnswering()
        let worker = f.worker(sink: sink, store: store)
        let drain = Task { try await worker.drainOnce() }
        try #require(try await eventually { sink.started.withLock { $0 } })
        drain.cancel()
        // Bounded far past the limit: a stop that waits for the store fails, not hangs.
        let stopped = try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask { try await drain.value }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                store.released.withLock { $0 = true }
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        #expect(stopped == 2, "the stop waited for the give-back")
        #expect(store.calls.withLock { $0.map(\.name) } == ["resolve", "unclaim"])
    }

    /// A destination that counts every copy, sent to one record at a time: the first is
    /// answered, the second hangs (the gateway about to be killed), the rest wait.
    final class OneByOneThenHanging: AttributionSink {
        let maxBatchSize = 100
        var countsEveryCopy: Bool { true }
        let sent = Mutex<[String]>([])
        let hangs: Bool
        init(hangs: Bool) { self.hangs = hangs }
        func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
            try await deliver(records, progress: .none)
        }
        func deliver(_ records: [AttributionRecord], progress: DeliveryProgress) async throws -> [DeliveryOutcome] {
            var outcomes: [DeliveryOutcome] = []
            for (index, record) in records.enumerated() {
                try await progress.sending(index)
                sent.withLock { $0.append(record.recordID) }
                if hangs, sent.withLock({ $0.count }) == 2 { try await Task.sleep(for: .seconds(3600)) }
                await progress.answered(index, .delivered)
                outcomes.append(.delivered)
            }
            return outcomes
        }
        func interruptedSend(of record: AttributionRecord) -> DeliveryOutcome {
            .reject(reason: "may have counted it")
        }
    }

    /// A vendor's answers are written as they come, not when its whole batch ends, so that
    /// a crash mid-batch does not send again every event the vendor already answered and
    /// counted.
    @Test func aSinkCountingEveryCopyHasEachAnswerWrittenAsItComesAndNothingSentTwiceAfterACrash() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(3)
        let sink = OneByOneThenHanging(hangs: true)
        let drain = Task { try await f.worker(sink: sink).drainOnce() }
        try #require(try await eventually { sink.sent.withLock { $0.count } >= 2 })
        // While the second hangs, the first's answer is already on disk, and the second is
        // marked as being sent.
        let rows = try f.store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT record_id, sending_since FROM outbox ORDER BY id")
        }
        #expect(rows.map { $0["record_id"] as String } == records.dropFirst().map(\.recordID))
        #expect(rows.map { ($0["sending_since"] as Double?) != nil } == [true, false])
        // The process dies here: a cancelled batch writes nothing more. The next start
        // sends the third only, and the second goes where the sink says.
        drain.cancel()
        _ = try? await drain.value
        let restarted = OneByOneThenHanging(hangs: false)
        try await f.worker(sink: restarted).drainOnce()
        #expect(restarted.sent.withLock { $0 } == [records[2].recordID])
        let letters = try await f.store.deadLetters(sink: "memory", limit: 10)
        #expect(letters.map(\.recordID) == [records[1].recordID])
        #expect(letters.first?.error == "may have counted it")
        #expect(try await f.attempts().isEmpty)
    }

    /// A destination answering the record in flight when the shutdown came (a vendor's
    /// `503` after the signal).
    final class AnsweringAfterTheSignal: AttributionSink {
        let maxBatchSize = 100
        var countsEveryCopy: Bool { true }
        let sending = Mutex(false)
        func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
            try await deliver(records, progress: .none)
        }
        func deliver(_ records: [AttributionRecord], progress: DeliveryProgress) async throws -> [DeliveryOutcome] {
            try await progress.sending(0)
            sending.withLock { $0 = true }
            try? await Task.sleep(for: .seconds(3600))  // the answer comes after the signal
            let refused = DeliveryOutcome.retry(reason: "answered 503", after: .zero)
            await progress.answered(0, refused)
            return [refused]
                + Array(repeating: .retry(reason: "not sent: the gateway is stopping"), count: records.count - 1)
        }
    }

    /// An answer that comes after the shutdown's signal is written all the same: cancelled
    /// with the worker, the write would leave the row its mark, and the restart would
    /// dead-letter a `503` as "may have counted it".
    @Test func anAnswerThatComesAfterTheShutdownSignalIsWritten() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(2)
        let sink = AnsweringAfterTheSignal()
        let drain = Task { try await f.worker(sink: sink).drainOnce() }
        try #require(try await eventually { sink.sending.withLock { $0 } })
        drain.cancel()
        _ = try? await drain.value
        let rows = try f.store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT record_id, attempts, sending_since FROM outbox ORDER BY id")
        }
        #expect(rows.map { $0["record_id"] as String } == records.map(\.recordID))
        #expect(
            rows.map { ($0["sending_since"] as Double?) == nil } == [true, true], "the answer is known: no mark left")
        #expect(rows.map { $0["attempts"] as Int } == [1, 0])
    }

    @Test func afterMaxAttemptsARecordMovesToTheDeadLetters() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(2)
        let worker = f.worker(maxAttempts: 3)
        f.sink.failNextBatches(10)

        #expect(try await worker.drainOnce() == 2)
        f.clock.advance(0.5)
        #expect(try await worker.drainOnce() == 2)
        f.clock.advance(1)
        #expect(try await worker.drainOnce() == 2)

        #expect(try await f.store.outboxStats().isEmpty)
        #expect(try await f.store.nextDueDate(sink: "memory") == nil)
        let letters = try await f.store.deadLetters(sink: "memory", limit: 10)
        #expect(Set(letters.map(\.recordID)) == Set(records.map(\.recordID)))
        #expect(letters.allSatisfy { $0.sink == "memory" && $0.attempts == 3 && $0.error.contains("Unreachable") })
        #expect(letters.allSatisfy { $0.failedAt == f.clock.now })
        #expect(f.sink.delivered.isEmpty)
        #expect(try await f.store.deadLetters(sink: "other", limit: 10).isEmpty)

        // Nothing more is offered while they sit there.
        f.clock.advance(3600)
        #expect(try await worker.drainOnce() == 0)
    }

    @Test func aSinkThatDidNotTryCountsNoAttemptAndWaitsTheTimeItNamed() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(1)
        // A webhook's open circuit: before, each of its answers counted an attempt, so that
        // with `max_attempts: 3` a record was dead-lettered by three skips it never saw.
        f.sink.addRule { _ in .postponed(reason: "circuit open after repeated failures", after: .seconds(30)) }
        let worker = f.worker(maxAttempts: 3)
        for _ in 0..<5 {
            #expect(try await worker.drainOnce() == 1)
            let dueAt = try await f.store.pool.read { db in
                try Double.fetchOne(db, sql: "SELECT next_attempt_at FROM outbox")
            }
            #expect(dueAt == f.clock.now.timeIntervalSince1970 + 30)
            #expect(try await worker.drainOnce() == 0)
            f.clock.advance(30)
        }
        #expect(try await f.attempts() == [0])
        #expect(try await f.store.deadLetters(sink: "memory", limit: 10).isEmpty)
        // Until then the worker takes no batch: taking them, it rewrote the whole outbox
        // once per cool-down for a dead receiver.
        #expect(worker.postponedUntil.withLock { $0 } == f.clock.now)
        f.sink.removeRules()
        f.clock.advance(30)
        #expect(try await worker.drainOnce() == 1)
        #expect(worker.postponedUntil.withLock { $0 } == nil)
    }

    @Test func aRejectedRecordIsDeadLetteredAtOnceWhileItsBatchIsDelivered() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(3)
        f.sink.addRule { $0.appUserID == "u1" ? .reject(reason: "malformed") : nil }
        #expect(try await f.worker(maxAttempts: 10).drainOnce() == 3)
        #expect(f.sink.delivered.map(\.appUserID) == ["u0", "u2"])
        let letters = try await f.store.deadLetters(sink: "memory", limit: 10)
        #expect(letters.map(\.recordID) == [records[1].recordID])
        #expect(letters.first?.error == "malformed")
        #expect(letters.first?.attempts == 1)
        #expect(try await f.store.outboxStats().isEmpty)
    }

    @Test func aSinkThatKeepsFailingIsLoggedOnceAMinuteNotPerBatch() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(3)
        let log = CapturedLog()
        let worker = f.worker(batchSize: 1, maxAttempts: 100, logger: log.logger)
        f.sink.failNextBatches(3)
        for _ in 0..<3 { #expect(try await worker.drainOnce() == 1) }
        #expect(log.messages.filter { $0 == "delivery incomplete" }.count == 1)
    }

    /// A sink failing whole batches (its destination down, its disk full) with a backlog:
    /// taking the next batch at once would fail the whole backlog through at full speed.
    /// Two batches it failed whole (threw) in a row pause
    /// the worker until the first record is due again; one alone (a record a plugin
    /// crashes on) does not.
    @Test func twoBatchesFailedWholeInARowPauseTheWorkerUntilTheFirstRecordIsDue() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(8)
        let worker = f.worker(batchSize: 2)
        f.sink.failNextBatches(1)
        #expect(try await worker.drainOnce() == 2)
        #expect(worker.postponedUntil.withLock { $0 } == nil, "one batch alone may be one bad record")
        #expect(try await worker.drainOnce() == 2)
        f.sink.failNextBatches(2)
        #expect(try await worker.drainOnce() == 2)
        #expect(worker.postponedUntil.withLock { $0 } == nil)
        #expect(try await worker.drainOnce() == 2)
        // Backoff of a first attempt at random 0: half the initial second.
        #expect(worker.postponedUntil.withLock { $0 } == f.clock.now.addingTimeInterval(0.5))
        // A batch the sink took in part ends the pause.
        f.clock.advance(1)
        f.sink.addRule { $0.appUserID == "u0" ? .retry(reason: "answered 503") : nil }
        #expect(try await worker.drainOnce() == 2)
        #expect(worker.postponedUntil.withLock { $0 } == nil)
    }

    /// A destination that asks every record of a batch to wait (Mixpanel's `429` with
    /// `Retry-After`) is throttling the sink, not refusing records: with a backlog, each
    /// next batch was sent at once only to get the same `429`.
    @Test func aBatchTheDestinationAsksToWaitWholePausesTheWorkerForThatWait() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(6)
        let worker = f.worker(batchSize: 2, random: 0.5)
        // One of the batch declined by the sink itself (no user to send) asked nothing.
        f.sink.addRule {
            $0.appUserID == "u1"
                ? .declined(reason: "no real user id") : .retry(reason: "answered 429", after: .seconds(7))
        }
        #expect(try await worker.drainOnce() == 2)
        #expect(worker.postponedUntil.withLock { $0 } == f.clock.now.addingTimeInterval(7))
        f.sink.removeRules()
        // A wait asked for one record alone is that record's.
        f.clock.advance(7)
        f.sink.addRule { $0.appUserID == "u2" ? .retry(reason: "answered 429", after: .seconds(7)) : nil }
        #expect(try await worker.drainOnce() == 2)
        #expect(f.sink.delivered.count == 1, "the batch held u2 and one other")
        #expect(worker.postponedUntil.withLock { $0 } == nil)
    }

    /// Mixpanel and AppsFlyer promise no `Retry-After` with a `429` or `5xx`, and without
    /// one the worker would take each next batch at once. A batch refused whole, with a
    /// wait or not, pauses the worker, and
    /// its records come due again together, as one batch.
    @Test func aBatchRefusedWholeWithoutAWaitPausesTheWorkerAndComesBackAsOneBatch() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(6)
        // Each draw another: drawn per record, the batch's retries would fall apart.
        let draws = Mutex([0.9, 0.1, 0.5])
        let clock = f.clock
        let worker = SinkWorker(
            sinkName: "memory", sink: f.sink, store: f.store,
            settings: DeliverySettings(
                batchSize: 3, maxAttempts: 5, backoffInitial: .seconds(1), backoffMax: .seconds(10)),
            now: { clock.now }, random: { draws.withLock { $0.isEmpty ? 0 : $0.removeFirst() } })
        f.sink.addRule { _ in .retry(reason: "answered 429", after: .zero) }
        #expect(try await worker.drainOnce() == 3)
        let paused = try #require(worker.postponedUntil.withLock { $0 })
        #expect(paused > f.clock.now)
        let due = try await f.store.pool.read { db in
            try Double.fetchAll(db, sql: "SELECT next_attempt_at FROM outbox WHERE attempts = 1")
        }
        #expect(due.count == 3 && Set(due).count == 1, "\(due)")
        #expect(Date(timeIntervalSince1970: due[0]) == paused)
    }

    /// A pause only until each batch's own first retry would have a backlog the destination
    /// keeps refusing ask a throttled vendor again and again, with fresh records each time.
    /// Throttled batches in a row wait longer each time.
    @Test func throttledBatchesInARowPauseTheWorkerLongerEachTime() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(6)
        let worker = f.worker(batchSize: 2, maxAttempts: 10, random: 0.5)
        f.sink.addRule { _ in .retry(reason: "answered 429", after: .zero) }
        var pauses: [TimeInterval] = []
        for _ in 0..<3 {
            #expect(try await worker.drainOnce() == 2)
            let until = try #require(worker.postponedUntil.withLock { $0 })
            pauses.append(until.timeIntervalSince(f.clock.now))
            f.clock.advance(until.timeIntervalSince(f.clock.now))
        }
        #expect(pauses[1] > pauses[0] && pauses[2] > pauses[1], "\(pauses)")
    }

    /// The pause is at most half a minute, not the refused records' backoff, towards an
    /// hour, which would make every new event wait with it; and one record the destination
    /// chokes on, due alone, does not pause the worker as if the destination refused
    /// everything.
    @Test func aThrottlePausesAtMostHalfAMinuteAndARecordRefusedAgainAlonePausesNothing() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(1)
        let clock = f.clock
        let worker = SinkWorker(
            sinkName: "memory", sink: f.sink, store: f.store,
            settings: DeliverySettings(
                batchSize: 10, maxAttempts: 100, backoffInitial: .seconds(600), backoffMax: .seconds(3600)),
            now: { clock.now }, random: { 0.5 })
        f.sink.addRule { _ in .retry(reason: "answered 500", after: .zero) }
        #expect(try await worker.drainOnce() == 1)
        let paused = try #require(worker.postponedUntil.withLock { $0 })
        #expect(paused.timeIntervalSince(f.clock.now) <= 30)
        // Its retry, alone, refused again: that record's, not the destination's.
        f.clock.advance(3600)
        #expect(try await worker.drainOnce() == 1)
        #expect(worker.postponedUntil.withLock { $0 } == nil)
    }

    /// After a restart during an outage, every record of the backlog has been tried before,
    /// and a batch of them refused whole must still pause the worker, not send the backlog
    /// as refused batch after refused batch. Many refused at once are the destination's
    /// refusal, however often each was tried.
    @Test func aBacklogTriedBeforeAndRefusedWholeAfterARestartPausesTheWorker() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(6)
        f.sink.addRule { _ in .retry(reason: "answered 503", after: .zero) }
        let before = f.worker(batchSize: 6, maxAttempts: 10, random: 0.5)
        #expect(try await before.drainOnce() == 6)
        #expect(try await f.attempts() == Array(repeating: 1, count: 6))
        f.clock.advance(3600)
        // A new worker, as after a restart: nothing in memory of the throttle before.
        let after = f.worker(batchSize: 2, maxAttempts: 10, random: 0.5)
        #expect(try await after.drainOnce() == 2)
        let paused = try #require(after.postponedUntil.withLock { $0 })
        #expect(paused > f.clock.now, "the next batch of the backlog waits for the pause")
    }

    /// Records retried one by one (devices Adjust has not learned yet), however many and
    /// in however full batches, are no sink down: other devices' records go out at once
    /// rather than at those records' next retry, up to an hour away.
    @Test func recordsRetriedOneByOneNeverPauseTheWorker() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(6)
        for batchSize in [1, 2] {
            let worker = f.worker(batchSize: batchSize)
            f.sink.addRule { _ in .retry(reason: "404 Device not found") }
            for _ in 0..<3 {
                #expect(try await worker.drainOnce() == batchSize)
                #expect(worker.postponedUntil.withLock { $0 } == nil, "batch size \(batchSize)")
            }
            f.sink.removeRules()
            f.clock.advance(3600)
        }
    }

    /// A poison record after a retried batch: the retry's minute of silence must not hide
    /// it; each dead letter's line names its record and the reason.
    @Test func aDeadLetterIsLoggedEvenWithinTheRetriesMinute() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(2)
        let log = CapturedLog()
        let worker = f.worker(batchSize: 1, maxAttempts: 100, logger: log.logger)
        f.sink.addRule {
            $0.appUserID == "u0" ? .retry(reason: "answered 503") : .reject(reason: "answered 400: bad field")
        }
        for _ in 0..<2 { #expect(try await worker.drainOnce() == 1) }
        #expect(log.messages.filter { $0 == "delivery incomplete" }.count == 1, "\(log.messages)")
        let dead = log.entries.withLock { $0.filter { $0.message == "records moved to the dead letters" } }
        #expect(dead.count == 1, "\(log.messages)")
        #expect(dead.first?.metadata["record_id"] == .string(records[1].recordID))
        #expect(dead.first?.metadata["error"] == .string("answered 400: bad field"))
    }

    /// Dead letters held back by the once-a-second limit, with none after them, are told
    /// at a later poll: before, they were never logged.
    @Test func deadLettersHeldBackByTheLimitAreLoggedAtALaterPoll() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(3)
        let log = CapturedLog()
        let worker = f.worker(batchSize: 1, maxAttempts: 100, logger: log.logger)
        f.sink.addRule { _ in .reject(reason: "answered 400") }
        for _ in 0..<3 { #expect(try await worker.drainOnce() == 1) }
        // The limit's second passes. On a slower machine a later dead letter's own line
        // came after it, and counted the ones held back in `similar_failures_not_logged`.
        try await Task.sleep(for: .milliseconds(1100))
        #expect(try await worker.drainOnce() == 0)
        let told = log.entries.withLock { entries in
            entries.filter { $0.message == "records moved to the dead letters" }.map { entry -> Int in
                ["dead_letter", "similar_failures_not_logged"].reduce(0) { sum, key in
                    if case .string(let count)? = entry.metadata[key] { return sum + (Int(count) ?? 0) }
                    return sum
                }
            }
        }
        #expect(told.reduce(0, +) == 3, "\(told)")
    }

    @Test func aSinkAnsweringTheWrongNumberOfOutcomesLosesNothing() async throws {
        struct OneAnswerSink: AttributionSink {
            let maxBatchSize = 100
            func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] { [.delivered] }
        }
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(3)
        #expect(try await f.worker(sink: OneAnswerSink()).drainOnce() == 3)
        #expect(try await f.attempts() == [1, 1, 1])
    }

    @Test func deadLettersCanBeRetriedBySinkOrByID() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(3)
        f.sink.addRule { _ in .reject(reason: "no") }
        #expect(try await f.worker().drainOnce() == 3)
        let letters = try await f.store.deadLetters(sink: "memory", limit: 10)
        #expect(letters.count == 3)
        f.sink.removeRules()

        // One by id: back in the outbox, due now, attempts from zero.
        let chosen = try #require(letters.first { $0.recordID == records[2].recordID })
        f.clock.advance(60)
        #expect(try await f.store.retryDeadLetters(ids: [chosen.id], sink: nil, now: f.clock.now) == 1)
        #expect(try await f.store.deadLetters(sink: "memory", limit: 10).count == 2)
        let due = try await f.store.dueEntries(sink: "memory", now: f.clock.now, limit: 10)
        #expect(due.map(\.record.recordID) == [records[2].recordID])
        #expect(due.map(\.attempts) == [0])

        // The rest by sink; another sink's filter moves nothing.
        #expect(try await f.store.retryDeadLetters(ids: nil, sink: "other", now: f.clock.now) == 0)
        #expect(try await f.store.retryDeadLetters(ids: nil, sink: "memory", now: f.clock.now) == 2)
        #expect(try await f.store.deadLetters(sink: nil, limit: 10).isEmpty)

        #expect(try await f.worker().drainOnce() == 3)
        #expect(f.sink.delivered.map(\.recordID).sorted() == records.map(\.recordID).sorted())
        #expect(try await f.store.outboxStats().isEmpty)
    }

    // MARK: dedupe

    @Test func aDuplicateIsReportedAndGetsNoSecondOutboxRow() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let first = try await f.ingest(1, prefix: "same")
        var again = first[0]
        again.recordID = AttributionRecord.newRecordID()
        again.campaignID = 99
        let results = try await f.store.ingest([RoutedRecord(record: again, sinks: ["memory", "other"])])
        #expect(results == [.duplicate(of: first[0].recordID)])
        #expect(try await f.store.outboxStats() == ["memory": OutboxStats(depth: 1, oldest: f.clock.now)])
        #expect(try await f.store.record(id: again.recordID) == nil)
        #expect(
            try await f.store.existingRecordIDs(dedupeKeys: [again.dedupeKey, "unknown"]) == [
                .init(again.dedupeKey): first[0].recordID
            ])

        // Within one batch too: the second of two records with one key is the duplicate.
        let a = f.records(1, prefix: "batch")[0]
        var b = a
        b.recordID = AttributionRecord.newRecordID()
        let batch = try await f.store.ingest([a, b].map { RoutedRecord(record: $0, sinks: ["memory"]) })
        #expect(batch == [.stored(recordID: a.recordID), .duplicate(of: a.recordID)])
        #expect(try await f.store.outboxStats()["memory"]?.depth == 2)

        _ = try await f.worker().drainOnce()
        #expect(f.sink.delivered.map(\.recordID) == [first[0].recordID, a.recordID])
    }

    // MARK: backoff

    @Test func backoffDoublesIsCappedJittersAndHonoursRetryAfter() {
        let settings = DeliverySettings(backoffInitial: .seconds(2), backoffMax: .seconds(60))
        // Exponential: 2, 4, 8, 16, 32 s, then capped at 60 s; equal jitter gives half to all of it.
        for (attempt, step) in [(1, 2), (2, 4), (3, 8), (4, 16), (5, 32), (6, 60), (7, 60), (40, 60)] {
            #expect(settings.backoff(attempt: attempt, retryAfter: nil, unit: 0) == .milliseconds(step * 500))
            #expect(settings.backoff(attempt: attempt, retryAfter: nil, unit: 0.5) == .milliseconds(step * 750))
            #expect(settings.backoff(attempt: attempt, retryAfter: nil, unit: 0.999_999) == .milliseconds(step * 1000))
        }
        // Never more than the cap, never less than half of it once reached, whatever the random number.
        for unit in stride(from: 0.0, to: 1.0, by: 0.05) {
            let delay = settings.backoff(attempt: 12, retryAfter: nil, unit: unit)
            #expect(delay >= .seconds(30) && delay <= .seconds(60))
        }
        // Retry-After is a floor, even above the cap, and never shortens the backoff.
        #expect(settings.backoff(attempt: 1, retryAfter: .seconds(90), unit: 0) == .seconds(90))
        #expect(settings.backoff(attempt: 1, retryAfter: .milliseconds(1500), unit: 0) == .milliseconds(1500))
        #expect(settings.backoff(attempt: 6, retryAfter: .seconds(1), unit: 1) == .seconds(60))
        // Millisecond settings, as config.yaml writes them.
        let fast = DeliverySettings(backoffInitial: .milliseconds(250), backoffMax: .milliseconds(8000))
        #expect(fast.backoff(attempt: 1, retryAfter: nil, unit: 0) == .milliseconds(125))
        #expect(fast.backoff(attempt: 3, retryAfter: nil, unit: 0.999_999) == .milliseconds(1000))
        #expect(fast.backoff(attempt: 9, retryAfter: nil, unit: 0) == .milliseconds(4000))
    }

    // MARK: the SQLite sink

    @Test func theSQLiteSinkWritesEachRecordOnceWithItsFieldsInColumns() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let sink = try SQLiteSink(path: f.path)
        var record = AttributionRecord(
            provider: "iad", kind: .purchase, dedupeKey: "k", receivedAt: Date(timeIntervalSince1970: 1_600_000_000.5),
            attributed: true)
        record.appID = "1234567890"
        record.keyword = "meditation app"
        record.keywordID = 87_675_432
        record.revenue = Decimal(string: "9.99")
        record.events = ["trial", "purchase"]
        record.raw = .object(["Version3.1": .object(["iad-attribution": .string("true")])])

        #expect(try await sink.deliver([record, record]) == [.delivered, .delivered])
        #expect(try await sink.deliver([record]) == [.delivered])
        record.campaignName = "Filled later"
        #expect(try await sink.deliver([record]) == [.delivered])

        // Rows are not Sendable, so these reads are synchronous.
        let rows = try f.store.pool.read { db in try Row.fetchAll(db, sql: "SELECT * FROM attribution_records") }
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect(row["record_id"] as String? == record.recordID)
        #expect(row["provider"] as String? == "iad")
        #expect(row["app_id"] as String? == "1234567890")
        #expect(row["kind"] as String? == "purchase")
        #expect(row["resolution"] as String? == "resolved")
        #expect(row["attributed"] as Int? == 1)
        #expect(row["is_test"] as Int? == 0)
        #expect(row["dedupe_key"] as String? == "k")
        #expect(row["keyword"] as String? == "meditation app")
        #expect(row["keyword_id"] as Int64? == 87_675_432)
        #expect(row["campaign_name"] as String? == "Filled later")
        #expect(row["campaign_id"] as Int64? == nil)
        #expect(row["revenue"] as Double? == 9.99)
        #expect(row["received_at"] as String? == "2020-09-13T12:26:40.500Z")
        #expect(row["events"] as String? == #"["trial","purchase"]"#)
        #expect(row["raw"] as String? == #"{"Version3.1":{"iad-attribution":"true"}}"#)

        // A second record is a second row.
        let other = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k2", receivedAt: Date())
        _ = try await sink.deliver([other])
        let count = try await f.store.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM attribution_records")
        }
        #expect(count == 2)
    }

    @Test func aRowTheSQLiteSinkRefusesIsDeadLetteredAloneNotWithItsBatch() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let sink = try SQLiteSink(path: f.path)
        try await f.store.pool.write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER refuse BEFORE INSERT ON attribution_records WHEN NEW.app_id = 'refused'
                    BEGIN SELECT RAISE(ABORT, 'refused by an operator''s trigger'); END
                    """)
        }
        let records = ["1", "refused", "2"].enumerated().map { index, app in
            var record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k\(index)", receivedAt: Date())
            record.appID = app
            return record
        }
        let outcomes = try await sink.deliver(records)
        #expect(outcomes[0] == .delivered && outcomes[2] == .delivered, "\(outcomes)")
        // A trigger's RAISE is a constraint failure: the same row would be refused again.
        guard case .reject(let reason) = outcomes[1] else {
            Issue.record("expected a rejection, got \(outcomes[1])")
            return
        }
        #expect(reason.contains("refused by an operator's trigger"))
        let written = try await f.store.pool.read { db in
            try String.fetchAll(db, sql: "SELECT app_id FROM attribution_records ORDER BY app_id")
        }
        #expect(written == ["1", "2"])
    }

    /// A forget deletes the rows of the records the store found, and the app's rows naming
    /// one of the user's ids whose record is gone (retention), and no one else's.
    @Test func theSQLiteSinkForgetsTheUsersRowsByRecordAndById() async throws {
        let f = try Fixture()
        let sink = try SQLiteSink(path: f.path)
        func install(_ user: String?, app: String = "1", idfv: String? = nil) -> AttributionRecord {
            var record = AttributionRecord(
                provider: "iad", kind: .install, dedupeKey: "iad:\(app):\(user ?? idfv ?? "")", receivedAt: Date())
            record.appID = app
            record.appUserID = user
            record.idfv = idfv
            return record
        }
        let found = install("forget-me")
        let rows = [
            found, install("forget-me", app: "1"), install(nil, idfv: "DEVICE-1"), install("forget-me", app: "2"),
            install("keep-me"),
        ]
        #expect(try await sink.deliver(rows) == Array(repeating: .delivered, count: rows.count))
        var ids = ForgottenIdentifiers()
        ids.recordIDs = [found.recordID]
        ids.appUserIDs = ["forget-me"]
        ids.idfvs = ["DEVICE-1"]
        let request = ForgetRequest(requestID: "r1", appID: "1", requestedAt: Date(), identifiers: ids)
        #expect(try await sink.forget(request) == .done)
        let left = try await f.store.pool.read { db in
            let sql = "SELECT app_id, app_user_id FROM attribution_records ORDER BY app_id, app_user_id"
            return try Row.fetchAll(db, sql: sql).map { row in
                "\(row["app_id"] as String? ?? "")/\(row["app_user_id"] as String? ?? "")"
            }
        }
        // The other app's user of the same id is another person.
        #expect(left == ["1/keep-me", "2/forget-me"])
    }

    @Test func theSQLiteSinkKeepsIndexesOnTheConfiguredColumnsOnly() async throws {
        let f = try Fixture()
        defer { f.remove() }
        func indexes() throws -> Set<String> {
            try f.store.pool.read { db in
                Set(
                    try String.fetchAll(
                        db,
                        sql:
                            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'attribution_records' AND sql IS NOT NULL"
                    ))
            }
        }
        _ = try SQLiteSink(path: f.path)
        // By default only `received_at`: its keys arrive in order, a page per commit.
        #expect(try indexes() == ["attribution_records_received_at"])

        // An index the operator made under a name of their own is theirs, and stays.
        try await f.store.pool.write { db in
            try db.execute(sql: "CREATE INDEX reports_by_country ON attribution_records(country_or_region)")
        }
        // Restarted with a shorter list: the others are dropped, since every row pays for them.
        let lean = try SQLiteSink(path: f.path, indexes: ["keyword_id", "currency"])
        #expect(
            try indexes() == ["attribution_records_keyword_id", "attribution_records_currency", "reports_by_country"])
        let record = AttributionRecord(provider: "iad", kind: .install, dedupeKey: "k", receivedAt: Date())
        #expect(try await lean.deliver([record]) == [.delivered])

        _ = try SQLiteSink(path: f.path, indexes: [])
        #expect(try indexes() == ["reports_by_country"])
        let plan = try await f.store.pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT * FROM attribution_records WHERE keyword_id = 1")
                .map { $0["detail"] as String }
        }
        #expect(plan == ["SCAN attribution_records"])
    }

    @Test func everyRecordFieldHasAColumnInTheSQLiteSinksTable() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let sink = try SQLiteSink(path: f.path)
        let record = try Self.everyField()
        _ = try await sink.deliver([record])

        let columns = Set(try await f.store.pool.read { db in try db.columns(in: "attribution_records").map(\.name) })
        let full = try JSONSerialization.jsonObject(with: AttributionRecord.makeEncoder().encode(record))
        let keys = Set((full as? [String: Any] ?? [:]).keys)
        #expect(keys.count == Mirror(reflecting: record).children.count)
        #expect(keys.subtracting(columns).isEmpty, "no column for \(keys.subtracting(columns).sorted())")

        // And each is filled: no field is left NULL by the sink.
        let row = try #require(
            try f.store.pool.read { db in try Row.fetchOne(db, sql: "SELECT * FROM attribution_records") })
        let empty = keys.filter { (row[$0] as DatabaseValue).isNull }
        #expect(empty.isEmpty, "NULL columns: \(empty.sorted())")
    }

    /// A record with every optional field set, built through its JSON names.
    static func everyField() throws -> AttributionRecord {
        let json = """
            {"record_id":"r","received_at":"2020-01-01T00:00:00Z","provider":"p","app_id":"a","app_user_id":"u",
             "idfv":"v","idfa":"i","att_status":3,"attributed":true,"kind":"event","resolution":"resolved","is_test":false,
             "duplicate_of":"o","network":"Apple Search Ads","org_id":1,"org_name":"o","campaign_id":1,"campaign_name":"c","ad_group_id":1,
             "ad_group_name":"g","keyword_id":1,"keyword":"k","keyword_match_type":"Exact","ad_id":1,"creative_set_id":1,
             "creative_set_name":"s","country_or_region":"US","conversion_type":"Download","claim_type":"Click",
             "supply_placement":"x","click_date":"2020-01-01T00:00:00Z","impression_date":"2020-01-01T00:00:00Z",
             "conversion_date":"2020-01-01T00:00:00Z","purchase_date":"2020-01-01T00:00:00Z","skan_version":"4.0",
             "ad_network_id":"n","transaction_id":"t","source_app_id":"s","source_identifier":"1","source_domain":"d",
             "fine_value":1,"coarse_value":"low","postback_sequence_index":0,"did_win":true,"fidelity_type":1,
             "redownload":false,"signature":"verified","events":["e"],"revenue_min":1,"revenue_max":2,"event_name":"e",
             "revenue":1,"currency":"USD","transaction_ref":"t","vendor_ids":{"adid":"x"},"raw":{},"dedupe_key":"d","enriched_at":"2020-01-01T00:00:00Z"}
            """
        let record = try AttributionRecord.makeDecoder().decode(AttributionRecord.self, from: Data(json.utf8))
        // Every stored property was set from the JSON above: a new field fails here until it is added.
        let unset = Mirror(reflecting: record).children.filter { "\($0.value)" == "nil" }.compactMap(\.label)
        #expect(unset.isEmpty, "fields not set by everyField(): \(unset)")
        #expect(Mirror(reflecting: record).children.count > 50)
        return record
    }
}
