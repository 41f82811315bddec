import Foundation
import GatewayCore
import Testing

/// The report's installs and revenue day by day, and its network and country filters.
@Suite struct DailySeriesTests {
    typealias Records = KeywordReportTests
    static let day: TimeInterval = 86400
    /// 2023-11-14T22:13:20Z: the records' start.
    static let start = Records.start

    static func date(_ text: String) -> Date { ISO8601.parse(text + "T00:00:00Z")! }

    @Test func eachDayOfThePeriodHasAnEntryDaysWithoutDataAtZero() {
        let series = DailySeries(since: Self.date("2023-11-01"), until: Self.date("2023-12-01"))
        #expect(series.days.count == 30)
        #expect(series.days.first == "2023-11-01" && series.days.last == "2023-11-30")
        #expect(series.attributed == Array(repeating: 0, count: 30) && series.organic.count == 30)
        // A period ending at a time in a day includes that day; one starting in a day, its day.
        let partial = DailySeries(
            since: ISO8601.parse("2023-11-01T12:00:00Z"), until: ISO8601.parse("2023-11-03T00:00:01Z"))
        #expect(partial.days == ["2023-11-01", "2023-11-02", "2023-11-03"])
        // Without a period, the 30 days up to now; a long one keeps its last days.
        let recent = DailySeries(since: nil, until: nil, now: Self.date("2023-11-30").addingTimeInterval(3600))
        #expect(recent.days.count == 30 && recent.days.last == "2023-11-30")
        let long = DailySeries(since: Self.date("2000-01-01"), until: Self.date("2023-12-01"))
        #expect(long.days.count == DailySeries.maxDays && long.days.last == "2023-11-30")
    }

    @Test func installsAndRevenueCountOnTheirDayAsTheTableCountsThem() {
        var report = KeywordReport(purchasesSince: Self.date("2023-11-13"), purchasesUntil: Self.date("2023-11-17"))
        // Two keyword installs on the 14th (one user twice: counted once), an organic one on the 15th.
        report.add(Records.install("a", keyword: "sleep"))
        report.add(Records.install("a", keyword: "sleep", at: 60))
        report.add(Records.install("b", keyword: "sleep", at: 60))
        var organic = Records.install("c", keyword: nil, at: Self.day)
        organic.resolution = .resolved
        report.add(organic)
        // One purchase twice (SDK and backend), one refunded, one in EUR the next day.
        report.add(Records.purchase("a", "t1", "4.99"))
        report.add(Records.purchase("a", "t1", "4.99"))
        report.add(Records.purchase("b", "t2", "9.99"))
        var refund = AttributionRecord(provider: "s2s", kind: .refund, dedupeKey: "r", receivedAt: Self.start)
        refund.appID = "1"
        refund.transactionRef = "t2"
        report.add(refund)
        var euros = Records.purchase("c", "t3", "2.50", "EUR")
        euros.receivedAt = Self.start.addingTimeInterval(Self.day)
        report.add(euros)

        let (rows, daily) = report.rowsAndDaily(
            DailySeries(since: Self.date("2023-11-13"), until: Self.date("2023-11-17")))
        #expect(daily.days == ["2023-11-13", "2023-11-14", "2023-11-15", "2023-11-16"])
        #expect(daily.attributed == [0, 2, 0, 0] && daily.organic == [0, 0, 1, 0])
        let (usd, eur) = (Decimal(string: "4.99")!, Decimal(string: "2.5")!)
        #expect(daily.revenue == ["USD": [0, usd, 0, 0], "EUR": [0, 0, eur, 0]])
        // One purchase in each: the first by code.
        #expect(daily.mainCurrency == "EUR")
        // Charted by how many bought in it, not by amounts that do not compare: two purchases
        // of ¥500 outweigh one of $4.99, one of ¥500 does not outweigh two in dollars.
        var yen = daily
        yen.addRevenue(Decimal(1000), "JPY", purchases: 2, onEpochDay: DailySeries.epochDay(Self.start))
        #expect(yen.mainCurrency == "JPY")
        var dollars = daily
        dollars.addRevenue(Decimal(500), "JPY", purchases: 1, onEpochDay: DailySeries.epochDay(Self.start))
        dollars.addRevenue(Decimal(1), "USD", purchases: 1, onEpochDay: DailySeries.epochDay(Self.start))
        #expect(dollars.mainCurrency == "USD")
        // The same numbers as the table's.
        #expect(rows == report.rows)
        #expect(rows.map(\.installs).reduce(0, +) == 3)
        let tabled = rows.compactMap { $0.revenue["USD"] }.reduce(Decimal(0), +)
        #expect(tabled == daily.revenue["USD"]!.reduce(0, +))
    }

    @Test func networkAndCountryFiltersKeepTheirLinesAndTheirPurchases() {
        var records: [AttributionRecord] = []
        var american = Records.install("us", keyword: "sleep")
        american.countryOrRegion = "US"
        var british = Records.install("gb", keyword: "sleep", at: 1)
        british.countryOrRegion = "GB"
        var organic = Records.install("org", keyword: nil, at: 2)
        organic.resolution = .resolved
        records += [american, british, organic]
        records += [
            Records.purchase("us", "t1", "1"), Records.purchase("gb", "t2", "2"), Records.purchase("org", "t3", "4"),
            Records.purchase("nobody", "t4", "8"),
        ]
        func report(network: String? = nil, country: String? = nil) -> [KeywordReport.Row] {
            var report = KeywordReport(network: network, country: country)
            for record in records { report.add(record) }
            return report.rows
        }
        let all = report()
        #expect(Set(all.compactMap(\.network)) == ["Apple Search Ads", "organic", "unattributed"])

        let organicOnly = report(network: "organic")
        #expect(organicOnly.count == 1 && organicOnly[0].installs == 1 && organicOnly[0].revenue == ["USD": 4])

        let us = report(country: "US")
        #expect(us.count == 1 && us[0].network == "Apple Search Ads")
        #expect(us[0].installs == 1 && us[0].payingUsers == 1 && us[0].revenue == ["USD": 1])
        // A user whose install gave no country, and a buyer with no install, are in no country.
        #expect(report(country: "FR").isEmpty)
        #expect(report(network: "Apple Search Ads", country: "GB").first?.revenue == ["USD": 2])
    }
}
