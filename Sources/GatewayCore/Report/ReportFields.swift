import Foundation

extension AttributionRecord {
    /// This record with only the fields the reports read (``KeywordReport``, ``SKANReport``),
    /// as ``ReportStore`` gives records back: its dedupe key is empty and the rest is absent.
    public var reportView: AttributionRecord {
        var view = AttributionRecord(
            provider: provider, kind: kind, dedupeKey: "", receivedAt: receivedAt, attributed: attributed,
            resolution: resolution, recordID: recordID)
        view.appID = appID
        view.appUserID = appUserID
        view.idfv = idfv
        view.isTest = isTest
        view.duplicateOf = duplicateOf
        view.network = network
        view.campaignID = campaignID
        view.campaignName = campaignName
        view.adGroupID = adGroupID
        view.adGroupName = adGroupName
        view.keywordID = keywordID
        view.keyword = keyword
        view.keywordMatchType = keywordMatchType
        view.countryOrRegion = countryOrRegion
        view.conversionDate = conversionDate
        view.purchaseDate = purchaseDate
        view.revenue = revenue
        view.currency = currency
        view.transactionRef = transactionRef
        view.sourceIdentifier = sourceIdentifier
        view.fineValue = fineValue
        view.coarseValue = coarseValue
        view.didWin = didWin
        view.signature = signature
        view.events = events
        return view
    }
}

/// The members of a stored body that ``AttributionRecord/reportView`` keeps, for a backend
/// to read out of the body with its JSON functions, and the record made of what it read.
public enum ReportFields {
    /// How a member's text is read back.
    public enum Value: Sendable {
        /// JSON text, read as the text itself.
        case text
        /// A JSON number, boolean or array, read as its JSON text: a number keeps every
        /// digit it was stored with (a revenue of `4.99` read as a double would not).
        case json
    }

    /// A member of the body, beside the `record_id`, `provider` and `app_id` columns; a
    /// backend reads them in this order.
    public enum Member: Int, CaseIterable, Sendable {
        case kind, receivedAt, attributed, resolution, isTest, appUserID, idfv, duplicateOf, network
        case campaignID, campaignName, adGroupID, adGroupName, keywordID, keyword, keywordMatchType
        case countryOrRegion, conversionDate, purchaseDate, revenue, currency, transactionRef
        case sourceIdentifier, fineValue, coarseValue, didWin, signature, events

        /// Its name in the body: the record's own coding key.
        public var name: String {
            switch self {
            case .kind: "kind"
            case .receivedAt: "received_at"
            case .attributed: "attributed"
            case .resolution: "resolution"
            case .isTest: "is_test"
            case .appUserID: "app_user_id"
            case .idfv: "idfv"
            case .duplicateOf: "duplicate_of"
            case .network: "network"
            case .campaignID: "campaign_id"
            case .campaignName: "campaign_name"
            case .adGroupID: "ad_group_id"
            case .adGroupName: "ad_group_name"
            case .keywordID: "keyword_id"
            case .keyword: "keyword"
            case .keywordMatchType: "keyword_match_type"
            case .countryOrRegion: "country_or_region"
            case .conversionDate: "conversion_date"
            case .purchaseDate: "purchase_date"
            case .revenue: "revenue"
            case .currency: "currency"
            case .transactionRef: "transaction_ref"
            case .sourceIdentifier: "source_identifier"
            case .fineValue: "fine_value"
            case .coarseValue: "coarse_value"
            case .didWin: "did_win"
            case .signature: "signature"
            case .events: "events"
            }
        }

        public var value: Value {
            switch self {
            case .attributed, .isTest, .campaignID, .adGroupID, .keywordID, .revenue, .fineValue, .didWin, .events:
                .json
            default: .text
            }
        }
    }

    private static let posix = Locale(identifier: "en_US_POSIX")

    /// The record whose columns are these and whose members read `values` (in ``Member``'s
    /// order, nil for a member the body lacks); nil when the body's kind or receiving time
    /// cannot be read.
    public static func record(recordID: String, provider: String, appID: String?, _ values: [String?])
        -> AttributionRecord?
    {
        guard values.count == Member.allCases.count else { return nil }
        func text(_ member: Member) -> String? { values[member.rawValue] }
        func flag(_ member: Member) -> Bool? { text(member).map { $0 == "true" || $0 == "1" } }
        func integer(_ member: Member) -> Int64? { text(member).flatMap { Int64($0) } }
        // A time may come as seconds since 1970: a backend keeping it in a column of its own
        // (``EncodedRecord/keptApartWhenCoded``) gives the column's number.
        func date(_ member: Member) -> Date? {
            text(member).flatMap { ISO8601.parse($0) ?? Double($0).map(ISO8601.milliseconds) }
        }
        guard let kind = text(.kind).flatMap(RecordKind.init(rawValue:)), let receivedAt = date(.receivedAt) else {
            return nil
        }
        var record = AttributionRecord(
            provider: provider, kind: kind, dedupeKey: "", receivedAt: receivedAt,
            attributed: flag(.attributed) ?? false,
            resolution: text(.resolution).flatMap(Resolution.init(rawValue:)) ?? .resolved, recordID: recordID)
        record.appID = appID
        record.appUserID = text(.appUserID)
        record.idfv = text(.idfv)
        record.isTest = flag(.isTest) ?? false
        record.duplicateOf = text(.duplicateOf)
        record.network = text(.network)
        record.campaignID = integer(.campaignID)
        record.campaignName = text(.campaignName)
        record.adGroupID = integer(.adGroupID)
        record.adGroupName = text(.adGroupName)
        record.keywordID = integer(.keywordID)
        record.keyword = text(.keyword)
        record.keywordMatchType = text(.keywordMatchType)
        record.countryOrRegion = text(.countryOrRegion)
        record.conversionDate = date(.conversionDate)
        record.purchaseDate = date(.purchaseDate)
        record.revenue = text(.revenue).flatMap { Decimal(string: $0, locale: posix) }
        record.currency = text(.currency)
        record.transactionRef = text(.transactionRef)
        record.sourceIdentifier = text(.sourceIdentifier)
        record.fineValue = integer(.fineValue).map(Int.init)
        record.coarseValue = text(.coarseValue)
        record.didWin = flag(.didWin)
        record.signature = text(.signature)
        record.events = text(.events).flatMap { try? JSONDecoder().decode([String].self, from: Data($0.utf8)) }
        return record
    }
}
