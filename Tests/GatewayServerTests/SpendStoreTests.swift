import Foundation
import GatewayCore
import GatewayTestSupport
import Logging
import Testing

@testable import GatewayEnrichers

/// Keyword spend kept beside the store, on SQLite and on PostgreSQL: what the daily fetch,
/// `import spend` and the report rely on, whichever backend holds the records.
@Suite struct SpendStoreTests {
    static let backends = ["sqlite"] + (TestPostgres.expected ? ["postgres"] : [])

    /// A new, empty spend store of `backend`, and a function opening another one on the same
    /// data (a second replica, or a restart).
    static func make(_ backend: String) async throws -> @Sendable () async throws -> any SpendStore {
        let logger = Logger(label: "test")
        if backend == "postgres" {
            let url = try await TestPostgres.newDatabase()
            return { try await SpendStorage.open(storagePath: "", storageURL: url, logger: logger) }
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spend-\(UUID()).sqlite").path
        return { try await SpendStorage.open(storagePath: path, storageURL: nil, logger: logger) }
    }

    static func entry(_ keyword: Int64, _ day: String, _ amount: String, _ currency: String = "USD") -> SpendEntry {
        SpendEntry(
            campaignID: 542_370_539, adGroupID: 542_317_095, keywordID: keyword, day: day, currency: currency,
            amount: Decimal(string: amount)!)
    }

    @Test(arguments: backends)
    func daysAreReplacedAndSummedExactlyOverAPeriod(_ backend: String) async throws {
        let open = try await Self.make(backend)
        let store = try await open()
        // More than one statement's worth, as a year of a large account's keywords is.
        var many: [SpendEntry] = []
        for keyword in 0..<1200 { many.append(Self.entry(Int64(1000 + keyword), "2026-03-01", "0.10")) }
        try await store.replace(many, scopes: [])
        try await store.replace(
            [
                Self.entry(7, "2026-02-28", "1.00"), Self.entry(7, "2026-03-01", "2.50"),
                Self.entry(7, "2026-03-31", "0.01"), Self.entry(7, "2026-04-01", "100"),
                Self.entry(7, "2026-03-15", "3", "EUR"),
            ], scopes: [])
        // Apple corrects the day: the later fetch replaces it, never adds to it.
        try await store.replace([Self.entry(7, "2026-03-01", "2.25")], scopes: [])

        let other = try await open()
        let march = try await other.totals(from: "2026-03-01", until: "2026-04-01")
        #expect(march[7]?.amounts == ["USD": Decimal(string: "2.26")!, "EUR": 3])
        #expect(march[1000]?.amounts == ["USD": Decimal(string: "0.1")!] && march.count == 1201)
        #expect(march[7]?.campaignID == 542_370_539 && march[7]?.adGroupID == 542_317_095 && march[7]?.appID == nil)
        // Exact: a thousand and more dimes are no binary float's sum.
        #expect(try await other.totals(from: nil, until: nil)[7]?.amounts["USD"] == Decimal(string: "103.26")!)
        #expect(try await other.totals(from: "2026-04-01", until: nil)[7]?.amounts == ["USD": 100])
        #expect(try await other.totals(from: nil, until: "2026-03-01")[7]?.amounts == ["USD": 1])
        // More than six decimals is not a currency amount: refused, nothing written.
        await #expect(throws: (any Error).self) {
            try await store.replace([Self.entry(8, "2026-03-01", "0.0000001")], scopes: [])
        }
        #expect(try await other.totals(from: nil, until: nil)[8]?.amounts == nil)
    }

