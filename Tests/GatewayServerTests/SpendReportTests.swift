import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GatewayTestSupport
import Hummingbird
import HummingbirdTesting
import Testing

/// `import spend` and the report's spend, cost and ROAS columns, as a user runs them.
extension CommandLineTests {
    @Test(arguments: backends)
    func importedSpendGivesTheReportCostsAndROASForItsPeriod(_ backend: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let database = backend == "postgres" ? try await TestPostgres.newDatabase() : nil
        let config = try storeConfig(env, providers: "iad: {}, s2s: {}", postgres: database)
        // Four users through the keyword, three installed in March and one the year before;
        // one of them buying twice in March.
        let installs = ["a", "b", "c", "d"].map { user in
            IAdPayloads.attributed(user: user).replacingOccurrences(of: "\n", with: "")
                .replacingOccurrences(
                    of: "2020-08-04T17:19:41.250Z", with: user == "d" ? "2025-06-01T10:00:00Z" : "2026-03-02T10:00:00Z")
        }
        func purchase(_ transaction: String, _ amount: String, _ timestamp: Int) -> String {
            #"{"type":"purchase","app_id":"1234567890","app_user_id":"a","revenue":\#(amount),"currency":"USD","transaction_id":"\#(transaction)","timestamp":\#(timestamp)}"#
        }
        let march = 1_772_928_000  // 2026-03-08
        let installFile = env.directory.appendingPathComponent("installs.jsonl").path
        let purchaseFile = env.directory.appendingPathComponent("purchases.jsonl").path
        try installs.joined(separator: "\n").write(toFile: installFile, atomically: true, encoding: .utf8)
        try [purchase("t1", "30.00", march), purchase("t2", "15.00", march + 86_400)].joined(separator: "\n")
            .write(toFile: purchaseFile, atomically: true, encoding: .utf8)
        #expect(try await run(["import", "--provider", "iad", "--config", config, installFile]).status == 0)
        #expect(try await run(["import", "--provider", "s2s", "--config", config, purchaseFile]).status == 0)

        // The UI's export: a title row, a keyword's day split by country, a day in April.
        let csv = env.directory.appendingPathComponent("spend.csv").path
        try """
        "Keywords report, Mar 1 - Apr 1"
        Day,Campaign ID,Ad Group ID,Keyword ID,Country or Region,Spend,Currency
        2026-03-01,542370539,542317095,87675432,US,10.00,USD
        2026-03-01,542370539,542317095,87675432,CA,2.00,USD
        2026-03-31,542370539,542317095,87675432,US,18.00,USD
        2026-04-01,542370539,542317095,87675432,US,500.00,USD
        2026-03-02,542370539,542317095,87675432,US,twelve,USD
        2026-03-05,542370539,542317095,99,US,4.00,USD

        """.write(toFile: csv, atomically: true, encoding: .utf8)
        let imported = try await run(["import", "spend", "--config", config, csv])
        // The bad row is named by line and column; the good ones are loaded all the same.
        #expect(imported.status == 1, "\(imported.stdout)\(imported.stderr)")
        #expect(
            imported.stdout.contains("4 keyword days of 2 keywords from 2026-03-01 to 2026-04-01"), "\(imported.stdout)"
        )
        #expect(
            imported.stdout.contains("line 7, column Spend: 'twelve' is not an amount in USD"), "\(imported.stdout)")

        struct Row: Decodable {
            let keyword_id: Int64?
            let app_id: String
            let installs: Int, installs_in_period: Int?, paying_users: Int
            let revenue: [String: Decimal]
            let spend: [String: Decimal]?
            let cost_per_install: [String: Decimal]?
            let cost_per_paying_user: [String: Decimal]?
            let roas: [String: Decimal]?
        }
        let result = try await run([
            "report", "keywords", "--config", config, "--format", "json", "--since", "2026-03-01", "--until",
            "2026-04-01",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let rows = try JSONDecoder().decode([Row].self, from: Data(result.stdout.utf8))
        let keyword = try #require(rows.first { $0.keyword_id == 87_675_432 })
        // March's 30.00 of spend, April's left out; 4 installs, 3 of them in March, 1 paying
        // user, 45.00 of revenue. An install costs March's spend over March's installs.
        #expect(keyword.spend == ["USD": 30])
        #expect(keyword.installs == 4 && keyword.installs_in_period == 3)
        #expect(keyword.cost_per_install == ["USD": 10])
        #expect(keyword.cost_per_paying_user == ["USD": 30])
        #expect(keyword.roas == ["USD": Decimal(string: "1.5")!])
        #expect(rows.filter { $0.keyword_id == nil }.allSatisfy { $0.spend == nil && $0.roas == nil })
        // From mid-day, spend counts from the next midnight, and so do the installs it buys.
        let midday = try JSONDecoder().decode(
            [Row].self,
            from: Data(
                try await run([
                    "report", "keywords", "--config", config, "--format", "json", "--since", "2026-03-01T10:00:00Z",
                    "--until", "2026-04-01",
                ]).stdout.utf8))
        let later = try #require(midday.first { $0.keyword_id == 87_675_432 })
        #expect(later.spend == ["USD": 18] && later.installs_in_period == 3 && later.cost_per_install == ["USD": 6])
        // A keyword that spent and brought nobody has a line of its own, in its campaign's app.
        let idle = try #require(rows.first { $0.keyword_id == 99 })
        #expect(idle.app_id == "1234567890" && idle.installs == 0 && idle.spend == ["USD": 4])
        #expect(idle.cost_per_install == nil && idle.cost_per_paying_user == nil && idle.roas == nil)
        let otherApp = try await run(["report", "keywords", "--config", config, "--format", "json", "--app-id", "42"])
        #expect(try JSONDecoder().decode([Row].self, from: Data(otherApp.stdout.utf8)).isEmpty, "\(otherApp.stdout)")

        // Of all time, April's spend counts too; the table and CSV show the same.
        let all = try JSONDecoder().decode(
            [Row].self,
            from: Data(try await run(["report", "keywords", "--config", config, "--format", "json"]).stdout.utf8))
        #expect(all.first { $0.keyword_id == 87_675_432 }?.spend == ["USD": 530])
        #expect(all.first { $0.keyword_id == 87_675_432 }?.installs_in_period == nil)
        let table = try await run([
            "report", "keywords", "--config", config, "--since", "2026-03-01", "--until", "2026-04-01",
        ])
        #expect(table.stdout.contains("cost/install") && table.stdout.contains("USD 10"), "\(table.stdout)")
        // A corrected export of a day replaces it.
        try "Day,Keyword ID,Spend (USD)\n2026-03-31,87675432,8.00\n".write(
            toFile: csv, atomically: true, encoding: .utf8)
        #expect(try await run(["import", "spend", "--config", config, csv]).status == 0)
        let corrected = try JSONDecoder().decode(
            [Row].self,
            from: Data(
                try await run([
                    "report", "keywords", "--config", config, "--format", "json", "--since", "2026-03-01",
                ]).stdout.utf8))
        #expect(corrected.first { $0.keyword_id == 87_675_432 }?.spend == ["USD": 520])
    }
}

