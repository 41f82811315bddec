import Foundation
import GatewayCore
import Logging
import ServiceLifecycle
import Synchronization

/// Daily spend per keyword of one campaign, from an Apple Ads keyword report.
protocol AppleAdsSpendSource: Sendable {
    /// Each keyword's spend on each day from `from` to `to` (both inclusive, `YYYY-MM-DD`,
    /// UTC) in `campaignID`, days without spend left out: the campaign's whole report; nil
    /// when Apple answered none (it refused the report, `403`, or knows no such campaign,
    /// `404`), which replaces nothing held. A refusal after the first page throws: a part of
    /// the report is not its whole.
    func keywordSpend(campaignID: Int64, orgID: Int64?, from: String, to: String) async throws -> [SpendEntry]?
}

extension AppleAdsHTTP {
    /// Most pages of one campaign's report: 1,000 keyword rows a page.
    static let maxReportPages = 50

    /// A `localSpend` object (`{"amount": "12.50", "currency": "USD"}`) as an amount and a
    /// currency; nil for an amount that is not a decimal, a negative one (spend is never
    /// below nothing, and one would lower the cost of every install; `import spend` refuses
    /// it too), or a currency that is not a code.
    static func spend(_ value: Any?) -> (amount: Decimal, currency: String)? {
        guard let money = value as? [String: Any],
            let currency = (money["currency"] as? String).flatMap(SpendCSVReader.currency)
        else { return nil }
        let amount: Decimal?
        if let text = money["amount"] as? String {
            amount =
                text.wholeMatch(of: /\d+(\.\d+)?/) != nil
                ? Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) : nil
        } else if let number = money["amount"] as? NSNumber {
            amount = Decimal(string: number.stringValue, locale: Locale(identifier: "en_US_POSIX"))
        } else {
            amount = nil
        }
        guard let amount, amount >= 0, SpendEntry.micros(amount) != nil else { return nil }
        return (amount, currency)
    }

    /// A report longer than ``maxReportPages`` pages: read in part, it is not replaced.
    static func tooManyPages(_ path: String) -> Failure {
        Failure(description: "\(path): the report runs past \(maxReportPages) pages; nothing of it was stored")
    }

    /// A report's later page refused (`403`, `404`) after its first was answered.
    static func refusedPage(_ path: String, _ page: Int) -> Failure {
        Failure(description: "\(path): Apple Ads refused page \(page + 1) of the report after answering the first")
    }

    /// An `error` Apple sends with a `200` (both APIs may): a failure, not an empty report.
    static func reportError(_ json: [String: Any], at path: String) -> Failure? {
        guard let error = json["error"], !(error is NSNull) else { return nil }
        return Failure(description: "\(path): Apple Ads answered 200 with an error")
    }
}

