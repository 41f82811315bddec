import Foundation
import GRDB
import GatewayCore
import GatewayStorage

/// Keyword spend in the gateway's SQLite file.
struct SQLiteSpend: SpendStore {
    let pool: DatabasePool

    init(path: String) throws {
        pool = try SQLiteDatabase.pool(path: path)
        try pool.write { db in
            try db.execute(sql: SpendSchema.sqlite)
        }
    }

    func replace(_ entries: [SpendEntry], scopes: [SpendScope]) async throws {
        guard !entries.isEmpty || !scopes.isEmpty else { return }
        try await pool.write { db in
            let unplaced = Set(entries.filter(\.unplaced).map(\.keywordID))
            var stored: [Int64: (campaignID: Int64, adGroupID: Int64)] = [:]
            if !unplaced.isEmpty {
                // Each keyword's latest day with a campaign, both ids from that row.
                let places = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT keyword_id, campaign_id, ad_group_id FROM apple_ads_spend
                        WHERE keyword_id IN (SELECT value FROM json_each(?)) AND campaign_id > 0
                        ORDER BY keyword_id, day DESC, ad_group_id DESC
                        """,
                    arguments: [String(decoding: try JSONEncoder().encode(Array(unplaced)), as: UTF8.self)])
                while let row = try places.next() {
                    let keyword: Int64 = row["keyword_id"]
                    if stored[keyword] == nil { stored[keyword] = (row["campaign_id"], row["ad_group_id"]) }
                }
            }
            let rows = try SpendSchema.rows(entries, stored: stored)
            for cleared in scopes {
                try db.execute(
                    sql: """
                        DELETE FROM apple_ads_spend
                        WHERE campaign_id = ? AND day = ? AND (? = 0 OR ad_group_id = ?)
                        """,
                    arguments: [cleared.campaignID, cleared.day, cleared.adGroupID, cleared.adGroupID])
            }
            for row in rows {
                try db.execute(
                    sql: "DELETE FROM apple_ads_spend WHERE keyword_id = ? AND day = ?",
                    arguments: [row.entry.keywordID, row.entry.day])
            }
            for row in rows {
                try db.execute(
                    sql: """
                        INSERT INTO apple_ads_spend
                            (keyword_id, day, currency, app_id, campaign_id, ad_group_id, amount_micros)
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        ON CONFLICT (keyword_id, day, currency) DO UPDATE SET
                            app_id = COALESCE(excluded.app_id, app_id), campaign_id = excluded.campaign_id,
                            ad_group_id = excluded.ad_group_id, amount_micros = excluded.amount_micros
                        """,
                    arguments: [
                        row.entry.keywordID, row.entry.day, row.entry.currency, row.entry.appID, row.entry.campaignID,
                        row.entry.adGroupID, row.micros,
                    ])
            }
        }
    }

    func totals(from: String?, until: String?) async throws -> [Int64: KeywordSpend] {
        try await pool.read { db in
            var totals: [Int64: KeywordSpend] = [:]
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT keyword_id, currency, SUM(amount_micros) AS micros, MAX(campaign_id) AS campaign_id,
                        MAX(ad_group_id) AS ad_group_id, MAX(app_id) AS app_id
                    FROM apple_ads_spend
                    WHERE (? IS NULL OR day >= ?) AND (? IS NULL OR day < ?)
                    GROUP BY keyword_id, currency
                    """, arguments: [from, from, until, until])
            while let row = try rows.next() {
                SpendEntry.add(
                    &totals, keyword: row["keyword_id"], currency: row["currency"], micros: row["micros"],
                    campaign: row["campaign_id"], adGroup: row["ad_group_id"], app: row["app_id"])
            }
            return totals
        }
    }

    func noteCampaigns(_ campaigns: [Int64: Int64?]) async throws {
        guard !campaigns.isEmpty else { return }
        try await pool.write { db in
            for (campaign, org) in campaigns {
                try db.execute(
                    sql: """
                        INSERT INTO apple_ads_spend_campaigns (campaign_id, org_id) VALUES (?, ?)
                        ON CONFLICT (campaign_id) DO UPDATE SET org_id = COALESCE(excluded.org_id, org_id)
                        """, arguments: [campaign, org])
            }
        }
    }

    func campaigns() async throws -> [(campaignID: Int64, orgID: Int64?)] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT campaign_id, org_id FROM apple_ads_spend_campaigns ORDER BY campaign_id")
                .map { row -> (campaignID: Int64, orgID: Int64?) in (row["campaign_id"], row["org_id"]) }
        }
    }

    func claimFetch(now: Date, every: TimeInterval, lease: TimeInterval) async throws -> Bool {
        let at = now.timeIntervalSince1970
        return try await pool.write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO apple_ads_spend_fetch (id) VALUES (1)")
            try db.execute(
                sql: """
                    UPDATE apple_ads_spend_fetch SET claimed_until = ?
                    WHERE id = 1 AND (fetched_at IS NULL OR fetched_at <= ?)
                        AND (claimed_until IS NULL OR claimed_until <= ?)
                    """, arguments: [at + lease, at - every, at])
            return db.changesCount == 1
        }
    }

    func fetched(at now: Date) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE apple_ads_spend_fetch SET fetched_at = ?, claimed_until = NULL WHERE id = 1",
                arguments: [now.timeIntervalSince1970])
        }
    }

    func lastFetched() async throws -> Date? {
        try await pool.read { db in
            try Double.fetchOne(db, sql: "SELECT fetched_at FROM apple_ads_spend_fetch WHERE id = 1")
                .map { Date(timeIntervalSince1970: $0) }
        }
    }
}

/// The spend tables, the same on both backends.
enum SpendSchema {
    static let sqlite = """
        CREATE TABLE IF NOT EXISTS apple_ads_spend (
            keyword_id INTEGER NOT NULL, day TEXT NOT NULL, currency TEXT NOT NULL, app_id TEXT,
            campaign_id INTEGER NOT NULL, ad_group_id INTEGER NOT NULL, amount_micros INTEGER NOT NULL,
            PRIMARY KEY (keyword_id, day, currency));
        CREATE INDEX IF NOT EXISTS apple_ads_spend_day ON apple_ads_spend (day);
        CREATE TABLE IF NOT EXISTS apple_ads_spend_campaigns (campaign_id INTEGER PRIMARY KEY, org_id INTEGER);
        CREATE TABLE IF NOT EXISTS apple_ads_spend_fetch (
            id INTEGER PRIMARY KEY, fetched_at REAL, claimed_until REAL);
        """

    struct TooPrecise: Error, CustomStringConvertible {
        let entry: SpendEntry
        var description: String {
            "spend \(entry.amount) \(entry.currency) of keyword \(entry.keywordID) on \(entry.day) has more than 6 decimals"
        }
    }

    /// Entries summed per key, placed (``SpendEntry/placed(_:stored:)``), with their amounts
    /// in millionths.
    static func rows(_ entries: [SpendEntry], stored: [Int64: (campaignID: Int64, adGroupID: Int64)]) throws
        -> [(entry: SpendEntry, micros: Int64)]
    {
        try SpendEntry.placed(SpendEntry.summed(entries), stored: stored).map { entry in
            guard let micros = entry.micros else { throw TooPrecise(entry: entry) }
            return (entry, micros)
        }
    }
}
