import Foundation
import GatewayConfig
import GatewayCore

/// What a keyword report covers: `report keywords`' options, the JSON route's and the
/// dashboard's query parameters.
public struct KeywordReportQuery: Sendable, Equatable {
    /// Only this app's lines.
    public var appID: String?
    /// Purchases at or after this; installs count from any time, so that a report of one
    /// month credits the keywords that brought its buyers earlier.
    public var purchasesSince: Date?
    /// Purchases before this.
    public var purchasesUntil: Date?
    /// Only this network's lines (``KeywordReport/Row/network``).
    public var network: String?
    /// Only installs in this country or region (ISO 3166 alpha-2, upper case) and the
    /// purchases credited to them (``KeywordReport/country``).
    public var country: String?

    public init(
        appID: String? = nil, purchasesSince: Date? = nil, purchasesUntil: Date? = nil, network: String? = nil,
        country: String? = nil
    ) {
        self.appID = appID
        self.purchasesSince = purchasesSince
        self.purchasesUntil = purchasesUntil
        self.network = network
        self.country = country
    }

    /// Why a `network` or `country` cannot be a filter, or nil when it can.
    public static func problem(network: String) -> String? {
        network.count > 200 || network.contains(where: { $0.isNewline || $0.asciiValue.map { $0 < 32 } ?? false })
            ? "expected a network's name (organic, unknown, unattributed, Apple Search Ads, a vendor's)" : nil
    }

    /// `country` as the filter takes it (`us` → `US`), or nil when it is no two-letter code.
    public static func country(_ text: String) -> String? {
        text.wholeMatch(of: /[A-Za-z]{2}/) != nil ? text.uppercased() : nil
    }
}

/// The keyword report as `report keywords`, `GET /v1/reports/keywords` and the dashboard
/// show it: one computation, so that their numbers agree.
public enum KeywordReportReader {
    /// Names by cache key, as ``KnownNames/names(_:)`` gives them.
    public typealias Names = [String: (name: String, matchType: String?)]
    /// Spend per keyword id, as ``KnownNames/spend(from:until:)`` gives it.
    public typealias Spend = [Int64: KeywordSpend]

    /// Reads every record (and every token Apple has not answered yet) from `store`, builds
    /// the report and names its Apple Search Ads lines from `names`, asked only when a line
    /// has ids to name. `spend` is asked for the days of the purchases' period (``spendDays(_:)``);
    /// a keyword that spent with no line gets one. `progress` is told the records read and
    /// their total after each page.
    public static func rows(
        from store: any AttributionStore, _ query: KeywordReportQuery,
        names: ([String]) async throws -> Names,
        spend: (_ from: String?, _ until: String?) async throws -> Spend = { _, _ in [:] },
        progress: (_ read: Int, _ total: Int) -> Void = { _, _ in }
    ) async throws -> [KeywordReport.Row] {
        try await report(from: store, query, days: nil, names: names, spend: spend, progress: progress).rows
    }

    /// As ``rows(from:_:names:spend:progress:)``, with the installs and revenue of `days`
    /// day by day from the same computation (nil without `days`), and the app's SKAdNetwork
    /// postbacks summed into `postbacks` in the same reading of the store (nil without it).
    public static func report(
        from store: any AttributionStore, _ query: KeywordReportQuery, days: DailySeries?,
        postbacks skanPostbacks: SKANReport? = nil,
        names: ([String]) async throws -> Names,
        spend: (_ from: String?, _ until: String?) async throws -> Spend = { _, _ in [:] },
        progress: (_ read: Int, _ total: Int) -> Void = { _, _ in }
    ) async throws -> (rows: [KeywordReport.Row], daily: DailySeries?, postbacks: SKANReport?) {
        let filters = KeywordReport(
            purchasesSince: query.purchasesSince, purchasesUntil: query.purchasesUntil, network: query.network,
            country: query.country)
        // Tokens Apple has not answered yet are installs too, of users it may never
        // name: `unknown`, not `unattributed` as users with no install are. Read before
        // the records: a token answered in between is then in both, and its user's
        // answered install outranks the unknown one; read after, it was in neither.
        var waiting: [AttributionRecord] = []
        var providers: [String: any DeferredAttributionProvider] = [:]
        for name in try await store.pendingCounts().keys {
            providers[name] = waitingProvider(named: name)
        }
        var after: String?
        while !providers.isEmpty {
            let page = try await store.waitingWork(after: after, limit: 2000)
            guard let last = page.last else { break }
            for work in page {
                if let record = providers[work.provider]?.waitingRecord(work),
                    query.appID == nil || record.appID == query.appID
                {
                    waiting.append(record)
                }
            }
            after = last.recordID
        }
        var (rows, daily, postbacks): ([KeywordReport.Row], DailySeries?, SKANReport?)
        if let indexed = store as? any ReportIndexStore {
            try await indexed.catchUpReportIndex(progress: progress)
            let sums = try await indexed.indexedReport(filters, appID: query.appID, live: waiting, days: days)
            (rows, daily) = (sums.rows, sums.daily)
            postbacks = nil
            if let skanPostbacks { postbacks = try await indexed.indexedPostbacks(skanPostbacks, appID: query.appID) }
        } else {
            (rows, daily, postbacks) = try await readAll(
                from: store, query, filters, waiting: waiting, days: days, postbacks: skanPostbacks, progress: progress)
        }
        // Spend is Apple's per keyword, not per country: a country's lines show none
        // rather than the whole world's.
        if query.country == nil, query.network.map({ $0 == KeywordReport.appleSearchAdsNetwork }) ?? true {
            let days = spendDays(query)
            rows = KeywordReport.spending(rows, try await spend(days.from, days.until), appID: query.appID)
        }
        let keys = KeywordReport.nameKeys(rows)
        return (keys.isEmpty ? rows : KeywordReport.naming(rows, from: try await names(keys)), daily, postbacks)
    }