extension AppleAdsPlatformV1: AppleAdsSpendSource {
    /// `POST /v1/reports/apps/keywords/query`, filtered by the campaign (the API requires
    /// it), daily in UTC: `result.rows[]`, each a keyword (`metadata.id`) with its
    /// `granularMetrics[]` by `date`, each with `localSpend`. Asked of the org's ad accounts
    /// in turn until one knows the campaign. An account that refuses may be the one that
    /// does: then an empty answer from another is no report of the campaign (nil).
    func keywordSpend(campaignID: Int64, orgID: Int64?, from: String, to: String) async throws -> [SpendEntry]? {
        let path = "/reports/apps/keywords/query"
        var refused = false
        for account in try await adAccounts(orgID: orgID) {
            var entries: [SpendEntry] = []
            var offset = 0
            var whole = false
            for page in 0..<AppleAdsHTTP.maxReportPages {
                let query: [String: Any] = [
                    "timeRange": ["start": from, "end": to, "timeZone": "UTC", "granularity": "DAILY"],
                    "filters": [["field": "campaignId", "operator": "EQUALS", "value": [String(campaignID)]]],
                    "fields": ["localSpend"],
                    "pagination": ["offset": offset, "pageSize": 1000],
                ]
                guard
                    let json = try await http.post(
                        path, json: try JSONSerialization.data(withJSONObject: query),
                        context: "adAccountId=\(account)")
                else {
                    if page > 0 { throw AppleAdsHTTP.refusedPage(path, page) }
                    refused = true
                    whole = true
                    break
                }
                if let failure = AppleAdsHTTP.reportError(json, at: path) { throw failure }
                guard let result = json["result"] as? [String: Any], let rows = result["rows"] as? [[String: Any]]
                else { throw AppleAdsHTTP.Failure(description: "\(path): an answer without result.rows") }
                for row in rows {
                    let metadata = row["metadata"] as? [String: Any] ?? [:]
                    guard let keyword = Self.int(metadata["id"]) else { continue }
                    for day in row["granularMetrics"] as? [[String: Any]] ?? [] {
                        guard let date = day["date"] as? String, let spend = AppleAdsHTTP.spend(day["localSpend"])
                        else { continue }
                        entries.append(
                            SpendEntry(
                                campaignID: Self.int(metadata["campaignId"]) ?? campaignID,
                                adGroupID: Self.int(metadata["adGroupId"]) ?? 0, keywordID: keyword,
                                day: String(date.prefix(10)), currency: spend.currency, amount: spend.amount))
                    }
                }
                offset += rows.count
                let total = ((json["pagination"] as? [String: Any])?["totalCount"]).flatMap(Self.int)
                if rows.isEmpty || total.map({ offset >= $0 }) ?? (rows.count < 1000) {
                    whole = true
                    break
                }
            }
            // Pages past the limit left unread: a part of the report would replace the whole.
            if !whole { throw AppleAdsHTTP.tooManyPages(path) }
            if !entries.isEmpty { return entries }
        }
        return refused ? nil : []
    }
}

extension AppleAdsCampaignManagementV5: AppleAdsSpendSource {
    /// `POST /reports/campaigns/{id}/keywords` (v5 asks by org), daily in UTC, ordered by
    /// keyword (a report without `selector.orderBy` fails): `data.reportingDataResponse.row[]`,
    /// each a keyword (`metadata.keywordId`) with its `granularity[]` by `date`.
    func keywordSpend(campaignID: Int64, orgID: Int64?, from: String, to: String) async throws -> [SpendEntry]? {
        guard let orgID else { throw AppleAdsHTTP.CannotAsk() }
        let path = "/reports/campaigns/\(campaignID)/keywords"
        var entries: [SpendEntry] = []
        var offset = 0
        var whole = false
        for page in 0..<AppleAdsHTTP.maxReportPages {
            let body: [String: Any] = [
                "startTime": from, "endTime": to, "granularity": "DAILY", "timeZone": "UTC",
                "returnRowTotals": false, "returnGrandTotals": false, "returnRecordsWithNoMetrics": false,
                "selector": [
                    "orderBy": [["field": "keywordId", "sortOrder": "ASCENDING"]],
                    "pagination": ["offset": offset, "limit": 1000],
                ],
            ]
            guard
                let json = try await http.post(
                    path, json: try JSONSerialization.data(withJSONObject: body), context: "orgId=\(orgID)")
            else {
                if page > 0 { throw AppleAdsHTTP.refusedPage(path, page) }
                return nil
            }
            if let failure = AppleAdsHTTP.reportError(json, at: path) { throw failure }
            guard let data = json["data"] as? [String: Any],
                let report = data["reportingDataResponse"] as? [String: Any]
            else { throw AppleAdsHTTP.Failure(description: "\(path): an answer without data.reportingDataResponse") }
            let rows = report["row"] as? [[String: Any]] ?? []
            for row in rows {
                let metadata = row["metadata"] as? [String: Any] ?? [:]
                guard let keyword = AppleAdsPlatformV1.int(metadata["keywordId"]) else { continue }
                for day in row["granularity"] as? [[String: Any]] ?? [] {
                    guard let date = day["date"] as? String, let spend = AppleAdsHTTP.spend(day["localSpend"]) else {
                        continue
                    }
                    entries.append(
                        SpendEntry(
                            campaignID: campaignID, adGroupID: AppleAdsPlatformV1.int(metadata["adGroupId"]) ?? 0,
                            keywordID: keyword, day: String(date.prefix(10)), currency: spend.currency,
                            amount: spend.amount))
                }
            }
            offset += rows.count
            let total = ((json["pagination"] as? [String: Any])?["totalResults"]).flatMap(AppleAdsPlatformV1.int)
            if rows.isEmpty || total.map({ offset >= $0 }) ?? (rows.count < 1000) {
                whole = true
                break
            }
        }
        // Pages past the limit left unread: a part of the report would replace the whole.
        guard whole else { throw AppleAdsHTTP.tooManyPages(path) }
        return entries
    }
}

