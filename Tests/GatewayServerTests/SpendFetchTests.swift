import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GatewayTestSupport
import Logging
import Synchronization
import Testing

@testable import GatewayEnrichers

/// The daily spend fetch against the fake Apple Ads, which answers keyword reports as the
/// real one does and refuses a request it would refuse.
extension KeywordLookupTests {
    static let campaign: Int64 = 542_370_539
    static let adGroup: Int64 = 542_317_095

    /// The enricher with `spend.enabled`, its clock at `now`, caching in `path` (or `url`).
    func spendEnricher(
        _ options: KeywordLookupPlugin.Options, path: String, url: PostgresURL? = nil,
        logger: Logger = Logger(label: "test"),
        now: @escaping @Sendable () -> Date
    ) async throws -> KeywordLookupEnricher {
        var options = options
        options.spendEnabled = true
        return try await KeywordLookupPlugin.make(
            options: options, context: EnricherContext(storagePath: path, storageURL: url, logger: logger),
            sleep: { _ in }, now: now)
    }

    /// Three keywords' days, more than one page of the fake's two, and a campaign of no record.
    func seed(_ fake: FakeAppleAds) {
        let seeded: [(Int64, String, String)] = [
            (Int64(87_675_432), "2026-11-21", "10.00"), (87_675_432, "2026-11-27", "2.50"),
            (87_675_433, "2026-11-27", "1.25"), (87_675_434, "2026-11-28", "0.75"),
            // Out of the last 7 days: not asked for.
            (87_675_432, "2026-11-01", "99.00"),
            // Below nothing: no spend, not a day that lowers the week's.
            (87_675_434, "2026-11-26", "-25.00"),
        ]
        fake.reports.days.withLock { days in
            for (keyword, date, amount) in seeded {
                days.append(
                    .init(campaign: Self.campaign, adGroup: Self.adGroup, keyword: keyword, date: date, amount: amount))
            }
            days.append(.init(campaign: 1, adGroup: 2, keyword: 3, date: "2026-11-27", amount: "5.00"))
        }
    }

    static let fetchDay = ISO8601DateFormatter().date(from: "2026-11-28T06:00:00Z")!

    @Test(arguments: ["v1", "v5"])
    func theDailyFetchStoresTheLastWeeksSpendOfTheCampaignsRecordsNamed(_ api: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            seed(fake)
            let clock = Mutex(Self.fetchDay)
            let lines = Mutex<[String]>([])
            let logger = capturing { line in lines.withLock { $0.append(line) } }
            let enricher = try await spendEnricher(
                api == "v5" ? v5Options(port: port) : options(port: port), path: env.databasePath, logger: logger,
                now: { clock.withLock { $0 } })
            let spend = try #require(enricher.spend)
            #expect(enricher.services.filter { $0 is SpendFetcher }.count == 1)

            // The records the gateway routes name the campaign (and its org, which v5 asks by).
            _ = await enricher.enrich([record(keyword: 87_675_432)])
            var campaigns: [(campaignID: Int64, orgID: Int64?)] = []
            _ = try await env.eventually {
                campaigns = try await spend.store.campaigns()
                return !campaigns.isEmpty
            }
            #expect(
                campaigns.map(\.campaignID) == [Self.campaign] && campaigns.map(\.orgID) == [.some(FakeAppleAds.orgID)])

