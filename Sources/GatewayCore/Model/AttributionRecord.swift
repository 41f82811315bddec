import Foundation

/// One normalised attribution signal: what every provider produces and every sink receives.
///
/// Absent values are `nil` and are left out of the JSON, never empty strings or zeros.
/// JSON names are the snake_case names of `DESIGN.md`; encode and decode with
/// ``AttributionRecord/makeEncoder()`` and ``AttributionRecord/makeDecoder()`` so dates
/// travel as ISO-8601 text.
public struct AttributionRecord: Sendable, Equatable, Codable {
    // identity
    public var recordID: String
    public var receivedAt: Date
    public var provider: String
    public var appID: String?
    public var appUserID: String?
    public var idfv: String?
    public var idfa: String?
    public var attStatus: Int?

    // outcome
    public var attributed: Bool
    public var kind: RecordKind
    public var resolution: Resolution
    public var isTest: Bool
    public var duplicateOf: String?

    /// The ad network a vendor credited (`media_source`, `network_name`): vendor callbacks only.
    public var network: String?

    // Apple Ads
    public var orgID: Int64?
    public var orgName: String?
    public var campaignID: Int64?
    public var campaignName: String?
    public var adGroupID: Int64?
    public var adGroupName: String?
    public var keywordID: Int64?
    public var keyword: String?
    public var keywordMatchType: String?
    public var adID: Int64?
    public var creativeSetID: Int64?
    public var creativeSetName: String?
    public var countryOrRegion: String?
    public var conversionType: String?
    public var claimType: String?
    public var supplyPlacement: String?
    public var clickDate: Date?
    public var impressionDate: Date?
    public var conversionDate: Date?
    public var purchaseDate: Date?

    // SKAdNetwork / AdAttributionKit
    public var skanVersion: String?
    public var adNetworkID: String?
    public var transactionID: String?
    public var sourceAppID: String?
    public var sourceIdentifier: String?
    public var sourceDomain: String?
    public var fineValue: Int?
    public var coarseValue: String?
    public var postbackSequenceIndex: Int?
    public var didWin: Bool?
    public var fidelityType: Int?
    public var redownload: Bool?
    public var signature: String?
    /// A postback whose signature did not verify (`invalid` or `unverifiable`): only routes
    /// with `quarantined: true` take it, and the store keeps a bounded amount of them.
    public var isQuarantined: Bool { signature.map { $0 != "verified" } ?? false }
    public var events: [String]?
    public var revenueMin: Decimal?
    public var revenueMax: Decimal?

    // money
    public var eventName: String?
    public var revenue: Decimal?
    public var currency: String?
    public var transactionRef: String?
    /// Vendors' own device ids the app sent (`appsflyer_id`, `adid`), kept with the record
    /// and not only in `raw`: a forget names them to the vendor after retention removed `raw`.
    public var vendorIDs: [String: String]?

    // audit
    public var raw: JSONValue?
    public var dedupeKey: String
    public var enrichedAt: Date?

    /// A record with a fresh `record_id`; providers fill in the rest.
    public init(
        provider: String,
        kind: RecordKind,
        dedupeKey: String,
        receivedAt: Date,
        attributed: Bool = false,
        resolution: Resolution = .resolved,
        recordID: String = AttributionRecord.newRecordID()
    ) {
        self.recordID = recordID
        self.receivedAt = receivedAt
        self.provider = provider
        self.kind = kind
        self.dedupeKey = dedupeKey
        self.attributed = attributed
        self.resolution = resolution
        self.isTest = false
    }

    /// The device a record is about, for destinations that want each device's records in
    /// order (vendors: session before events): the app and the IDFV, else the user, else
    /// the IDFA. Nil when the record names no device.
    public var deliveryLane: String? {
        guard let appID, let device = idfv ?? appUserID.map({ "user:" + $0 }) ?? idfa else { return nil }
        return appID + "|" + device
    }

    /// A new record id: a lowercase UUID that grows with time (version 7).
    public static func newRecordID() -> String {
        TimeOrderedUUID.make()
    }

    enum CodingKeys: String, CodingKey {
        case recordID = "record_id"
        case receivedAt = "received_at"
        case provider
        case appID = "app_id"
        case appUserID = "app_user_id"
        case idfv, idfa
        case attStatus = "att_status"
        case attributed, kind, resolution
        case isTest = "is_test"
        case duplicateOf = "duplicate_of"
        case network
        case orgID = "org_id"
        case orgName = "org_name"
        case campaignID = "campaign_id"
        case campaignName = "campaign_name"
        case adGroupID = "ad_group_id"
        case adGroupName = "ad_group_name"
        case keywordID = "keyword_id"
        case keyword
        case keywordMatchType = "keyword_match_type"
        case adID = "ad_id"
        case creativeSetID = "creative_set_id"
        case creativeSetName = "creative_set_name"
        case countryOrRegion = "country_or_region"
        case conversionType = "conversion_type"
        case claimType = "claim_type"
        case supplyPlacement = "supply_placement"
        case clickDate = "click_date"
        case impressionDate = "impression_date"
        case conversionDate = "conversion_date"
        case purchaseDate = "purchase_date"
        case skanVersion = "skan_version"
        case adNetworkID = "ad_network_id"
        case transactionID = "transaction_id"
        case sourceAppID = "source_app_id"
        case sourceIdentifier = "source_identifier"
        case sourceDomain = "source_domain"
        case fineValue = "fine_value"
        case coarseValue = "coarse_value"
        case postbackSequenceIndex = "postback_sequence_index"
        case didWin = "did_win"
        case fidelityType = "fidelity_type"
        case redownload, signature, events
        case revenueMin = "revenue_min"
        case revenueMax = "revenue_max"
        case eventName = "event_name"
        case revenue, currency
        case transactionRef = "transaction_ref"
        case vendorIDs = "vendor_ids"
        case raw
        case dedupeKey = "dedupe_key"
        case enrichedAt = "enriched_at"
    }
}

extension AttributionRecord {
    /// A creative set id as the record keeps it: Apple sends `0` where there is none
    /// (creative sets were retired in 2022), a zero that is no data; `raw` keeps it.
    public static func creativeSetID(_ id: Int64?) -> Int64? {
        id == 0 ? nil : id
    }
}

extension AttributionRecord {
    /// The values that name the user or their device: their ids, the vendors' ids, and the
    /// IP address a payload carried. Taken out of what a destination answers before it is
    /// logged or kept.
    public var identifyingValues: [String] {
        var values = [appUserID, idfv, idfa, transactionRef].compactMap(\.self)
        values += (vendorIDs ?? [:]).values
        if case .object(let fields)? = raw, case .string(let ip)? = fields["ip"] { values.append(ip) }
        return values.filter { $0.count >= 4 }
    }
}

extension AttributionRecord {
    /// The all-zero UUID: Apple's IDFA without consent, and an app's unset IDFV. It names
    /// no device, so no record keeps it as one and nothing joins on it.
    public static let unsetDeviceID = "00000000-0000-0000-0000-000000000000"
}

extension AttributionRecord {
    /// The encoder every sink and the store use: ISO-8601 dates with milliseconds, sorted keys.
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ISO8601.format(date))
        }
        return encoder
    }

    /// The decoder matching ``makeEncoder()``.
    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = ISO8601.parse(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "not an ISO-8601 date: \(text)")
            }
            return date
        }
        return decoder
    }
}
