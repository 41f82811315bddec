import Foundation
import GatewayCore
import Logging

/// `keyword_lookup`: fills `keyword`, `keyword_match_type`, `ad_group_name` and
/// `campaign_name` of Apple Ads records from Apple's APIs, by id.
///
/// Cached names are used at once; missing ones are fetched (one request per id however
/// many records wait) and the records wait up to `wait` for them. Past that the records
/// are routed with their ids alone; the fetch completes in the background and the cache
/// serves later records. Keywords absent from AdServices answers (search match) are not
/// looked up. An enricher never fails a record: Apple down means ids only.
final class KeywordLookupEnricher: Enricher, Sendable {
    let name = "keyword_lookup"
    let source: any AppleAdsNameSource
    let cache: KeywordNameCache
    let wait: Duration
    let ttl: TimeInterval
    let unknownTTL: TimeInterval
    let logger: Logger
    let now: @Sendable () -> Date
    let fetches = NameFetches()

    init(
        source: any AppleAdsNameSource, cache: KeywordNameCache, wait: Duration, ttl: TimeInterval,
        unknownTTL: TimeInterval, logger: Logger, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.source = source
        self.cache = cache
        self.wait = wait
        self.ttl = ttl
        self.unknownTTL = unknownTTL
        self.logger = logger
        self.now = now
    }

    /// What to ask for one record, by cache key.
    enum Lookup: Sendable {
        case keyword(id: Int64, adGroupID: Int64?, campaignID: Int64?, orgID: Int64?)
        case adGroup(id: Int64, campaignID: Int64?, orgID: Int64?)
        case campaign(id: Int64, orgID: Int64?)
    }

    static func lookups(for record: AttributionRecord) -> [String: Lookup] {
        guard ["adservices", "iad"].contains(record.provider), record.attributed else { return [:] }
        var lookups: [String: Lookup] = [:]
        if let id = record.keywordID, record.keyword == nil {
            lookups["keyword:\(id)"] = .keyword(
                id: id, adGroupID: record.adGroupID, campaignID: record.campaignID, orgID: record.orgID)
        }
        if let id = record.adGroupID, record.adGroupName == nil {
            lookups["adgroup:\(id)"] = .adGroup(id: id, campaignID: record.campaignID, orgID: record.orgID)
        }
        if let id = record.campaignID, record.campaignName == nil {
            lookups["campaign:\(id)"] = .campaign(id: id, orgID: record.orgID)
        }
        return lookups
    }

    func enrich(_ records: [AttributionRecord]) async -> [AttributionRecord] {
        var wanted: [String: Lookup] = [:]
        for record in records { wanted.merge(Self.lookups(for: record)) { first, _ in first } }
        guard !wanted.isEmpty else { return records }

        var known = await fresh(Array(wanted.keys))
        let missing = wanted.filter { known[$0.key] == nil }
        if !missing.isEmpty {
            for (key, lookup) in missing {
                await fetches.start(key) { [self] in await self.fetch(key, lookup) }
            }
            let deadline = ContinuousClock.now.advanced(by: wait)
            for key in missing.keys {
                if let entry = await fetches.wait(key, until: deadline) { known[key] = entry }
            }
            // A fetch that finished before its wait began is in the cache.
            let late = missing.keys.filter { known[$0] == nil }
            known.merge(await fresh(late)) { first, _ in first }
        }
        return records.map { record in
            var record = record
            var filled = false
            if let id = record.keywordID, record.keyword == nil, let entry = known["keyword:\(id)"], let text = entry.name {
                record.keyword = text
                record.keywordMatchType = record.keywordMatchType ?? entry.matchType
                filled = true
            }
            if let id = record.adGroupID, record.adGroupName == nil, let name = known["adgroup:\(id)"]?.name {
                record.adGroupName = name
                filled = true
            }
            if let id = record.campaignID, record.campaignName == nil, let name = known["campaign:\(id)"]?.name {
                record.campaignName = name
                filled = true
            }
            if filled { record.enrichedAt = now() }
            return record
        }
    }

    /// Cached entries still within their TTL.
    func fresh(_ keys: [String]) async -> [String: KeywordNameCache.Entry] {
        guard let entries = try? await cache.entries(keys) else { return [:] }
        let now = now()
        return entries.filter { _, entry in
            now.timeIntervalSince(entry.fetchedAt) < (entry.name == nil ? unknownTTL : ttl)
        }
    }

    func fetch(_ key: String, _ lookup: Lookup) async -> KeywordNameCache.Entry? {
        do {
            var entry = KeywordNameCache.Entry(name: nil, matchType: nil, fetchedAt: now())
            switch lookup {
            case .keyword(let id, let adGroupID, let campaignID, let orgID):
                if let keyword = try await source.keyword(id: id, adGroupID: adGroupID, campaignID: campaignID, orgID: orgID) {
                    entry.name = keyword.text
                    entry.matchType = keyword.matchType
                }
            case .adGroup(let id, let campaignID, let orgID):
                entry.name = try await source.adGroupName(id: id, campaignID: campaignID, orgID: orgID)
            case .campaign(let id, let orgID):
                entry.name = try await source.campaignName(id: id, orgID: orgID)
            }
            try await cache.store(key, entry)
            return entry
        } catch {
            // Errors name the path and status only; tokens and keys never reach them.
            logger.warning("name lookup failed", metadata: ["key": "\(key)", "error": "\(error)"])
            return nil
        }
    }
}
