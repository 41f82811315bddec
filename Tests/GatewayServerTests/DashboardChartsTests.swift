import Foundation
import GatewayCore
import GatewayServer
import HummingbirdTesting
import Testing

/// The dashboard's daily charts and its network and country filters, over loopback HTTP
/// with a real SQLite store.
@Suite struct DashboardChartsTests {
    typealias Routes = ReportRoutesTests

    /// The `data-` attributes of each day's mark in the chart `id`, in order.
    static func marks(_ html: String, chart id: String) -> [[String: String]] {
        guard let start = html.range(of: #"<figure class="chart" id="chart-\#(id)">"#),
            let end = html.range(of: "</figure>", range: start.upperBound..<html.endIndex)
        else { return [] }
        let figure = html[start.upperBound..<end.lowerBound]
        return figure.matches(of: /<g class="mark"([^>]*)>/).map { match in
            var attributes: [String: String] = [:]
            for pair in match.output.1.matches(of: /data-([a-z]+)="([^"]*)"/) {
                attributes[String(pair.output.1)] = String(pair.output.2)
            }
            return attributes
        }
    }

    static func rows(_ response: TestResponse) throws -> [KeywordReport.Row] {
        try JSONDecoder().decode([KeywordReport.Row].self, from: Data(String(buffer: response.body).utf8))
    }

    /// Runs `body` against a live gateway holding ``ReportRoutesTests/ingest(_:keyword:)``'s records.
    static func withIngested(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(
            configuration: try Routes.configuration(env, auth: Routes.operatorOnly))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            try await Routes.ingest(client)
            try await body(client)
        }
    }

    @Test func eachChartHasOneMarkPerDayWithTheReportsNumbers() async throws {
        try await Self.withIngested { client in
            // The two keyword installs were made on 2020-08-04 (iAd's conversion date).
            let installs = try await client.execute(
                uri: "/dashboard?app_id=1234567890&since=2020-08-01&until=2020-08-08", method: .get,
                headers: Routes.bearer)
            let page = String(buffer: installs.body)
            #expect(installs.status == .ok)
            #expect(page.contains(#"<svg role="img" aria-labelledby="chart-installs-title""#))
            #expect(!page.contains("<script"))
            let installMarks = Self.marks(page, chart: "installs")
            #expect(installMarks.map { $0["day"] ?? "" } == (1...7).map { "2020-08-0\($0)" })
            #expect(installMarks.map { $0["attributed"] ?? "" } == ["0", "0", "0", "2", "0", "0", "0"])
            #expect(installMarks.allSatisfy { $0["organic"] == "0" })
            #expect(page.contains("<title>2020-08-04: 2 attributed, 0 organic</title>"), "\(page)")

            // The purchases were made on 2023-11-14: the chart's revenue is the JSON report's.
            let period = "app_id=1234567890&since=2023-11-10&until=2023-11-20"
            let revenue = String(
                buffer: try await client.execute(uri: "/dashboard?" + period, method: .get, headers: Routes.bearer)
                    .body)
            let revenueMarks = Self.marks(revenue, chart: "revenue")
            #expect(revenueMarks.count == 10 && revenueMarks.allSatisfy { $0["currency"] == "USD" })
            let json = try Self.rows(
                try await client.execute(uri: "/v1/reports/keywords?" + period, method: .get, headers: Routes.bearer))
            let total = json.compactMap { $0.revenue["USD"] }.reduce(Decimal(0), +)
            #expect(total == Decimal(string: "15.98"))
            let charted = revenueMarks.compactMap { Decimal(string: $0["revenue"] ?? "") }
            #expect(charted.count == 10 && charted.reduce(0, +) == total)
            #expect(revenueMarks.first { $0["revenue"] != "0" }?["day"] == "2023-11-14")
        }
    }

    @Test func theDailyRouteGivesTheChartsNumbers() async throws {
        try await Self.withIngested { client in
            func get(_ uri: String) async throws -> String {
                String(buffer: try await client.execute(uri: uri, method: .get, headers: Routes.bearer).body)
            }
            struct Day: Decodable, Equatable {
                let date: String
                let installs_attributed: Int
                let installs_organic: Int
                let revenue: [String: Decimal]
            }
            struct Daily: Decodable { let days: [Day] }
            for period in [
                "app_id=1234567890&since=2020-08-01&until=2020-08-08",
                "app_id=1234567890&since=2023-11-10&until=2023-11-20",
            ] {
                let daily = try JSONDecoder().decode(
                    Daily.self, from: Data(try await get("/v1/reports/daily?" + period).utf8))
                let page = try await get("/dashboard?" + period)
                let installs = Self.marks(page, chart: "installs")
                #expect(daily.days.map(\.date) == installs.map { $0["day"] ?? "" })
                #expect(daily.days.map { String($0.installs_attributed) } == installs.map { $0["attributed"] ?? "" })
                #expect(daily.days.map { String($0.installs_organic) } == installs.map { $0["organic"] ?? "" })
                let revenue = Self.marks(page, chart: "revenue").map { Decimal(string: $0["revenue"] ?? "") ?? -1 }
                if !revenue.isEmpty { #expect(daily.days.map { $0.revenue["USD"] ?? 0 } == revenue) }
            }
            let november = try await get("/v1/reports/daily?app_id=1234567890&since=2023-11-10&until=2023-11-20")
            #expect(
                november.contains(
                    #"{"date":"2023-11-14","installs_attributed":0,"installs_organic":0,"revenue":{"USD":15.98}}"#),
                "\(november)")
        }
    }

    @Test func networkAndCountryFilterTheTableTheChartsTheLinksAndTheCSV() async throws {
        try await Self.withIngested { client in
            func get(_ uri: String) async throws -> TestResponse {
                try await client.execute(uri: uri, method: .get, headers: Routes.bearer)
            }
            // The keyword installs were in the US; the organic user's gave no country.
            let american = try Self.rows(try await get("/v1/reports/keywords?country=US"))
            #expect(american.count == 1 && american[0].network == "Apple Search Ads" && american[0].installs == 2)
            #expect(american[0].revenue == ["USD": Decimal(string: "14.98")!])
            #expect(try Self.rows(try await get("/v1/reports/keywords?country=FR")).isEmpty)
            // The organic user's purchase is dated (2023) before their install arrived (now):
            // no install brought it, so it is unattributed, not the organic line's.
            let organic = try Self.rows(try await get("/v1/reports/keywords?network=organic"))
            #expect(organic.count == 1 && organic[0].installs == 1 && organic[0].revenue.isEmpty)
            let unattributed = try Self.rows(try await get("/v1/reports/keywords?network=unattributed"))
            #expect(unattributed.count == 1 && unattributed[0].revenue == ["USD": 1])

            let page = String(buffer: try await get("/dashboard?country=us").body)
            // The country kept, upper case, in the drill-down links, the form and the CSV link.
            #expect(
                page.contains(
                    #"href="/dashboard?app_id=1234567890&amp;network=Apple%20Search%20Ads&amp;country=US&amp;as_of="#),
                "\(page)")
            #expect(page.contains(/href="\/dashboard\?country=US&amp;as_of=[0-9a-f]{32}&amp;format=csv"/))
            #expect(page.contains(#"name="country" value="US""#))
            #expect(!page.contains(">organic<"))

            let csv = String(buffer: try await get("/dashboard?country=US&format=csv").body)
            let lines = csv.split(separator: "\r\n").map(String.init)
            #expect(lines.count == 2 && lines[1].hasPrefix("1234567890,Apple Search Ads,"), "\(lines)")
            let organicCSV = String(buffer: try await get("/dashboard?network=organic&format=csv").body)
            #expect(!organicCSV.contains("Apple Search Ads") && organicCSV.split(separator: "\r\n").count == 2)
        }
    }
}
