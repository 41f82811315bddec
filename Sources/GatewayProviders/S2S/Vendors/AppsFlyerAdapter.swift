import Foundation
import GatewayCore

/// AppsFlyer's S2S in-app event API: `POST /inappevent/id{app_id}`, a JSON body under
/// 1 KB, the key in an `authentication` header (the S2S key on `api3`, the dev key on
/// the legacy `api2` host).
///
/// Its S2S API takes in-app events only, so sessions are not sent. An iOS app id without
/// its `id` prefix is answered `200` and dropped silently: the prefix is always added.
public struct AppsFlyerAdapter: VendorAdapter {
    public let vendor = Vendor.appsflyer
    public let kinds: [RecordKind] = [.event, .purchase]
    static let purchaseEventName = "af_purchase"
    static let maxBodyBytes = 1024
    let settings: VendorSettings

    public init(settings: VendorSettings) {
        self.settings = settings
    }

    /// `yyyy-MM-dd HH:mm:ss.SSS` in UTC, as `eventTime` must be.
    static func eventTime(_ date: Date) -> String {
        let c = Calendar.utc.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let millis = Int((date.timeIntervalSince1970 * 1000).rounded(.down)) % 1000
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02d.%03d", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0,
            c.minute ?? 0, c.second ?? 0, millis)
    }

    public func request(for event: RawEvent, record: AttributionRecord, now: Date) throws(VendorRefusal)
        -> VendorRequest
    {
        guard let key = settings.apiKey else { throw VendorRefusal("no AppsFlyer key is configured") }
        guard let appsFlyerID = event.vendorIDs["appsflyer_id"] else {
            throw VendorRefusal("vendor_ids.appsflyer_id is missing; AppsFlyer requires it")
        }
        let digits = event.appID.hasPrefix("id") ? String(event.appID.dropFirst(2)) : event.appID
        guard digits.isASCIIDigits else {
            throw VendorRefusal(
                "app_id '\(event.appID.prefix(40))' is not an App Store id; AppsFlyer needs id123456789")
        }
        let isPurchase = event.type == .purchase
        var value = event.properties
        if let revenue = event.revenue {
            value["af_revenue"] = .string(AmountText.format(revenue))
            if let currency = event.currency { value["af_currency"] = .string(currency) }
        }
        if isPurchase, let transaction = event.transactionID { value["af_order_id"] = .string(transaction) }
        if isPurchase, let product = event.productID { value["af_content_id"] = .string(product) }

        var body: [String: JSONValue] = [
            "appsflyer_id": .string(appsFlyerID),
            "eventName": .string(event.name ?? (isPurchase ? Self.purchaseEventName : "event")),
            "eventValue": .string(value.isEmpty ? "" : JSONText.object(value)),
            "eventTime": .string(Self.eventTime(event.occurredAt(receivedAt: record.receivedAt))),
        ]
        func add(_ name: String, _ text: String?) {
            if let text { body[name] = .string(text) }
        }
        add("eventCurrency", event.currency)
        add("idfa", event.idfa)
        add("idfv", event.idfv)
        if let att = event.attStatus { body["att"] = .integer(Int64(att)) }
        add("customer_user_id", event.appUserID)
        add("ip", event.ipv4)
        add("bundleIdentifier", event.bundleID)
        add("os", event.osVersion)
        add("app_version_name", event.appVersion)
        let data = Data(JSONValue.object(body).jsonText.utf8)
        guard data.count <= Self.maxBodyBytes else {
            throw VendorRefusal(
                "the event is \(data.count) bytes as AppsFlyer JSON; AppsFlyer takes at most 1 KB (shorten properties)")
        }
        return VendorRequest(
            method: .post, url: "\(settings.base)/inappevent/id\(digits)",
            headers: [("authentication", key), ("Content-Type", "application/json")], body: data)
    }

    public func outcome(status: Int, body: String, retryAfter: Duration?, age: Duration) -> DeliveryOutcome {
        switch status {
        case 200..<300:
            return .delivered
        // A wrong key or a suspended account is mended in config, then the events go.
        case 401, 403, 408, 429, 500...599:
            // `.zero` without `Retry-After`: AppsFlyer as a whole said no (see DeliveryOutcome).
            return .retry(reason: "AppsFlyer answered \(status)", after: retryAfter ?? .zero)
        case 400 where body.localizedCaseInsensitiveContains("authenticate"):
            return .retry(
                reason: "AppsFlyer did not accept the key (400 \(body.prefix(60)))", after: retryAfter ?? .zero)
        default:
            return .reject(reason: "AppsFlyer answered \(status): \(body.prefix(200))")
        }
    }
}