    /// An export without `Campaign ID` or `Ad Group ID` keeps where the keyword stands, from
    /// its other days (even the day it replaces) or the same file: a report of that day alone
    /// places its spend, and the next report of the campaign's day replaces it.
    @Test(arguments: backends)
    func aDayWithoutItsCampaignKeepsTheKeywordsCampaign(_ backend: String) async throws {
        let store = try await Self.make(backend)()
        try await store.replace([Self.entry(200, "2026-03-01", "10")], scopes: [])
        func unplaced(_ keyword: Int64, _ day: String, _ amount: Decimal) -> SpendEntry {
            SpendEntry(campaignID: 0, adGroupID: 0, keywordID: keyword, day: day, currency: "USD", amount: amount)
        }
        try await store.replace(
            [
                unplaced(200, "2026-03-01", 11), unplaced(200, "2026-03-02", 4), unplaced(201, "2026-03-02", 3),
                SpendEntry(campaignID: 9, adGroupID: 0, keywordID: 201, day: "2026-03-03", currency: "USD", amount: 1),
                unplaced(202, "2026-03-02", 2),
            ], scopes: [])
        let second = try await store.totals(from: "2026-03-02", until: "2026-03-03")
        #expect(second[200]?.amounts == ["USD": 4])
        #expect(second[200]?.campaignID == 542_370_539 && second[200]?.adGroupID == 542_317_095)
        #expect(second[201]?.campaignID == 9 && second[201]?.adGroupID == nil)
        #expect(second[202]?.campaignID == nil)
        #expect(try await store.totals(from: "2026-03-01", until: "2026-03-02")[200]?.campaignID == 542_370_539)
        // A keyword met under two campaigns (two files disagreeing) takes the latest day's
        // campaign with that day's ad group, never a pair no file gave.
        try await store.replace(
            [
                SpendEntry(
                    campaignID: 100, adGroupID: 900, keywordID: 555, day: "2026-01-05", currency: "USD", amount: 1),
                SpendEntry(
                    campaignID: 200, adGroupID: 800, keywordID: 555, day: "2026-01-06", currency: "USD", amount: 1),
            ], scopes: [])
        try await store.replace([unplaced(555, "2026-01-07", 1)], scopes: [])
        let seventh = try await store.totals(from: "2026-01-07", until: "2026-01-08")[555]
        #expect(seventh?.campaignID == 200 && seventh?.adGroupID == 800)
        // A row with its campaign but not its ad group takes the ad group the table knows.
        try await store.replace(
            [SpendEntry(campaignID: 200, adGroupID: 0, keywordID: 555, day: "2026-01-08", currency: "USD", amount: 1)],
            scopes: [])
        #expect(try await store.totals(from: "2026-01-08", until: "2026-01-09")[555]?.adGroupID == 800)
        // Apple's report of the campaign's day no longer has the keyword: its spend that day is gone.
        try await store.replace(
            [], scopes: [SpendScope(campaignID: 542_370_539, adGroupID: 0, day: "2026-03-02")])
        #expect(try await store.totals(from: "2026-03-02", until: "2026-03-03")[200] == nil)
    }

    /// A corrected report of a campaign's day replaces the whole day: a keyword it no longer
    /// has, or a currency it no longer reports in, is gone, and other campaigns and days stay.
    @Test(arguments: backends)
    func aCampaignsDayIsReplacedWhole(_ backend: String) async throws {
        let store = try await Self.make(backend)()
        try await store.replace(
            [
                Self.entry(200, "2026-03-01", "10"), Self.entry(201, "2026-03-01", "20"),
                Self.entry(201, "2026-03-02", "5"),
                SpendEntry(campaignID: 9, adGroupID: 1, keywordID: 300, day: "2026-03-01", currency: "USD", amount: 7),
            ], scopes: [])
        let corrected = SpendScope(campaignID: 542_370_539, adGroupID: 0, day: "2026-03-01")
        try await store.replace([Self.entry(200, "2026-03-01", "8", "EUR")], scopes: [corrected])
        let totals = try await store.totals(from: nil, until: nil)
        #expect(totals[200]?.amounts == ["EUR": 8])
        #expect(totals[201]?.amounts == ["USD": 5])
        #expect(totals[300]?.amounts == ["USD": 7])
        // Without a campaign (an export lacking the column), the keyword's day in any currency.
        try await store.replace([Self.entry(300, "2026-03-01", "6", "GBP")], scopes: [])
        #expect(try await store.totals(from: nil, until: nil)[300]?.amounts == ["GBP": 6])
        // An export of one ad group replaces that ad group's day, not its campaign's others'.
        func inGroup(_ group: Int64, _ keyword: Int64, _ amount: Decimal) -> SpendEntry {
            SpendEntry(
                campaignID: 5, adGroupID: group, keywordID: keyword, day: "2026-03-03", currency: "USD", amount: amount)
        }
        try await store.replace([inGroup(51, 501, 1), inGroup(51, 502, 2), inGroup(52, 503, 3)], scopes: [])
        try await store.replace(
            [inGroup(51, 501, 4)], scopes: [SpendScope(campaignID: 5, adGroupID: 51, day: "2026-03-03")])
        let groups = try await store.totals(from: "2026-03-03", until: "2026-03-04")
        #expect(groups[501]?.amounts == ["USD": 4] && groups[502] == nil && groups[503]?.amounts == ["USD": 3])
    }