/// Fetches the last `days` days of keyword spend, once a day, for every campaign the
/// gateway saw records of: Apple corrects a day's spend after it ends, so each fetch asks
/// for the week again and replaces it. On PostgreSQL one replica of many fetches (a claim
/// in the spend table); a fetch that failed for every campaign is tried again an hour on.
final class SpendFetcher: Service, Sendable {
    let source: any AppleAdsSpendSource
    let store: any SpendStore
    let days: Int
    let logger: Logger
    let now: @Sendable () -> Date
    /// How often a fetch is due.
    static let every: TimeInterval = 86_400
    /// How long a claim holds: a fetch that dies is taken over after this.
    static let lease: TimeInterval = 3600
    /// Most campaigns asked in one fetch, so that a store of stray ids cannot make it endless.
    static let maxCampaigns = 2000

    init(
        source: any AppleAdsSpendSource, store: any SpendStore, days: Int, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.source = source
        self.store = store
        self.days = days
        self.logger = logger
        self.now = now
    }

    /// Checks whether a fetch is due at start and then every hour at most, fetching when it
    /// is and this process claims it.
    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            // A fetch of many campaigns is cut short by a shutdown, not waited for: what it
            // left undone is asked again once its claim lapses.
            let wait = await cancelWhenGracefulShutdown { await self.check() }
            let pause = Duration.seconds(wait)
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
        }
    }

    /// Fetches if due; how long to wait before checking again.
    private func check() async -> TimeInterval {
        do {
            _ = try await fetchIfDue()
            guard let last = try await store.lastFetched() else { return 3600 }
            return min(3600, max(60, Self.every - now().timeIntervalSince(last)))
        } catch {
            logger.warning("spend fetch failed", metadata: ["error": "\(error)"])
            return 3600
        }
    }

    /// What one fetch did.
    struct Outcome: Sendable, Equatable {
        var campaigns = 0
        var failed = 0
        var keywordDays = 0
        /// Campaigns Apple answered no report for (`403`, `404`): their spend held is kept.
        var unanswered = 0
    }

    /// Fetches when a day has passed since the last fetch and no other replica is at it;
    /// nil when it did not.
    func fetchIfDue() async throws -> Outcome? {
        guard try await store.claimFetch(now: now(), every: Self.every, lease: Self.lease) else { return nil }
        let today = now()
        let (from, to) = (SpendDay.string(today, adding: -days), SpendDay.string(today))
        var outcome = Outcome()
        let campaigns = try await store.campaigns()
        // No campaign yet (spend just turned on, no Apple Ads record since): not a day's
        // fetch done, or the first records' campaigns would wait a day; the claim's hour
        // passes and the next check looks again.
        guard !campaigns.isEmpty else { return outcome }
        if campaigns.count > Self.maxCampaigns {
            logger.warning(
                "more campaigns than one spend fetch asks about; the rest wait",
                metadata: ["campaigns": "\(campaigns.count)", "asked": "\(Self.maxCampaigns)"])
        }
        for (campaign, org) in campaigns.prefix(Self.maxCampaigns) {
            // Cancelled (a shutdown): not a day's fetch done.
            if Task.isCancelled { return outcome }
            outcome.campaigns += 1
            do {
                guard
                    let entries = try await source.keywordSpend(campaignID: campaign, orgID: org, from: from, to: to)
                else {
                    outcome.unanswered += 1
                    logger.warning(
                        "Apple Ads answered no spend report for a campaign; its spend held is kept",
                        metadata: ["campaign_id": "\(campaign)"])
                    continue
                }
                // Apple's report is the campaign's whole: a keyword absent from a day spent nothing.
                let asked = (-days...0).map {
                    SpendScope(campaignID: campaign, adGroupID: 0, day: SpendDay.string(today, adding: $0))
                }
                try await store.replace(entries, scopes: asked)
                outcome.keywordDays += SpendEntry.summed(entries).count
            } catch is AppleAdsHTTP.CannotAsk {
                // v5 asks by org, and a campaign only `import spend` named has none yet: not
                // Apple failing, so not a reason to ask every campaign again within the hour.
                outcome.unanswered += 1
                logger.info(
                    "a campaign's org is not known yet (v5 asks by org); a record of it will tell",
                    metadata: ["campaign_id": "\(campaign)"])
            } catch {
                outcome.failed += 1
                // The error says the path and Apple's status, never the token.
                logger.warning(
                    "spend fetch failed for a campaign", metadata: ["campaign_id": "\(campaign)", "error": "\(error)"])
            }
        }
        // Every campaign failing (Apple down, the key revoked) is asked again after the
        // claim's hour, not a day later; a campaign failing alone is asked with the next.
        // Campaigns not asked (no org yet) or not answered (refused) do not count: an outage
        // failing every campaign that was asked is still retried within the hour.
        if outcome.failed > 0 && outcome.failed == outcome.campaigns - outcome.unanswered { return outcome }
        try await store.fetched(at: now())
        logger.info(
            "spend fetched",
            metadata: [
                "from": "\(from)", "to": "\(to)", "campaigns": "\(outcome.campaigns)", "failed": "\(outcome.failed)",
                "unanswered": "\(outcome.unanswered)", "keyword_days": "\(outcome.keywordDays)",
            ])
        return outcome
    }
}

