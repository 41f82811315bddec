import Foundation
import GatewayCore

/// Adjust's S2S API: `POST /session` and `POST /event` with a form body, the S2S token as
/// `Authorization: Bearer`, apps and events named by Adjust's tokens.
///
/// `451` means the device opted out: final, so it is declined, never retried. A `404`
/// for a device Adjust does not know yet is retried for 6 hours from the event's arrival.
/// `202` means Adjust did not take the S2S token. Events older than 58 days are refused
/// by Adjust, so they are dead-lettered without a call.
public struct AdjustAdapter: VendorAdapter {
    public let vendor = Vendor.adjust
    public let kinds: [RecordKind] = [.session, .event, .purchase]
    static let maxAge: TimeInterval = 58 * 24 * 3600
    /// How long an event waits for Adjust to learn its device (see `outcome`).
    static let deviceWait: Duration = .seconds(6 * 3600)
    let settings: VendorSettings

    public init(settings: VendorSettings) {
        self.settings = settings
    }

    public func request(for event: RawEvent, record: AttributionRecord, now: Date) throws(VendorRefusal)
        -> VendorRequest
    {
        guard let app = settings.adjustApps[event.appID] else {
            throw VendorRefusal("no Adjust app token for app_id \(event.appID) (providers.s2s.vendors.adjust.apps)")
        }
        let adid = event.vendorIDs["adid"]
        guard event.idfa != nil || event.idfv != nil || adid != nil else {
            throw VendorRefusal("Adjust needs a device id: idfv, an allowed idfa or vendor_ids.adid")
        }
        let occurred = event.occurredAt(receivedAt: record.receivedAt)
        guard now.timeIntervalSince(occurred) <= Self.maxAge else {
            throw VendorRefusal("the event is older than 58 days; Adjust refuses it")
        }
        var form: [(String, String)] = [("s2s", "1"), ("app_token", app.appToken)]
        func add(_ name: String, _ value: String?) {
            if let value { form.append((name, value)) }
        }
        let path: String
        switch event.type {
        case .refund:
            // Not reached through VendorSink, which declines kinds Adjust does not take;
            // Adjust refuses negative revenue, so a refund has no form here.
            throw VendorRefusal("refunds are not sent to Adjust")
        case .session:
            path = "/session"
        case .event, .purchase:
            path = "/event"
            let name = event.name ?? event.type.rawValue
            guard let token = app.eventTokens[name] else {
                throw VendorRefusal(
                    "no Adjust event token for '\(name.prefix(60))' (providers.s2s.vendors.adjust.apps.\(event.appID).event_tokens)"
                )
            }
            add("event_token", token)
        }
        add("idfa", event.idfa)
        add("idfv", event.idfv)
        add("adid", adid)
        // Adjust takes the ATT status from iOS 14.5, where Apple enforces it; below, whether
        // the device allows tracking, never both. An IDFA is sent only when it does.
        if event.osVersion.flatMap(TrackingConsent.predatesATT) == true {
            add("tracking_enabled", event.idfa == nil ? "0" : "1")
        } else {
            add("att_status", event.attStatus.map(String.init))
        }
        add("os_name", "ios")
        add("os_version", event.osVersion)
        add("ip_address", event.ipv4)
        add("user_agent", event.userAgent)
        add("created_at_unix", String(Int64(occurred.timeIntervalSince1970)))
        add("environment", settings.environment)
        if let revenue = event.revenue, revenue >= Decimal(string: "0.001")! {
            add("revenue", AmountText.format(revenue))
            add("currency", event.currency)
        }
        if !event.properties.isEmpty {
            // Adjust takes flat JSON with string values only.
            let strings = event.properties.mapValues { value -> JSONValue in
                switch value {
                case .string: value
                case .bool(let b): .string(b ? "true" : "false")
                case .integer(let n): .string(String(n))
                case .double(let d): .string(String(d))
                default: .string(value.jsonText)
                }
            }
            add("callback_params", JSONText.object(strings))
        }
        var headers = [("Content-Type", "application/x-www-form-urlencoded")]
        if let key = settings.apiKey { headers.append(("Authorization", "Bearer \(key)")) }
        if event.type == .session, let ip = event.ipv4 { headers.append(("X-Adjust-Forwarded-For", ip)) }
        return VendorRequest(
            method: .post, url: settings.base + path, headers: headers, body: Data(FormEncoding.encode(form).utf8))
    }

    public func outcome(status: Int, body: String, retryAfter: Duration?, age: Duration) -> DeliveryOutcome {
        switch status {
        case 200:
            return .delivered
        case 451:
            return .declined(reason: "Adjust answered 451: the device opted out")
        // Adjust has not seen the device's install from its SDK yet (a backend's purchase
        // often races it): the same event goes through once it has. Only for a while:
        // a device Adjust never learns (an app without its SDK) would otherwise hold its
        // lane, in device order, for the whole retry budget (days). An unknown app token
        // is the other 404, mended only in config.
        case 404 where body.localizedCaseInsensitiveContains("device not found"):
            guard age < Self.deviceWait else {
                return .reject(
                    reason: "Adjust answered 404 for 6 hours: it does not know the device (\(body.prefix(80)))")
            }
            return .retry(
                reason: "Adjust does not know the device yet (404 \(body.prefix(80)))",
                after: retryAfter)
        case 202:
            // `.zero` without `Retry-After`: Adjust as a whole said no (see DeliveryOutcome).
            return .retry(reason: "Adjust did not accept the S2S token (202)", after: retryAfter ?? .zero)
        case 401, 403, 408, 429, 500...599:
            return .retry(reason: "Adjust answered \(status)", after: retryAfter ?? .zero)
        default:
            return .reject(reason: "Adjust answered \(status): \(body.prefix(200))")
        }
    }
}
