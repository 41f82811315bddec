import Foundation
import GatewayCore
import GatewaySinks
import GatewayStorage
import GRDB
import Synchronization
import Testing

/// The delivery worker over a real SQLite store, with a sink that fails on purpose and a
/// clock the test moves: no sleeping.
@Suite struct SinkWorkerTests {
    final class Clock: Sendable {
        let value = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { value.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { value.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    struct Fixture {
        let path: String
        let store: SQLiteStore
        let sink = MemorySink(maxBatchSize: 100)
        let clock = Clock()

        init() throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("worker-\(UUID()).sqlite").path
            store = try SQLiteStore(path: path, durability: .normal)
        }

        func worker(batchSize: Int = 10, maxAttempts: Int = 3) -> SinkWorker {
            let clock = clock
            return SinkWorker(
                sinkName: "memory", sink: sink, store: store,
                settings: DeliverySettings(
                    batchSize: batchSize, maxAttempts: maxAttempts, backoffInitial: .seconds(1), backoffMax: .seconds(10)),
                now: { clock.now }, random: { 0 })
        }

        @discardableResult
        func ingest(_ count: Int, prefix: String = "u") async throws -> [AttributionRecord] {
            let records = (0..<count).map { index in
                var record = AttributionRecord(
                    provider: "iad", kind: .install, dedupeKey: "iad:1:\(prefix)\(index)", receivedAt: clock.now)
                record.appUserID = "\(prefix)\(index)"
                return record
            }
            _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: ["memory"]) })
            return records
        }

        func remove() {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
    }

    @Test func deliversInBatchesOfTheConfiguredSize() async throws {
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

    @Test func aFailingSinkIsRetriedWithBackoffThenDeadLettered() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let records = try await f.ingest(2)
        let worker = f.worker(maxAttempts: 3)
        f.sink.failNextBatches(10)

        #expect(try await worker.drainOnce() == 2)
        // Not due again until the backoff has passed (1 s × equal jitter at 0 → 0.5 s).
        #expect(try await worker.drainOnce() == 0)
        #expect(try await f.store.nextDueDate(sink: "memory") == f.clock.now.addingTimeInterval(0.5))
        f.clock.advance(0.5)
        #expect(try await worker.drainOnce() == 2)
        #expect(try await f.store.nextDueDate(sink: "memory") == f.clock.now.addingTimeInterval(1))
        f.clock.advance(1)
        #expect(try await worker.drainOnce() == 2)

        // Third failure: out of the outbox, into the dead-letter queue, nothing delivered.
        #expect(try await f.store.outboxStats().isEmpty)
        let letters = try await f.store.deadLetters(sink: "memory", limit: 10)
        #expect(Set(letters.map(\.recordID)) == Set(records.map(\.recordID)))
        #expect(letters.allSatisfy { $0.attempts == 3 && $0.error.contains("Unreachable") })
        #expect(f.sink.delivered.isEmpty)

        // Retried from the queue once the sink is back: delivered once each.
        #expect(try await f.store.retryDeadLetters(ids: nil, sink: "memory", now: f.clock.now) == 2)
        f.sink.failNextBatches(0)
        #expect(try await worker.drainOnce() == 2)
        #expect(f.sink.delivered.map(\.recordID).sorted() == records.map(\.recordID).sorted())
    }

    @Test func aRejectedRecordIsDeadLetteredWithoutHoldingBackItsBatch() async throws {
        let f = try Fixture()
        defer { f.remove() }
        try await f.ingest(3)
        f.sink.addRule { $0.appUserID == "u1" ? .reject(reason: "malformed") : nil }
        #expect(try await f.worker().drainOnce() == 3)
        #expect(f.sink.delivered.map(\.appUserID) == ["u0", "u2"])
        let letters = try await f.store.deadLetters(sink: "memory", limit: 10)
        #expect(letters.count == 1)
        #expect(letters.first?.error == "malformed")
        #expect(letters.first?.attempts == 1)
        #expect(try await f.store.outboxStats().isEmpty)
    }

