import Foundation

/// Which keywords and campaigns bring paying users: installs joined to purchases by app
/// and user, summed per campaign, ad group and keyword.
///
/// A user's attribution is their first attributed install or reinstall (AdServices, iAd,
/// a vendor's callback), else their first unattributed one (`organic`); a user with
/// purchases and no install record is `unattributed`. A purchase counts once per
/// transaction (`transaction_ref`), whichever way it arrived (the ASA SDK's
/// `associate-user`, a backend's `/v1/events`). Feed records in any order, then read
/// ``rows``.
public struct KeywordReport: Sendable {
    /// One line of the report.
    public struct Row: Sendable, Equatable, Codable {
        public var network: String?
        public var campaignID: Int64?
        public var campaign: String?
        public var adGroupID: Int64?
        public var adGroup: String?
        public var keywordID: Int64?
        public var keyword: String?
        public var matchType: String?
        /// Users whose install this line is.
        public var installs: Int
        /// Of those, users with at least one purchase.
        public var payingUsers: Int
        public var purchases: Int
        /// Revenue per currency code.
        public var revenue: [String: Decimal]

        enum CodingKeys: String, CodingKey {
            case network, campaign, keyword
            case campaignID = "campaign_id"
            case adGroupID = "ad_group_id"
            case adGroup = "ad_group"
            case keywordID = "keyword_id"
            case matchType = "keyword_match_type"
            case installs
            case payingUsers = "paying_users"
            case purchases, revenue
        }
    }

    struct Attribution: Hashable {
        var network: String?
        var campaignID: Int64?
        var campaign: String?
        var adGroupID: Int64?
        var adGroup: String?
        var keywordID: Int64?
        var keyword: String?
        var matchType: String?

        static let organic = Attribution(network: "organic")
        static let unattributed = Attribution(network: "unattributed")

        /// What makes two installs one line: ids where there are ids (a keyword renamed,
        /// or named late, stays one line), names where there are none (vendors).
        var line: Attribution {
            Attribution(
                network: network, campaignID: campaignID, campaign: campaignID == nil ? campaign : nil,
                adGroupID: adGroupID, adGroup: adGroupID == nil ? adGroup : nil, keywordID: keywordID,
                keyword: keywordID == nil ? keyword : nil, matchType: keywordID == nil ? matchType : nil)
        }
    }

    struct User {
        var attribution: Attribution?
        var attributed = false
        var firstSeen = Date.distantFuture
        var transactions: [String: (Decimal?, String?)] = [:]
    }

    private var users: [String: User] = [:]
    /// Purchases before this are left out; installs count from any time, so that a
    /// report of one month credits the keywords that brought its buyers earlier.
    public var purchasesSince: Date?

    public init(purchasesSince: Date? = nil) {
        self.purchasesSince = purchasesSince
    }

    /// Takes one stored record; records of other kinds, or without a user, are ignored.
    public mutating func add(_ record: AttributionRecord) {
        guard !record.isTest, let user = record.appUserID else { return }
        let key = (record.appID ?? "") + "\u{1F}" + user
        var entry = users[key] ?? User()
        switch record.kind {
        case .install, .reinstall:
            let attributed = record.attributed
            // Attributed beats organic; among equals, the first.
            if entry.attribution == nil || (attributed && !entry.attributed)
                || (attributed == entry.attributed && record.receivedAt < entry.firstSeen)
            {
                entry.attribution = attributed ? Self.attribution(record) : .organic
                entry.attributed = attributed
                entry.firstSeen = record.receivedAt
            }
        case .purchase:
            if let purchasesSince, record.receivedAt < purchasesSince { return }
            let transaction = record.transactionRef ?? record.recordID
            entry.transactions[transaction] = (record.revenue, record.currency)
        default:
            return
        }
        users[key] = entry
    }

    static func attribution(_ record: AttributionRecord) -> Attribution {
        Attribution(
            network: record.network ?? (["adservices", "iad"].contains(record.provider) ? "Apple Search Ads" : record.provider),
            campaignID: record.campaignID, campaign: record.campaignName, adGroupID: record.adGroupID,
            adGroup: record.adGroupName, keywordID: record.keywordID, keyword: record.keyword,
            matchType: record.keywordMatchType)
    }

    /// The lines, most paying users first, then most installs.
    public var rows: [Row] {
        var lines: [Attribution: Row] = [:]
        // The names of each line: oldest install first, each newer name replacing the
        // older one field by field (an install routed before its names came keeps the
        // older names). Sorted, so the same store gives the same report.
        var names: [Attribution: Attribution] = [:]
        let chronological = users.sorted { ($0.value.firstSeen, $0.key) < ($1.value.firstSeen, $1.key) }
        for (_, user) in chronological {
            guard let attribution = user.attribution else { continue }
            let line = attribution.line
            var named = names[line] ?? attribution
            named.campaign = attribution.campaign ?? named.campaign
            named.adGroup = attribution.adGroup ?? named.adGroup
            named.keyword = attribution.keyword ?? named.keyword
            named.matchType = attribution.matchType ?? named.matchType
            names[line] = named
        }
        for user in users.values {
            let line = (user.attribution ?? .unattributed).line
            let attribution = names[line] ?? line
            var row = lines[line] ?? Row(
                network: attribution.network, campaignID: attribution.campaignID, campaign: attribution.campaign,
                adGroupID: attribution.adGroupID, adGroup: attribution.adGroup, keywordID: attribution.keywordID,
                keyword: attribution.keyword, matchType: attribution.matchType, installs: 0, payingUsers: 0,
                purchases: 0, revenue: [:])
            if user.attribution != nil { row.installs += 1 }
            if !user.transactions.isEmpty { row.payingUsers += 1 }
            row.purchases += user.transactions.count
            for (amount, currency) in user.transactions.values {
                guard let amount, let currency else { continue }
                row.revenue[currency, default: 0] += amount
            }
            lines[line] = row
        }
        return lines.values.sorted { a, b in
            if (a.payingUsers, a.installs) != (b.payingUsers, b.installs) {
                return (a.payingUsers, a.installs) > (b.payingUsers, b.installs)
            }
            // Ties in a fixed order, so that two runs print the same lines.
            return (a.network ?? "", a.campaignID ?? -1, a.campaign ?? "", a.adGroupID ?? -1, a.keywordID ?? -1, a.keyword ?? "")
                < (b.network ?? "", b.campaignID ?? -1, b.campaign ?? "", b.adGroupID ?? -1, b.keywordID ?? -1, b.keyword ?? "")
        }
    }
}
