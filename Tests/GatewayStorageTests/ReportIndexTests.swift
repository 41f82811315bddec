import Foundation
import GatewayCore
import GatewayTestSupport
import Logging
import Testing

@testable import GatewayStorage

/// The report index against the report counted from every record: the same lines, names,
/// counts and days, whatever the filters, after records arrive in several batches, are
/// changed by a forget request, or deleted by retention, and with waiting tokens beside.
@Suite struct ReportIndexTests {
    /// The backends that keep a report index.
    static let backends: [StoreBackend] = StoreBackend.available.filter { $0 != .memory }

    static let start = Date(timeIntervalSince1970: 1_780_000_000)

    /// What the report reads of every stored record, counted in memory: the reference.
    static func counted(
        _ store: any AttributionStore, _ filters: KeywordReport, appID: String?, live: [AttributionRecord],
        days: DailySeries
    ) async throws -> (rows: [KeywordReport.Row], daily: DailySeries) {
        var report = filters
        for record in live where appID == nil || record.appID == appID { report.add(record) }
        var cursor: Int64 = 0
        while true {
            let page = try await store.reportRecords(
                appID: appID, kinds: [.install, .reinstall, .purchase, .refund], after: cursor, limit: 500)
            if page.scanned == 0 { break }
            for record in page.records { report.add(record) }
            cursor = page.cursor
        }
        return report.rowsAndDaily(days)
    }

    static let filters: [(KeywordReport, String?)] = [
        (KeywordReport(), nil),
        (KeywordReport(), "1"),
        (
            KeywordReport(
                purchasesSince: start.addingTimeInterval(5 * 86400),
                purchasesUntil: start.addingTimeInterval(20 * 86400)), nil
        ),
        (KeywordReport(network: "Apple Search Ads"), "1"),
        (KeywordReport(network: "unattributed"), nil),
        (KeywordReport(country: "US"), nil),
        (KeywordReport(purchasesSince: start.addingTimeInterval(3 * 86400), network: "organic", country: "DE"), "1"),
    ]

