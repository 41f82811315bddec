import Foundation
import GatewayCore
import GatewayPostgres
import Logging
import PostgresNIO

/// Keyword spend in the gateway's PostgreSQL database, shared by its replicas: one of them
/// fetches each day (``claimFetch(now:every:lease:)``), and every one reports it.
final class PostgresSpend: SpendStore {
    let database: EnricherPostgres
    var logger: Logger { database.logger }
    /// A day's report is written in one transaction of many statements: longer than a request waits.
    var timeout: Duration { database.url.timeout * 3 }

    init(url: PostgresURL, logger: Logger) async throws {
        database = try await EnricherPostgres(
            url: url, logger: logger, lock: 0x4154_5452_4757_0004,
            schema: [
                """
                CREATE TABLE IF NOT EXISTS apple_ads_spend (
                    keyword_id bigint NOT NULL, day text NOT NULL, currency text NOT NULL, app_id text,
                    campaign_id bigint NOT NULL, ad_group_id bigint NOT NULL, amount_micros bigint NOT NULL,
                    PRIMARY KEY (keyword_id, day, currency))
                """,
                "CREATE INDEX IF NOT EXISTS apple_ads_spend_day ON apple_ads_spend (day)",
                "CREATE TABLE IF NOT EXISTS apple_ads_spend_campaigns (campaign_id bigint PRIMARY KEY, org_id bigint)",
                """
                CREATE TABLE IF NOT EXISTS apple_ads_spend_fetch (
                    id integer PRIMARY KEY, fetched_at double precision, claimed_until double precision)
                """,
            ])
    }

    func replace(_ entries: [SpendEntry], scopes: [SpendScope]) async throws {
        let unplaced = Array(Set(entries.filter(\.unplaced).map(\.keywordID)))
        var stored: [Int64: (campaignID: Int64, adGroupID: Int64)] = [:]
        if !unplaced.isEmpty {
            stored = try await run { [logger] client in
                var places: [Int64: (campaignID: Int64, adGroupID: Int64)] = [:]
                // Each keyword's latest day with a campaign, both ids from that row.
                let rows = try await client.query(
                    """
                    SELECT DISTINCT ON (keyword_id) keyword_id, campaign_id, ad_group_id FROM apple_ads_spend
                    WHERE keyword_id = ANY(\(unplaced)::int8[]) AND campaign_id > 0
                    ORDER BY keyword_id, day DESC, ad_group_id DESC
                    """, logger: logger)
                for try await (keyword, campaign, adGroup) in rows.decode((Int64, Int64, Int64).self) {
                    places[keyword] = (campaign, adGroup)
                }
                return places
            }
        }
        let rows = try SpendSchema.rows(entries, stored: stored)
        let clearing: [PostgresQuery] = [
            """
            DELETE FROM apple_ads_spend s
            USING unnest(
                \(scopes.map(\.campaignID))::int8[], \(scopes.map(\.adGroupID))::int8[], \(scopes.map(\.day))::text[]
            ) AS c(campaign_id, ad_group_id, day)
            WHERE s.campaign_id = c.campaign_id AND s.day = c.day
                AND (c.ad_group_id = 0 OR s.ad_group_id = c.ad_group_id)
            """,
            """
            DELETE FROM apple_ads_spend s
            USING unnest(\(entries.map(\.keywordID))::int8[], \(entries.map(\.day))::text[]) AS k(keyword_id, day)
            WHERE s.keyword_id = k.keyword_id AND s.day = k.day
            """,
        ]
        try await database.run(within: timeout) { [database] _ in
            try await database.insert(
                rows, columns: 7, after: clearing,
                statement: { values in
                    """
                    INSERT INTO apple_ads_spend
                        (keyword_id, day, currency, app_id, campaign_id, ad_group_id, amount_micros)
                    VALUES \(values)
                    ON CONFLICT (keyword_id, day, currency) DO UPDATE SET
                        app_id = COALESCE(EXCLUDED.app_id, apple_ads_spend.app_id),
                        campaign_id = EXCLUDED.campaign_id, ad_group_id = EXCLUDED.ad_group_id,
                        amount_micros = EXCLUDED.amount_micros
                    """
                },
                bind: { bindings, row in
                    let (entry, micros) = row
                    bindings.append(entry.keywordID)
                    bindings.append(entry.day)
                    bindings.append(entry.currency)
                    if let app = entry.appID { bindings.append(app) } else { bindings.appendNull() }
                    bindings.append(entry.campaignID)
                    bindings.append(entry.adGroupID)
                    bindings.append(micros)
                })
        }
    }

