import Foundation
import GatewayCore

/// One view of the dashboard: where in network → campaign → ad group → keyword it is, and
/// the report's lines summed at that level, per app. Built from the query parameters, so
/// that each view is a stable URL.
struct DashboardView {
    /// A campaign or an ad group: by id where the lines have one (Apple's), else by name
    /// (a vendor's).
    enum Ref: Equatable {
        case id(Int64)
        case name(String)

        init?(id: Int64?, name: String?) {
            if let id {
                self = .id(id)
            } else if let name {
                self = .name(name)
            } else {
                return nil
            }
        }
    }

    enum Level: String {
        case network, campaign, adGroup = "ad group", keyword
    }

    /// The lines of one app summed over one entry of the level shown.
    struct Group {
        var appID: String
        /// What the entry is, as the next level's query parameter takes it; nil for lines
        /// that have none (organic installs have no campaign): nothing below to open.
        /// Keywords, the last level, open nothing either way.
        var ref: Ref?
        var label: String
        var matchType: String?
        /// The lines' counts and revenue summed.
        var totals = KeywordReport.emptyRow

        /// The numbers of its row, as the page and the CSV show them: installs, paying users,
        /// conversion, purchases, refunds, revenue in each of `currencies`, then for each of
        /// `spendCurrencies` the spend, cost per install, cost per paying user and ROAS, and
        /// with spend and a period, the installs of the period the cost per install divides by.
        func numbers(_ currencies: [String], spendCurrencies: [String] = [], installsInPeriod: Bool = false)
            -> [String]
        {
            func shown(_ amounts: [String: Decimal]?, _ currency: String) -> String {
                amounts?[currency].map { "\($0)" } ?? ""
            }
            let inPeriod = installsInPeriod ? [String(totals.installsInPeriod ?? 0)] : []
            return [
                String(totals.installs), String(totals.payingUsers), conversion, String(totals.purchases),
                String(totals.refunds),
            ] + currencies.map { shown(totals.revenue, $0) }
                + spendCurrencies.flatMap { currency in
                    [totals.spend, totals.costPerInstall, totals.costPerPayingUser, totals.roas].map {
                        shown($0, currency)
                    }
                } + inPeriod
        }

        /// Of the installs, those paying on the same line, as `report keywords` shows it.
        var conversion: String { KeywordReport.conversion(totals.convertedInstalls, of: totals.installs) }
    }

    var appID: String?
    var network: String?
    var campaign: Ref?
    var adGroup: Ref?
    var since: String?
    var until: String?
    /// Installs in this country or region only, upper case, as the report filters them.
    var country: String?
    /// The computation whose numbers the view shows (``ReportSnapshots``), carried by the
    /// page's links; nil computes the report afresh.
    var asOf: String?

    /// The parameters the dashboard takes beyond the report's.
    static let parameters =
        ReportParameters.report + ["campaign_id", "campaign", "ad_group_id", "ad_group", "format", "as_of"]

    init(since: String? = nil, until: String? = nil, country: String? = nil) {
        self.since = since
        self.until = until
        self.country = country
    }

    /// The view's filters without its place: where "All apps" goes back to.
    var filters: DashboardView { DashboardView(since: since, until: until, country: country) }

    init(_ parameters: ReportParameters) throws {
        appID = parameters["app_id"]
        network = parameters["network"]
        campaign = Ref(id: try parameters.id("campaign_id"), name: parameters["campaign"])
        adGroup = Ref(id: try parameters.id("ad_group_id"), name: parameters["ad_group"])
        since = parameters["since"]
        until = parameters["until"]
        country = parameters["country"].flatMap(KeywordReportQuery.country)
        asOf = parameters["as_of"]
        if let asOf, !ReportSnapshots.isID(asOf) {
            throw GatewayError(.invalidParameter, "expected the as_of of a dashboard page's link", field: "as_of")
        }
        if network == nil,
            let name = ["campaign_id", "campaign", "ad_group_id", "ad_group"].first(where: {
                parameters[$0] != nil
            })
        {
            throw GatewayError(.invalidParameter, "needs network: a view opens one level at a time", field: name)
        }
        if campaign == nil, let name = ["ad_group_id", "ad_group"].first(where: { parameters[$0] != nil }) {
            throw GatewayError(.invalidParameter, "needs campaign_id or campaign", field: name)
        }
    }

    var level: Level {
        network == nil ? .network : campaign == nil ? .campaign : adGroup == nil ? .adGroup : .keyword
    }

    func includes(_ row: KeywordReport.Row) -> Bool {
        func matches(_ ref: Ref?, _ id: Int64?, _ name: String?) -> Bool {
            switch ref {
            case nil: true
            case .id(let wanted)?: id == wanted
            case .name(let wanted)?: id == nil && name == wanted
            }
        }
        return (network.map { row.network == $0 } ?? true) && matches(campaign, row.campaignID, row.campaign)
            && matches(adGroup, row.adGroupID, row.adGroup)
    }

