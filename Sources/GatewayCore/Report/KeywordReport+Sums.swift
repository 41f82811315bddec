import Foundation

extension KeywordReport {
    /// The report's lines as the facts of its people and purchases add up: counted here
    /// from records (``KeywordReport/add(to:)``) or by a database from the facts it keeps,
    /// or both for people apart, so that the naming and ordering of lines is one.
    public struct Sums: Sendable {
        private var lines: [Attribution: Row] = [:]
        // The names of each line: field by field, the newest credited install's that has
        // one (an install routed before its names came keeps the older names), by (time,
        // record id), so the same store gives the same report whatever order it is read in.
        private var names: [Attribution: LineNames] = [:]
        /// The installs and revenue day by day, when asked for.
        public var daily: DailySeries?
        /// Whether the report has a period, whose installs each line counts apart.
        let period: Bool

        public init(days: DailySeries?, period: Bool = false) {
            daily = days
            self.period = period
        }

        /// Names `line` from `attribution`, an install of it given at `stamp`: where it is
        /// the newest to give a name, that name shows.
        mutating func name(_ line: Attribution, from attribution: Attribution, at stamp: (Date, RecordOrder)) {
            names[line, default: LineNames(attribution)].take(attribution, at: stamp)
        }

        /// ``name(_:from:at:)`` with the install's time and record id.
        public mutating func name(_ line: Attribution, from attribution: Attribution, at time: Date, recordID: String) {
            name(line, from: attribution, at: (time, RecordOrder(recordID)))
        }

        /// Adds counts to `line`, which shows from then on.
        public mutating func add(
            _ line: Attribution, installs: Int = 0, installsInPeriod: Int = 0, payingUsers: Int = 0,
            convertedInstalls: Int = 0, purchases: Int = 0, refunds: Int = 0
        ) {
            var row = lines[line] ?? KeywordReport.emptyRow
            row.installs += installs
            if period { row.installsInPeriod = (row.installsInPeriod ?? 0) + installsInPeriod }
            row.payingUsers += payingUsers
            row.convertedInstalls += convertedInstalls
            row.purchases += purchases
            row.refunds += refunds
            lines[line] = row
        }

        public mutating func add(_ line: Attribution, revenue amount: Decimal, currency: String) {
            lines[line, default: KeywordReport.emptyRow].revenue[currency, default: 0] += amount
        }

        /// Adds `count` purchases of `line` that a database counted alike: refunded or not,
        /// each of `amount` (decimal text) in `currency` where both are known.
        public mutating func add(
            _ line: Attribution, purchases count: Int, refunded: Bool, amount: String?, currency: String?
        ) {
            if refunded {
                add(line, refunds: count)
                return
            }
            add(line, purchases: count)
            if let currency, let amount = amount.flatMap({ Decimal(string: $0) }) {
                add(line, revenue: amount * Decimal(count), currency: currency)
            }
        }

        /// Adds `count` purchases of `amount` (decimal text) in `currency` to the day's revenue.
        public mutating func addDailyRevenue(_ count: Int, of amount: String, _ currency: String, onEpochDay day: Int) {
            guard let amount = Decimal(string: amount) else { return }
            daily?.addRevenue(amount * Decimal(count), currency, purchases: count, onEpochDay: day)
        }

        /// The lines, named, most paying users first, then most installs.
        public var rows: [Row] {
            let named = lines.map { line, row in
                let attribution = names[line]?.attribution ?? line
                var named = row
                (named.appID, named.network) = (line.appID ?? "", attribution.network)
                (named.campaignID, named.campaign) = (attribution.campaignID, attribution.campaign)
                (named.adGroupID, named.adGroup) = (attribution.adGroupID, attribution.adGroup)
                (named.keywordID, named.keyword) = (attribution.keywordID, attribution.keyword)
                named.matchType = attribution.matchType
                return named
            }
            return named.sorted { a, b in
                if (a.payingUsers, a.installs) != (b.payingUsers, b.installs) {
                    return (a.payingUsers, a.installs) > (b.payingUsers, b.installs)
                }
                // Ties in a fixed order, so that two runs print the same lines: by every field
                // of the line, the ad group's name and the match type included (two lines of a
                // vendor's campaign may differ in those alone).
                if a.appID != b.appID { return a.appID < b.appID }
                let first = (a.network ?? "", a.campaignID ?? -1, a.campaign ?? "", a.adGroupID ?? -1, a.adGroup ?? "")
                let second = (b.network ?? "", b.campaignID ?? -1, b.campaign ?? "", b.adGroupID ?? -1, b.adGroup ?? "")
                if first != second { return first < second }
                return (a.keywordID ?? -1, a.keyword ?? "", a.matchType ?? "") < (
                    b.keywordID ?? -1, b.keyword ?? "", b.matchType ?? ""
                )
            }
        }
    }

    /// The names a line shows: each the newest that any of its installs gave.
    struct LineNames: Sendable {
        private(set) var attribution: Attribution
        /// When the campaign, ad group, keyword and match type shown were given.
        private var stamps: [(Date, RecordOrder)?] = [nil, nil, nil, nil]

        init(_ attribution: Attribution) {
            self.attribution = attribution
            (self.attribution.campaign, self.attribution.adGroup) = (nil, nil)
            (self.attribution.keyword, self.attribution.matchType) = (nil, nil)
        }

        mutating func take(_ other: Attribution, at stamp: (Date, RecordOrder)) {
            let values = [other.campaign, other.adGroup, other.keyword, other.matchType]
            for (index, value) in values.enumerated() {
                guard let value, stamps[index].map({ $0 < stamp }) ?? true else { continue }
                stamps[index] = stamp
                switch index {
                case 0: attribution.campaign = value
                case 1: attribution.adGroup = value
                case 2: attribution.keyword = value
                default: attribution.matchType = value
                }
            }
        }
    }

}