/// Spend over HTTP: the JSON route answers what the command prints, and the dashboard's
/// page and CSV show the same spend, costs and ROAS, summed up the levels.
extension ReportRoutesTests {
    @Test func theRouteAndTheDashboardShowTheSpendTheCommandPrints() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let path = env.directory.appendingPathComponent("report.yaml").path
        try Self.yaml(env, auth: Self.operatorOnly).write(toFile: path, atomically: true, encoding: .utf8)
        let gateway = try await Gateway.build(
            configuration: try ConfigLoader.load(path: path, environment: [:], registry: .builtIn))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            // Two installs through the keyword, one paying 14.98 USD on 2023-11-14.
            try await Self.ingest(client)
            let csv = env.directory.appendingPathComponent("spend.csv").path
            try "Date,Keyword ID,Spend,Currency\n2023-11-14,87675432,10.00,USD\n2023-11-15,87675432,5.00,USD\n"
                .write(toFile: csv, atomically: true, encoding: .utf8)
            #expect(try await CommandLineTests().run(["import", "spend", "--config", path, csv]).status == 0)

            func served(_ query: String) async throws -> [KeywordReport.Row] {
                let answer = try await client.execute(
                    uri: "/v1/reports/keywords" + query, method: .get, headers: Self.bearer)
                #expect(answer.status == .ok)
                return try JSONDecoder().decode([KeywordReport.Row].self, from: Data(String(buffer: answer.body).utf8))
            }
            let rows = try await served("")
            let printed = try await CommandLineTests().run(["report", "keywords", "--config", path, "--format", "json"])
            #expect(try JSONDecoder().decode([KeywordReport.Row].self, from: Data(printed.stdout.utf8)) == rows)
            let keyword = try #require(rows.first { $0.keywordID == 87_675_432 })
            #expect(keyword.spend == ["USD": 15] && keyword.costPerInstall == ["USD": Decimal(string: "7.5")!])
            #expect(keyword.costPerPayingUser == ["USD": 15])
            #expect(keyword.roas == ["USD": Decimal(string: "0.9987")!])
            // The organic line has no spend, and says none.
            #expect(rows.first { $0.network == "organic" }.map { $0.spend == nil && $0.roas == nil } == true)
            // From the 15th: that day's spend, and no revenue to return on it.
            let later = try #require(try await served("?since=2023-11-15").first { $0.keywordID == 87_675_432 })
            #expect(later.spend == ["USD": 5] && later.roas == nil)

