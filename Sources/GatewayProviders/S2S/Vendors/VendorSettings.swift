import Foundation
import GatewayCore

/// The attribution vendors the `s2s` provider talks to.
public enum Vendor: String, Sendable, CaseIterable {
    case singular, appsflyer, adjust

    public var displayName: String {
        switch self {
        case .singular: "Singular"
        case .appsflyer: "AppsFlyer"
        case .adjust: "Adjust"
        }
    }

    /// The name of its destination, in `dlq`, `replay`, metrics and logs. The '.' keeps
    /// it apart from every name under `sinks:`.
    public var sinkName: String { "s2s.\(rawValue)" }
}

/// One vendor's settings under `providers.s2s.vendors`.
public struct VendorSettings: Sendable {
    /// An app's Adjust tokens: Adjust names apps and events by tokens, not by ids.
    public struct AdjustApp: Sendable, Equatable {
        public var appToken: String
        /// Event name (a purchase's name, `purchase` by default) → event token.
        public var eventTokens: [String: String]

        public init(appToken: String, eventTokens: [String: String]) {
            self.appToken = appToken
            self.eventTokens = eventTokens
        }
    }

    public var vendor: Vendor
    /// The base URL; the vendor's production host by default.
    public var endpoint: String
    /// Singular's SDK key, AppsFlyer's S2S key (dev key on the legacy host), Adjust's S2S token.
    public var apiKey: String?
    /// Forward only events whose user allowed tracking: ATT status 3, or no status from iOS
    /// before 14.5, which had no ATT (``TrackingConsent``).
    public var requireConsent = false
    public var timeout: Duration = .seconds(10)
    /// `on_no_answer: retry`: send again an event the vendor was sent whole and did not
    /// answer in time, which it may have counted (no vendor dedupes). By default such an
    /// event is dead-lettered instead, for an operator to check.
    public var retryUnanswered = false
    /// Devices whose events are sent at once; one device's events go in order.
    public var concurrency = 8
    /// Retries for about eight days (backoff doubling to an hour, 200 attempts): a
    /// vendor outage delays events rather than dead-lettering them.
    public var delivery: DeliverySettings = {
        var settings = DeliverySettings(batchSize: 50, maxAttempts: 200, backoffMax: .seconds(3600))
        // Vendors want a device's session before its events, in time order.
        settings.inDeviceOrder = true
        return settings
    }()
    /// SHA-256 of the secret its callbacks must present; no callbacks without one.
    public var callbackSecretSHA256: [UInt8]?
    /// Adjust: `production` or `sandbox`.
    public var environment = "production"
    /// Adjust: tokens per app id.
    public var adjustApps: [String: AdjustApp] = [:]
    /// Singular: each app id's bundle id. Singular names the app by bundle under one SDK
    /// key for the account, so without these a key for one app could send events, and
    /// revenue, for another's bundle.
    public var singularBundles: [String: String] = [:]
    /// Singular: `return_conversion_value`, answer `POST /v1/events` with the conversion
    /// value Singular returns for the event, waiting up to `answerWait` for its delivery.
    public var returnConversionValue = false
    /// Singular: `answer_wait_ms`, how long `POST /v1/events` waits for Singular's answer.
    public var answerWait: Duration = .milliseconds(1500)

    /// The base URL of the vendor's deletion API (`gdpr_endpoint`), its own host.
    public var gdprEndpoint: String
    /// The key the vendor's deletion API takes, apart from its S2S key: AppsFlyer's V2 API
    /// token (`gdpr_api_token`), Singular's reporting API key (`gdpr_api_key`).
    public var gdprToken: String?

    public init(vendor: Vendor) {
        self.vendor = vendor
        endpoint = Self.defaultEndpoint(vendor)
        gdprEndpoint = Self.defaultGDPREndpoint(vendor)
    }

    public static func defaultGDPREndpoint(_ vendor: Vendor) -> String {
        switch vendor {
        case .singular: "https://gdpr.singular.net"
        case .appsflyer: "https://hq1.appsflyer.com"
        case .adjust: "https://gdpr.adjust.com"
        }
    }

    /// ``gdprEndpoint`` without a trailing slash.
    var gdprBase: String {
        gdprEndpoint.hasSuffix("/") ? String(gdprEndpoint.dropLast()) : gdprEndpoint
    }

    public static func defaultEndpoint(_ vendor: Vendor, legacy: Bool = false) -> String {
        switch vendor {
        case .singular: "https://s2s.singular.net"
        case .appsflyer: legacy ? "https://api2.appsflyer.com" : "https://api3.appsflyer.com"
        case .adjust: "https://s2s.adjust.com"
        }
    }

    /// The base URL without a trailing slash, for joining paths.
    var base: String {
        endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
    }
}
