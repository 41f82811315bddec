import Foundation
import GatewayCore
import GatewayServer
import HummingbirdTesting
import Testing

extension SKAdNetworkEndToEndTests {
    /// Signed postbacks through the real server and SQLite, then the dashboard's section.
    @Test func theDashboardCountsPostbacksPerCampaignAndValue() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let auth = "\nauth:\n  operator_keys: [\"\(ReportRoutesTests.operatorKey)\"]\n"
        let gateway = try await Gateway.build(configuration: try configuration(env, auth: auth))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            for (transaction, fine) in [("a", 12), ("b", 12), ("c", nil)] as [(String, Int?)] {
                let response = try await client.execute(
                    uri: "/v1/skadnetwork/postbacks", method: .post,
                    body: try body(try postback(transaction: transaction, fine: fine)))
                #expect([200, 202].contains(response.status.code), "\(String(buffer: response.body))")
            }
            func page(_ query: String) async throws -> String {
                String(
                    buffer: try await client.execute(
                        uri: "/dashboard?" + query, method: .get, headers: ReportRoutesTests.bearer
                    ).body)
            }
            let html = try await page("app_id=525463029")
            #expect(html.contains("3 postbacks received of all time"), "\(html)")
            // Three postbacks of source 5239, all winning, all with a value.
            let campaign = #"<tr><td>5239</td>"# + String(repeating: #"<td class="num">3</td>"#, count: 3)
            #expect(html.contains(campaign))
            #expect(html.contains(#"<tr><td>12</td><td class="num">2</td></tr>"#))
            #expect(html.contains(#"<tr><td>medium</td><td class="num">1</td></tr>"#))
            // Another app's view, or a period before they came, has none.
            #expect(try await page("app_id=42").contains("0 postbacks received"))
            #expect(try await page("app_id=525463029&until=2020-01-01").contains("0 postbacks received"))

            // The same numbers as JSON, for a team's own charts.
            func json(_ query: String) async throws -> [String: Any] {
                let response = try await client.execute(
                    uri: "/v1/reports/postbacks?" + query, method: .get, headers: ReportRoutesTests.bearer)
                #expect(response.status == .ok)
                return try #require(
                    try JSONSerialization.jsonObject(with: Data(String(buffer: response.body).utf8)) as? [String: Any])
            }
            let numbers = try await json("app_id=525463029")
            #expect(numbers["total"] as? Int == 3)
            let campaigns = try #require(numbers["campaigns"] as? [[String: Any]])
            #expect(campaigns.count == 1 && campaigns[0]["source"] as? String == "5239")
            #expect(campaigns[0]["postbacks"] as? Int == 3 && campaigns[0]["with_value"] as? Int == 3)
            #expect(numbers["fine_values"] as? [String: Int] == ["12": 2])
            #expect(numbers["coarse_values"] as? [String: Int] == ["medium": 1])
            #expect(try await json("app_id=42")["total"] as? Int == 0)
            let refused = try await client.execute(uri: "/v1/reports/postbacks?app_id=525463029", method: .get)
            #expect(refused.status == .unauthorized)
        }
    }
}
