import Foundation
import GatewayCore

/// A vendor's attribution result (`/v1/s2s/{vendor}/callbacks`) normalised into an
/// install, reinstall or event record, so that a team that moves from a vendor to
/// self-attribution keeps one table of records.
///
/// Values come from the query (Adjust fills placeholders into a GET URL) and from the
/// body (JSON or a form), the body winning; numbers and booleans may arrive as text.
/// Which keys hold what differs per vendor (``CallbackFields``); the rest is shared.
enum VendorCallback {
    static let prefix = "/v1/s2s/"
    static let suffix = "/callbacks"

    static func path(_ vendor: Vendor) -> String {
        prefix + vendor.rawValue + suffix
    }

    static func vendor(forPath path: String) -> Vendor? {
        guard path.hasPrefix(prefix), path.hasSuffix(suffix) else { return nil }
        return Vendor(rawValue: String(path.dropFirst(prefix.count).dropLast(suffix.count)))
    }

    static func normalize(_ payload: IngestPayload, vendor: Vendor) throws -> AttributionRecord {
        let fields = PayloadFields(try values(payload))
        let map = CallbackFields.of(vendor)
        func text(_ keys: [String]) throws -> String? {
            for key in keys {
                if let value = try fields.string(key) { return value }
            }
            return nil
        }
        func number(_ keys: [String]) -> Int64? {
            // Vendors' ids are not always numbers (AppsFlyer's af_c_id may be any text):
            // only numeric ones fill the numeric id fields; raw keeps every one.
            for key in keys {
                if let value = try? fields.id(key) { return value }
            }
            return nil
        }
        func date(_ keys: [String]) throws -> Date? {
            for key in keys {
                guard let value = fields.value(key) else { continue }
                guard let date = CallbackTime.read(value) else {
                    throw GatewayError.invalid(key, "expected Unix seconds, 'yyyy-mm-dd hh:mm:ss' (UTC) or ISO-8601")
                }
                // A vendor's placeholder (`0001-01-01`, 1970) is no time: the callback is
                // kept without it, rather than lost over a click time.
                guard CallbackTime.isPlausible(date) else { continue }
                return date
            }
            return nil
        }

        guard let activity = try text(map.kind)?.lowercased() else {
            throw GatewayError.missing(map.kind[0])
        }
        // Installs and reattributions only: the vendor's in-app events and sessions are
        // what this gateway forwards to it, and would travel back to it as records.
        guard let kind = map.kinds[activity] else {
            throw GatewayError.invalid(
                map.kind[0],
                "'\(activity.prefix(40))' is not an attribution result; expected \(map.kinds.keys.sorted().joined(separator: ", "))"
            )
        }
        let network = try text(map.network)
        let organic =
            try map.organic.lazy.compactMap { try fields.bool($0) }.first
            ?? (network.map { $0.lowercased() == "organic" } ?? true)
        let device = try DeviceFields(fields)
        // Never the raw IDFA: only one the user allowed may be kept anywhere, keys included.
        let vendorDevice = try text(map.deviceID)
        guard let deviceKey = try vendorDevice ?? device.idfv ?? text(map.user) ?? device.idfa else {
            throw GatewayError(
                .missingField,
                "a device id is required: \((map.deviceID + ["idfv"] + map.user).joined(separator: ", "))",
                field: map.deviceID[0])
        }
        let installedAt = try date(map.installTime)
        let eventAt = try date(map.eventTime)
        // A reattribution happens after the install: its own time tells two apart.
        let occurred = kind == .reinstall ? (eventAt ?? installedAt) : (installedAt ?? eventAt)
        var stored = fields.object
        if device.idfa == nil {
            for key in stored.keys where Self.isAdvertisingID(key) { stored[key] = nil }
        }
        let appKey = try text(map.appID) ?? "-"
        let moment = occurred.map(ISO8601.format) ?? "sha256:" + SHA256Text.hex(JSONValue.object(stored).jsonText)
        var record = AttributionRecord(
            provider: S2SProvider.typeName, kind: kind,
            dedupeKey: DedupeKey.make(S2SProvider.typeName, vendor.rawValue, appKey, deviceKey, activity, moment),
            receivedAt: payload.receivedAt, attributed: !organic)
        var appID = try text(map.appID)
        if vendor == .appsflyer, let id = appID, id.hasPrefix("id"), id.dropFirst(2).isASCIIDigits {
            appID = String(id.dropFirst(2))
        }
        record.appID = appID
        record.appUserID = try text(map.user)
        device.apply(to: &record)
        // The vendor's own device id, as an event's `vendor_ids` holds it: a forget names it.
        record.vendorIDs = vendorDevice.map { [map.deviceID[0]: $0] }
        record.network = network
        if !organic {
            record.campaignName = try text(map.campaign)
            record.campaignID = number(map.campaignID)
            record.adGroupName = try text(map.adGroup)
            record.adGroupID = number(map.adGroupID)
            record.keyword = try text(map.keyword)
            record.keywordID = number(map.keywordID)
            record.keywordMatchType = try KeywordMatchType.normalized(text(map.matchType))
            record.adID = number(map.adID)
            let touched = try date(map.clickTime)
            if try text(map.touchType)?.lowercased() == "impression" {
                record.impressionDate = touched
            } else {
                record.clickDate = touched
            }
        }
        // A reattribution's conversion is its own: the report places the purchases made
        // after the first install and before the reattribution on the first install's line.
        record.conversionDate = occurred
        record.countryOrRegion = try text(map.country)?.uppercased()
        record.raw = .object(["vendor": .string(vendor.rawValue), "callback": .object(stored)])
        return record
    }