            // The campaign's row sums its keywords': the page and its CSV.
            let campaigns = "/dashboard?app_id=1234567890&network=Apple%20Search%20Ads"
            let page = String(
                buffer: try await client.execute(uri: campaigns, method: .get, headers: Self.bearer).body)
            #expect(page.contains(#"<th scope="col" class="num">Spend USD</th>"#), "\(page)")
            #expect(page.contains(#"<th scope="col" class="num">ROAS USD</th>"#))
            #expect(page.contains(#"<td class="num">0.9987</td>"#), "\(page)")
            let download = String(
                buffer: try await client.execute(uri: campaigns + "&format=csv", method: .get, headers: Self.bearer)
                    .body)
            let lines = download.split(separator: "\r\n").map(String.init)
            #expect(
                lines.first?.hasSuffix(
                    "revenue_USD,spend_USD,cost_per_install_USD,cost_per_paying_user_USD,roas_USD") == true,
                "\(lines)")
            #expect(lines.contains { $0.hasSuffix(",14.98,15,7.5,15,0.9987") }, "\(lines)")
            // With a period, the installs its cost per install divides by are shown beside it:
            // the installs (2020) are none of the period's, so there is no cost per install.
            let period = campaigns + "&since=2023-11-14&until=2023-11-16"
            let dated = String(
                buffer: try await client.execute(uri: period, method: .get, headers: Self.bearer).body)
            #expect(dated.contains(#"<th scope="col" class="num">Installs in period</th>"#), "\(dated)")
            let datedCSV = String(
                buffer: try await client.execute(uri: period + "&format=csv", method: .get, headers: Self.bearer).body
            ).split(separator: "\r\n").map(String.init)
            #expect(datedCSV.first?.hasSuffix(",roas_USD,installs_in_period") == true, "\(datedCSV)")
            #expect(datedCSV.contains { $0.hasSuffix(",14.98,15,,15,0.9987,0") }, "\(datedCSV)")
        }
    }
}
