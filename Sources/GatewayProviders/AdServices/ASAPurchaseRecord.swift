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
            dedupeKey: dedupeKey(appID: appID, transactionID: transactionID), receivedAt: receivedAt,
            attributed: attribution?.attributed ?? false,
            resolution: attribution?.resolution ?? (tokenPending ? .pending : .resolved))
        record.appID = appID
        record.appUserID = String(userID)
        record.transactionRef = transactionID
        record.raw = .object(["user_id": .integer(userID), "transaction_id": .string(transactionID)])
        if let attribution { credit(&record, with: attribution) }
        return record
    }

    /// One purchase record per app and transaction, however often it is associated.
    public static func dedupeKey(appID: String, transactionID: String) -> String {
        DedupeKey.make("adservices", "purchase", appID, transactionID)
    }

    /// `purchase` with its user's answered attribution: its campaign, ad group and
    /// keyword when the user came from an ad. A purchase made while the token waited is
    /// credited so when Apple answers.
    public static func credit(_ purchase: inout AttributionRecord, with source: AttributionRecord) {
        purchase.attributed = source.attributed
        purchase.resolution = source.resolution
        if case .object(var raw)? = purchase.raw {
            raw["attribution_record_id"] = .string(source.recordID)
            purchase.raw = .object(raw)
        }
        guard source.attributed else { return }
        purchase.orgID = source.orgID
        purchase.campaignID = source.campaignID
        purchase.campaignName = source.campaignName
        purchase.adGroupID = source.adGroupID
        purchase.adGroupName = source.adGroupName
        purchase.keywordID = source.keywordID
        purchase.keyword = source.keyword
        purchase.keywordMatchType = source.keywordMatchType
        purchase.adID = source.adID
        purchase.countryOrRegion = source.countryOrRegion
        purchase.conversionType = source.conversionType
        purchase.claimType = source.claimType
        purchase.supplyPlacement = source.supplyPlacement
        purchase.clickDate = source.clickDate
        purchase.impressionDate = source.impressionDate
        purchase.isTest = source.isTest
    }
}