            let outcome = try #require(try await spend.fetcher.fetchIfDue())
            #expect(outcome == .init(campaigns: 1, failed: 0, keywordDays: 4))
            #expect(fake.refused.isEmpty, "\(fake.refused)")
            // Three keywords at two a page: two requests, for the one campaign records named.
            #expect(fake.reports.asked.withLock { $0 } == ["\(api):\(Self.campaign)", "\(api):\(Self.campaign)"])
            let week = try await spend.store.totals(from: "2026-11-21", until: "2026-11-29")
            #expect(week[87_675_432]?.amounts == ["USD": Decimal(string: "12.5")!])
            #expect(
                week[87_675_433]?.amounts == ["USD": Decimal(string: "1.25")!]
                    && week[87_675_434]?.amounts == ["USD": Decimal(string: "0.75")!])
            #expect(
                try await spend.store.totals(from: nil, until: nil)[87_675_432]?.amounts["USD"] == Decimal(
                    string: "12.5")!)

            // Not due again the same day.
            clock.withLock { $0 += 3600 * 12 }
            #expect(try await spend.fetcher.fetchIfDue() == nil)
            // A day on, Apple has corrected the 27th: the fetch replaces it, and a keyword whose
            // spend that day Apple took back (no row any more) has none.
            fake.reports.days.withLock { days in
                if let index = days.firstIndex(where: { $0.keyword == 87_675_432 && $0.date == "2026-11-27" }) {
                    days[index].amount = "3.00"
                }
                days.removeAll { $0.keyword == 87_675_433 && $0.date == "2026-11-27" }
            }
            clock.withLock { $0 += 3600 * 13 }
            #expect(try await spend.fetcher.fetchIfDue() != nil)
            let corrected = try await spend.store.totals(from: "2026-11-27", until: "2026-11-28")
            #expect(corrected[87_675_432]?.amounts == ["USD": 3] && corrected[87_675_433] == nil)
            // Said, and never with the token.
            let logged = lines.withLock { $0 }
            #expect(logged.contains { $0.contains("spend fetched") })
            #expect(!fake.issuedTokens.contains { token in logged.contains { $0.contains(token) } })
        }
    }

    @Test func aFetchThatFailsForEveryCampaignIsTriedAgainWithinTheHour() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            seed(fake)
            let clock = Mutex(Self.fetchDay)
            // Apple's outage pause kept short: the clock it runs on is the process's, not the test's.
            var quick = options(port: port)
            quick.backoffInitial = .milliseconds(1)
            let enricher = try await spendEnricher(quick, path: env.databasePath, now: { clock.withLock { $0 } })
            let spend = try #require(enricher.spend)
            // Before any record named a campaign, a check asks nothing and does not count as
            // the day's fetch: an hour on, the campaigns records named since are asked about.
            #expect(try await spend.fetcher.fetchIfDue() == .init())
            #expect(try await spend.store.lastFetched() == nil && fake.reports.asked.withLock { $0 }.isEmpty)
            clock.withLock { $0 += 3600 }
            try await spend.store.noteCampaigns([Self.campaign: .some(FakeAppleAds.orgID)])
            fake.down.withLock { $0 = true }
            #expect(try await spend.fetcher.fetchIfDue() == .init(campaigns: 1, failed: 1, keywordDays: 0))
            #expect(try await spend.store.lastFetched() == nil)
            fake.down.withLock { $0 = false }
            // The failed fetch's claim holds for its hour, then the next one may go.
            clock.withLock { $0 += 600 }
            #expect(try await spend.fetcher.fetchIfDue() == nil)
            clock.withLock { $0 += 3600 }
            let outcome = try await spend.fetcher.fetchIfDue()
            #expect(outcome?.failed == 0 && outcome?.keywordDays == 4, "\(String(describing: outcome))")
        }
    }

    /// The spend of `api`'s enricher, its campaign noted and USD 4 held for one keyword's
    /// day in the window the next fetch asks about.
    func heldSpend(_ api: String, port: Int, env: TestEnvironment) async throws -> SpendCampaigns {
        let enricher = try await spendEnricher(
            api == "v5" ? v5Options(port: port) : options(port: port), path: env.databasePath,
            now: { Self.fetchDay })
        let spend = try #require(enricher.spend)
        try await spend.store.noteCampaigns([Self.campaign: .some(FakeAppleAds.orgID)])
        let held = SpendEntry(
            campaignID: Self.campaign, adGroupID: Self.adGroup, keywordID: 87_675_432, day: "2026-11-27",
            currency: "USD", amount: 4)
        try await spend.store.replace([held], scopes: [])
        return spend
    }

    /// A report Apple refuses (`403`) is no report: the spend held for the campaign's days
    /// stays, where an empty report would have replaced it with nothing.
    @Test(arguments: ["v1", "v5"])
    func aRefusedReportKeepsTheSpendHeld(_ api: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            let spend = try await heldSpend(api, port: port, env: env)
            fake.reports.refused.withLock { $0 = true }
            // v1 asks each of the org's accounts: another's empty report is no report of the
            // campaign when the account that refused may be its owner.
            if api == "v1" { fake.otherAccount.withLock { $0 = true } }
            #expect(
                try await spend.fetcher.fetchIfDue() == .init(campaigns: 1, failed: 0, keywordDays: 0, unanswered: 1))
            #expect(try await spend.store.totals(from: nil, until: nil)[87_675_432]?.amounts == ["USD": 4])
        }
    }

    /// A report longer than the pages the fetch reads is not stored in part: the days the
    /// unread pages hold would be replaced with nothing.
    @Test(arguments: ["v1", "v5"])
    func aReportPastThePageLimitReplacesNothing(_ api: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            fake.reports.days.withLock { days in
                // The fake's pages hold two keywords: past the limit's pages.
                for keyword in 0..<Int64(AppleAdsHTTP.maxReportPages * 2 + 1) {
                    days.append(
                        .init(
                            campaign: Self.campaign, adGroup: Self.adGroup, keyword: 1000 + keyword, date: "2026-11-27",
                            amount: "1.00"))
                }
            }
            let spend = try await heldSpend(api, port: port, env: env)
            #expect(try await spend.fetcher.fetchIfDue() == .init(campaigns: 1, failed: 1, keywordDays: 0))
            let totals = try await spend.store.totals(from: nil, until: nil)
            #expect(totals[87_675_432]?.amounts == ["USD": 4] && totals[1000] == nil)
        }
    }

    /// On v5, a campaign only `import spend` named has no org to ask by: not a failure, which
    /// would have the whole fetch tried again every hour.
    @Test func aV5CampaignWithoutItsOrgIsNotAFailure() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            let clock = Mutex(Self.fetchDay)
            let enricher = try await spendEnricher(
                v5Options(port: port), path: env.databasePath, now: { clock.withLock { $0 } })
            let spend = try #require(enricher.spend)
            try await spend.store.noteCampaigns([Self.campaign: .none])
            #expect(
                try await spend.fetcher.fetchIfDue() == .init(campaigns: 1, failed: 0, keywordDays: 0, unanswered: 1))
            #expect(try await spend.store.lastFetched() == Self.fetchDay)
            // Beside it, a campaign Apple fails for: every campaign asked failed, so the
            // fetch is tried again within the hour, not a day later.
            try await spend.store.noteCampaigns([Self.campaign + 1: .some(FakeAppleAds.orgID)])
            fake.down.withLock { $0 = true }
            clock.withLock { $0 += 86_400 + 60 }
            let later = try await spend.fetcher.fetchIfDue()
            #expect(later == .init(campaigns: 2, failed: 1, keywordDays: 0, unanswered: 1))
            #expect(try await spend.store.lastFetched() == Self.fetchDay)
        }
    }

    static let replicaStores = TestPostgres.expected ? ["postgres"] : []

    /// Two replicas on one PostgreSQL store: one fetches the day's spend, the other finds it
    /// done and asks Apple nothing.
    @Test(arguments: replicaStores)
    func replicasOnPostgreSQLFetchEachDayOnce(_ backend: String) async throws {
        let url = try await TestPostgres.newDatabase()
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            seed(fake)
            let now: @Sendable () -> Date = { Self.fetchDay }
            let first = try await spendEnricher(options(port: port), path: env.databasePath, url: url, now: now)
            let second = try await spendEnricher(options(port: port), path: env.databasePath, url: url, now: now)
            let (a, b) = (try #require(first.spend), try #require(second.spend))
            try await a.store.noteCampaigns([Self.campaign: .some(FakeAppleAds.orgID)])
            async let one = a.fetcher.fetchIfDue()
            async let other = b.fetcher.fetchIfDue()
            let outcomes = try await [one, other]
            #expect(outcomes.compactMap { $0 }.count == 1)
            #expect(fake.reports.asked.withLock { $0.count } == 2)
            let totals = try await b.store.totals(from: nil, until: nil)
            #expect(totals[87_675_432]?.amounts == ["USD": Decimal(string: "12.5")!])
        }
    }

    /// `spend:` is checked with the rest of the file, and a gateway built with it runs the
    /// fetch beside the server; without it, there is none.
    @Test func theSpendKeysAreCheckedAndServeRunsTheFetch() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        func yaml(_ spend: String) -> String {
            """
            server: { host: 127.0.0.1, port: 0, log_level: warning }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            enrichers:
              keyword_lookup:
                client_id: \(FakeAppleAds.clientID)
                team_id: \(FakeAppleAds.teamID)
                key_id: \(FakeAppleAds.keyID)
                private_key: "${ADS_PRIVATE_KEY}"
                endpoint: http://127.0.0.1:9/v1
                \(spend)
            sinks:
              local: { type: sqlite }
            """
        }
        func parse(_ spend: String) throws -> GatewayConfiguration {
            try ConfigLoader.parse(
                yaml: yaml(spend), file: "spend.yaml", environment: ["ADS_PRIVATE_KEY": key.pemRepresentation],
                registry: .builtIn)
        }
        do {
            _ = try parse("spend: { enabled: true, fetch_days: 91, every: 1 }")
            Issue.record("accepted")
        } catch let error as ConfigError {
            let messages = error.issues.map { "\($0.path): \($0.message)" }.joined(separator: "; ")
            #expect(messages.contains("enrichers.keyword_lookup.spend.fetch_days"), "\(messages)")
            #expect(messages.contains("enrichers.keyword_lookup.spend.every"), "\(messages)")
        }
        let on = try await Gateway.build(configuration: try parse("spend: { enabled: true, fetch_days: 14 }"))
        let fetchers = on.enricherServices.compactMap { $0 as? SpendFetcher }
        #expect(fetchers.count == 1 && fetchers.first?.days == 14)
        let off = try await Gateway.build(configuration: try parse(""))
        #expect(!off.enricherServices.contains { $0 is SpendFetcher })
    }

    /// As `serve` runs it: a fetch at start, then a wait that ends with the server.
    @Test func theRunningFetchAsksAtStartAndStopsWhenCancelled() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            seed(fake)
            let enricher = try await spendEnricher(options(port: port), path: env.databasePath, now: { Self.fetchDay })
            let spend = try #require(enricher.spend)
            try await spend.store.noteCampaigns([Self.campaign: .some(FakeAppleAds.orgID)])
            let running = Task { try await spend.fetcher.run() }
            var fetched: Date?
            _ = try await env.eventually {
                fetched = try await spend.store.lastFetched()
                return fetched != nil
            }
            #expect(fetched == Self.fetchDay)
            #expect(
                try await spend.store.totals(from: nil, until: nil)[87_675_432]?.amounts == [
                    "USD": Decimal(string: "12.5")!
                ])
            running.cancel()
            try await running.value
            // Done for the day: the loop asked once.
            #expect(fake.reports.asked.withLock { $0.count } == 2)
        }
    }
}
