import Foundation
import GatewayCore

/// Reads the JSON that Apple's AdServices attribution API answers with `200`.
///
/// Organic answers come in three shapes in production: `{"attribution":false}`, `{}` and
/// `{"error":"1"}`; all are organic. Ids are longs (sometimes relayed as strings), dates
/// stop at the minute (`2024-10-08T17:17Z`), and `conversionType` has been written both
/// `PreOrder` and `preorder`. An organic answer never carries campaign fields.
enum AdServicesAnswer {
    /// The ids of Apple's developer-mode test answer.
    static let testID: Int64 = 1_234_567_890

    /// Every field Apple's answer has been seen with, `error` aside. An object with none of
    /// them (and not an organic answer) is another source's payload given to the wrong
    /// provider, or a proxy's own JSON.
    static let fieldNames: Set<String> = [
        "attribution", "orgId", "campaignId", "adGroupId", "keywordId", "adId", "creativeSetId",
        "countryOrRegion", "conversionType", "claimType", "supplyPlacement", "clickDate", "impressionDate",
    ]

    /// Refuses an object that cannot be one of Apple's answers, rather than reading it as
    /// organic: `import --provider adservices` on a file of iAd payloads would otherwise
    /// store every line as an organic install. Apple's organic `{"error":"1"}` passes; a
    /// proxy's `{"error":"Bad Gateway"}` does not.
    static func requireAnswerShape(_ answer: PayloadFields) throws {
        let organicError: Bool =
            switch answer.object["error"] {
            case .string("1"), .integer(1): true
            default: false
            }
        guard answer.object.isEmpty || organicError || !fieldNames.isDisjoint(with: answer.object.keys) else {
            throw GatewayError.invalid(
                "attribution",
                "not an answer from Apple's AdServices API: it has none of its fields (attribution, orgId, campaignId, …)"
            )
        }
    }

    /// Fills `record` from Apple's answer. Throws ``GatewayError`` for an object that is
    /// not one of Apple's answers, or a field that is present but unreadable; the caller
    /// decides what a malformed answer means.
    static func apply(_ answer: PayloadFields, to record: inout AttributionRecord) throws {
        try requireAnswerShape(answer)
        let attributed = try answer.bool("attribution") ?? false
        record.attributed = attributed
        record.resolution = .resolved
        guard attributed else {
            record.kind = .install
            return
        }
        record.orgID = try answer.id("orgId")
        record.campaignID = try answer.id("campaignId")
        record.adGroupID = try answer.id("adGroupId")
        record.keywordID = try answer.id("keywordId")
        record.adID = try answer.id("adId")
        record.creativeSetID = AttributionRecord.creativeSetID(try answer.id("creativeSetId"))
        record.countryOrRegion = try answer.string("countryOrRegion")
        record.conversionType = try answer.string("conversionType").map(conversionType)
        record.claimType = try answer.string("claimType").map(claimType)
        record.supplyPlacement = try answer.string("supplyPlacement")
        record.clickDate = try answer.date("clickDate")
        record.impressionDate = try answer.date("impressionDate")
        record.kind = record.conversionType == "Redownload" ? .reinstall : .install
        record.isTest = [record.orgID, record.campaignID, record.adGroupID, record.adID].contains(testID)
    }

    /// Apple's spelling, whatever case the answer used.
    static func conversionType(_ text: String) -> String {
        switch text.lowercased() {
        case "download": "Download"
        case "redownload": "Redownload"
        case "preorder", "pre-order", "pre_order": "PreOrder"
        default: text
        }
    }

    static func claimType(_ text: String) -> String {
        switch text.lowercased() {
        case "click": "Click"
        case "impression": "Impression"
        default: text
        }
    }
}
