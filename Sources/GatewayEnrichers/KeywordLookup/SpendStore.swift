import Foundation
import GatewayCore
import Logging

/// Apple Ads spend per keyword and day, kept by the `keyword_lookup` enricher beside the
/// records (the SQLite file or the PostgreSQL database), so that every replica and the
/// report read the same numbers. Filled by the daily fetch and by `import spend`.
///
/// A keyword's day is one row per currency: Apple's keyword ids are unique across
/// campaigns, so the keyword id, the day and the currency name it, and a later fetch or
/// import of that day replaces it (Apple corrects spend for days after they end).
protocol SpendStore: Sendable {
    /// Writes these days in one transaction, replacing what the store held of each entry's
    /// keyword and day in any currency, and every row of `scopes`: a corrected report
    /// of a campaign's (or an ad group's) day leaves no keyword or currency it no longer has.
    func replace(_ entries: [SpendEntry], scopes: [SpendScope]) async throws

    /// Spend summed per keyword and currency over the days `from` (inclusive) to `until`
    /// (exclusive), `YYYY-MM-DD`, with the keyword's campaign, ad group and app where known;
    /// nil leaves that side open.
    func totals(from: String?, until: String?) async throws -> [Int64: KeywordSpend]

    /// Campaigns the gateway saw records of, with their org where known: what the daily
    /// fetch asks Apple about. A campaign noted again keeps a known org.
    func noteCampaigns(_ campaigns: [Int64: Int64?]) async throws

    func campaigns() async throws -> [(campaignID: Int64, orgID: Int64?)]

    /// True, and the fetch claimed for `lease`, when the last fetch ended `every` or more
    /// before `now` and no other claim holds: one replica of many fetches.
    func claimFetch(now: Date, every: TimeInterval, lease: TimeInterval) async throws -> Bool

    /// The claimed fetch ended well at `now`; the next is due `every` after.
    func fetched(at now: Date) async throws

    /// When the last fetch ended well, if one has.
    func lastFetched() async throws -> Date?
}

/// One keyword's spend on one day, in one currency.
public struct SpendEntry: Sendable, Equatable {
    /// The app (Apple's adam id), where the source gives it.
    public var appID: String?
    /// 0 where the source does not give it (an export without the column).
    public var campaignID: Int64
    public var adGroupID: Int64
    public var keywordID: Int64
    /// `YYYY-MM-DD`, in the report's time zone (UTC for the fetch).
    public var day: String
    public var currency: String
    public var amount: Decimal

    public init(
        appID: String? = nil, campaignID: Int64, adGroupID: Int64, keywordID: Int64, day: String, currency: String,
        amount: Decimal
    ) {
        self.appID = appID
        self.campaignID = campaignID
        self.adGroupID = adGroupID
        self.keywordID = keywordID
        self.day = day
        self.currency = currency
        self.amount = amount
    }

    /// What names one row of the table.
    var key: String { "\(keywordID)\u{1F}\(day)\u{1F}\(currency)" }

    /// The amount in millionths, as the table holds it: sums in SQL stay exact on both
    /// backends (a SQLite `SUM` of decimal text would be a binary float).
    var micros: Int64? { Self.micros(amount) }

    static func micros(_ amount: Decimal) -> Int64? {
        var scaled = amount * 1_000_000
        var rounded = Decimal()
        NSDecimalRound(&rounded, &scaled, 0, .plain)
        guard rounded == scaled, abs(rounded) < Decimal(Int64.max / 2) else { return nil }
        return Int64(rounded.description)
    }

    static func amount(micros: Int64) -> Decimal {
        Decimal(micros) / 1_000_000
    }

    /// Adds one currency's sum of a keyword to `totals`, with where the keyword stands
    /// (0 for an id the source did not give).
    static func add(
        _ totals: inout [Int64: KeywordSpend], keyword: Int64, currency: String, micros: Int64, campaign: Int64,
        adGroup: Int64, app: String?
    ) {
        var entry = totals[keyword] ?? KeywordSpend(amounts: [:])
        entry.amounts[currency] = amount(micros: micros)
        if campaign > 0 { entry.campaignID = campaign }
        if adGroup > 0 { entry.adGroupID = adGroup }
        entry.appID = entry.appID ?? app
        totals[keyword] = entry
    }

