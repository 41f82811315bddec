import Foundation
import GatewayCore
import Logging
import ServiceLifecycle
import Synchronization

/// `keyword_lookup`: fills `keyword`, `keyword_match_type`, `ad_group_name` and
/// `campaign_name` of Apple Ads records from Apple's APIs, by id.
///
/// Cached names are used at once; missing ones are fetched (one request per id however
/// many records wait) and the records wait up to `wait` for them. Past that the records
/// are routed with their ids alone; the fetch completes in the background and the cache
/// serves later records. Keywords absent from AdServices answers (search match) are not
/// looked up. An enricher never fails a record: Apple down means ids only. Records that
/// went on without a name come back through ``lateRecords`` once it arrives.
final class KeywordLookupEnricher: LateEnricher, EnricherWithServices, Sendable {
    let name = "keyword_lookup"
    let source: any AppleAdsNameSource
    let cache: any KeywordNameStore
    /// The campaigns whose spend the daily fetch asks for, and the fetch; nil without
    /// `spend.enabled`.
    let spend: SpendCampaigns?
    let wait: Duration
    let ttl: TimeInterval
    let unknownTTL: TimeInterval
    let logger: Logger
    let now: @Sendable () -> Date
    let metrics: GatewayMetrics
    /// Waits between attempts at a name Apple could not give (down, throttling).
    let sleep: @Sendable (Duration) async throws -> Void
    /// How long a failing name keeps being retried for the records waiting for it.
    static let retryFor: Duration = .seconds(3600)
    /// The first wait before asking again; doubles to 30 times this.
    let retryInitial: Duration
    let fetches = NameFetches()
    let lateRecords: AsyncStream<[AttributionRecord]>
    private let lateContinuation: AsyncStream<[AttributionRecord]>.Continuation
    /// Records routed without a name, by the cache key they wait for.
    private let waitingLate = Mutex<[String: [AttributionRecord]]>([:])
    /// At most one `name lookup failed` line each 10 s, saying how many it stands for.
    private let failureLines = OncePerInterval(.seconds(10))
    private let bulkFailureLines = OncePerInterval(.seconds(10))
    private let owedPruning = OncePerInterval(.seconds(3600))
    /// At most this many records wait for late names; older ones keep their ids only.
    static let maxWaitingLate = 10_000
    /// Requests for names by id at once: a thousand keywords the bulk query left would
    /// otherwise go in one burst into Apple's rate limit.
    static let requestsAtOnce = 8
    private let requests = ConcurrencyLimit(requestsAtOnce)