    func totals(from: String?, until: String?) async throws -> [Int64: KeywordSpend] {
        try await run { [logger] client in
            var totals: [Int64: KeywordSpend] = [:]
            let rows = try await client.query(
                """
                SELECT keyword_id, currency, SUM(amount_micros)::bigint, MAX(campaign_id), MAX(ad_group_id), MAX(app_id)
                FROM apple_ads_spend
                WHERE (\(from)::text IS NULL OR day >= \(from)::text) AND (\(until)::text IS NULL OR day < \(until)::text)
                GROUP BY keyword_id, currency
                """, logger: logger)
            for try await (keyword, currency, micros, campaign, adGroup, app) in rows.decode(
                (Int64, String, Int64, Int64, Int64, String?).self)
            {
                SpendEntry.add(
                    &totals, keyword: keyword, currency: currency, micros: micros, campaign: campaign,
                    adGroup: adGroup, app: app)
            }
            return totals
        }
    }

    func noteCampaigns(_ campaigns: [Int64: Int64?]) async throws {
        guard !campaigns.isEmpty else { return }
        let ids = Array(campaigns.keys)
        // `0` stands for no org in the array, PostgreSQL arrays of nullable bigints being awkward to bind.
        let orgs = ids.map { campaigns[$0].flatMap { $0 } ?? 0 }
        try await run { [logger] client in
            _ = try await client.query(
                """
                INSERT INTO apple_ads_spend_campaigns (campaign_id, org_id)
                SELECT id, NULLIF(org, 0) FROM unnest(\(ids)::bigint[], \(orgs)::bigint[]) AS t(id, org)
                ON CONFLICT (campaign_id) DO UPDATE SET
                    org_id = COALESCE(EXCLUDED.org_id, apple_ads_spend_campaigns.org_id)
                """, logger: logger)
        }
    }

    func campaigns() async throws -> [(campaignID: Int64, orgID: Int64?)] {
        try await run { [logger] client in
            var found: [(campaignID: Int64, orgID: Int64?)] = []
            let rows = try await client.query(
                "SELECT campaign_id, org_id FROM apple_ads_spend_campaigns ORDER BY campaign_id", logger: logger)
            for try await (campaign, org) in rows.decode((Int64, Int64?).self) { found.append((campaign, org)) }
            return found
        }
    }

    func claimFetch(now: Date, every: TimeInterval, lease: TimeInterval) async throws -> Bool {
        let at = now.timeIntervalSince1970
        let (claimedUntil, due) = (at + lease, at - every)
        return try await run { [logger] client in
            _ = try await client.query(
                "INSERT INTO apple_ads_spend_fetch (id) VALUES (1) ON CONFLICT (id) DO NOTHING", logger: logger)
            // One statement: of replicas claiming together, one row update wins, the others
            // find the claim set when their turn on the row lock comes.
            let rows = try await client.query(
                """
                UPDATE apple_ads_spend_fetch SET claimed_until = \(claimedUntil)
                WHERE id = 1 AND (fetched_at IS NULL OR fetched_at <= \(due))
                    AND (claimed_until IS NULL OR claimed_until <= \(at))
                RETURNING id
                """, logger: logger)
            var claimed = false
            for try await _ in rows.decode(Int.self) { claimed = true }
            return claimed
        }
    }

    func fetched(at now: Date) async throws {
        let at = now.timeIntervalSince1970
        try await run { [logger] client in
            _ = try await client.query(
                "UPDATE apple_ads_spend_fetch SET fetched_at = \(at), claimed_until = NULL WHERE id = 1",
                logger: logger)
        }
    }

    func lastFetched() async throws -> Date? {
        try await run { [logger] client in
            let rows = try await client.query(
                "SELECT fetched_at FROM apple_ads_spend_fetch WHERE id = 1", logger: logger)
            for try await at in rows.decode(Double?.self) { return at.map { Date(timeIntervalSince1970: $0) } }
            return nil
        }
    }

    private func run<T: Sendable>(_ work: @escaping @Sendable (PostgresClient) async throws -> T) async throws -> T {
        try await database.run(within: timeout, work)
    }
}
