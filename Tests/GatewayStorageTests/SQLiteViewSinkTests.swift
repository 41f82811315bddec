import Foundation
import GRDB
import GatewayCore
import GatewaySinks
import GatewayStorage
import Testing

/// `view: true`: `attribution_records` reads the store's own records, so a record is
/// written once, and shows what a table of the same records would hold.
@Suite struct SQLiteViewSinkTests {
    /// A store on a fresh file and its path, removed afterwards.
    func withStore(_ test: (String, SQLiteStore) async throws -> Void) async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("view-\(UUID()).sqlite").path
        defer {
            for suffix in ["", "-wal", "-shm", "-serve.lock"] {
                try? FileManager.default.removeItem(atPath: path + suffix)
            }
        }
        try await test(path, try SQLiteStore(path: path, durability: .normal))
    }

    /// Records of every kind of field: dates, amounts, lists, booleans, text to escape.
    static func records() -> [AttributionRecord] {
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        var install = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: "iad:1:u1", receivedAt: at, attributed: true)
        install.appID = "1"
        install.appUserID = "u1"
        install.keyword = #"say "om", é"#
        install.keywordID = 87_000_001
        // Milliseconds that binary fractions hold a little under: a date must not lose one.
        install.clickDate = at.addingTimeInterval(-59.877)
        install.conversionDate = at.addingTimeInterval(0.123)
        install.isTest = true
        install.raw = .object(["Version3.1": .object(["iad-keyword": .string("om")])])
        var purchase = AttributionRecord(
            provider: "s2s", kind: .purchase, dedupeKey: "s2s:1:purchase:7", receivedAt: at.addingTimeInterval(5))
        purchase.appID = "1"
        purchase.appUserID = "u1"
        purchase.revenue = Decimal(string: "9.99")
        purchase.currency = "USD"
        purchase.transactionRef = "7"
        purchase.purchaseDate = at.addingTimeInterval(4.001)
        var postback = AttributionRecord(
            provider: "skadnetwork", kind: .postback, dedupeKey: "skan:tx-1:0", receivedAt: at.addingTimeInterval(9),
            attributed: true)
        postback.skanVersion = "4.0"
        postback.fineValue = 42
        postback.didWin = false
        postback.events = ["trial", "purchase"]
        postback.revenueMin = Decimal(string: "0.99")
        return [install, purchase, postback]
    }

    /// Every column but `raw`, with SQLite's type of each value, row by row.
    func rows(_ db: Database) throws -> [[String]] {
        let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info('attribution_records')")
            .filter { $0 != "raw" }
        #expect(columns.count > 50)
        let sql =
            "SELECT \(columns.map { "\($0), typeof(\($0))" }.joined(separator: ", ")) FROM attribution_records ORDER BY received_at"
        return try Row.fetchAll(db, sql: sql).map { row in
            (0..<row.count).map { index in row[index].map { "\($0)" } ?? "NULL" }
        }
    }

    @Test func theViewHoldsWhatTheTableWouldHold() async throws {
        try await withStore { path, store in
            let view = try SQLiteViewSink(path: path)
            store.deliverInline(try #require(view.inlineDelivery(sinkName: "local", into: store)))
            let records = Self.records()
            _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: ["local"]) })

            // The same records as the store hands them to a sink, into a table on another file.
            let tablePath = path + "-table.sqlite"
            defer { try? FileManager.default.removeItem(atPath: tablePath) }
            let table = try SQLiteSink(path: tablePath)
            var stored: [AttributionRecord] = []
            for record in records { stored.append(try #require(try await store.record(id: record.recordID))) }
            #expect(try await table.deliver(stored) == [.delivered, .delivered, .delivered])

            let fromView = try await store.pool.read { db in try rows(db) }
            let fromTable = try await DatabaseQueue(path: tablePath).read { db in try rows(db) }
            #expect(fromView.count == 3)
            #expect(fromView == fromTable)
            // The payload stays in the store, compressed, and the sink lists only places.
            #expect(
                try await store.pool.read { db in
                    try Int.fetchOne(db, sql: "SELECT COUNT(raw) FROM attribution_records")
                } == 0)
            #expect(try await store.record(id: records[0].recordID)?.raw == records[0].raw)
        }
    }

    /// A record shows once delivered, inline or through the outbox; a late version shows
    /// at once; one the sink was not given does not show.
    @Test func theViewShowsTheRecordsDeliveredAsTheyAreNow() async throws {
        try await withStore { path, store in
            let view = try SQLiteViewSink(path: path)
            store.deliverInline(try #require(view.inlineDelivery(sinkName: "local", into: store)))
            let records = Self.records()
            _ = try await store.ingest([
                RoutedRecord(record: records[0], sinks: ["local"]), RoutedRecord(record: records[1], sinks: ["hook"]),
                RoutedRecord(record: records[2], sinks: []),
            ])
            func users() async throws -> [String] {
                try await store.pool.read { db in
                    try String.fetchAll(db, sql: "SELECT dedupe_key FROM attribution_records ORDER BY received_at")
                }
            }
            #expect(try await users() == ["iad:1:u1"])
            #expect(try await view.deliver([records[1]]) == [.delivered])
            #expect(try await view.deliver([records[1]]) == [.delivered])
            #expect(try await users() == ["iad:1:u1", "s2s:1:purchase:7"])

            var late = records[0]
            late.campaignName = "Spring"
            #expect(try await store.replaceRecords([RoutedRecord(record: late, sinks: [])], now: Date()) == 1)
            let id = late.recordID
            let campaign = try await store.pool.read { db in
                try String.fetchOne(
                    db, sql: "SELECT campaign_name FROM attribution_records WHERE record_id = ?", arguments: [id])
            }
            #expect(campaign == "Spring")
        }
    }

    /// A forget request takes the user's rows out of the view, and no one else's.
    @Test func aForgottenUsersRowsLeaveTheView() async throws {
        try await withStore { path, store in
            let view = try SQLiteViewSink(path: path)
            store.deliverInline(try #require(view.inlineDelivery(sinkName: "local", into: store)))
            var other = Self.records()[0]
            other = AttributionRecord(
                provider: "iad", kind: .install, dedupeKey: "iad:1:u2", receivedAt: other.receivedAt, attributed: true)
            other.appID = "1"
            other.appUserID = "u2"
            _ = try await store.ingest((Self.records() + [other]).map { RoutedRecord(record: $0, sinks: ["local"]) })
            _ = try await store.forget(
                ForgetSubject(appID: "1", appUserID: "u1"), requestID: "r1", userDigest: "d", sinks: ["local"],
                now: Date())
            let request = try #require(try await store.forgetRequest(id: "r1", sink: "local"))
            #expect(try await view.forget(request) == .done)
            let left = try await store.pool.read { db in
                try Row.fetchAll(db, sql: "SELECT app_user_id, dedupe_key FROM attribution_records ORDER BY dedupe_key")
                    .map { "\($0["app_user_id"] as String? ?? "-") \($0["dedupe_key"] as String)" }
            }
            // The postback names no user of the app.
            #expect(left == ["u2 iad:1:u2", "- skan:tx-1:0"])
        }
    }

    /// A record retention deletes leaves the sink's list too: the list does not outgrow
    /// the records a year of retention keeps.
    @Test func aRecordRetentionDeletesLeavesTheList() async throws {
        try await withStore { path, store in
            let view = try SQLiteViewSink(path: path)
            store.deliverInline(try #require(view.inlineDelivery(sinkName: "local", into: store)))
            let records = Self.records()
            _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: ["local"]) })
            // The install and the purchase are older than the cut; the postback is not.
            let cut = records[1].receivedAt.addingTimeInterval(1)
            #expect(try await store.deleteRecords(receivedBefore: cut, limit: 100) == 2)
            let listed = try await store.pool.read { db in
                try String?.fetchAll(
                    db,
                    sql: "SELECT r.dedupe_key FROM attribution_records_rows d LEFT JOIN records r ON r.seq = d.seq")
            }
            #expect(listed == ["skan:tx-1:0"])
        }
    }

    /// `indexes` index the same expressions on `records`, and a query of the view uses them.
    @Test func aListedFieldIsIndexedForQueriesOfTheView() async throws {
        try await withStore { path, store in
            _ = try SQLiteViewSink(path: path, indexes: ["app_user_id", "raw"])
            let plan = try await store.pool.read { db in
                try Row.fetchAll(
                    db, sql: "EXPLAIN QUERY PLAN SELECT keyword FROM attribution_records WHERE app_user_id = 'u1'"
                ).map { $0["detail"] as String }
            }
            #expect(plan.contains { $0.contains("attribution_records_app_user_id") })
            _ = try SQLiteViewSink(path: path, indexes: [])
            let indexes = try await store.pool.read { db in
                try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE name LIKE 'attribution_records_%' AND type = 'index'"
                )
            }
            #expect(indexes.isEmpty)
        }
    }

    /// A table and a view cannot share the name: the sink that would lose rows, or find a
    /// view where it writes, refuses to start and says why.
    @Test func aViewAndATableOnOneFileRefuseToStart() async throws {
        try await withStore { path, _ in
            _ = try SQLiteSink(path: path)
            await Self.expectRefusal("attribution_records is a table here") { _ = try SQLiteViewSink(path: path) }
        }
        try await withStore { path, _ in
            _ = try SQLiteViewSink(path: path)
            await Self.expectRefusal("attribution_records is a view here") { _ = try SQLiteSink(path: path) }
        }
    }

    /// Turned back into a table, the sink's indexes are the table's: the view's, on
    /// `records` under the same names, would keep the table's from being made.
    @Test func aViewTurnedBackIntoATableHasTheTablesIndexes() async throws {
        try await withStore { path, store in
            _ = try SQLiteViewSink(path: path, indexes: ["app_user_id", "received_at"])
            try await store.pool.write { db in try db.execute(sql: "DROP VIEW attribution_records") }
            _ = try SQLiteSink(path: path, indexes: ["app_user_id"])
            let indexes = try await store.pool.read { db in
                try Row.fetchAll(
                    db,
                    sql:
                        "SELECT name, tbl_name FROM sqlite_master WHERE name LIKE 'attribution_records_%' AND type = 'index'"
                ).map { "\($0["name"] as String) on \($0["tbl_name"] as String)" }
            }
            #expect(indexes == ["attribution_records_app_user_id on attribution_records"])
        }
    }

    /// Expects `start` to fail with an error saying `reason`.
    static func expectRefusal(_ reason: String, _ start: () async throws -> Void) async {
        do {
            try await start()
            Issue.record("started where it should have refused: \(reason)")
        } catch {
            #expect("\(error)".contains(reason))
        }
    }
}