    /// The report read from every record, for a store that keeps no report index.
    static func readAll(
        from store: any AttributionStore, _ query: KeywordReportQuery, _ filters: KeywordReport,
        waiting: [AttributionRecord], days: DailySeries?, postbacks: SKANReport?,
        progress: (_ read: Int, _ total: Int) -> Void
    ) async throws -> (rows: [KeywordReport.Row], daily: DailySeries?, postbacks: SKANReport?) {
        var report = filters
        var postbacks = postbacks
        for record in waiting { report.add(record) }
        // Installs from any time: a buyer of this month may have come through a keyword earlier.
        var kinds: Set<RecordKind> = [.install, .reinstall, .purchase, .refund]
        if postbacks != nil { kinds.insert(.postback) }
        let total = try await store.countRecords(matching: ReplayFilter())
        var read = 0
        try await forEachReportPage(store, appID: query.appID, kinds: kinds) { page in
            for record in page.records {
                report.add(record)
                postbacks?.add(record)
            }
            read += page.scanned
            progress(min(read, total), total)
        }
        guard let days else { return (report.rows, nil, postbacks) }
        let built = report.rowsAndDaily(days)
        return (built.rows, built.daily, postbacks)
    }

    /// `report` with the postbacks of `appID` (every app's without one) added: only
    /// postbacks are read, since they join nothing of the keyword report.
    public static func postbacks(from store: any AttributionStore, appID: String?, into report: SKANReport)
        async throws -> SKANReport
    {
        if let indexed = store as? any ReportIndexStore {
            try await indexed.catchUpReportIndex()
            return try await indexed.indexedPostbacks(report, appID: appID)
        }
        var report = report
        try await forEachReportPage(store, appID: appID, kinds: [.postback]) { page in
            for record in page.records { report.add(record) }
        }
        return report
    }

    /// Reads the store's records of `kinds` (of `appID`, when given) page by page, in storage order.
    static func forEachReportPage(
        _ store: any AttributionStore, appID: String?, kinds: Set<RecordKind>, _ body: (ReportPage) -> Void
    ) async throws {
        var cursor: Int64 = 0
        while true {
            let page = try await store.reportRecords(appID: appID, kinds: kinds, after: cursor, limit: 5000)
            if page.scanned == 0 { return }
            body(page)
            cursor = page.cursor
        }
    }

    /// The days whose spend a report counts, `YYYY-MM-DD`, `until` exclusive: those whose
    /// midnight (UTC) falls in the purchases' period, so that `--since 2026-03-01 --until
    /// 2026-04-01` counts March's spend.
    public static func spendDays(_ query: KeywordReportQuery) -> (from: String?, until: String?) {
        func day(_ date: Date) -> String {
            let calendar = Calendar.utc
            let start = calendar.startOfDay(for: date)
            let first = start < date ? calendar.date(byAdding: .day, value: 1, to: start)! : start
            return ISO8601.format(first).prefix(10).description
        }
        return (query.purchasesSince.map(day), query.purchasesUntil.map(day))
    }

    /// A deferred provider with its default options, for reading its waiting work: what a
    /// waiting token shows does not depend on the provider's settings.
    static func waitingProvider(named name: String) -> (any DeferredAttributionProvider)? {
        let diagnostics = ConfigDiagnostics(file: "report")
        let reader = ConfigReader(node: ConfigNode(.null), path: name, diagnostics: diagnostics, environment: [:])
        guard let prepared = PluginRegistry.builtIn.prepareProvider(type: name, reader: reader) ?? nil else {
            return nil
        }
        return (try? prepared.build()) as? any DeferredAttributionProvider
    }
}

/// A report's `since` or `until`: an ISO-8601 time with its zone, or a bare date
/// (`2026-03-01`), read as that day's midnight UTC.
public enum ReportTime {
    /// Why a text is no such time, naming `option` (`--since`, `since`).
    public struct Invalid: Error, Sendable {
        public let message: String
    }

    public static func parse(_ text: String, option: String) throws(Invalid) -> Date {
        if let date = ISO8601.parse(text) { return date }
        if text.wholeMatch(of: /\d{4}-\d{2}-\d{2}/) != nil, let date = ISO8601.parse(text + "T00:00:00Z") {
            return date
        }
        if text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?/) != nil {
            throw Invalid(
                message: "\(option) needs a time zone: \(text)Z for UTC, or an offset such as \(text)+01:00")
        }
        throw Invalid(message: "\(option) is not an ISO-8601 time or date (2026-03-01, 2026-03-01T09:00:00Z)")
    }
}