    /// `import spend` of a file larger than any batch the store writes keeps every row: in
    /// parts, each part's replacing of the campaign's day took away the part before.
    @Test func aLargeSpendFileIsStoredWhole() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let commands = CommandLineTests()
        let config = try commands.storeConfig(env, providers: "iad: {}")
        let csv = env.directory.appendingPathComponent("month.csv").path
        var lines = ["Day,Campaign ID,Ad Group ID,Keyword ID,Spend,Currency"]
        for keyword in 1...6000 { lines.append("2026-03-01,77,88,\(keyword),0.10,USD") }
        try lines.joined(separator: "\n").write(toFile: csv, atomically: true, encoding: .utf8)
        let imported = try await commands.run(["import", "spend", "--config", config, csv])
        #expect(imported.status == 0, "\(imported.stdout)\(imported.stderr)")
        let store = try await SpendStorage.open(
            storagePath: env.databasePath, storageURL: nil, logger: Logger(label: "test"))
        let totals = try await store.totals(from: nil, until: nil)
        #expect(totals.count == 6000 && totals.values.allSatisfy { $0.amounts == ["USD": Decimal(string: "0.1")!] })
    }

    @Test(arguments: backends)
    func oneReplicaClaimsEachDaysFetch(_ backend: String) async throws {
        let open = try await Self.make(backend)
        let (first, second) = (try await open(), try await open())
        let start = Date(timeIntervalSince1970: 1_780_000_000)
        #expect(try await first.lastFetched() == nil)
        #expect(try await first.claimFetch(now: start, every: 86_400, lease: 3600))
        // The other replica finds the claim held, and so does the first asking again.
        #expect(try await second.claimFetch(now: start + 1, every: 86_400, lease: 3600) == false)
        #expect(try await first.claimFetch(now: start + 2, every: 86_400, lease: 3600) == false)
        try await first.fetched(at: start + 10)
        #expect(try await second.lastFetched() == start + 10)
        // Done: not due again for a day, whoever asks.
        #expect(try await second.claimFetch(now: start + 3600 * 5, every: 86_400, lease: 3600) == false)
        #expect(try await second.claimFetch(now: start + 10 + 86_400, every: 86_400, lease: 3600))
        // A replica that died holding the claim is taken over once its lease ends.
        #expect(try await first.claimFetch(now: start + 10 + 86_400 + 60, every: 86_400, lease: 3600) == false)
        #expect(try await first.claimFetch(now: start + 10 + 86_400 + 3600, every: 86_400, lease: 3600))
    }

    @Test(arguments: backends)
    func campaignsKeepTheirOrgOnceKnown(_ backend: String) async throws {
        let open = try await Self.make(backend)
        let store = try await open()
        try await store.noteCampaigns([1: 40_669_820, 2: nil])
        try await store.noteCampaigns([1: nil, 2: 77])
        let campaigns = try await open().campaigns()
        #expect(campaigns.map(\.campaignID) == [1, 2])
        #expect(campaigns.map(\.orgID) == [40_669_820, 77])
    }
}
