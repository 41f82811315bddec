import Foundation
import GatewayCore

/// Singular's S2S API: `GET /api/v1/launch` for sessions and `GET /api/v1/evt` for events
/// and purchases, everything in the query, the SDK key as `a`.
///
/// Singular answers `200` even to a refused request; its body's `status` decides. A
/// refusal (`{"status":"error","reason":…}`) is about the parameters and is not retried,
/// as Singular advises; `408`, `429` and `5xx` are retried, other answers dead-lettered.
public struct SingularAdapter: VendorAdapter {
    public let vendor = Vendor.singular
    public let kinds: [RecordKind] = [.session, .event, .purchase]
    /// Singular's name for in-app purchases.
    static let purchaseEventName = "__iap__"
    let settings: VendorSettings

    public init(settings: VendorSettings) {
        self.settings = settings
    }

    public func request(for event: RawEvent, record: AttributionRecord, now: Date) throws(VendorRefusal)
        -> VendorRequest
    {
        guard let key = settings.apiKey else { throw VendorRefusal("no Singular SDK key is configured") }
        // The configured bundle when there is one: what was posted may be another app's.
        let configured = settings.singularBundles.isEmpty ? event.bundleID : settings.singularBundles[event.appID]
        guard let bundleID = configured else { throw VendorRefusal("bundle_id is missing; Singular requires it (i)") }
        guard let ip = event.ipv4 else { throw VendorRefusal("ip (IPv4) is missing; Singular requires it") }
        guard let osVersion = event.osVersion else {
            throw VendorRefusal("os_version is missing; Singular requires it (ve)")
        }
        guard event.idfv != nil || event.idfa != nil else {
            throw VendorRefusal("idfv is missing; Singular needs a device id")
        }
        var query: [(String, String)] = [
            ("a", key), ("p", "iOS"), ("i", bundleID), ("ip", ip), ("ve", osVersion), ("ma", "Apple"),
        ]
        func add(_ name: String, _ value: String?) {
            if let value { query.append((name, value)) }
        }
        add("mo", event.deviceModel)
        add("lc", event.locale)
        add("app_v", event.appVersion)
        add("idfv", event.idfv)
        add("idfa", event.idfa)
        add("att_authorization_status", event.attStatus.map(String.init))
        add("ua", event.userAgent)
        add("custom_user_id", event.appUserID)
        add("utime", String(Int64(event.occurredAt(receivedAt: record.receivedAt).timeIntervalSince1970)))
        add("skan_conversion_value", event.skanConversionValue.map(String.init))
        add("skan_first_call_timestamp", event.skanFirstCallTimestamp.map(String.init))
        add("skan_last_call_timestamp", event.skanLastCallTimestamp.map(String.init))

        let path: String
        switch event.type {
        case .refund:
            throw VendorRefusal("refunds are not sent to Singular")
        case .session:
            path = "/api/v1/launch"
            add("attribution_token", event.adServicesToken)
        case .event, .purchase:
            path = "/api/v1/evt"
            let isPurchase = event.type == .purchase
            add("n", event.name ?? (isPurchase ? Self.purchaseEventName : nil))
            if !event.properties.isEmpty { add("e", JSONText.object(event.properties)) }
            if let revenue = event.revenue {
                add("amt", AmountText.format(revenue))
                add("cur", event.currency)
                add("is_revenue_event", "true")
            }
            if isPurchase {
                add("purchase_transaction_id", event.transactionID)
                add("purchase_product_id", event.productID)
            }
        }
        let url = settings.base + path + "?" + FormEncoding.encode(query)
        guard url.utf8.count <= Self.maxURLBytes else {
            throw VendorRefusal(
                "the request is \(url.utf8.count) bytes as a Singular URL; at most \(Self.maxURLBytes) (shorten properties)"
            )
        }
        return VendorRequest(method: .get, url: url)
    }

    /// Everything goes in the query; servers commonly refuse URLs past 8 KiB.
    static let maxURLBytes = 8192

    public func outcome(status: Int, body: String, retryAfter: Duration?, age: Duration) -> DeliveryOutcome {
        switch status {
        case 200: break
        case 408, 429, 500...599:
            // `.zero` without `Retry-After`: Singular as a whole said no (see DeliveryOutcome).
            return .retry(reason: "Singular answered \(status)", after: retryAfter ?? .zero)
        default:
            return .reject(reason: "Singular answered \(status): \(body.prefix(200))")
        }
        // Retrying could count the event twice (Singular does not dedupe): an answer
        // that says neither ok nor error is kept in the dead-letter queue to look at.
        guard let answer = try? JSONValue.parse(Data(body.utf8)), case .string(let state)? = answer["status"] else {
            return .reject(reason: "Singular answered 200 without a status: \(body.prefix(200))")
        }
        if state == "ok" { return .delivered }
        let reason =
            answer["reason"].flatMap { if case .string(let text) = $0 { text } else { nil } } ?? "no reason given"
        return .reject(reason: "Singular refused the event: \(reason.prefix(200))")
    }

    /// With SKAN enabled for the app, Singular's session and event endpoints answer the
    /// conversion value to set: `conversion_value`, and for SKAN 4
    /// `skan_updated_coarse_value` (0 low, 1 medium, 2 high) and
    /// `skan_updated_lock_window_value`. Numbers or booleans sent as text are read too; a
    /// value out of range is no value.
    public func conversionValue(answer body: String) -> VendorConversionValue? {
        guard let answer = try? JSONValue.parse(Data(body.utf8)),
            let fine = Self.integer(answer["conversion_value"]), (0...63).contains(fine)
        else { return nil }
        var value = VendorConversionValue(fineValue: fine)
        switch answer["skan_updated_coarse_value"] {
        case .string(let level)? where ConversionModel.coarseLevels.contains(level):
            value.coarseValue = level
        case let number:
            if let rank = Self.integer(number), ConversionModel.coarseLevels.indices.contains(rank) {
                value.coarseValue = ConversionModel.coarseLevels[rank]
            }
        }
        switch answer["skan_updated_lock_window_value"] {
        case .bool(let lock)?: value.lockWindow = lock
        case .string("true")?: value.lockWindow = true
        case .string("false")?: value.lockWindow = false
        default: break
        }
        return value
    }

    static func integer(_ value: JSONValue?) -> Int? {
        switch value {
        case .integer(let n)?: Int(exactly: n)
        case .string(let text)? where text.isASCIIDigits: Int(text)
        default: nil
        }
    }
}
