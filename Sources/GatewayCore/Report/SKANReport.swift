import Foundation

/// SKAdNetwork and AdAttributionKit postbacks summed on their own: per campaign (source
/// identifier), and how their conversion values and coarse values spread. Postbacks carry
/// no user id, so they join no install or purchase of the keyword report. Its size is the
/// number of campaigns and values, whatever the number of postbacks.
public struct SKANReport: Sendable, Equatable {
    /// One campaign's postbacks.
    public struct Campaign: Sendable, Equatable {
        /// The source identifier (SKAN 4, AdAttributionKit), else the campaign id (SKAN 3 and
        /// before); empty when the postback gave neither.
        public var source: String
        public var postbacks = 0
        /// Those that won the attribution (`did_win`; SKAN 3 and before send only winners').
        public var winning = 0
        /// Those with a fine or coarse value (Apple leaves it out below its privacy threshold).
        public var withValue = 0
    }

    /// Postbacks received at or after this count; nil for any time.
    public var since: Date?
    /// Postbacks received before this count.
    public var until: Date?
    public private(set) var campaigns: [String: Campaign] = [:]
    /// Postbacks per fine conversion value (0–63).
    public private(set) var fineValues: [Int: Int] = [:]
    /// Postbacks per coarse value (`low`, `medium`, `high`).
    public private(set) var coarseValues: [String: Int] = [:]
    /// Postbacks per event the conversion model decoded from their value.
    public private(set) var events: [String: Int] = [:]
    public private(set) var total = 0

    public init(since: Date? = nil, until: Date? = nil) {
        self.since = since
        self.until = until
    }

    /// Takes one stored record: a postback in the period, neither a test's, a duplicate nor
    /// one whose signature is known to be forged. Others are ignored.
    public mutating func add(_ record: AttributionRecord) {
        guard record.kind == .postback, !record.isTest, record.duplicateOf == nil, record.signature != "invalid"
        else { return }
        if let since, record.receivedAt < since { return }
        if let until, record.receivedAt >= until { return }
        let source = record.sourceIdentifier ?? record.campaignID.map(String.init) ?? ""
        var campaign = campaigns[source] ?? Campaign(source: source)
        campaign.postbacks += 1
        if record.didWin ?? true { campaign.winning += 1 }
        if record.fineValue != nil || record.coarseValue != nil { campaign.withValue += 1 }
        campaigns[source] = campaign
        if let fine = record.fineValue { fineValues[fine, default: 0] += 1 }
        if let coarse = record.coarseValue { coarseValues[coarse, default: 0] += 1 }
        for event in Set(record.events ?? []) { events[event, default: 0] += 1 }
        total += 1
    }

    /// The campaigns, most postbacks first, then by source.
    public var byCampaign: [Campaign] {
        campaigns.values.sorted { ($1.postbacks, $0.source) < ($0.postbacks, $1.source) }
    }
}
