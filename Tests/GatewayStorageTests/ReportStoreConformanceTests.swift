import Foundation
import GatewayCore
import GatewayPostgres
import GatewayTestSupport
import PostgresNIO
import Testing

@testable import GatewayStorage

/// What the reports read of the stored records, on every backend: exactly the report's
/// fields of the records asked for, revenue to the last digit, in storage order, a page at
/// a time, whatever a damaged body holds.
@Suite struct ReportStoreConformanceTests {
    static let kinds: Set<RecordKind> = [.install, .reinstall, .purchase, .refund, .postback]

    /// Records with every field the reports read, and some they do not.
    static func records(at now: Date) -> [AttributionRecord] {
        var install = StoreConformanceTests.install("u1", at: now)
        install.idfv = "6D92078A-8246-4BA4-AE5B-76104861E7DC"
        install.network = "Apple Search Ads"
        install.campaignID = 9_007_199_254_740_993  // past a double's exact integers
        install.campaignName = "Spring \"quoted\" ünïcode"
        install.adGroupID = 2
        install.adGroupName = "Group"
        install.keywordID = 3
        install.keywordMatchType = "EXACT"
        install.countryOrRegion = "DE"
        install.conversionDate = now.addingTimeInterval(-0.123)
        install.resolution = .resolved
        install.isTest = true
        install.raw = .object(["payload": .string(String(repeating: "x", count: 3000))])
        install.orgName = "not read by reports"
        var purchase = AttributionRecord(
            provider: "s2s", kind: .purchase, dedupeKey: "s2s:purchase:T1", receivedAt: now.addingTimeInterval(1.5),
            attributed: false, resolution: .notFound)
        purchase.appID = "1"
        purchase.appUserID = "u1"
        purchase.revenue = Decimal(string: "19.99")
        purchase.currency = "EUR"
        purchase.transactionRef = "T1"
        purchase.purchaseDate = now
        purchase.duplicateOf = "another"
        var refund = purchase
        refund.recordID = AttributionRecord.newRecordID()
        refund.kind = .refund
        refund.dedupeKey = "s2s:refund:T1"
        refund.revenue = Decimal(string: "0.1")
        var postback = AttributionRecord(
            provider: "skadnetwork", kind: .postback, dedupeKey: "skan:1", receivedAt: now, attributed: true)
        postback.appID = "1"
        postback.sourceIdentifier = "1234"
        postback.fineValue = 42
        postback.coarseValue = "high"
        postback.didWin = false
        postback.signature = "verified"
        postback.events = ["purchase", "trial"]
        var session = AttributionRecord(provider: "s2s", kind: .session, dedupeKey: "s2s:session:1", receivedAt: now)
        session.appID = "1"
        let otherApp = StoreConformanceTests.install("u2", at: now, app: "2")
        return [install, purchase, session, refund, postback, otherApp]
    }

    @Test(arguments: StoreBackend.available)
    func givesTheReportsFieldsOfTheRecordsAskedForInStorageOrder(backend: StoreBackend) async throws {
        let clock = TestClock()
        let store = try await backend.make(clock: clock).store
        let records = Self.records(at: clock.now)
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })

        // Pages of two: every record is scanned once, a session and another app's left out.
        var read: [AttributionRecord] = []
        var scanned: [Int] = []
        var cursor: Int64 = 0
        while true {
            let page = try await store.reportRecords(appID: "1", kinds: Self.kinds, after: cursor, limit: 2)
            if page.scanned == 0 { break }
            read += page.records
            scanned.append(page.scanned)
            cursor = page.cursor
        }
        #expect(scanned == [2, 2, 2])
        var expected: [AttributionRecord] = []
        for record in records where record.appID == "1" && record.kind != .session {
            expected.append(try #require(try await store.record(id: record.recordID)).reportView)
        }
        #expect(read == expected)
        #expect(read.first?.campaignID == 9_007_199_254_740_993)
        #expect(read.first?.raw == nil && read.first?.orgName == nil && read.first?.dedupeKey == "")
        // Read as a double, 19.99 would come back 19.989999999999998.
        #expect(read.dropFirst().first?.revenue == Decimal(string: "19.99"))

        let all = try await store.reportRecords(appID: nil, kinds: [.install], after: 0, limit: 100)
        #expect(all.records.map(\.appUserID) == ["u1", "u2"])
        #expect(all.scanned == records.count)
    }

    @Test func aSQLiteBodyThatIsNotJSONIsLeftOut() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("report-\(UUID()).sqlite").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try SQLiteStore(path: path, durability: .normal)
        let records = [0, 1, 2].map { StoreConformanceTests.install("u\($0)", at: Date()) }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        try await store.pool.write { db in
            try db.execute(
                sql: "UPDATE records SET body = '{not json' WHERE record_id = ?", arguments: [records[1].recordID])
        }
        let page = try await store.reportRecords(appID: nil, kinds: [.install], after: 0, limit: 10)
        #expect(page.records.map(\.appUserID) == ["u0", "u2"])
        #expect(page.scanned == 3)
    }

    @Test(.enabled(if: TestPostgres.expected)) func aPostgreSQLBodyThatIsNotJSONIsLeftOut() async throws {
        let url = try await TestPostgres.newDatabase()
        let store = try await PostgresStore(url: url, poolSize: 2, outboxLease: .seconds(60))
        let records = [0, 1, 2].map { StoreConformanceTests.install("u\($0)", at: Date()) }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        try await TestPostgres.withClient(url) { client in
            try await client.query("UPDATE records SET body = '{not json' WHERE record_id = \(records[1].recordID)")
        }
        let page = try await store.reportRecords(appID: nil, kinds: [.install], after: 0, limit: 10)
        #expect(page.records.map(\.appUserID) == ["u0", "u2"])
        #expect(page.scanned == 3)
    }
}