    static func expectSameReports(
        _ store: any AttributionStore, live: [AttributionRecord] = [], leastLines: Int = 6
    ) async throws {
        let indexed = try #require(store as? any ReportIndexStore)
        try await indexed.catchUpReportIndex(batch: 97)
        #expect(try await indexed.reportIndexQueue().waiting == 0)
        let days = DailySeries(since: start.addingTimeInterval(-2 * 86400), until: start.addingTimeInterval(40 * 86400))
        for (filters, appID) in filters {
            let expected = try await counted(store, filters, appID: appID, live: live, days: days)
            let sums = try await indexed.indexedReport(filters, appID: appID, live: live, days: days)
            if filters.network == nil, filters.country == nil { #expect(expected.rows.count >= leastLines) }
            #expect(sums.rows == expected.rows, "filters \(filters), app \(appID ?? "any")")
            #expect(sums.daily == expected.daily, "filters \(filters), app \(appID ?? "any")")
        }
    }

    @Test(arguments: backends)
    func theIndexedReportIsTheReportOfEveryRecord(backend: StoreBackend) async throws {
        let store = try await backend.make(clock: TestClock()).store
        var generator = RecordGenerator(seed: 7, start: Self.start)
        let records = (0..<900).map { _ in generator.next() }
        // Batches indexed between others: groups made apart are joined by later records.
        for (index, batch) in records.chunked(into: 150).enumerated() {
            _ = try await store.ingest(batch.map { RoutedRecord(record: $0, sinks: []) })
            if index % 2 == 0, let indexed = store as? any ReportIndexStore {
                _ = try await indexed.indexReport(limit: 60)
            }
        }
        try await Self.expectSameReports(store)

        // Tokens Apple has not answered, of a user with records and of new ones.
        var live: [AttributionRecord] = []
        for user in ["u3", "u17", "waiting-1"] {
            var token = AttributionRecord(
                provider: "adservices", kind: .install, dedupeKey: "", receivedAt: Self.start.addingTimeInterval(86400),
                attributed: false, resolution: .pending)
            token.appID = "1"
            token.appUserID = user
            live.append(token)
        }
        try await Self.expectSameReports(store, live: live)
    }

    @Test(arguments: backends)
    func forgottenAndExpiredRecordsLeaveTheIndex(backend: StoreBackend) async throws {
        let store = try await backend.make(clock: TestClock()).store
        var generator = RecordGenerator(seed: 11, start: Self.start)
        let records = (0..<600).map { _ in generator.next() }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        try await Self.expectSameReports(store)

        for user in ["u1", "u2", "u5"] {
            _ = try await store.forget(
                ForgetSubject(appID: "1", appUserID: user), requestID: UUID().uuidString.lowercased(),
                userDigest: user, sinks: [], now: Self.start.addingTimeInterval(50 * 86400))
        }
        try await Self.expectSameReports(store)
        let removed = try await store.deleteRecords(
            receivedBefore: Self.start.addingTimeInterval(10 * 86400), limit: 10_000)
        #expect(removed > 0)
        try await Self.expectSameReports(store)
    }

    @Test(arguments: backends)
    func theIndexedPostbacksAreThoseOfEveryRecord(backend: StoreBackend) async throws {
        let store = try await backend.make(clock: TestClock()).store
        var generator = RecordGenerator(seed: 5, start: Self.start)
        let records = (0..<1500).map { _ in generator.next() }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        _ = try await store.deleteRecords(receivedBefore: Self.start.addingTimeInterval(3 * 86400), limit: 10_000)
        let indexed = try #require(store as? any ReportIndexStore)
        try await indexed.catchUpReportIndex(batch: 500)
        let periods = [
            SKANReport(),
            SKANReport(
                since: Self.start.addingTimeInterval(10 * 86400), until: Self.start.addingTimeInterval(20 * 86400)),
        ]
        for period in periods {
            for appID in [nil, "2"] {
                var expected = period
                var cursor: Int64 = 0
                while true {
                    let page = try await store.reportRecords(
                        appID: appID, kinds: [.postback], after: cursor, limit: 500)
                    if page.scanned == 0 { break }
                    for record in page.records { expected.add(record) }
                    cursor = page.cursor
                }
                if appID == nil, period.since == nil {
                    #expect(expected.total > 50 && expected.events.count == 3 && expected.fineValues.count > 10)
                }
                #expect(expected.total > 0)
                #expect(try await indexed.indexedPostbacks(period, appID: appID) == expected)
            }
        }
    }

    @Test(arguments: backends)
    func theIndexerKeepsUpWithRecordsWithoutAReportAsked(backend: StoreBackend) async throws {
        let store = try await backend.make(clock: TestClock()).store
        let indexed = try #require(store as? any ReportIndexStore)
        var generator = RecordGenerator(seed: 3, start: Self.start)
        let indexer = ReportIndexer(
            store: indexed, batchSize: 40, idle: .milliseconds(10), pause: .zero, logger: Logger(label: "test"))
        let running = Task { try await indexer.run() }
        defer { running.cancel() }
        func waitForIndexer() async throws {
            for _ in 0..<3000 where try await indexed.reportIndexQueue().waiting > 0 {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        for _ in 0..<3 {
            let records = (0..<150).map { _ in generator.next() }
            _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
            try await waitForIndexer()
            #expect(try await indexed.reportIndexQueue().waiting == 0)
        }
        // What it kept, read without indexing first, is the report of every record.
        let days = DailySeries(since: Self.start, until: Self.start.addingTimeInterval(30 * 86400))
        let expected = try await Self.counted(store, KeywordReport(), appID: nil, live: [], days: days)
        let sums = try await indexed.indexedReport(KeywordReport(), appID: nil, live: [], days: days)
        #expect(expected.rows.count > 5)
        #expect(sums.rows == expected.rows && sums.daily == expected.daily)
    }

    @Test(arguments: backends)
    func aReportIndexesEveryEntryQueuedBeforeItWhateverItsBatches(backend: StoreBackend) async throws {
        let store = try await backend.make(clock: TestClock()).store
        let indexed = try #require(store as? any ReportIndexStore)
        // A user's many purchases, queued twice (written, then rewritten by a forget
        // request), then a new user's install: the last entry of the queue.
        let purchases = (0..<300).map { index in
            var purchase = AttributionRecord(
                provider: "s2s", kind: .purchase, dedupeKey: "p\(index)", receivedAt: Self.start, attributed: false)
            purchase.appID = "1"
            purchase.appUserID = "big"
            purchase.transactionRef = "T\(index)"
            return purchase
        }
        _ = try await store.ingest(purchases.map { RoutedRecord(record: $0, sinks: []) })
        _ = try await store.forget(
            ForgetSubject(appID: "1", appUserID: "big"), requestID: "forget-1", userDigest: "big", sinks: [],
            now: Self.start)
        var install = StoreConformanceTests.install("fresh", at: Self.start)
        install.resolution = .resolved
        install.attributed = false
        _ = try await store.ingest([RoutedRecord(record: install, sinks: [])])
        try await indexed.catchUpReportIndex(batch: 200)
        let sums = try await indexed.indexedReport(KeywordReport(), appID: "1", live: [], days: nil)
        #expect(sums.rows.first { $0.network == "organic" }?.installs == 1)
        #expect(try await indexed.reportIndexQueue().waiting == 0)
    }

    @Test(arguments: backends)
    func idsTheReportHoldsEqualAreOnePerson(backend: StoreBackend) async throws {
        let store = try await backend.make(clock: TestClock()).store
        // `á` as one character and as `a` with a combining accent: one Swift string, one
        // user; and a campaign named in both forms, one line.
        var records: [AttributionRecord] = []
        for (index, user) in ["\u{e1}", "a\u{301}"].enumerated() {
            var install = StoreConformanceTests.install(
                user, key: "k\(index)", at: Self.start.addingTimeInterval(Double(index)))
            install.campaignID = nil
            install.campaignName = ["caf\u{e9}", "cafe\u{301}"][index]
            install.network = "Vendor"
            var purchase = AttributionRecord(
                provider: "s2s", kind: .purchase, dedupeKey: "p\(index)", receivedAt: Self.start.addingTimeInterval(60),
                attributed: false)
            purchase.appID = "1"
            purchase.appUserID = user
            purchase.transactionRef = "T\(index)"
            records += [install, purchase]
        }
        var long = StoreConformanceTests.install("long", at: Self.start)
        // Longer than a PostgreSQL index entry may be, in every field the index keys.
        long.campaignName = String(repeating: "\u{4e2d}", count: 1000)
        long.keyword = String(repeating: "\u{6587}", count: 1000)
        records.append(long)
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        try await Self.expectSameReports(store, leastLines: 2)
        let indexed = try #require(store as? any ReportIndexStore)
        let rows = try await indexed.indexedReport(KeywordReport(), appID: "1", live: [], days: nil).rows
        #expect(rows.first { $0.network == "Vendor" }.map { ($0.installs, $0.payingUsers) } ?? (0, 0) == (1, 1))
    }

    @Test(arguments: backends)
    func installsOfOneTimeNameTheirLineByRecordID(backend: StoreBackend) async throws {
        let store = try await backend.make(clock: TestClock()).store
        // Three users' installs of one keyword at one time, two naming it `x` (records a and
        // c) and one `y` (record b): the report takes the names of the greatest record id.
        let records = [("b", "y"), ("c", "x"), ("a", "x")].enumerated().map { index, install in
            var record = StoreConformanceTests.install(
                "user-\(index)", at: Self.start.addingTimeInterval(Double(index)))
            record.recordID = "00000000-0000-7000-8000-00000000000\(install.0)"
            record.conversionDate = Self.start
            (record.campaignID, record.adGroupID, record.keywordID) = (1, 2, 3)
            record.keyword = "keyword \(install.1)"
            return record
        }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        try await Self.expectSameReports(store, leastLines: 1)
        let indexed = try #require(store as? any ReportIndexStore)
        let rows = try await indexed.indexedReport(KeywordReport(), appID: "1", live: [], days: nil).rows
        #expect(rows.map(\.keyword) == ["keyword x"])
    }

    @Test func aNodeNumberIsTheSameInEveryProcess() {
        // Kept in the store: a number that changed between runs would split a user's records.
        #expect(SQLiteStore.nodeNumber("1\u{0}u\u{0}user-7") == SQLiteStore.nodeNumber("1\u{0}u\u{0}user-7"))
        #expect(SQLiteStore.nodeNumber("") == Int64(bitPattern: 0xe3b0_c442_98fc_1c14))
    }
}

/// Installs, purchases and refunds of few users, devices and transactions, so that records
/// link in every way the report joins them: users sharing devices, two users claiming one
/// transaction, testers, refunds, renamed keywords, late and missing answers.
struct RecordGenerator {
    private var state: UInt64
    private var index = 0
    let start: Date

    init(seed: UInt64, start: Date) {
        state = seed
        self.start = start
    }

    private mutating func random(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }

    private mutating func chance(_ percent: Int) -> Bool { random(100) < percent }

    mutating func next() -> AttributionRecord {
        index += 1
        let roll = random(100)
        let kind: RecordKind =
            roll < 42
            ? .install
            : roll < 47
                ? .reinstall
                : roll < 80
                    ? .purchase
                    : roll < 88
                        ? .refund
                        : roll < 97 ? .postback : .session
        let receivedAt = start.addingTimeInterval(Double(index) * 2400 + Double(random(600)))
        var record = AttributionRecord(
            provider: chance(50) ? "iad" : "s2s", kind: kind, dedupeKey: "generated:\(index)", receivedAt: receivedAt,
            attributed: false, resolution: .resolved)
        record.appID = chance(85) ? "1" : "2"
        let user = random(120)
        if chance(85) { record.appUserID = "u\(user)" }
        // Mostly the user's own device; now and then one shared, or the unset one.
        if chance(35) {
            record.idfv =
                chance(8) ? "dev-shared-\(random(3))" : chance(8) ? AttributionRecord.unsetDeviceID : "dev-\(user)"
            if chance(30) { record.idfv = record.idfv?.uppercased() }
        }
        record.isTest = chance(4)
        switch kind {
        case .install, .reinstall:
            switch random(6) {
            case 0, 1, 2:
                record.attributed = true
                record.network = chance(80) ? nil : "Apple Search Ads"
                record.provider = "iad"
                record.campaignID = Int64(1 + random(2))
                record.campaignName = chance(70) ? "Campaign \(record.campaignID!)" : "Renamed \(random(3))"
                record.adGroupID = Int64(10 + random(2))
                record.adGroupName = chance(50) ? "Group" : nil
                record.keywordID = Int64(100 + random(3))
                record.keyword = chance(60) ? "keyword \(record.keywordID!)" : chance(50) ? nil : "other \(random(2))"
                record.keywordMatchType = ["Exact", "EXACT", "BROAD", nil][random(4)]
            case 3:
                record.attributed = true
                record.provider = "s2s"
                record.network = ["Singular Partner", "Meta"][random(2)]
                record.campaignName = "vendor \(random(2))"
            case 4:
                record.resolution = .resolved
            default:
                record.resolution = [.notFound, .pending, .invalid][random(3)]
            }
            record.countryOrRegion = ["US", "DE", "us", nil, "ZZZ"][random(5)]
            if chance(40) { record.conversionDate = receivedAt.addingTimeInterval(-Double(random(5 * 86400))) }
        case .purchase:
            // Mostly the buyer's own transaction; now and then one another user claims too.
            if chance(85) { record.transactionRef = chance(6) ? "T-shared-\(random(6))" : "T\(user)-\(random(3))" }
            if chance(85) {
                record.revenue =
                    [Decimal(string: "0.99"), Decimal(string: "4.99"), Decimal(string: "19.90")][random(3)]
                record.currency = ["USD", "EUR"][random(2)]
            }
            if chance(50) { record.purchaseDate = receivedAt.addingTimeInterval(-Double(random(3 * 86400))) }
        case .postback:
            record.provider = "skadnetwork"
            if chance(70) {
                record.sourceIdentifier = "\(1000 + random(4))"
            } else if chance(70) {
                record.campaignID = Int64(random(3))
            }
            if chance(60) { record.fineValue = random(64) }
            if chance(50) { record.coarseValue = ["low", "medium", "high"][random(3)] }
            if chance(50) { record.didWin = chance(70) }
            if chance(10) { record.signature = chance(50) ? "invalid" : "verified" }
            if chance(5) { record.duplicateOf = "earlier" }
            if chance(40) { record.events = Array(["purchase", "trial", "purchase", "subscribe"].prefix(random(5))) }
        case .refund:
            record.transactionRef = chance(10) ? "T-shared-\(random(6))" : "T\(user)-\(random(3))"
        default:
            break
        }
        return record
    }
}