    /// Keys that may hold an advertising id in any vendor's spelling (`idfa`,
    /// `idfa_upper`, `idfa_md5`, `advertising_id`, `gps_adid`, `idfa||gps_adid`).
    static func isAdvertisingID(_ key: String) -> Bool {
        let lower = key.lowercased()
        return lower.contains("idfa") || lower.contains("advertising_id")
            || lower.contains("adid") && lower.contains("gps")
    }

    /// The query and the body's values, as one object. An empty value is no value: Adjust
    /// fills a placeholder it has nothing for with an empty string, AppsFlyer sends `null`,
    /// and an organic install's `click_time=` must not refuse the install.
    static func values(_ payload: IngestPayload) throws -> [String: JSONValue] {
        let object = try merged(payload)
        // `%00` in the query or a form decodes to a NUL, as `\u0000` does in JSON.
        try PayloadFields.refuseNUL(in: .object(object))
        return object
    }

    private static func merged(_ payload: IngestPayload) throws -> [String: JSONValue] {
        var object = payload.query.filter { !$0.value.isEmpty }.mapValues(JSONValue.string)
        let body = payload.body
        guard !body.isEmpty else { return object }
        let type = payload.contentType?.lowercased() ?? ""
        if type.hasPrefix("application/x-www-form-urlencoded") {
            for (key, value) in FormEncoding.decode(String(decoding: body, as: UTF8.self)) where !value.isEmpty {
                object[key] = .string(value)
            }
            return object
        }
        let fields = try PayloadFields.parseObject(body)
        object.merge(fields.object.filter { $0.value != .null && $0.value != .string("") }) { _, body in body }
        return object
    }
}

/// Which keys each vendor uses for each field, first match wins.
struct CallbackFields {
    var kind: [String]
    /// Activity → record kind; any other activity is refused.
    var kinds: [String: RecordKind]
    var network: [String]
    var organic: [String]
    var campaign: [String]
    var campaignID: [String]
    var adGroup: [String]
    var adGroupID: [String]
    var keyword: [String]
    var keywordID: [String]
    var matchType: [String] = []
    var adID: [String] = []
    var installTime: [String]
    var clickTime: [String]
    var touchType: [String] = []
    var eventTime: [String]
    var appID: [String]
    var user: [String]
    var deviceID: [String]
    var country: [String]

    static func of(_ vendor: Vendor) -> CallbackFields {
        switch vendor {
        case .appsflyer: appsFlyer
        case .adjust: adjust
        case .singular: singular
        }
    }

