import Crypto
import Foundation
import GatewayCore
import Logging

/// Registers the `s2s` provider under `providers: s2s:`.
///
/// ```yaml
/// s2s:
///   vendor: singular            # or a list; the vendors events are forwarded to
///   api_key: ${SINGULAR_KEY}    # shorthand for vendors.<vendor>.api_key (endpoint too)
///   vendors:                    # every vendor's settings, used or not, so that
///     appsflyer: { api_key: ${AF_KEY} }   # switching is one word
/// ```
///
/// Each forwarding vendor becomes a destination named `s2s.<vendor>` with its own outbox
/// and worker, fed by a route that takes this provider's records of the kinds the vendor
/// accepts (and only consented ones with `require_consent: true`), and delivered by the
/// sink `Delivery` builds.
public enum S2SProviderPlugin<Delivery: VendorDelivery>: ProviderPlugin {
    public typealias Options = S2SProvider.Options
    public static var typeName: String { S2SProvider.typeName }

    public static func readOptions(_ reader: ConfigReader) -> Options? {
        let before = reader.diagnostics.issues.count
        var chosen: [Vendor] = []
        for name in reader.stringList("vendor") ?? [] {
            guard let vendor = Vendor(rawValue: name) else {
                reader.report(
                    "unknown vendor '\(name)'; one of \(Vendor.allCases.map(\.rawValue).joined(separator: ", "))",
                    key: "vendor")
                continue
            }
            if !chosen.contains(vendor) { chosen.append(vendor) }
        }
        // `endpoint` and `api_key` beside `vendor` belong to that one vendor.
        let shorthand = (endpoint: reader.url("endpoint"), apiKey: reader.string("api_key"))
        if reader.has("endpoint") || shorthand.apiKey != nil, chosen.count != 1 {
            reader.report(
                "endpoint and api_key here need exactly one vendor; use vendors.<name> for several", key: "vendor")
        }
        var settings: [Vendor: VendorSettings] = [:]
        let sections = reader.child("vendors")
        for name in sections?.keys ?? [] {
            guard let vendor = Vendor(rawValue: name) else {
                sections?.report(
                    "unknown vendor '\(name)'; one of \(Vendor.allCases.map(\.rawValue).joined(separator: ", "))",
                    key: name)
                continue
            }
            settings[vendor] = sections?.child(name).map { readVendor(vendor, $0) }
        }
        sections?.finish()
        for vendor in chosen where settings[vendor] == nil {
            settings[vendor] = VendorSettings(vendor: vendor)
        }
        if chosen.count == 1, var single = settings[chosen[0]] {
            if let endpoint = shorthand.endpoint { single.endpoint = endpoint }
            if let key = shorthand.apiKey { single.apiKey = key }
            settings[chosen[0]] = single
        }
        for vendor in chosen {
            guard let vendorSettings = settings[vendor] else { continue }
            if vendor != .adjust, vendorSettings.apiKey == nil {
                reader.report(
                    "\(vendor.displayName) needs api_key (here, or under vendors.\(vendor.rawValue))", key: "vendor")
            }
            if vendor == .adjust, vendorSettings.adjustApps.isEmpty {
                reader.report(
                    "Adjust needs apps: { \"<app_id>\": { app_token: …, event_tokens: {…} } } under vendors.adjust",
                    key: "vendor")
            }
        }
        guard reader.diagnostics.issues.count == before else { return nil }
        var options = Options()
        options.forwarding = chosen.compactMap { settings[$0] }
        options.callbacks = Vendor.allCases.compactMap { settings[$0] }.filter { $0.callbackSecretSHA256 != nil }
        return options
    }