    init(
        source: any AppleAdsNameSource, cache: any KeywordNameStore, spend: SpendCampaigns? = nil, wait: Duration,
        ttl: TimeInterval,
        unknownTTL: TimeInterval, logger: Logger, now: @escaping @Sendable () -> Date = { Date() },
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        retryInitial: Duration = .seconds(2), metrics: GatewayMetrics = .none
    ) {
        self.metrics = metrics
        self.sleep = sleep
        self.retryInitial = retryInitial
        self.source = source
        self.cache = cache
        self.spend = spend
        self.wait = wait
        self.ttl = ttl
        self.unknownTTL = unknownTTL
        self.logger = logger
        self.now = now
        (lateRecords, lateContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1000))
    }

    /// What to ask for one record, by cache key.
    enum Lookup: Sendable {
        case keyword(id: Int64, adGroupID: Int64?, campaignID: Int64?, orgID: Int64?)
        case adGroup(id: Int64, campaignID: Int64?, orgID: Int64?)
        case campaign(id: Int64, orgID: Int64?)
    }

    static func lookups(for record: AttributionRecord) -> [String: Lookup] {
        // Apple's developer-mode answers name ids no account has (`1234567890`, keyword
        // `123222`): asked about, each was cached as unknown and asked again every
        // `unknown_ttl_minutes`.
        guard ["adservices", "iad"].contains(record.provider), record.attributed, !record.isTest else { return [:] }
        var lookups: [String: Lookup] = [:]
        if let id = record.keywordID, record.keyword == nil {
            lookups[AppleAdsNameKey.keyword(id)] = .keyword(
                id: id, adGroupID: record.adGroupID, campaignID: record.campaignID, orgID: record.orgID)
        }
        if let id = record.adGroupID, record.adGroupName == nil {
            lookups[AppleAdsNameKey.adGroup(id)] = .adGroup(id: id, campaignID: record.campaignID, orgID: record.orgID)
        }
        if let id = record.campaignID, record.campaignName == nil {
            lookups[AppleAdsNameKey.campaign(id)] = .campaign(id: id, orgID: record.orgID)
        }
        return lookups
    }

    /// The record's lookups the API can make: v5 finds an entity by org (and campaign and
    /// ad group), and a record without them (an iAd payload with no `iad-org-id`) is not
    /// looked up, waited for or owed its names; the next record that has them asks.
    func askable(for record: AttributionRecord) -> [String: Lookup] {
        let lookups = Self.lookups(for: record)
        guard source.asksByOrg else { return lookups }
        return lookups.filter { _, lookup in
            switch lookup {
            case .keyword(_, let adGroupID, let campaignID, let orgID):
                adGroupID != nil && campaignID != nil && orgID != nil
            case .adGroup(_, let campaignID, let orgID): campaignID != nil && orgID != nil
            case .campaign(_, let orgID): orgID != nil
            }
        }
    }

    var services: [any Service] {
        [NameFetchesStop(fetches: fetches) as any Service] + (spend.map { [$0.fetcher as any Service] } ?? [])
    }

    func enrich(_ records: [AttributionRecord]) async -> [AttributionRecord] {
        spend?.note(records)
        var wanted: [String: Lookup] = [:]
        for record in records { wanted.merge(askable(for: record)) { first, _ in first } }
        guard !wanted.isEmpty else { return records }

        var known = await fresh(Array(wanted.keys))
        let missing = wanted.filter { known[$0.key] == nil }
        defer { count(wanted: Array(wanted.keys), missing: Set(missing.keys), known: known) }
        if !missing.isEmpty {
            // Many keywords of one org: one bulk query (the rest, and single ones, by id).
            var single = missing
            let byOrg = Dictionary(
                grouping: missing.compactMap { key, lookup -> (Int64?, String)? in
                    if case .keyword(_, _, _, let orgID) = lookup { return (orgID, key) }
                    return nil
                }
            ) { $0.0 }
            for (orgID, group) in byOrg where group.count >= 2 {
                let keys = group.map(\.1)
                let lookups = keys.reduce(into: [String: Lookup]()) { $0[$1] = missing[$1] }
                for key in keys { single[key] = nil }
                await fetches.startGroup(
                    keys,
                    { [self] keys, done in await self.fetchKeywords(keys, lookups: lookups, orgID: orgID, done: done) },
                    then: { [self] key in await self.completeLate(key) })
            }
            for (key, lookup) in single {
                await fetches.start(
                    key, { [self] in await self.fetch(key, lookup) }, then: { [self] in await self.completeLate(key) })
            }
            // While Apple asks every request to wait (throttling), a name cannot come within
            // `wait`: the records go on at once, as for a failing name.
            let deadline = ContinuousClock.now.advanced(by: await source.heldFor() == nil ? wait : .zero)
            for key in missing.keys {
                if let entry = await fetches.wait(key, until: deadline) { known[key] = entry }
            }
            // A fetch that finished before its wait began is in the cache; so, past its TTL,
            // may be a name Apple could not renew in time: still its name (renamed at
            // worst), better than none for the whole of an outage.
            let late = missing.keys.filter { known[$0] == nil }
            let cached = late.isEmpty ? [:] : (try? await cache.entries(late)) ?? [:]
            let now = now()
            known.merge(cached.filter { isFresh($0.value, now: now) || $0.value.name != nil }) { first, _ in first }
        }
        let result = records.map { fill($0, known) }
        // Owed: a name neither cached nor known to be unknown. Kept past a restart.
        let owed = result.filter { record in askable(for: record).keys.contains { known[$0] == nil } }
        do {
            try await cache.rememberOwed(owed.map(\.recordID), now: now())
            // Let go after a week even without a restart (revoked credentials, for months).
            if !owed.isEmpty, owedPruning.allow() {
                try await cache.letGoOwed(before: now().addingTimeInterval(-Self.owedFor))
            }
        } catch {
            logger.warning("cannot keep the records owed a name", metadata: ["error": "\(error)"])
        }
        await waitForLateNames(result)
        return result
    }

    /// How long a record stays owed a name across restarts.
    static let owedFor: TimeInterval = 7 * 86_400

    func recordsLeftWaiting() async -> [String] {
        do {
            let owed = try await cache.owed(since: now().addingTimeInterval(-Self.owedFor))
            let waiting = waitingLate.withLock { Set($0.values.joined().map(\.recordID)) }
            return waiting.isEmpty ? owed : owed.filter { !waiting.contains($0) }
        } catch {
            logger.warning("cannot read the records owed a name", metadata: ["error": "\(error)"])
            return []
        }
    }

    /// Enriched again: what is named now goes out as a late version, what is still owed
    /// waits as a new record would, and what needs nothing more is let go.
    func resume(_ records: [AttributionRecord]) async {
        let result = await enrich(records)
        var completed: [AttributionRecord] = []
        var settled: [String] = []
        let known = await fresh(Array(Set(result.flatMap { askable(for: $0).keys })))
        for (before, after) in zip(records, result) {
            if after != before {
                completed.append(after)
            } else if askable(for: after).keys.allSatisfy({ known[$0] != nil }) {
                settled.append(after.recordID)
            }
        }
        await forget(settled)
        if !completed.isEmpty { lateContinuation.yield(completed) }
    }

    /// Late versions stored: those that owe nothing more (every name they lack is cached
    /// as unknown, within its TTL) are let go; one still waiting for a failing name stays owed.
    func stored(_ records: [AttributionRecord]) async {
        let keys = Set(records.flatMap { askable(for: $0).keys })
        // Within their TTL: an id Apple did not know an hour ago is asked again, and owed.
        let cached = keys.isEmpty ? [:] : await fresh(Array(keys))
        let settled = records.filter { askable(for: $0).keys.allSatisfy { cached[$0] != nil } }
        await forget(settled.map(\.recordID))
    }

    func forget(_ recordIDs: [String]) async {
        do {
            try await cache.forgetOwed(recordIDs)
        } catch {
            logger.warning("cannot update the records owed a name", metadata: ["error": "\(error)"])
        }
    }

    /// Each name looked up counts once: `late` (no answer in time), `unknown` (Apple has
    /// no such id), `fetched` (asked and answered in time), `hit` (cached) or `stale` (past
    /// its TTL, and Apple did not answer in time).
    func count(wanted: [String], missing: Set<String>, known: [String: KeywordNameEntry]) {
        var outcomes: [String: Int] = [:]
        let now = now()
        for key in wanted {
            let outcome =
                if let entry = known[key] {
                    entry.name == nil
                        ? "unknown"
                        : now.timeIntervalSince(entry.fetchedAt) >= ttl
                            ? "stale" : missing.contains(key) ? "fetched" : "hit"
                } else { "late" }
            outcomes[outcome, default: 0] += 1
        }
        for (outcome, count) in outcomes {
            metrics.enrichment(enricher: KeywordLookupPlugin.typeName, outcome: outcome, count: count)
        }
    }

    func fill(_ record: AttributionRecord, _ known: [String: KeywordNameEntry]) -> AttributionRecord {
        var record = record
        var filled = false
        if let id = record.keywordID, record.keyword == nil, let entry = known[AppleAdsNameKey.keyword(id)],
            let text = entry.name
        {
            record.keyword = text
            record.keywordMatchType = record.keywordMatchType ?? KeywordMatchType.normalized(entry.matchType)
            filled = true
        }
        if let id = record.adGroupID, record.adGroupName == nil, let name = known[AppleAdsNameKey.adGroup(id)]?.name {
            record.adGroupName = name
            filled = true
        }
        if let id = record.campaignID, record.campaignName == nil, let name = known[AppleAdsNameKey.campaign(id)]?.name
        {
            record.campaignName = name
            filled = true
        }
        if filled { record.enrichedAt = now() }
        return record
    }

    /// Remembers records that still lack a name being fetched, so the fetch's end
    /// completes them; a fetch that already ended completes them now.
    func waitForLateNames(_ records: [AttributionRecord]) async {
        var candidates: Set<String> = []
        for record in records { candidates.formUnion(askable(for: record).keys) }
        // Only names still on their way: an id Apple does not know stays without one.
        var running: Set<String> = []
        var finished: Set<String> = []
        for key in candidates {
            if await fetches.isRunning(key) {
                running.insert(key)
            } else if await fetches.finishedRecently(key) {
                finished.insert(key)
            }
        }
        let keys = running.union(finished)
        guard !keys.isEmpty else { return }
        waitingLate.withLock { waiting in
            var total = waiting.values.reduce(0) { $0 + $1.count }
            for record in records {
                for key in askable(for: record).keys where keys.contains(key) && total < Self.maxWaitingLate {
                    waiting[key, default: []].append(record)
                    total += 1
                }
            }
        }
        // Those that ended between the wait and now; a running one completes itself.
        for key in keys where await !fetches.isRunning(key) {
            await completeLate(key)
        }
    }

    /// Hands the records waiting for `key` back, with every name now cached. A record
    /// that also waits for another name still being fetched (and not failing) is handed
    /// back when that one ends: one new version with its keyword, ad group and campaign,
    /// not one per name, each delivered again to every sink. With `keepWaiting` (the
    /// fetch of `key` is failing and goes on), they stay waiting for it too.
    func completeLate(_ key: String, keepWaiting: Bool = false) async {
        // The records, and the other names each still waits under.
        let (records, elsewhere) = waitingLate.withLock { waiting in
            let records = (keepWaiting ? waiting[key] : waiting.removeValue(forKey: key)) ?? []
            let ids = Set(records.map(\.recordID))
            var elsewhere: [String: Set<String>] = [:]
            for (other, list) in waiting where other != key {
                for record in list where ids.contains(record.recordID) {
                    elsewhere[record.recordID, default: []].insert(other)
                }
            }
            return (records, elsewhere)
        }
        guard !records.isEmpty else { return }
        var coming: Set<String> = []
        for other in Set(elsewhere.values.flatMap { $0 }) {
            if await fetches.isComing(other) { coming.insert(other) }
        }
        let ready = records.filter { (elsewhere[$0.recordID] ?? []).isDisjoint(with: coming) }
        guard !ready.isEmpty else { return }
        var keys: Set<String> = []
        for record in ready { keys.formUnion(askable(for: record).keys) }
        let known = await fresh(Array(keys))
        let completed = ready.map { fill($0, known) }.filter { $0.enrichedAt != nil }
        if !completed.isEmpty { lateContinuation.yield(completed) }
    }

    /// Whether records wait for `key`'s name (for tests: whether its end was handled).
    func isWaiting(for key: String) -> Bool {
        waitingLate.withLock { $0[key] != nil }
    }

    /// Cached entries still within their TTL.
    func fresh(_ keys: [String]) async -> [String: KeywordNameEntry] {
        guard let entries = try? await cache.entries(keys) else { return [:] }
        let now = now()
        return entries.filter { isFresh($0.value, now: now) }
    }

    func isFresh(_ entry: KeywordNameEntry, now: Date) -> Bool {
        now.timeIntervalSince(entry.fetchedAt) < (entry.name == nil ? unknownTTL : ttl)
    }

    /// Asks Apple until it answers (Apple down or throttling keeps the records waiting
    /// for late names), backing off to a minute, for at most ``retryFor``.
    func fetch(_ key: String, _ lookup: Lookup) async -> KeywordNameEntry? {
        var delay = retryInitial
        var waited = Duration.zero
        var failed = false
        while true {
            let recoveries = await source.recoveries()
            do {
                let entry = try await requests.run { try await self.fetchOnce(key, lookup) }
                // Answered after failing (Apple Ads back): the other failing names are
                // being asked now too, and records wait for them rather than go on with
                // this one name alone, a late version per name.
                if failed { await fetches.clearFailing() }
                return entry
            } catch is AppleAdsHTTP.CannotAsk {
                // Cached as unknown, it hid the name from records that carry the org id.
                return nil
            } catch {
                // Records held back for this name go out with the others they have
                // now; they stay waiting for this one too.
                failed = true
                // Apple Ads came back while this attempt failed: asked again at once, and not
                // marked failing, which would let its records go on without this name.
                if await source.recoveries() > recoveries { continue }
                if await fetches.markFailing(key) { await completeLate(key, keepWaiting: true) }
                // Errors name the path and status only; tokens and keys never reach them.
                // One line per interval: each name's retries logging theirs would flood the
                // log during an outage.
                if let held = failureLines.pass() {
                    var metadata: Logger.Metadata = ["key": "\(key)", "error": "\(error)"]
                    if held > 0 { metadata["similar_failures_not_logged"] = "\(held)" }
                    logger.warning("name lookup failed", metadata: metadata)
                }
                guard waited < Self.retryFor else { return nil }
                // Refused by the outage gate without being sent: back when the next probe
                // may go, not after this name's own doubling wait (up to a minute).
                let refusedFor = (error as? AppleAdsHTTP.Failure)?.retryIn.map { max($0, .milliseconds(100)) }
                switch await pause(refusedFor ?? delay, unless: recoveries) {
                case .cancelled:
                    return nil
                case .slept:
                    waited += refusedFor ?? delay
                    if refusedFor == nil { delay = min(delay * 2, retryInitial * 30) }
                case .recovered:
                    // Apple Ads is back: every failing name is asked now, together.
                    await fetches.clearFailing()
                    delay = retryInitial
                }
            }
        }
    }

    /// Apple asked every request to wait (throttling): every fetch, those queued for a turn
    /// too, waits it out, counted failing meanwhile, so the records go on without the names
    /// and get them late.
    func heldByApple() async {
        for key in await fetches.markAllFailing() { await completeLate(key, keepWaiting: true) }
    }

    enum Pause { case slept, recovered, cancelled }

    /// `delay`, cut short when an Apple Ads outage ends after `recoveries` had (at once
    /// if one has ended since the attempt began).
    func pause(_ delay: Duration, unless recoveries: Int) async -> Pause {
        await withTaskGroup(of: Pause.self) { group in
            group.addTask { (try? await self.sleep(delay)) != nil ? .slept : .cancelled }
            group.addTask {
                await self.source.untilRecovered(after: recoveries)
                return Task.isCancelled ? .cancelled : .recovered
            }
            let first = await group.next() ?? .cancelled
            group.cancelAll()
            return first
        }
    }

    /// One bulk query for several keywords; those it does not return (deleted, unknown)
    /// and all of them when it fails are asked for one by one.
    func fetchKeywords(
        _ keys: [String], lookups: [String: Lookup], orgID: Int64?, done: NameFetches.KeyDone = { _, _ in }
    ) async -> [String: KeywordNameEntry] {
        var ids: [Int64: String] = [:]
        for key in keys {
            if case .keyword(let id, _, _, _)? = lookups[key] { ids[id] = key }
        }
        var entries: [String: KeywordNameEntry] = [:]
        do {
            for (id, keyword) in try await source.keywords(ids: Array(ids.keys), orgID: orgID) ?? [:] {
                guard let key = ids[id] else { continue }
                let entry = KeywordNameEntry(name: keyword.text, matchType: keyword.matchType, fetchedAt: now())
                try? await cache.store(key, entry)
                entries[key] = entry
            }
        } catch {
            if let held = bulkFailureLines.pass() {
                var metadata: Logger.Metadata = ["keywords": "\(ids.count)", "error": "\(error)"]
                if held > 0 { metadata["similar_failures_not_logged"] = "\(held)" }
                logger.warning("keyword names' bulk query failed; asking for each by id", metadata: metadata)
            }
        }
        for (key, entry) in entries { await done(key, entry) }
        // Those the query did not answer, each by id, with its own retries; their requests
        // go at most `requestsAtOnce` at a time (``fetch(_:_:)``).
        await withTaskGroup(of: (String, KeywordNameEntry?).self) { group in
            for key in keys where entries[key] == nil {
                guard let lookup = lookups[key] else { continue }
                group.addTask { (key, await self.fetch(key, lookup)) }
            }
            for await (key, entry) in group {
                entries[key] = entry
                await done(key, entry)
            }
        }
        return entries
    }

    func fetchOnce(_ key: String, _ lookup: Lookup) async throws -> KeywordNameEntry {
        var entry = KeywordNameEntry(name: nil, matchType: nil, fetchedAt: now())
        switch lookup {
        case .keyword(let id, let adGroupID, let campaignID, let orgID):
            if let keyword = try await source.keyword(
                id: id, adGroupID: adGroupID, campaignID: campaignID, orgID: orgID)
            {
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
    }
}

/// Ends the enricher's lookups when it stops: at a shutdown, and when a reload replaces or
/// removes it.
struct NameFetchesStop: Service {
    let fetches: NameFetches

    func run() async throws {
        try? await gracefulShutdown()
        await fetches.stop()
    }
}