    @Test func duplicatesAreReportedAndNotQueuedTwice() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let first = try await f.ingest(1, prefix: "same")
        var again = first[0]
        again.recordID = AttributionRecord.newRecordID()
        let results = try await f.store.ingest([RoutedRecord(record: again, sinks: ["memory"])])
        #expect(results == [.duplicate(of: first[0].recordID)])
        #expect(try await f.store.outboxStats()["memory"]?.depth == 1)
    }

    @Test func theSQLiteSinkWritesEachRecordOnceWithEveryFieldAsAColumn() async throws {
        let f = try Fixture()
        defer { f.remove() }
        let sink = try SQLiteSink(path: f.path)
        var record = AttributionRecord(
            provider: "iad", kind: .purchase, dedupeKey: "k", receivedAt: Date(timeIntervalSince1970: 1_600_000_000.5),
            attributed: true)
        record.keyword = "meditation app"
        record.keywordID = 87_675_432
        record.revenue = Decimal(string: "9.99")
        record.events = ["trial", "purchase"]
        record.raw = .object(["Version3.1": .object(["iad-attribution": .string("true")])])

        #expect(try await sink.deliver([record, record]) == [.delivered, .delivered])
        record.campaignName = "Filled later"
        #expect(try await sink.deliver([record]) == [.delivered])

        let row = try #require(try f.store.pool.read { db in
            try Row.fetchOne(db, sql: "SELECT *, (SELECT COUNT(*) FROM attribution_records) AS n FROM attribution_records")
        })
        #expect(row["n"] as Int == 1)
        #expect(row["keyword"] as String? == "meditation app")
        #expect(row["keyword_id"] as Int64? == 87_675_432)
        #expect(row["campaign_name"] as String? == "Filled later")
        #expect(row["revenue"] as Double? == 9.99)
        #expect(row["received_at"] as String? == "2020-09-13T12:26:40.500Z")
        #expect(row["events"] as String? == #"["trial","purchase"]"#)
        #expect(row["raw"] as String? == #"{"Version3.1":{"iad-attribution":"true"}}"#)

        // Every field a record can carry has a column, so none is silently dropped.
        let columns = Set(try await f.store.pool.read { db in try db.columns(in: "attribution_records").map(\.name) })
        let full = try JSONSerialization.jsonObject(with: AttributionRecord.makeEncoder().encode(Self.everyField()))
        let keys = Set((full as? [String: Any] ?? [:]).keys)
        #expect(keys.count > 50)
        #expect(keys.subtracting(columns).isEmpty, "no column for \(keys.subtracting(columns).sorted())")
    }

    /// A record with every optional field set, built through its JSON names.
    static func everyField() throws -> AttributionRecord {
        let mirror = Mirror(reflecting: AttributionRecord(provider: "p", kind: .event, dedupeKey: "d", receivedAt: Date()))
        #expect(mirror.children.count > 50)
        let json = """
            {"record_id":"r","received_at":"2020-01-01T00:00:00Z","provider":"p","app_id":"a","app_user_id":"u",
             "idfv":"v","idfa":"i","att_status":3,"attributed":true,"kind":"event","resolution":"resolved","is_test":false,
             "duplicate_of":"o","org_id":1,"org_name":"o","campaign_id":1,"campaign_name":"c","ad_group_id":1,
             "ad_group_name":"g","keyword_id":1,"keyword":"k","keyword_match_type":"Exact","ad_id":1,"creative_set_id":1,
             "creative_set_name":"s","country_or_region":"US","conversion_type":"Download","claim_type":"Click",
             "supply_placement":"x","click_date":"2020-01-01T00:00:00Z","impression_date":"2020-01-01T00:00:00Z",
             "conversion_date":"2020-01-01T00:00:00Z","purchase_date":"2020-01-01T00:00:00Z","skan_version":"4.0",
             "ad_network_id":"n","transaction_id":"t","source_app_id":"s","source_identifier":"1","source_domain":"d",
             "fine_value":1,"coarse_value":"low","postback_sequence_index":0,"did_win":true,"fidelity_type":1,
             "redownload":false,"signature":"verified","events":["e"],"revenue_min":1,"revenue_max":2,"event_name":"e",
             "revenue":1,"currency":"USD","transaction_ref":"t","raw":{},"dedupe_key":"d","enriched_at":"2020-01-01T00:00:00Z"}
            """
        let record = try AttributionRecord.makeDecoder().decode(AttributionRecord.self, from: Data(json.utf8))
        // Every stored property was set from the JSON above (none left nil).
        #expect(Mirror(reflecting: record).children.allSatisfy { child in
            if case Optional<Any>.none = child.value as Any? { return false }
            return !"\(child.value)".hasPrefix("nil")
        })
        return record
    }
}
