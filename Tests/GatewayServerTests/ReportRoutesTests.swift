import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GatewayTestSupport
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing

/// `GET /v1/reports/keywords` and the dashboard, over loopback HTTP.
@Suite struct ReportRoutesTests {
    static let operatorKey = "operator-key-0123456789"
    static let appKey = "key-for-app-1234567890"
    static let backendKey = "backend-key-1234567890"
    static let bearer: HTTPFields = [.authorization: "Bearer \(operatorKey)"]

    /// The environment's config with the `s2s` provider (for purchases) and `auth`.
    static func yaml(_ env: TestEnvironment, auth: String) -> String {
        env.yaml().replacingOccurrences(of: "  iad: { enabled: true }", with: "  iad: { enabled: true }\n  s2s: {}")
            + "\nauth:\n" + auth
    }

    static func configuration(_ env: TestEnvironment, auth: String) throws -> GatewayConfiguration {
        try ConfigLoader.parse(yaml: yaml(env, auth: auth), file: "report.yaml", environment: [:], registry: .builtIn)
    }

    static let operatorOnly = "  operator_keys: [\"\(operatorKey)\"]\n"

    static func purchase(_ user: String, _ transaction: String, _ amount: String) -> String {
        #"{"type":"purchase","app_id":"1234567890","app_user_id":"\#(user)","revenue":\#(amount),"currency":"USD","#
            + #""transaction_id":"\#(transaction)","timestamp":1700000000}"#
    }

