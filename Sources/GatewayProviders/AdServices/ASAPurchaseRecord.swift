import Foundation
import GatewayCore

/// The `purchase` record made when the ASA Attribution SDK ties a StoreKit transaction
/// to a user: it carries the user's campaign, ad group and keyword, so that any sink can
/// tell which keywords bring paying users without joining tables.
public enum ASAPurchaseRecord {
    /// - Parameter attribution: the user's AdServices record; nil when they sent no
    ///   token (organic) or Apple has not answered yet (`pending`).
    public static func make(
        userID: Int64, transactionID: String, appID: String, attribution: AttributionRecord?, tokenPending: Bool,
        receivedAt: Date
    ) -> AttributionRecord {
        var record = AttributionRecord(
            provider: AdServicesProvider.typeName, kind: .purchase,
            dedupeKey: DedupeKey.make("adservices", "purchase", appID, transactionID), receivedAt: receivedAt,
            attributed: attribution?.attributed ?? false,
            resolution: attribution?.resolution ?? (tokenPending ? .pending : .resolved))
        record.appID = appID
        record.appUserID = String(userID)
        record.transactionRef = transactionID
        if let source = attribution, source.attributed {
            record.orgID = source.orgID
            record.campaignID = source.campaignID
            record.campaignName = source.campaignName
            record.adGroupID = source.adGroupID
            record.adGroupName = source.adGroupName
            record.keywordID = source.keywordID
            record.keyword = source.keyword
            record.keywordMatchType = source.keywordMatchType
            record.adID = source.adID
            record.countryOrRegion = source.countryOrRegion
            record.conversionType = source.conversionType
            record.claimType = source.claimType
            record.supplyPlacement = source.supplyPlacement
            record.clickDate = source.clickDate
            record.impressionDate = source.impressionDate
            record.isTest = source.isTest
        }
        var raw: [String: JSONValue] = ["user_id": .integer(userID), "transaction_id": .string(transactionID)]
        if let source = attribution { raw["attribution_record_id"] = .string(source.recordID) }
        record.raw = .object(raw)
        return record
    }
}
