import Foundation
import GatewayCore
import GatewayTestSupport
import Testing

/// `import spend` and the report's spend, cost and ROAS columns, as a user runs them.
extension CommandLineTests {
    @Test(arguments: backends)
    func importedSpendGivesTheReportCostsAndROASForItsPeriod(_ backend: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let database = backend == "postgres" ? try await TestPostgres.newDatabase() : nil
        let config = try storeConfig(env, providers: "iad: {}, s2s: {}", postgres: database)
        // Four users through the keyword, one of them buying twice in March.
        let installs = ["a", "b", "c", "d"].map {
            IAdPayloads.attributed(user: $0).replacingOccurrences(of: "\n", with: "")
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
        #expect(try run(["import", "--provider", "iad", "--config", config, installFile]).status == 0)
        #expect(try run(["import", "--provider", "s2s", "--config", config, purchaseFile]).status == 0)

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

        """.write(toFile: csv, atomically: true, encoding: .utf8)
        let imported = try run(["import", "spend", "--config", config, csv])
        // The bad row is named by line and column; the good ones are loaded all the same.
        #expect(imported.status == 1, "\(imported.stdout)\(imported.stderr)")
        #expect(
            imported.stdout.contains("3 keyword days of 1 keywords from 2026-03-01 to 2026-04-01"), "\(imported.stdout)"
        )
        #expect(imported.stdout.contains("line 7, column Spend: 'twelve' is not an amount"), "\(imported.stdout)")

        struct Row: Decodable {
            let keyword_id: Int64?
            let installs: Int, paying_users: Int
            let revenue: [String: Decimal]
            let spend: [String: Decimal]?
            let cost_per_install: [String: Decimal]?
            let cost_per_paying_user: [String: Decimal]?
            let roas: [String: Decimal]?
        }
        let result = try run([
            "report", "keywords", "--config", config, "--format", "json", "--since", "2026-03-01", "--until",
            "2026-04-01",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let rows = try JSONDecoder().decode([Row].self, from: Data(result.stdout.utf8))
        let keyword = try #require(rows.first { $0.keyword_id == 87_675_432 })
        // March's 30.00 of spend, April's left out; 4 installs, 1 paying user, 45.00 of revenue.
        #expect(keyword.spend == ["USD": 30])
        #expect(keyword.cost_per_install == ["USD": Decimal(string: "7.5")!])
        #expect(keyword.cost_per_paying_user == ["USD": 30])
        #expect(keyword.roas == ["USD": Decimal(string: "1.5")!])
        #expect(rows.filter { $0.keyword_id == nil }.allSatisfy { $0.spend == nil && $0.roas == nil })

        // Of all time, April's spend counts too; the table and CSV show the same.
        let all = try JSONDecoder().decode(
            [Row].self, from: Data(try run(["report", "keywords", "--config", config, "--format", "json"]).stdout.utf8))
        #expect(all.first { $0.keyword_id == 87_675_432 }?.spend == ["USD": 530])
        let table = try run([
            "report", "keywords", "--config", config, "--since", "2026-03-01", "--until", "2026-04-01",
        ])
        #expect(table.stdout.contains("cost/install") && table.stdout.contains("USD 7.5"), "\(table.stdout)")
        // A corrected export of a day replaces it.
        try "Day,Keyword ID,Spend (USD)\n2026-03-31,87675432,8.00\n".write(
            toFile: csv, atomically: true, encoding: .utf8)
        #expect(try run(["import", "spend", "--config", config, csv]).status == 0)
        let corrected = try JSONDecoder().decode(
            [Row].self,
            from: Data(
                try run([
                    "report", "keywords", "--config", config, "--format", "json", "--since", "2026-03-01",
                ]).stdout.utf8))
        #expect(corrected.first { $0.keyword_id == 87_675_432 }?.spend == ["USD": 520])
    }
}
