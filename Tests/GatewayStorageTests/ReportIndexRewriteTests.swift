import Foundation
import GRDB
import GatewayCore
import GatewayPostgres
import GatewayTestSupport
import PostgresNIO
import Testing

@testable import GatewayStorage

/// A record joining a group changes only the report index's rows it makes: the install a
/// purchase joins keeps its facts where they are, so a store of millions of buyers does not
/// rewrite each buyer's install (on PostgreSQL, a dead row and index entries a vacuum must
/// clear), and the report stays the report of every record.
@Suite struct ReportIndexRewriteTests {
    static let start = ReportIndexTests.start

    /// Installs of two users, then a purchase by the first, a refund of it and a purchase
    /// that joins both users by one transaction, each indexed in turn. `places` names the
    /// stored rows of `report_people` and `report_members` as the database places them.
    static func expectFactsKeptInPlace(
        _ store: any AttributionStore, places: () async throws -> [String: String]
    ) async throws {
        let indexed = try #require(store as? any ReportIndexStore)
        let installs = ["u1", "u2"].enumerated().map { index, user in
            var install = StoreConformanceTests.install(user, at: start.addingTimeInterval(Double(index)))
            install.campaignID = 7
            return install
        }
        // One at a time, so that the first user's rows are not the last a database placed.
        for install in installs {
            _ = try await store.ingest([RoutedRecord(record: install, sinks: [])])
            try await indexed.catchUpReportIndex(batch: 10)
        }
        let before = try await places()
        #expect(before.count == 4, "a person and a member row for each install: \(before)")

        var purchase = AttributionRecord(
            provider: "s2s", kind: .purchase, dedupeKey: "p1", receivedAt: start.addingTimeInterval(60),
            attributed: false)
        purchase.appID = "1"
        purchase.appUserID = "u1"
        purchase.transactionRef = "T1"
        purchase.revenue = Decimal(string: "4.99")
        purchase.currency = "EUR"
        _ = try await store.ingest([RoutedRecord(record: purchase, sinks: [])])
        try await indexed.catchUpReportIndex(batch: 10)
        let after = try await places()
        for (row, place) in before {
            #expect(after[row] == place, "\(row) was written again")
        }
        #expect(after.count == 5)
        try await ReportIndexTests.expectSameReports(store, leastLines: 1)

        // The second user claims the first's transaction: one group of both, and still the
        // report of every record.
        var shared = purchase
        shared.recordID = UUID().uuidString.lowercased()
        shared.dedupeKey = "p2"
        shared.appUserID = "u2"
        shared.receivedAt = start.addingTimeInterval(120)
        _ = try await store.ingest([RoutedRecord(record: shared, sinks: [])])
        try await ReportIndexTests.expectSameReports(store, leastLines: 1)
        let joined = try await places()
        #expect(
            Set(joined.keys.filter { $0.hasPrefix("member") }.compactMap { joined[$0]?.split(separator: "@").last })
                .count == 1, "one group: \(joined)")
    }

    @Test func sqliteKeepsAnInstallsFactsWhenAPurchaseJoins() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("rewrite-\(UUID()).sqlite").path
        let store = try SQLiteStore(path: path, durability: .normal)
        try await Self.expectFactsKeptInPlace(store) {
            try await store.pool.read { db in
                var places: [String: String] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT rowid, record_id, group_id FROM report_people") {
                    places["person " + (row[1] as String)] = "\(row[0] as Int64)@\(row[2] as Int64)"
                }
                for row in try Row.fetchAll(db, sql: "SELECT seq, group_id FROM report_members") {
                    places["member \(row[0] as Int64)"] = "@\(row[1] as Int64)"
                }
                return places
            }
        }
    }

    @Test(.enabled(if: TestPostgres.expected)) func postgresKeepsAnInstallsFactsWhenAPurchaseJoins() async throws {
        let url = try await TestPostgres.newDatabase()
        let store = try await PostgresStore(url: url, poolSize: 2, outboxLease: .seconds(60))
        try await Self.expectFactsKeptInPlace(store) {
            // A row's `ctid` and `xmin` change when it is written again, deleted and inserted or updated.
            try await TestPostgres.withClient(url) { client in
                var places: [String: String] = [:]
                let people = try await client.query(
                    "SELECT install_seq::text, ctid::text || '/' || xmin::text, group_id FROM report_people")
                for try await (record, place, group) in people.decode((String, String, Int64).self) {
                    places["person " + record] = "\(place)@\(group)"
                }
                let members = try await client.query(
                    "SELECT seq, ctid::text || '/' || xmin::text, group_id FROM report_members")
                for try await (seq, place, group) in members.decode((Int64, String, Int64).self) {
                    places["member \(seq)"] = "\(place)@\(group)"
                }
                return places
            }
        }
        // Every batch named the one app again; it kept its number, and no batch took another
        // from the identity, which a batch per number would run out.
        let numbered = try await TestPostgres.withClient(url) { client in
            var values: [Int64] = []
            for try await value in try await client.query("SELECT last_value FROM report_apps_id_seq").decode(
                Int64.self)
            {
                values.append(value)
            }
            return values
        }
        #expect(numbered == [1])
    }
}