    static func readVendor(_ vendor: Vendor, _ reader: ConfigReader) -> VendorSettings {
        var settings = VendorSettings(vendor: vendor)
        if vendor == .appsflyer, let api = reader.choice("api", ["s2s", "legacy"]) {
            settings.endpoint = VendorSettings.defaultEndpoint(vendor, legacy: api == "legacy")
        }
        if let endpoint = reader.url("endpoint") { settings.endpoint = endpoint }
        settings.apiKey = reader.string("api_key")
        if let endpoint = reader.url("gdpr_endpoint") { settings.gdprEndpoint = endpoint }
        switch vendor {
        case .appsflyer: settings.gdprToken = reader.string("gdpr_api_token")
        case .singular: settings.gdprToken = reader.string("gdpr_api_key")
        case .adjust: break
        }
        if let consent = reader.bool("require_consent") { settings.requireConsent = consent }
        if let ms = reader.int("timeout_ms", in: 100...120_000) { settings.timeout = .milliseconds(ms) }
        if let choice = reader.choice("on_no_answer", ["dead_letter", "retry"]) {
            settings.retryUnanswered = choice == "retry"
        }
        if let n = reader.int("concurrency", in: 1...256) { settings.concurrency = n }
        if let secret = reader.string("callback_secret") {
            if secret.count < 16 {
                reader.report("must be at least 16 characters", key: "callback_secret")
            } else {
                settings.callbackSecretSHA256 = Array(SHA256.hash(data: Data(secret.utf8)))
            }
        }
        settings.delivery = DeliverySettings.read(reader, defaults: settings.delivery)
        if vendor == .adjust {
            if let environment = reader.choice("environment", ["production", "sandbox"]) {
                settings.environment = environment
            }
            if let apps = reader.child("apps") {
                for appID in apps.keys {
                    guard let app = apps.child(appID) else { continue }
                    let token = app.requiredString("app_token")
                    var events: [String: String] = [:]
                    if let tokens = app.child("event_tokens") {
                        for name in tokens.keys {
                            if let value = tokens.string(name) { events[name] = value }
                        }
                        tokens.finish()
                    }
                    app.finish()
                    if let token { settings.adjustApps[appID] = .init(appToken: token, eventTokens: events) }
                }
                apps.finish()
            }
        }
        if vendor == .singular {
            if let apps = reader.child("apps") {
                for appID in apps.keys {
                    guard let app = apps.child(appID) else { continue }
                    if let bundle = app.requiredString("bundle_id") { settings.singularBundles[appID] = bundle }
                    app.finish()
                }
                apps.finish()
            }
            if let answer = reader.bool("return_conversion_value") { settings.returnConversionValue = answer }
            if let ms = reader.int("answer_wait_ms", in: 0...30_000) { settings.answerWait = .milliseconds(ms) }
        }
        reader.finish()
        return settings
    }

    public static func makeProvider(options: Options) throws -> any AttributionProvider {
        S2SProvider(options: options)
    }

    public static func sinks(options: Options) -> [ProviderSink] {
        options.forwarding.map { settings in
            let adapter = adapter(settings)
            var filter = RecordFilter(providers: [typeName], kinds: adapter.kinds)
            if settings.requireConsent { filter.trackingConsent = true }
            let host = URL(string: settings.endpoint)?.host ?? settings.endpoint
            let prepared = PreparedSink(
                name: settings.vendor.sinkName, typeName: "s2s",
                summary: "\(settings.vendor.displayName) S2S at \(host)"
                    + (settings.requireConsent ? ", consented events only" : ""),
                build: { context in
                    Delivery.sink(
                        adapter: adapter, settings: settings, logger: context.logger,
                        conversionValues: settings.returnConversionValue ? options.conversionValues : nil)
                })
            return ProviderSink(prepared: prepared, delivery: settings.delivery, filter: filter)
        }
    }

    static func adapter(_ settings: VendorSettings) -> any VendorAdapter {
        switch settings.vendor {
        case .singular: SingularAdapter(settings: settings)
        case .appsflyer: AppsFlyerAdapter(settings: settings)
        case .adjust: AdjustAdapter(settings: settings)
        }
    }
}
