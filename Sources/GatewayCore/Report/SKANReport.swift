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

    /// What one postback adds, as a report index keeps it.
    public struct IndexedPostback: Sendable, Equatable {
        public let appID: String
        public let receivedAt: Date
        /// ``Campaign/source``.
        public let source: String
        public let won: Bool
        public let hasValue: Bool
        public let fineValue: Int?
        public let coarseValue: String?
        /// Each event once.
        public let events: [String]
    }

    /// What `record` adds whatever the period: nil unless it is a postback, neither a
    /// test's, a duplicate nor one whose signature is known to be forged.
    public static func indexedPostback(_ record: AttributionRecord) -> IndexedPostback? {
        guard record.kind == .postback, !record.isTest, record.duplicateOf == nil, record.signature != "invalid"
        else { return nil }
        return IndexedPostback(
            appID: record.appID ?? "", receivedAt: record.receivedAt,
            source: record.sourceIdentifier ?? record.campaignID.map(String.init) ?? "", won: record.didWin ?? true,
            hasValue: record.fineValue != nil || record.coarseValue != nil, fineValue: record.fineValue,
            coarseValue: record.coarseValue, events: Set(record.events ?? []).sorted())
    }

    /// Takes one stored record: a postback in the period that ``indexedPostback(_:)`` counts.
    /// Others are ignored.
    public mutating func add(_ record: AttributionRecord) {
        guard let postback = Self.indexedPostback(record) else { return }
        if let since, postback.receivedAt < since { return }
        if let until, postback.receivedAt >= until { return }
        add(
            source: postback.source, postbacks: 1, winning: postback.won ? 1 : 0,
            withValue: postback.hasValue ? 1 : 0)
        if let fine = postback.fineValue { add(fineValue: fine, count: 1) }
        if let coarse = postback.coarseValue { add(coarseValue: coarse, count: 1) }
        for event in postback.events { add(event: event, count: 1) }
    }

    /// Adds `postbacks` of a campaign, as a database counted them.
    public mutating func add(source: String, postbacks: Int, winning: Int, withValue: Int) {
        var campaign = campaigns[source] ?? Campaign(source: source)
        campaign.postbacks += postbacks
        campaign.winning += winning
        campaign.withValue += withValue
        campaigns[source] = campaign
        total += postbacks
    }

    public mutating func add(fineValue: Int, count: Int) { fineValues[fineValue, default: 0] += count }
    public mutating func add(coarseValue: String, count: Int) { coarseValues[coarseValue, default: 0] += count }
    public mutating func add(event: String, count: Int) { events[event, default: 0] += count }

    /// The campaigns, most postbacks first, then by source.
    public var byCampaign: [Campaign] {
        campaigns.values.sorted { ($1.postbacks, $0.source) < ($0.postbacks, $1.source) }
    }
}
