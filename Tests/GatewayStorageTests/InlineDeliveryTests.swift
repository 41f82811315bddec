import Foundation
import GRDB
import GatewayCore
import GatewaySinks
import Synchronization
import Testing

import GatewayStorage

/// A sink on the store's own file gets its rows in the record's own transaction; a row
/// that fails goes to the sink's outbox instead, and other sinks keep their outboxes.
@Suite struct InlineDeliveryTests {
    func record(_ user: String, campaign: Int64 = 1) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: "iad:1:\(user)",
            receivedAt: Date(timeIntervalSince1970: 1_800_000_000),
            attributed: true)
        record.appID = "1"
        record.appUserID = user
        record.campaignID = campaign
        return record
    }

    /// Runs `test` with a store on a fresh file (and that file's path) whose inline
    /// reports are counted, then removes the file.
    func withStore(_ test: (String, SQLiteStore, InlineCounts) async throws -> Void) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("inline-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let store = try SQLiteStore(path: path, durability: .normal)
        let reported = InlineCounts()
        store.observeInline(reported)
        try await test(path, store, reported)
    }

    /// An inline sink that writes each record's campaign into `table`.
    func campaigns(into table: String) -> InlineDelivery {
        InlineDelivery(sink: table, sql: "INSERT INTO \(table) (campaign) VALUES (?)") { record, _ in
            [record.campaignID]
        }
    }

    func outboxSinks(_ store: SQLiteStore) async throws -> [String] {
        try await store.pool.read { db in try String.fetchAll(db, sql: "SELECT sink FROM outbox ORDER BY id") }
    }

    @Test func theSQLiteSinkOnTheStoresFileHasTheRowWhenTheIngestReturns() async throws {
        try await withStore { path, store, reported in
            let sink = try SQLiteSink(path: path)
            store.deliverInline(try #require(sink.inlineDelivery(sinkName: "local", into: store)))
            var first = record("u1")
            first.raw = .object([
                "Version3.1": .object(["iad-keyword": .string("say \"om\""), "iad-org-id": .integer(4)])
            ])
            let results = try await store.ingest([
                RoutedRecord(record: first, sinks: ["local", "hook"]),
                RoutedRecord(record: record("u2"), sinks: ["local"]),
            ])
            #expect(results.count == 2)
            let rows = try store.pool.read { db in
                try Row.fetchAll(
                    db,
                    sql: "SELECT record_id, app_user_id, campaign_id, raw FROM attribution_records ORDER BY app_user_id"
                )
            }
            #expect(rows.map { $0["app_user_id"] as String } == ["u1", "u2"])
            #expect(rows.first?["record_id"] as String? == first.recordID)
            #expect(rows.first?["campaign_id"] as Int64? == 1)
            #expect(rows.first?["raw"] as String? == #"{"Version3.1":{"iad-keyword":"say \"om\"","iad-org-id":4}}"#)
            // Only the webhook waits in an outbox; nothing of local does.
            #expect(try await outboxSinks(store) == ["hook"])
            #expect(reported.deliveredCounts.withLock { $0 } == ["local": 2])
            #expect(reported.fellBackCounts.withLock { $0 }.isEmpty)

            // A duplicate writes nothing anywhere.
            _ = try await store.ingest([RoutedRecord(record: record("u1"), sinks: ["local", "hook"])])
            #expect(reported.fellBackCounts.withLock { $0 }.isEmpty)
            #expect(
                try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM attribution_records")
                }
                    == 2)
            #expect(try await outboxSinks(store) == ["hook"])
        }
    }

    /// With `raw: false` the row has every field but the payload, which the store keeps
    /// compressed; written with the record or through the outbox alike.
    @Test func aSQLiteSinkWithoutRawLeavesThePayloadToTheStore() async throws {
        try await withStore { path, store, _ in
            let sink = try SQLiteSink(path: path, raw: false)
            store.deliverInline(try #require(sink.inlineDelivery(sinkName: "local", into: store)))
            var inline = record("u1")
            inline.raw = .object(["Version3.1": .object(["iad-keyword": .string("om")])])
            var late = record("u2", campaign: 2)
            late.raw = inline.raw
            _ = try await store.ingest([RoutedRecord(record: inline, sinks: ["local"])])
            #expect(try await sink.deliver([late]) == [.delivered])
            let rows = try store.pool.read { db in
                try Row.fetchAll(
                    db, sql: "SELECT app_user_id, campaign_id, raw FROM attribution_records ORDER BY app_user_id")
            }
            #expect(rows.map { $0["app_user_id"] as String } == ["u1", "u2"])
            #expect(rows.map { $0["campaign_id"] as Int64 } == [1, 2])
            #expect(rows.map { $0["raw"] as String? } == [nil, nil])
            let stored = try #require(try await store.record(id: inline.recordID))
            #expect(stored.raw == inline.raw)
        }
    }

    @Test func aSQLiteSinkRowRefusedByATriggerDoesNotFailTheRowsAfterIt() async throws {
        try await withStore { path, store, reported in
            let sink = try SQLiteSink(path: path)
            store.deliverInline(try #require(sink.inlineDelivery(sinkName: "local", into: store)))
            try await store.pool.write { db in
                try db.execute(
                    sql: """
                        CREATE TRIGGER refuse BEFORE INSERT ON attribution_records WHEN NEW.app_user_id = 'refused'
                        BEGIN SELECT RAISE(ABORT, 'refused'); END
                        """)
            }
            let refused = record("refused")
            _ = try await store.ingest([
                RoutedRecord(record: refused, sinks: ["local"]), RoutedRecord(record: record("next"), sinks: ["local"]),
            ])
            _ = try await store.ingest([RoutedRecord(record: record("later"), sinks: ["local"])])
            #expect(reported.deliveredCounts.withLock { $0 } == ["local": 2])
            #expect(reported.fellBackCounts.withLock { $0 } == ["local": 1])
            let queued = try await store.dueEntries(sink: "local", now: .distantFuture, limit: 10, laneOrdered: false)
            #expect(queued.map(\.record.recordID) == [refused.recordID])
        }
    }

    @Test func aSinkOnAnotherFileIsNotInline() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("inline-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SQLiteStore(path: folder.appendingPathComponent("gateway.sqlite").path)
        let sink = try SQLiteSink(path: folder.appendingPathComponent("analytics.sqlite").path)
        #expect(sink.inlineDelivery(sinkName: "analytics", into: store) == nil)
    }

    @Test func aRowThatFailsGoesToTheSinksOutboxAndTheRecordIsStored() async throws {
        try await withStore { path, store, reported in
            try await store.pool.write { db in
                try db.execute(sql: "CREATE TABLE checked (campaign INTEGER CHECK (campaign > 0))")
            }
            store.deliverInline(campaigns(into: "checked"))
            let good = record("good", campaign: 5)
            let bad = record("bad", campaign: -5)
            let results = try await store.ingest([
                RoutedRecord(record: bad, sinks: ["checked"]), RoutedRecord(record: good, sinks: ["checked"]),
            ])
            #expect(results == [.stored(recordID: bad.recordID), .stored(recordID: good.recordID)])
            #expect(
                try await store.pool.read { db in try Int64.fetchAll(db, sql: "SELECT campaign FROM checked") } == [5])
            let queued = try await store.dueEntries(sink: "checked", now: .distantFuture, limit: 10, laneOrdered: false)
            #expect(queued.map(\.record.recordID) == [bad.recordID])
            #expect(try await store.record(id: bad.recordID) != nil)
            #expect(reported.fellBackCounts.withLock { $0 } == ["checked": 1])
            #expect(reported.deliveredCounts.withLock { $0 } == ["checked": 1])
        }
    }

    @Test func aRecordWhoseRowCannotBeMadeGoesToTheOutboxAndIsCounted() async throws {
        struct Unmakeable: Error {}
        try await withStore { path, store, reported in
            try await store.pool.write { db in try db.execute(sql: "CREATE TABLE picky (campaign INTEGER)") }
            store.deliverInline(
                InlineDelivery(sink: "picky", sql: "INSERT INTO picky (campaign) VALUES (?)") { record, _ in
                    guard let campaign = record.campaignID, campaign > 0 else { throw Unmakeable() }
                    return [campaign]
                })
            let odd = record("odd", campaign: 0)
            let results = try await store.ingest([
                RoutedRecord(record: odd, sinks: ["picky"]),
                RoutedRecord(record: record("fine", campaign: 3), sinks: ["picky"]),
            ])
            #expect(results.count == 2)
            let queued = try await store.dueEntries(sink: "picky", now: .distantFuture, limit: 10, laneOrdered: false)
            #expect(queued.map(\.record.recordID) == [odd.recordID])
            #expect(reported.fellBackCounts.withLock { $0 } == ["picky": 1])
            #expect(reported.deliveredCounts.withLock { $0 } == ["picky": 1])
        }
    }

    @Test func aRowWhoseFailureUndoesTheTransactionLeavesTheRecordsToTheOutbox() async throws {
        try await withStore { path, store, reported in
            // A trigger that rolls the whole transaction back, as a full disk can.
            try await store.pool.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE strict (campaign INTEGER);
                        CREATE TRIGGER refuse BEFORE INSERT ON strict WHEN NEW.campaign < 0
                        BEGIN SELECT RAISE(ROLLBACK, 'refused'); END;
                        """)
            }
            store.deliverInline(campaigns(into: "strict"))
            let stored = record("stored", campaign: 1)
            _ = try await store.ingest([RoutedRecord(record: stored, sinks: ["strict"])])
            // One bad row undoes the batch; its neighbour and the duplicate ride along.
            let bad = record("bad", campaign: -1)
            let good = record("good", campaign: 2)
            let results = try await store.ingest([
                RoutedRecord(record: bad, sinks: ["strict", "hook"]), RoutedRecord(record: good, sinks: ["strict"]),
                RoutedRecord(record: record("stored", campaign: 1), sinks: ["strict"]),
            ])
            #expect(
                results == [
                    .stored(recordID: bad.recordID), .stored(recordID: good.recordID), .duplicate(of: stored.recordID),
                ])
            #expect(try await outboxSinks(store).sorted() == ["hook", "strict", "strict"])
            // Told, so that the sink's worker is woken and the fallback counted: the two new
            // records, not the duplicate.
            #expect(reported.fellBackCounts.withLock { $0 } == ["strict": 2])
            #expect(reported.deliveredCounts.withLock { $0 } == ["strict": 1])
            #expect(try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM strict") } == 1)
        }
    }
}

/// Rows written inline and rows fallen back to the outbox, per sink, as the store told them.
final class InlineCounts: InlineDeliveryObserver {
    let deliveredCounts = Mutex<[String: Int]>([:])
    let fellBackCounts = Mutex<[String: Int]>([:])

    func delivered(sink: String, records: [(record: AttributionRecord, queuedAt: Date)]) {
        deliveredCounts.withLock { $0[sink, default: 0] += records.count }
    }

    func fellBack(sink: String, count: Int) {
        fellBackCounts.withLock { $0[sink, default: 0] += count }
    }
}