    /// The source left out the keyword's campaign or ad group (an export without the column).
    var unplaced: Bool { campaignID == 0 || adGroupID == 0 }

    /// Entries without their keyword's campaign or ad group take them from another entry of
    /// the keyword, else from what the store holds of it (`stored`, its latest day with a
    /// campaign): a keyword id is one ad group's. Stored as 0, a day escaped the replacing
    /// of its campaign's day, and a report of that day alone could not place its spend.
    /// Both ids come from the same entry or row; an ad group only with its own campaign.
    static func placed(_ entries: [SpendEntry], stored: [Int64: (campaignID: Int64, adGroupID: Int64)])
        -> [SpendEntry]
    {
        var known: [Int64: (campaignID: Int64, adGroupID: Int64)] = [:]
        for entry in entries where entry.campaignID > 0 {
            if let was = known[entry.keywordID], was.adGroupID > 0 || entry.adGroupID == 0 { continue }
            known[entry.keywordID] = (entry.campaignID, entry.adGroupID)
        }
        return entries.map { entry in
            guard entry.unplaced else { return entry }
            let places = [known[entry.keywordID], stored[entry.keywordID]].compactMap { $0 }
            var placed = entry
            if placed.campaignID == 0, let place = places.first(where: { $0.campaignID > 0 }) {
                placed.campaignID = place.campaignID
            }
            if placed.adGroupID == 0,
                let place = places.first(where: { $0.campaignID == placed.campaignID && $0.adGroupID > 0 })
            {
                placed.adGroupID = place.adGroupID
            }
            return placed
        }
    }

    /// Several rows of one keyword's day (an export split by country, a fetch's pages)
    /// summed into one per key.
    static func summed(_ entries: [SpendEntry]) -> [SpendEntry] {
        var byKey: [String: SpendEntry] = [:]
        var order: [String] = []
        for entry in entries {
            if var existing = byKey[entry.key] {
                existing.amount += entry.amount
                existing.appID = existing.appID ?? entry.appID
                if existing.campaignID == 0 { existing.campaignID = entry.campaignID }
                if existing.adGroupID == 0, existing.campaignID == entry.campaignID {
                    existing.adGroupID = entry.adGroupID
                }
                byKey[entry.key] = existing
            } else {
                byKey[entry.key] = entry
                order.append(entry.key)
            }
        }
        return order.compactMap { byKey[$0] }
    }
}

/// Opens the spend store of the gateway's storage: its PostgreSQL database when
/// `storage.postgres` is set, else its SQLite file.
enum SpendStorage {
    static func open(storagePath: String, storageURL: PostgresURL?, logger: Logger) async throws -> any SpendStore {
        if let storageURL { return try await PostgresSpend(url: storageURL, logger: logger) }
        return try SQLiteSpend(path: storagePath)
    }
}

/// A campaign's day, or one ad group's, that a complete report of it replaces whole: Apple's
/// report of a campaign, or an export of it, holds every keyword that spent; an export
/// filtered to one ad group, only that ad group's.
struct SpendScope: Sendable, Hashable {
    var campaignID: Int64
    /// 0: every ad group of the campaign.
    var adGroupID: Int64
    var day: String
}

/// A `YYYY-MM-DD` day in UTC.
enum SpendDay {
    static func string(_ date: Date) -> String {
        let parts = Calendar.utc.dateComponents([.year, .month, .day], from: date)
        func padded(_ value: Int?, _ width: Int) -> String {
            let digits = String(value ?? 0)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(padded(parts.year, 4))-\(padded(parts.month, 2))-\(padded(parts.day, 2))"
    }

    /// The day of `date`, moved by `days`.
    static func string(_ date: Date, adding days: Int) -> String {
        string(Calendar.utc.date(byAdding: .day, value: days, to: date) ?? date)
    }
}