    static func post(
        _ client: some TestClientProtocol, _ uri: String, _ body: String, key: String? = nil
    ) async throws -> TestResponse {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let key { headers[.authorization] = "Bearer \(key)" }
        return try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body))
    }

    @Test func operatorKeysAndAPIKeysOpenEachOthersRoutesNever() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let auth = """
              api_keys:
                - { app_id: "1234567890", key: "\(Self.appKey)" }
                - { app_id: "1234567890", key: "\(Self.backendKey)", scope: backend }
            """ + "\n" + Self.operatorOnly
        let gateway = try await Gateway.build(configuration: try Self.configuration(env, auth: auth))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func report(_ key: String?) async throws -> TestResponse {
                try await client.execute(
                    uri: "/v1/reports/keywords", method: .get,
                    headers: key.map { [.authorization: "Bearer \($0)"] } ?? [:])
            }
            for key in [nil, Self.appKey, Self.backendKey, "not-a-key-at-all-0000"] {
                let refused = try await report(key)
                #expect(refused.status == .unauthorized)
                #expect(String(buffer: refused.body).contains(#""code":"unauthorized""#))
                for secret in [Self.operatorKey, Self.appKey, Self.backendKey] {
                    #expect(!String(buffer: refused.body).contains(secret))
                }
            }
            #expect(try await report(Self.operatorKey).status == .ok)
            // The dashboard does not take an API key either.
            let dashboard = try await client.execute(
                uri: "/dashboard", method: .get, headers: [.authorization: "Bearer \(Self.backendKey)"])
            #expect(dashboard.status == .unauthorized)

            // An operator key writes no record.
            let install = IAdPayloads.attributed(user: "u1")
            #expect(try await Self.post(client, "/v1/iad", install, key: Self.operatorKey).status == .unauthorized)
            let event = Self.purchase("u1", "t1", "1.00")
            #expect(try await Self.post(client, "/v1/events", event, key: Self.operatorKey).status == .unauthorized)
            #expect(try await gateway.store.countRecords(matching: .init()) == 0)
            #expect(try await Self.post(client, "/v1/iad", install, key: Self.appKey).status == .accepted)
        }
    }

    @Test func withoutOperatorKeysTheRoutesSayWhyTheyAreClosed() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let auth = "  api_keys: [ { app_id: \"1234567890\", key: \"\(Self.backendKey)\", scope: backend } ]\n"
        let gateway = try await Gateway.build(configuration: try Self.configuration(env, auth: auth))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            for uri in ["/v1/reports/keywords", "/dashboard", "/dashboard/login"] {
                let closed = try await client.execute(
                    uri: uri, method: .get, headers: [.authorization: "Bearer \(Self.backendKey)"])
                #expect(closed.status == .forbidden, "\(uri)")
                let text = String(buffer: closed.body)
                #expect(text.contains("auth.operator_keys is not set") && !text.contains(Self.backendKey), "\(text)")
            }
        }
    }

    /// Stores two keyword installs, an organic one and purchases through the routes.
    static func ingest(_ client: some TestClientProtocol, keyword: String = "meditation app") async throws {
        let named = IAdPayloads.attributed(user: "buyer").replacingOccurrences(
            of: #""iad-keyword":"meditation app""#, with: #""iad-keyword":"\#(keyword)""#)
        // The named one last: both installs have the same time, and a line shows the names
        // of its newest install, the later record among equals.
        let installs = [
            IAdPayloads.attributed(user: "browser"), named,
            #"{"app_id":"1234567890","app_user_id":"organic","Version3.1":{"iad-attribution":"false"}}"#,
        ]
        for install in installs {
            #expect(try await post(client, "/v1/iad", install).status == .accepted)
        }
        for event in [purchase("buyer", "t1", "4.99"), purchase("buyer", "t2", "9.99"), purchase("organic", "t3", "1")]
        {
            #expect(try await post(client, "/v1/events", event).status.code < 300)
        }
    }

    @Test(arguments: CommandLineTests.backends)
    func theJSONReportIsWhatTheCommandPrints(_ backend: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        var yaml = Self.yaml(env, auth: Self.operatorOnly)
        if backend == "postgres" {
            let database = try await TestPostgres.newDatabase()
            yaml = yaml.replacingOccurrences(
                of: "sqlite: { path: \(env.databasePath), durability: normal }",
                with: "postgres: { url: \"\(database)\", timeout_ms: \(TestPostgres.timeoutMs) }"
            ).replacingOccurrences(of: "local: { type: sqlite,", with: "local: { type: postgres,")
        }
        let path = env.directory.appendingPathComponent("report.yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let configuration = try ConfigLoader.load(path: path, environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            try await Self.ingest(client)
            let answer = try await client.execute(uri: "/v1/reports/keywords", method: .get, headers: Self.bearer)
            #expect(answer.status == .ok)
            #expect(answer.headers[.cacheControl] == "no-store")
            let served = try JSONDecoder().decode(
                [KeywordReport.Row].self, from: Data(String(buffer: answer.body).utf8))
            let printed = try await CommandLineTests().run(["report", "keywords", "--config", path, "--format", "json"])
            #expect(printed.status == 0, "\(printed.stderr)")
            let rows = try JSONDecoder().decode([KeywordReport.Row].self, from: Data(printed.stdout.utf8))
            #expect(served == rows && !rows.isEmpty)
            let keyword = try #require(served.first { $0.keyword == "meditation app" })
            #expect(
                keyword.installs == 2 && keyword.payingUsers == 1
                    && keyword.revenue == ["USD": Decimal(string: "14.98")!])

            // Filters as the command's options: another app has no lines; purchases before
            // them leave revenue out.
            let other = try await client.execute(
                uri: "/v1/reports/keywords?app_id=42", method: .get, headers: Self.bearer)
            #expect(String(buffer: other.body) == "[]")
            let later = try await client.execute(
                uri: "/v1/reports/keywords?since=2024-01-01", method: .get, headers: Self.bearer)
            let laterRows = try JSONDecoder().decode(
                [KeywordReport.Row].self, from: Data(String(buffer: later.body).utf8))
            let printedLater = try await CommandLineTests().run([
                "report", "keywords", "--config", path, "--format", "json", "--since", "2024-01-01",
            ])
            #expect(
                try JSONDecoder().decode([KeywordReport.Row].self, from: Data(printedLater.stdout.utf8)) == laterRows)
            #expect(laterRows.allSatisfy { $0.purchases == 0 })
            // The network and country filters, by the same names.
            let american = try await client.execute(
                uri: "/v1/reports/keywords?country=us&network=Apple%20Search%20Ads", method: .get, headers: Self.bearer)
            let americanRows = try JSONDecoder().decode(
                [KeywordReport.Row].self, from: Data(String(buffer: american.body).utf8))
            let printedAmerican = try await CommandLineTests().run([
                "report", "keywords", "--config", path, "--format", "json", "--country", "us", "--network",
                "Apple Search Ads",
            ])
            #expect(printedAmerican.status == 0, "\(printedAmerican.stderr)")
            #expect(
                try JSONDecoder().decode([KeywordReport.Row].self, from: Data(printedAmerican.stdout.utf8))
                    == americanRows)
            #expect(americanRows.count == 1 && americanRows.first?.installs == 2)
            let badCountry = try await CommandLineTests().run([
                "report", "keywords", "--config", path, "--country", "USA",
            ])
            #expect(badCountry.status != 0 && badCountry.stderr.contains("--country"))

            // Names the keyword cache learns later (Apple's, or the team's export) show on the
            // next request, as on the command's next run.
            let csv = env.directory.appendingPathComponent("keywords.csv").path
            try "Keyword ID,Keyword,Match Type\n87675432,sleep sounds,Exact\n".write(
                toFile: csv, atomically: true, encoding: .utf8)
            #expect(try await CommandLineTests().run(["keywords", "import", "--config", path, csv]).status == 0)
            let named = try await client.execute(uri: "/v1/reports/keywords", method: .get, headers: Self.bearer)
            let namedRows = try JSONDecoder().decode(
                [KeywordReport.Row].self, from: Data(String(buffer: named.body).utf8))
            #expect(namedRows.contains { $0.keyword == "sleep sounds" })
            let printedNamed = try await CommandLineTests().run([
                "report", "keywords", "--config", path, "--format", "json",
            ])
            #expect(
                try JSONDecoder().decode([KeywordReport.Row].self, from: Data(printedNamed.stdout.utf8)) == namedRows)
        }
    }

    @Test(arguments: [
        ("/v1/reports/keywords?bogus=1", "bogus"), ("/v1/reports/keywords?since=yesterday", "since"),
        ("/v1/reports/keywords?since=2026-03-01T09:00", "since"), ("/v1/reports/keywords?app_id=1&app_id=2", "app_id"),
        ("/v1/reports/keywords?since=2026-03-02&until=2026-03-01", "until"), ("/dashboard?format=xml", "format"),
        ("/dashboard?network=x&campaign_id=abc", "campaign_id"), ("/dashboard?campaign=x", "campaign"),
        ("/dashboard?keyword=x", "keyword"), ("/v1/reports/keywords?country=USA", "country"),
        ("/dashboard?country=1", "country"), ("/v1/reports/keywords?network=a%0Ab", "network"),
        ("/dashboard?network=a%01b", "network"), ("/dashboard?as_of=latest", "as_of"),
    ])
    func aBadParameterIsA400NamingIt(_ uri: String, _ field: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try Self.configuration(env, auth: Self.operatorOnly))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let answer = try await client.execute(uri: uri, method: .get, headers: Self.bearer)
            #expect(answer.status == .badRequest)
            let text = String(buffer: answer.body)
            #expect(text.contains(#""code":"invalid_parameter""#) && text.contains(#""field":"\#(field)""#), "\(text)")
        }
    }

    @Test func theDashboardEscapesNamesAndDrillsDownToKeywords() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try Self.configuration(env, auth: Self.operatorOnly))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            try await Self.ingest(client, keyword: "<script>alert(1)</script>")
            let top = try await client.execute(uri: "/dashboard", method: .get, headers: Self.bearer)
            #expect(top.status == .ok)
            #expect(top.headers[.contentType] == "text/html; charset=utf-8")
            #expect(top.headers[.contentSecurityPolicy]?.contains("default-src 'none'") == true)
            let page = String(buffer: top.body)
            #expect(page.contains("<table>") && page.contains("App 1234567890"))
            #expect(
                page.contains(#"href="/dashboard?app_id=1234567890&amp;network=Apple%20Search%20Ads&amp;as_of="#),
                "\(page)")

            // Down to the keywords of the ad group, each a stable URL.
            let keywords = try await client.execute(
                uri: "/dashboard?app_id=1234567890&network=Apple%20Search%20Ads&campaign_id=542370539"
                    + "&ad_group_id=542317095",
                method: .get, headers: Self.bearer)
            let html = String(buffer: keywords.body)
            #expect(keywords.status == .ok)
            #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "\(html)")
            #expect(!html.contains("<script"))
            #expect(html.contains("US Search - Meditation") && html.contains("Exact - Core"))
            // Both keyword installs, one paying with two purchases: 14.98 USD.
            #expect(html.contains(#"<td class="num">14.98</td>"#), "\(html)")
        }
    }

    /// The `as_of` of an Apple Search Ads page's links, and its link one level down, into the campaign.
    static func asOf(_ page: String) throws -> (id: String, link: String) {
        let id = try #require(page.firstMatch(of: /as_of=([0-9a-f]{32})/)?.1)
        let link = try #require(
            page.firstMatch(of: /href="(\/dashboard\?[^"]*campaign_id=542370539[^"]*)"/)?.1)
        return (String(id), String(link).replacingOccurrences(of: "&amp;", with: "&"))
    }

    @Test func aPagesLinksShowItsNumbersAndALoadWithoutThemCountsAgain() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try Self.configuration(env, auth: Self.operatorOnly))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            try await Self.ingest(client)
            func load(_ uri: String) async throws -> String {
                let answer = try await client.execute(uri: uri, method: .get, headers: Self.bearer)
                #expect(answer.status == .ok, "\(uri)")
                return String(buffer: answer.body)
            }
            let page = try await load("/dashboard?app_id=1234567890&network=Apple%20Search%20Ads")
            #expect(page.contains("Numbers as of "), "\(page)")
            // The buyer's two purchases: 14.98 USD in the campaign.
            #expect(page.contains(#"<td class="num">14.98</td>"#), "\(page)")
            let (id, link) = try Self.asOf(page)
            #expect(link.hasSuffix("&as_of=\(id)"))

            // A third purchase of the buyer's after the page was shown.
            #expect(try await Self.post(client, "/v1/events", Self.purchase("buyer", "t4", "5")).status.code < 300)

            // The page's links show the page's numbers: the line opened, and its CSV.
            let opened = try await load(link)
            #expect(opened.contains(#"<td class="num">14.98</td>"#), "\(opened)")
            #expect(opened.contains("as_of=\(id)"))
            // Back up to the network's campaigns, by the breadcrumb.
            let nav = try #require(opened.firstMatch(of: /<nav aria-label="Drill-down">(.*?)<\/nav>/)?.1)
            let crumb = try #require(nav.firstMatch(of: /href="([^"]*network=Apple%20Search%20Ads[^"]*)"/)?.1)
            #expect(!crumb.contains("campaign") && crumb.contains("as_of=\(id)"), "\(crumb)")
            // Above the network, another query: counted again, so no as_of.
            let app = try #require(nav.firstMatch(of: /href="(\/dashboard\?app_id=1234567890)"/))
            #expect(!app.0.contains("as_of"))
            let back = try await load(String(crumb).replacingOccurrences(of: "&amp;", with: "&"))
            #expect(back.contains(#"<td class="num">14.98</td>"#), "\(back)")
            let csv = try await load(link + "&format=csv")
            #expect(csv.contains(",14.98"), "\(csv)")
            #expect(!csv.contains(",19.98"), "\(csv)")

            // The same view loaded without it, or with another query, is counted again.
            let fresh = try await load(link.replacingOccurrences(of: "&as_of=\(id)", with: ""))
            #expect(fresh.contains(#"<td class="num">19.98</td>"#), "\(fresh)")
            #expect(try Self.asOf(fresh).id != id)
            let otherPeriod = try await load(link + "&since=2020-01-01")
            #expect(otherPeriod.contains(#"<td class="num">19.98</td>"#), "\(otherPeriod)")
            // An id no page gave (or one no longer kept) is counted afresh too.
            let unknown = try await load(link.replacingOccurrences(of: id, with: String(repeating: "0", count: 32)))
            #expect(unknown.contains(#"<td class="num">19.98</td>"#), "\(unknown)")
        }
    }

    @Test func onlyAPageShownIsKeptNotAHEADOrACSVOfAScript() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try Self.configuration(env, auth: Self.operatorOnly))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            try await Self.ingest(client)
            let view = "/dashboard?app_id=1234567890&network=Apple%20Search%20Ads"
            let page = String(buffer: try await client.execute(uri: view, method: .get, headers: Self.bearer).body)
            let (id, link) = try Self.asOf(page)
            #expect(try await Self.post(client, "/v1/events", Self.purchase("buyer", "t4", "5")).status.code < 300)
            // More than the kept pages' worth of other views, fetched by a script.
            for day in 1...9 {
                let other = view + "&since=2020-01-0\(day)"
                #expect(try await client.execute(uri: other, method: .head, headers: Self.bearer).status == .ok)
                let csv = try await client.execute(uri: other + "&format=csv", method: .get, headers: Self.bearer)
                #expect(csv.status == .ok)
            }
            let opened = String(buffer: try await client.execute(uri: link, method: .get, headers: Self.bearer).body)
            #expect(opened.contains("as_of=\(id)") && opened.contains(#"<td class="num">14.98</td>"#), "\(opened)")
        }
    }

    @Test func theCSVOfAViewDefusesFormulas() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try Self.configuration(env, auth: Self.operatorOnly))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            try await Self.ingest(client, keyword: "=HYPERLINK(\\\"http://evil\\\")")
            let answer = try await client.execute(
                uri: "/dashboard?app_id=1234567890&network=Apple%20Search%20Ads&campaign_id=542370539"
                    + "&ad_group_id=542317095&format=csv",
                method: .get, headers: Self.bearer)
            #expect(answer.status == .ok)
            #expect(answer.headers[.contentType] == "text/csv; charset=utf-8")
            let lines = String(buffer: answer.body).split(separator: "\r\n").map(String.init)
            #expect(lines.first?.hasPrefix("app_id,keyword,id,match_type,installs,paying_users") == true)
            #expect(lines.contains { $0.contains(#""'=HYPERLINK(""http://evil"")""#) }, "\(lines)")
            #expect(!lines.contains { $0.contains(",=") || $0.hasPrefix("=") })
        }
    }

    @Test func theLoginFormSetsAStrictSessionCookieAndSaysNothingOfAWrongKey() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        let gateway = try await Gateway.build(
            configuration: try Self.configuration(env, auth: Self.operatorOnly),
            logger: Logger(label: "gateway", factory: { _ in handler }))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let asked = try await client.execute(uri: "/dashboard?app_id=1234567890", method: .get)
            #expect(asked.status == .unauthorized)
            let form = String(buffer: asked.body)
            #expect(form.contains(#"action="/dashboard/login""#) && form.contains(#"type="password""#))
            #expect(form.contains(#"name="next" value="/dashboard?app_id=1234567890""#), "\(form)")

            func login(_ body: String) async throws -> TestResponse {
                try await client.execute(
                    uri: "/dashboard/login", method: .post,
                    headers: [.contentType: "application/x-www-form-urlencoded"], body: ByteBuffer(string: body))
            }
            let wrong = try await login("key=operator-key-0123456780&next=%2Fdashboard")
            #expect(wrong.status == .unauthorized && wrong.headers[.setCookie] == nil)
            #expect(String(buffer: wrong.body).contains("That key was not accepted."))
            // In the log, once, without the key tried.
            let refused = lines.withLock { $0 }.filter { $0.contains("a dashboard login was refused") }
            #expect(refused.count == 1 && !refused[0].contains("operator-key-0123456780"), "\(refused)")

            let right = try await login("key=\(Self.operatorKey)&next=%2Fdashboard%3Fapp_id%3D1234567890")
            #expect(right.status == .seeOther)
            #expect(right.headers[.location] == "/dashboard?app_id=1234567890")
            let cookie = try #require(right.headers[.setCookie])
            for flag in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/dashboard", "Max-Age=43200"] {
                #expect(cookie.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.contains(flag))
            }
            #expect(!cookie.contains(Self.operatorKey))
            let session = String(cookie.prefix { $0 != ";" })
            #expect(
                try await client.execute(uri: "/dashboard", method: .get, headers: [.cookie: session]).status == .ok)
            // A session altered, or one from another key, opens nothing.
            let altered = session.dropLast() + (session.hasSuffix("0") ? "1" : "0")
            #expect(
                try await client.execute(uri: "/dashboard", method: .get, headers: [.cookie: String(altered)]).status
                    == .unauthorized)

            // Elsewhere than the dashboard, the form does not send anyone.
            let away = try await login("key=\(Self.operatorKey)&next=https%3A%2F%2Fevil.example%2F")
            #expect(away.headers[.location] == "/dashboard")
            let out = try await client.execute(uri: "/dashboard/logout", method: .post, headers: [.cookie: session])
            #expect(out.status == .seeOther && out.headers[.setCookie]?.contains("Max-Age=0") == true)
        }
    }
}
