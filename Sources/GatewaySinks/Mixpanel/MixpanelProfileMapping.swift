import Foundation
import GatewayCore

/// Turns a record into Mixpanel People updates with the property names growth teams
/// already query (`asa_campaign_id`, `asa_keyword`, …, with a configurable prefix).
///
/// Attribution is first-touch, so it goes in `$set_once`: a later record never
/// overwrites how the user arrived. Names that enrichment fills in later (keyword,
/// campaign and ad group names) go in `$set`, so an update can add them.
///
/// Only a final answer (`resolution == .resolved`) writes the campaign. A `pending` record
/// writes nothing: the ASA SDK's purchase made while the user's token still waits for
/// Apple does not know how the user arrived. Apple's `not_found` or `invalid` sets
/// `asa_attribution: false` once, with `asa_resolution` saying why, so the user joins the
/// `asa_attribution = false` cohort; an attributed answer that comes later (a new token)
/// writes `asa_attribution: true` with `$set`, over it.
struct MixpanelProfileMapping: Sendable {
    let token: String
    let prefix: String
    /// Property names chosen in config (`properties: { keyword: "Search Term" }`),
    /// by the unprefixed name; the others are `prefix + name`.
    var names: [String: String] = [:]

    /// Every property the mapping writes, unprefixed, for config checks.
    static let propertyNames = [
        "attribution", "resolution", "org_id", "campaign_id", "ad_group_id", "keyword_id", "ad_id", "country",
        "conversion_type", "claim_type", "keyword_match_type", "click_date", "impression_date", "keyword",
        "campaign_name", "ad_group_name", "skan_ad_network_id", "skan_source_app_id", "skan_fine_value",
        "skan_coarse_value",
    ]

    /// The user this record belongs to, or nil when it has no real one: a placeholder
    /// (Mixpanel refuses those as `distinct_id`, which would merge unrelated users) or a
    /// forgotten user's stand-in (``UserIDs/isReal(_:)``).
    static func distinctID(_ record: AttributionRecord) -> String? {
        guard let id = record.appUserID, UserIDs.isReal(id) else { return nil }
        return id.trimmingCharacters(in: .whitespaces)
    }

    /// The properties of one record: first-touch ones (`$set_once`) and those a later
    /// update may fill in (`$set`); none for a record whose answer is not final.
    func properties(for record: AttributionRecord) -> (once: [String: JSONValue], set: [String: JSONValue]) {
        var once: [String: JSONValue] = [:]
        var set: [String: JSONValue] = [:]
        guard record.resolution == .resolved else { return (once, set) }
        func put(_ target: inout [String: JSONValue], _ name: String, _ value: JSONValue?) {
            if let value { target[propertyName(name)] = value }
        }
        let isAppleAds = ["iad", "adservices"].contains(record.provider)
        if isAppleAds {
            // First touch, except that an attributed answer outranks an earlier failure's false.
            if record.attributed {
                put(&set, "attribution", .bool(true))
            } else {
                put(&once, "attribution", .bool(false))
            }
            put(&set, "resolution", .string(record.resolution.rawValue))
            put(&once, "org_id", record.orgID.map(JSONValue.integer))
            put(&once, "campaign_id", record.campaignID.map(JSONValue.integer))
            put(&once, "ad_group_id", record.adGroupID.map(JSONValue.integer))
            put(&once, "keyword_id", record.keywordID.map(JSONValue.integer))
            put(&once, "ad_id", record.adID.map(JSONValue.integer))
            put(&once, "country", record.countryOrRegion.map(JSONValue.string))
            put(&once, "conversion_type", record.conversionType.map(JSONValue.string))
            put(&once, "claim_type", record.claimType.map(JSONValue.string))
            put(&once, "keyword_match_type", record.keywordMatchType.map(JSONValue.string))
            put(&once, "click_date", record.clickDate.map { .string(ISO8601.format($0)) })
            // A view-through install (`claim_type: Impression`) has no click, only this.
            put(&once, "impression_date", record.impressionDate.map { .string(ISO8601.format($0)) })
            put(&set, "keyword", record.keyword.map(JSONValue.string))
            put(&set, "campaign_name", record.campaignName.map(JSONValue.string))
            put(&set, "ad_group_name", record.adGroupName.map(JSONValue.string))
        }
        if record.provider == "skadnetwork" {
            put(&once, "skan_ad_network_id", record.adNetworkID.map(JSONValue.string))
            put(&once, "skan_source_app_id", record.sourceAppID.map(JSONValue.string))
            put(&set, "skan_fine_value", record.fineValue.map { .integer(Int64($0)) })
            put(&set, "skan_coarse_value", record.coarseValue.map(JSONValue.string))
        }
        return (once, set)
    }

    /// Apple could not attribute the user (`not_found`, `invalid`): profile properties only,
    /// set once, for the `asa_attribution = false` cohort; the record's event has none.
    func failureProperties(for record: AttributionRecord) -> [String: JSONValue] {
        guard [.notFound, .invalid].contains(record.resolution), ["iad", "adservices"].contains(record.provider)
        else { return [:] }
        return [
            propertyName("attribution"): .bool(false),
            propertyName("resolution"): .string(record.resolution.rawValue),
        ]
    }

    /// A property's name in Mixpanel: as renamed in config, else prefixed.
    func propertyName(_ name: String) -> String {
        names[name] ?? prefix + name
    }

    /// The update objects for one record (none when it has no real user).
    func updates(for record: AttributionRecord) -> [JSONValue] {
        guard let distinctID = Self.distinctID(record) else { return [] }
        var (once, set) = properties(for: record)
        once.merge(failureProperties(for: record)) { $1 }
        var updates: [JSONValue] = []
        let base: [String: JSONValue] = [
            "$token": .string(token), "$distinct_id": .string(distinctID), "$ip": .string("0"),
        ]
        if !once.isEmpty { updates.append(.object(base.merging(["$set_once": .object(once)]) { $1 })) }
        if !set.isEmpty { updates.append(.object(base.merging(["$set": .object(set)]) { $1 })) }
        return updates
    }
}