/// Notes the campaigns of the Apple Ads records the enricher sees, for the daily spend
/// fetch: each one once a process (with its org, which v5 asks by), written in the
/// background so that no record waits on it.
final class SpendCampaigns: Sendable {
    let store: any SpendStore
    let fetcher: SpendFetcher
    let logger: Logger
    private let noted = Mutex<Set<Int64>>([])

    init(store: any SpendStore, fetcher: SpendFetcher, logger: Logger) {
        self.store = store
        self.fetcher = fetcher
        self.logger = logger
    }

    func note(_ records: [AttributionRecord]) {
        var fresh: [Int64: Int64?] = [:]
        for record in records where ["adservices", "iad"].contains(record.provider) && record.attributed {
            guard let campaign = record.campaignID, campaign > 0 else { continue }
            // A campaign seen first without its org is noted again once a record gives it.
            let key = record.orgID == nil ? -campaign : campaign
            guard noted.withLock({ !$0.contains(key) && !$0.contains(campaign) }) else { continue }
            fresh[campaign] = .some(record.orgID)
        }
        guard !fresh.isEmpty else { return }
        noted.withLock { set in
            for (campaign, org) in fresh { set.insert(org == nil ? -campaign : campaign) }
        }
        let (store, logger, campaigns) = (store, logger, fresh)
        Task {
            do {
                try await store.noteCampaigns(campaigns)
            } catch {
                logger.warning("could not note campaigns for the spend fetch", metadata: ["error": "\(error)"])
                // Noted again with the next record of them.
                self.noted.withLock { set in
                    for (campaign, org) in campaigns { set.remove(org == nil ? -campaign : campaign) }
                }
            }
        }
    }
}