    /// The view's lines summed per app and entry of its level, most paying users first.
    func groups(_ rows: [KeywordReport.Row]) -> [Group] {
        var groups: [String: Group] = [:]
        var order: [String] = []
        for row in rows where includes(row) {
            let ref: Ref?
            let label: String?
            switch level {
            case .network:
                ref = .name(row.network ?? "")
                label = row.network
            case .campaign:
                ref = Ref(id: row.campaignID, name: row.campaign)
                label = row.campaign
            case .adGroup:
                ref = Ref(id: row.adGroupID, name: row.adGroup)
                label = row.adGroup
            case .keyword:
                ref = Ref(id: row.keywordID, name: row.keyword)
                label = row.keyword
            }
            let key =
                "\(row.appID)\u{1F}\(String(describing: ref))\u{1F}\(level == .keyword ? row.matchType ?? "" : "")"
            if groups[key] == nil {
                order.append(key)
                let shown =
                    switch ref {
                    case .id(let id)?: label ?? "#\(id)"
                    case .name(let name)?: name
                    case nil: "(none)"
                    }
                groups[key] = Group(
                    appID: row.appID, ref: ref, label: shown,
                    matchType: level == .keyword ? row.matchType : nil)
            }
            groups[key]?.totals.add(row)
        }
        return order.compactMap { groups[$0] }.sorted { a, b in
            if a.appID != b.appID { return a.appID < b.appID }
            let (first, second) = (a.totals, b.totals)
            if (first.payingUsers, first.installs) != (second.payingUsers, second.installs) {
                return (first.payingUsers, first.installs) > (second.payingUsers, second.installs)
            }
            return a.label < b.label
        }
    }

    /// The query of this view, in a fixed order: the same view is the same URL.
    var queryItems: [(String, String)] {
        func ref(_ ref: Ref?, _ name: String) -> [(String, String)] {
            switch ref {
            case nil: []
            case .id(let id)?: [("\(name)_id", String(id))]
            case .name(let text)?: [(name, text)]
            }
        }
        let items: [(String, String?)] = [("app_id", appID), ("network", network)]
        return items.compactMap { name, value in value.map { (name, $0) } } + ref(campaign, "campaign")
            + ref(adGroup, "ad_group")
            + [("since", since), ("until", until), ("country", country), ("as_of", asOf)].compactMap { name, value in
                value.map { (name, $0) }
            }
    }

    func url(_ extra: [(String, String)] = []) -> String {
        let items = queryItems + extra
        return items.isEmpty ? "/dashboard" : "/dashboard?" + FormEncoding.encode(items)
    }

    /// The view one level down, into `group`.
    func opening(_ group: Group) -> DashboardView? {
        guard let ref = group.ref else { return nil }
        var next = self
        next.appID = group.appID
        switch level {
        case .network:
            guard case .name(let name) = ref else { return nil }
            next.network = name
        case .campaign: next.campaign = ref
        case .adGroup: next.adGroup = ref
        case .keyword: return nil
        }
        return next
    }

    /// The currencies the groups' revenue is in, each a column.
    static func currencies(_ groups: [Group]) -> [String] {
        Set(groups.flatMap(\.totals.revenue.keys)).sorted()
    }

    /// The currencies the groups' spend is in, each four columns: spend, cost per install,
    /// cost per paying user, ROAS. None when no group has spend: the columns stay away.
    static func spendCurrencies(_ groups: [Group]) -> [String] {
        Set(groups.flatMap { ($0.totals.spend ?? [:]).keys }).sorted()
    }

    /// The headers of a spend currency's four columns, as `name` writes each.
    /// Whether rows end with the period's installs (``Group/numbers(_:spendCurrencies:installsInPeriod:)``):
    /// with spend shown and a period set, for the cost per install to be checked by.
    func showsInstallsInPeriod(_ spendCurrencies: [String]) -> Bool {
        !spendCurrencies.isEmpty && (since != nil || until != nil)
    }

    static func spendHeaders(_ currency: String, _ name: (String) -> String) -> [String] {
        ["spend", "cost_per_install", "cost_per_paying_user", "roas"].map { name($0) + "_" + currency }
    }

    /// The view as CSV: one line per group, revenue a column per currency. Cells a
    /// spreadsheet would run as a formula are defused by ``CSV/row(_:)``.
    func csv(_ groups: [Group]) -> String {
        let currencies = Self.currencies(groups)
        let spendCurrencies = Self.spendCurrencies(groups)
        var header = ["app_id", level.rawValue.replacingOccurrences(of: " ", with: "_"), "id"]
        if level == .keyword { header.append("match_type") }
        header += ["installs", "paying_users", "conversion_pct", "purchases", "refunds"]
        header += currencies.map { "revenue_\($0)" }
        header += spendCurrencies.flatMap { Self.spendHeaders($0) { $0 } }
        if showsInstallsInPeriod(spendCurrencies) { header.append("installs_in_period") }
        var lines = [CSV.row(header)]
        for group in groups {
            var cells = [group.appID, group.label]
            switch group.ref {
            case .id(let id)?: cells.append(String(id))
            default: cells.append("")
            }
            if level == .keyword { cells.append(group.matchType ?? "") }
            cells += group.numbers(
                currencies, spendCurrencies: spendCurrencies,
                installsInPeriod: showsInstallsInPeriod(spendCurrencies))
            lines.append(CSV.row(cells))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}