    /// AppsFlyer's Push API (JSON POST, or GET with the same names).
    static let appsFlyer = CallbackFields(
        kind: ["event_name"],
        kinds: [
            "install": .install, "reinstall": .reinstall, "re-attribution": .reinstall, "re-engagement": .reinstall,
        ],
        network: ["media_source"], organic: [], campaign: ["campaign"], campaignID: ["af_c_id"],
        adGroup: ["af_adset"], adGroupID: ["af_adset_id"], keyword: ["af_keywords"], keywordID: ["keyword_id"],
        matchType: ["keyword_match_type"], adID: ["af_ad_id"], installTime: ["install_time"],
        clickTime: ["attributed_touch_time"], touchType: ["attributed_touch_type"], eventTime: ["event_time"],
        appID: ["app_id"], user: ["customer_user_id"], deviceID: ["appsflyer_id"], country: ["country_code"])

    /// Adjust's callbacks: a GET whose query holds the placeholders the operator chose,
    /// named as the placeholders are.
    static let adjust = CallbackFields(
        kind: ["activity_kind"],
        kinds: [
            "install": .install, "reinstall": .reinstall, "reattribution": .reinstall,
            "reattribution_reinstall": .reinstall,
        ],
        network: ["network_name"], organic: ["is_organic"], campaign: ["campaign_name"], campaignID: ["campaign_id"],
        adGroup: ["adgroup_name"], adGroupID: ["adgroup_id"], keyword: ["iad_keyword", "search_term", "keyword"],
        keywordID: ["iad_keyword_id"], installTime: ["installed_at"], clickTime: ["click_time"],
        eventTime: ["reattributed_at", "created_at"], appID: ["app_id"], user: ["user_id", "customer_user_id"],
        deviceID: ["adid"],
        country: ["country"])

    /// Singular's internal BI postbacks (JSON POST).
    static let singular = CallbackFields(
        kind: ["event_name"],
        kinds: ["install": .install, "reinstall": .reinstall, "re-engagement": .reinstall],
        network: ["network"], organic: ["is_organic"], campaign: ["campaign", "tracker_campaign_name"],
        campaignID: ["tracker_campaign_id", "campaign_id"], adGroup: ["tracker_sub_campaign_name"],
        adGroupID: ["tracker_sub_campaign_id"], keyword: ["keyword"], keywordID: ["keyword_id"],
        installTime: ["install_utc_timestamp"], clickTime: ["click_utc_timestamp"], eventTime: ["event_utc_timestamp"],
        appID: ["app_id"], user: ["user_id", "custom_user_id"], deviceID: ["singular_id"], country: ["country"])
}

/// The times vendors send: Unix seconds (numbers or text), AppsFlyer's
/// `yyyy-mm-dd hh:mm:ss.sss` in UTC, or ISO-8601.
enum CallbackTime {
    /// Nil outside 2008–2100, however it is written: a callback's `installed_at` of
    /// `0001-01-01` would otherwise be the earliest touch, and win first-touch credit.
    static func parse(_ value: JSONValue) -> Date? {
        read(value).flatMap { isPlausible($0) ? $0 : nil }
    }

    static func isPlausible(_ date: Date) -> Bool {
        RawEvent.unixSecondsWindow.contains(date.timeIntervalSince1970)
    }

    /// The time as written: a date whatever its year, Unix seconds only within 2008–2100
    /// (past it, a number is not the seconds the field names: milliseconds, most often).
    static func read(_ value: JSONValue) -> Date? {
        switch value {
        case .integer(let n): return seconds(Double(n))
        case .double(let d): return seconds(d)
        case .string(let text):
            if let number = Double(text) { return seconds(number) }
            if let date = ISO8601.parse(text) { return date }
            // "2023-11-01 04:05:07.925", maybe with an offset after it ("+0000", "+01:00",
            // "-05:00"); UTC without one. A query's unencoded "+" reads as a space (" 01:00").
            guard
                let parts = text.wholeMatch(
                    of: /(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d+)?)(?:(?: ?([+-])| )(\d{2}):?(\d{2})|Z)?/)
            else { return nil }
            let (_, day, time, sign, hours, minutes) = parts.output
            let offset = hours.map { "\(sign == "-" ? "-" : "+")\($0):\(minutes ?? "00")" } ?? "Z"
            return ISO8601.parse("\(day)T\(time)\(offset)")
        default: return nil
        }
    }

    static func seconds(_ value: Double) -> Date? {
        guard RawEvent.unixSecondsWindow.contains(value) else { return nil }
        return Date(timeIntervalSince1970: value)
    }
}
