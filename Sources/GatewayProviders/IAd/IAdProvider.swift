import Foundation
import GatewayCore

/// The legacy iAd attribution dictionary (`ADClient.requestAttributionDetails`).
///
/// Apple's iAd API has answered only `false` since February 2023; this provider serves
/// stored payloads and backfills. Payloads arrive as the app got them: every value may
/// be a string (`"true"`, `"40669820"`), dates with seconds, and older payloads carry
/// `iad-lineitem-*` and `iad-creative-*` where newer ones have `iad-adgroup-*` and
/// `iad-creativeset-*`.
public struct IAdProvider: AttributionProvider {
    public static let typeName = "iad"
    public var name: String { Self.typeName }
    public var routes: [ProviderRoute] { [ProviderRoute(.post, "/v1/iad")] }

    /// The ids Apple's developer-mode test dictionary uses.
    static let testID: Int64 = 1_234_567_890

    public init() {}

    public func normalize(_ payload: IngestPayload) throws -> [AttributionRecord] {
        let fields = try PayloadFields.parseObject(payload.body)
        let appID = try fields.requiredString("app_id")
        let appUserID = try fields.requiredString("app_user_id")
        let device = try DeviceFields(fields)
        let details = try fields.requiredObject("Version3.1")
        guard let attributed = try details.bool("iad-attribution") else {
            throw GatewayError.missing(details.fieldPath("iad-attribution"))
        }

        let conversion = try details.string("iad-conversion-type").map(Self.conversionType)
        var record = AttributionRecord(
            provider: name,
            kind: conversion == "Redownload" ? .reinstall : .install,
            dedupeKey: DedupeKey.make("iad", appID, appUserID),
            receivedAt: payload.receivedAt,
            attributed: attributed)
        record.appID = appID
        record.appUserID = appUserID
        device.apply(to: &record)
        record.raw = .object(device.scrubbed(fields.object))

        // An organic answer carries no campaign, whatever else the dictionary holds.
        if attributed {
            record.orgID = try details.id("iad-org-id")
            record.orgName = try details.string("iad-org-name")
            record.campaignID = try details.id("iad-campaign-id")
            record.campaignName = try details.string("iad-campaign-name")
            record.adGroupID = try details.id("iad-adgroup-id") ?? details.id("iad-lineitem-id")
            record.adGroupName = try details.string("iad-adgroup-name") ?? details.string("iad-lineitem-name")
            record.keywordID = try details.id("iad-keyword-id")
            record.keyword = try details.string("iad-keyword")
            // `raw` keeps the dictionary's own spelling (`Exact`).
            record.keywordMatchType = try KeywordMatchType.normalized(details.string("iad-keyword-matchtype"))
            record.adID = try details.id("iad-ad-id")
            // The iAd network's dictionaries (before Search Ads) name the ad's creative
            // where later ones name its creative set: the record's creative fields take either.
            record.creativeSetID =
                try AttributionRecord.creativeSetID(details.id("iad-creativeset-id"))
                ?? AttributionRecord.creativeSetID(details.id("iad-creative-id"))
            record.creativeSetName = try details.string("iad-creativeset-name") ?? details.string("iad-creative-name")
            record.countryOrRegion = try details.string("iad-country-or-region")
            record.conversionType = conversion
            record.clickDate = try details.date("iad-click-date")
            record.impressionDate = try details.date("iad-impression-date")
            record.conversionDate = try details.date("iad-conversion-date")
            record.purchaseDate = try details.date("iad-purchase-date")
            record.isTest = [record.orgID, record.campaignID, record.adGroupID].contains(Self.testID)
        }
        return [record]
    }

    /// Apple documents `newdownload`/`redownload`; devices were seen sending `Download`.
    static func conversionType(_ text: String) -> String {
        switch text.lowercased() {
        case "newdownload", "download": "Download"
        case "redownload": "Redownload"
        default: text
        }
    }
}

/// Registers the iAd provider under `providers: iad:`.
public enum IAdProviderPlugin: ProviderPlugin {
    public struct Options: Sendable {}
    public static let typeName = IAdProvider.typeName

    public static func readOptions(_ reader: ConfigReader) -> Options? {
        Options()
    }

    public static func makeProvider(options: Options) throws -> any AttributionProvider {
        IAdProvider()
    }
}
