import Foundation
import GatewayCore
@testable import GatewayProviders
import GatewaySinks
import Testing

/// The vendors' S2S wire formats, consent gating, intake checks and vendor callbacks, all
/// through the real path: `POST /v1/events` → record → stored event → vendor request.
@Suite struct S2SVendorFormatTests {
    let receivedAt = Date(timeIntervalSince1970: 1_700_000_000)  // 2023-11-14T22:13:20Z
    var now: Date { receivedAt.addingTimeInterval(60) }
    static let idfv = "6D92078A-8246-4BA4-AE5B-76104861E7DC"
    static let idfa = "A1B2C3D4-1111-4222-8333-444455556666"
    static let zeroIDFA = "00000000-0000-0000-0000-000000000000"
    static let appsFlyerID = "1700000000000-1234567"
    static let adServicesToken = "++++//5BQg=="

    let singular = SingularAdapter(settings: settings(.singular, key: "SDKKEY"))
    let appsFlyer = AppsFlyerAdapter(settings: settings(.appsflyer, key: "AFKEY"))
    let adjust = AdjustAdapter(settings: settings(.adjust, key: "S2STOKEN"))

    static func settings(_ vendor: Vendor, key: String) -> VendorSettings {
        var settings = VendorSettings(vendor: vendor)
        settings.endpoint = "http://vendor.test"
        settings.apiKey = key
        settings.adjustApps = [
            "123456789": .init(appToken: "apptok", eventTokens: ["level_up": "lvl1", "purchase": "pur1"])
        ]
        return settings
    }

    // MARK: helpers

    static func q(_ text: String) -> String { "\"\(text)\"" }

    /// A valid event of `type`; `extra` holds raw JSON values that add or replace fields.
    static func event(_ type: String, _ extra: [String: String] = [:]) -> String {
        var fields = [
            "type": q(type), "app_id": q("123456789"), "bundle_id": q("com.example.calm"), "ip": q("203.0.113.7"),
            "os_version": q("17.4"), "idfv": q(idfv), "att_status": "2",
        ]
        fields.merge(extra) { $1 }
        return "{" + fields.map { "\(q($0.key)):\($0.value)" }.joined(separator: ",") + "}"
    }

    func records(_ body: String, at date: Date? = nil) throws -> [AttributionRecord] {
        let payload = IngestPayload(body: Data(body.utf8), receivedAt: date ?? receivedAt, path: "/v1/events")
        return try S2SProvider(options: .init()).normalize(payload)
    }

    func record(_ body: String, at date: Date? = nil) throws -> AttributionRecord {
        let all = try records(body, at: date)
        #expect(all.count == 1)
        return try #require(all.first)
    }

    func request(_ adapter: some VendorAdapter, _ body: String, now: Date? = nil) throws -> VendorRequest {
        let record = try record(body)
        let event = try RawEvent(stored: record.raw)
        return try adapter.request(for: event, record: record, now: now ?? self.now)
    }

    func refusal(_ adapter: some VendorAdapter, _ body: String, now: Date? = nil) throws -> VendorRefusal? {
        let record = try record(body)
        let event = try RawEvent(stored: record.raw)
        do throws(VendorRefusal) {
            _ = try adapter.request(for: event, record: record, now: now ?? self.now)
            return nil
        } catch {
            return error
        }
    }

    func intakeError(_ body: String) -> GatewayError? {
        do {
            _ = try records(body)
            return nil
        } catch {
            return error as? GatewayError
        }
    }

    /// `name=value&…` decoded, checking it is fully percent-encoded and names no key twice.
    func pairs(_ encoded: String) throws -> [String: String] {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%=&")
        #expect(encoded.allSatisfy(allowed.contains), "not fully percent-encoded: \(encoded)")
        let items = try #require(URLComponents(string: "http://x/?" + encoded)?.queryItems)
        let result = Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
        #expect(result.count == items.count, "a name appears twice in \(encoded)")
        return result
    }

    func query(_ request: VendorRequest, path: String) throws -> [String: String] {
        #expect(request.method == .get)
        let parts = request.url.split(separator: "?", maxSplits: 1).map(String.init)
        #expect(parts.first == "http://vendor.test" + path)
        return try pairs(parts.count == 2 ? parts[1] : "")
    }

    func form(_ request: VendorRequest) throws -> [String: String] {
        try pairs(String(decoding: try #require(request.body), as: UTF8.self))
    }

    func json(_ request: VendorRequest) throws -> [String: JSONValue] {
        let body = try #require(request.body)
        return try #require(try JSONValue.parse(body).objectValue)
    }

    func jsonText(_ value: JSONValue?) throws -> JSONValue {
        guard case .string(let text)? = value else { throw GatewayError.invalid("value", "expected a JSON string") }
        return try JSONValue.parse(Data(text.utf8))
    }

    func headers(_ request: VendorRequest) -> Set<String> {
        Set(request.headers.map { "\($0.0.lowercased()): \($0.1)" })
    }

    enum Verdict { case delivered, declined, retry, reject, postponed, checkLater }

    func verdict(_ adapter: some VendorAdapter, _ status: Int, _ body: String = "", age: Duration = .zero) -> Verdict {
        switch adapter.outcome(status: status, body: body, retryAfter: nil, age: age) {
        case .delivered: .delivered
        case .declined: .declined
        case .retry: .retry
        case .reject: .reject
        case .postponed: .postponed
        case .checkLater: .checkLater
        }
    }

    /// A `429` or `5xx` without `Retry-After` is the vendor's whole refusal (a wait of
    /// zero: the worker pauses), a device Adjust does not know yet the record's own (none).
    @Test func aVendorsRefusalOfEverythingWithoutAWaitIsTheDestinationsNotTheRecords() {
        func after(_ adapter: some VendorAdapter, _ status: Int, _ body: String = "") -> Duration?? {
            if case .retry(_, let after) = adapter.outcome(status: status, body: body, retryAfter: nil, age: .zero) {
                return after
            }
            return nil
        }
        for status in [429, 500, 503] {
            #expect(after(singular, status) == .some(.zero), "Singular \(status)")
            #expect(after(appsFlyer, status) == .some(.zero), "AppsFlyer \(status)")
            #expect(after(adjust, status) == .some(.zero), "Adjust \(status)")
        }
        #expect(after(adjust, 404, "Device not found") == .some(nil))
    }

    // MARK: Singular

    /// A time out of any app's life refused, whichever way it is written: Singular got
    /// `0001-01-01` as a negative `utime` and AppsFlyer as another day.
    @Test func aTimestampOutsideAnAppsLifeIsRefusedWhicheverWayItIsWritten() throws {
        for timestamp in [Self.q("0001-01-01T00:00:00Z"), Self.q("9999-12-31T23:59:59Z"), "0", "1700000000000", "-5"] {
            #expect(throws: GatewayError.self, "\(timestamp)") {
                try records(Self.event("session", ["timestamp": timestamp]))
            }
        }
        for timestamp in [Self.q("2026-11-24T10:00:00Z"), "1764000000", "1764000000.5"] {
            #expect(throws: Never.self, "\(timestamp)") { try records(Self.event("session", ["timestamp": timestamp])) }
        }
    }

    @Test func singularSessionIsALaunchWithExactlyTheDocumentedQuery() throws {
        let body = Self.event(
            "session",
            [
                "device_model": Self.q("iPhone15,2"), "locale": Self.q("en_US"), "app_user_id": Self.q("user-1"),
                "timestamp": "1699999000", "adservices_token": Self.q(Self.adServicesToken),
                "skan_conversion_value": "12",
                "skan_first_call_timestamp": "1699990000", "skan_last_call_timestamp": "1699995000",
            ])
        let sent = try request(singular, body)
        #expect(
            try query(sent, path: "/api/v1/launch") == [
                "a": "SDKKEY", "p": "iOS", "i": "com.example.calm", "ip": "203.0.113.7", "ve": "17.4", "ma": "Apple",
                "mo": "iPhone15,2", "lc": "en_US", "idfv": Self.idfv, "att_authorization_status": "2",
                "custom_user_id": "user-1", "utime": "1699999000", "attribution_token": Self.adServicesToken,
                "skan_conversion_value": "12", "skan_first_call_timestamp": "1699990000",
                "skan_last_call_timestamp": "1699995000",
            ])
        #expect(sent.url.contains("attribution_token=%2B%2B%2B%2B%2F%2F5BQg%3D%3D"))
    }

    @Test func singularEventSendsNameAndPropertiesAsJSON() throws {
        let body = Self.event("event", ["name": Self.q("level_up"), "properties": #"{"level":3,"mode":"hard"}"#])
        let sent = try query(try request(singular, body), path: "/api/v1/evt")
        #expect(sent["n"] == "level_up")
        #expect(
            try JSONValue.parse(Data(try #require(sent["e"]).utf8))
                == .object(["level": .integer(3), "mode": .string("hard")]))
        #expect(sent["utime"] == "1700000000", "without a timestamp, the time it was received")
        #expect(sent["amt"] == nil && sent["is_revenue_event"] == nil)
    }

    @Test func singularPurchaseIsARevenueEvent() throws {
        let body = Self.event(
            "purchase",
            [
                "revenue": "9.99", "currency": Self.q("USD"), "transaction_id": Self.q("2000000123456789"),
                "product_id": Self.q("com.example.calm.annual"),
            ])
        let sent = try query(try request(singular, body), path: "/api/v1/evt")
        #expect(sent["n"] == "__iap__")
        #expect(sent["amt"] == "9.99")
        #expect(sent["cur"] == "USD")
        #expect(sent["is_revenue_event"] == "true")
        #expect(sent["purchase_transaction_id"] == "2000000123456789")
        #expect(sent["purchase_product_id"] == "com.example.calm.annual")
    }

    @Test func singularPercentEncodesReservedCharactersInValues() throws {
        let sent = try request(singular, Self.event("session", ["app_user_id": Self.q("a+b & c=d")]))
        #expect(sent.url.contains("custom_user_id=a%2Bb%20%26%20c%3Dd"))
        let values = try query(sent, path: "/api/v1/launch")
        #expect(values["custom_user_id"] == "a+b & c=d")
        #expect(values[" c"] == nil)
    }

    @Test func singularOutcomeFollowsTheBodyStatus() {
        #expect(verdict(singular, 200, #"{"status":"ok"}"#) == .delivered)
        #expect(verdict(singular, 200, #"{"status":"error","reason":"Invalid SDK key"}"#) == .reject)
        #expect(verdict(singular, 500, #"{"status":"ok"}"#) == .retry)
        // A retry could count the event twice: an unreadable 200 is kept to look at.
        #expect(verdict(singular, 200, "<html>busy</html>") == .reject)
        #expect(verdict(singular, 414, "URI Too Long") == .reject)
        #expect(verdict(singular, 429, "") == .retry)
    }

    @Test func singularsAnswerCarriesTheConversionValueForTheApp() {
        #expect(singular.conversionValue(answer: #"{"status":"ok"}"#) == nil)
        #expect(singular.conversionValue(answer: #"{"status":"ok","conversion_value":5}"#) == .init(fineValue: 5))
        let skan4 =
            #"{"status":"ok","conversion_value":"12","skan_updated_coarse_value":2,"#
            + #""skan_updated_lock_window_value":true}"#
        #expect(singular.conversionValue(answer: skan4) == .init(fineValue: 12, coarseValue: "high", lockWindow: true))
        #expect(
            singular.conversionValue(answer: #"{"conversion_value":3,"skan_updated_coarse_value":"low"}"#)
                == .init(fineValue: 3, coarseValue: "low"))
        // Out of SKAN's range, or not a number: no value, rather than a wrong one.
        #expect(singular.conversionValue(answer: #"{"status":"ok","conversion_value":64}"#) == nil)
        #expect(singular.conversionValue(answer: #"{"status":"ok","conversion_value":-1}"#) == nil)
        #expect(singular.conversionValue(answer: "<html>busy</html>") == nil)
        #expect(appsFlyer.conversionValue(answer: #"{"conversion_value":5}"#) == nil)
    }

    // MARK: AppsFlyer

    @Test func appsFlyerPurchaseIsAnInAppEventWithAJSONStringValue() throws {
        let body = Self.event(
            "purchase",
            [
                "vendor_ids": "{\"appsflyer_id\":\"\(Self.appsFlyerID)\"}", "att_status": "3",
                "idfa": Self.q(Self.idfa),
                "app_user_id": Self.q("user-1"), "revenue": "9.99", "currency": Self.q("USD"),
                "transaction_id": Self.q("2000000123456789"), "timestamp": Self.q("2023-11-14T22:13:20.125Z"),
            ])
        let sent = try request(appsFlyer, body)
        #expect(sent.method == .post)
        #expect(sent.url == "http://vendor.test/inappevent/id123456789")
        #expect(headers(sent) == ["authentication: AFKEY", "content-type: application/json"])
        let fields = try json(sent)
        #expect(fields["appsflyer_id"] == .string(Self.appsFlyerID))
        #expect(fields["eventName"] == .string("af_purchase"))
        let value = try jsonText(fields["eventValue"])
        #expect(value["af_revenue"] == .string("9.99"))
        #expect(value["af_currency"] == .string("USD"))
        #expect(value["af_order_id"] == .string("2000000123456789"))
        #expect(fields["eventCurrency"] == .string("USD"))
        #expect(fields["eventTime"] == .string("2023-11-14 22:13:20.125"))
        #expect(fields["att"] == .integer(3))
        #expect(fields["idfa"] == .string(Self.idfa))
        #expect(fields["idfv"] == .string(Self.idfv))
        #expect(fields["customer_user_id"] == .string("user-1"))
        #expect(fields["ip"] == .string("203.0.113.7"))
        #expect(fields["bundleIdentifier"] == .string("com.example.calm"))
        #expect(fields["os"] == .string("17.4"))
    }

    /// The vendors' device ids are the record's, not only its raw payload's: retention may
    /// remove the payload while a forget still has to name them to the vendor.
    @Test func vendorDeviceIDsAreTheRecordsOwnFields() throws {
        let ids = "{\"appsflyer_id\":\"\(Self.appsFlyerID)\",\"adid\":\"0123456789abcdef0123456789abcdef\"}"
        let record = try record(Self.event("session", ["vendor_ids": ids]))
        #expect(record.vendorIDs == ["appsflyer_id": Self.appsFlyerID, "adid": "0123456789abcdef0123456789abcdef"])
        #expect(try self.record(Self.event("session")).vendorIDs == nil)
    }

    @Test(arguments: [#""123456789""#, #""id123456789""#, "123456789"])
    func appsFlyerURLAlwaysCarriesTheIDPrefix(appID: String) throws {
        let body = Self.event(
            "event",
            [
                "app_id": appID, "name": Self.q("level_up"), "properties": #"{"level":3}"#,
                "vendor_ids": "{\"appsflyer_id\":\"\(Self.appsFlyerID)\"}",
            ])
        let sent = try request(appsFlyer, body)
        #expect(sent.url == "http://vendor.test/inappevent/id123456789")
        let fields = try json(sent)
        #expect(fields["eventName"] == .string("level_up"))
        #expect(try jsonText(fields["eventValue"]) == .object(["level": .integer(3)]))
        #expect(fields["eventCurrency"] == nil)
    }

    @Test func appsFlyerEventTimeHasMillisecondsOnAWholeSecond() throws {
        let body = Self.event(
            "event",
            [
                "name": Self.q("level_up"), "timestamp": "1700000000",
                "vendor_ids": "{\"appsflyer_id\":\"\(Self.appsFlyerID)\"}",
            ])
        let fields = try json(try request(appsFlyer, body))
        #expect(fields["eventTime"] == .string("2023-11-14 22:13:20.000"))
    }

    @Test func onlyAppsFlyerLeavesSessionsOut() {
        #expect(Set(appsFlyer.kinds) == [.event, .purchase])
        #expect(Set(singular.kinds) == [.session, .event, .purchase])
        #expect(Set(adjust.kinds) == [.session, .event, .purchase])
    }

    @Test func appsFlyerRefusesWithoutItsIDOrOverOneKilobyte() throws {
        let ids = ["vendor_ids": "{\"appsflyer_id\":\"\(Self.appsFlyerID)\"}", "name": Self.q("level_up")]
        #expect(try refusal(appsFlyer, Self.event("event", ids)) == nil)
        #expect(try refusal(appsFlyer, Self.event("event", ["name": Self.q("level_up")])) != nil)
        let long = String(repeating: "x", count: 300)
        let properties = "{" + (1...4).map { "\"p\($0)\":\"\(long)\"" }.joined(separator: ",") + "}"
        let big = try refusal(appsFlyer, Self.event("event", ids.merging(["properties": properties]) { $1 }))
        #expect(big?.reason.contains("1 KB") == true)
    }

    @Test func appsFlyerOutcomes() {
        #expect(verdict(appsFlyer, 200, "OK") == .delivered)
        #expect(verdict(appsFlyer, 400, "appsflyer_id is a mandatory field") == .reject)
        #expect(verdict(appsFlyer, 401, "Unauthorized") == .retry)
        #expect(verdict(appsFlyer, 500) == .retry)
    }

    // MARK: Adjust

    @Test func adjustSessionIsAFormPostWithForwardedIP() throws {
        let sent = try request(adjust, Self.event("session", ["timestamp": "1699999000"]))
        #expect(sent.method == .post)
        #expect(sent.url == "http://vendor.test/session")
        #expect(
            headers(sent) == [
                "authorization: Bearer S2STOKEN", "content-type: application/x-www-form-urlencoded",
                "x-adjust-forwarded-for: 203.0.113.7",
            ])
        #expect(
            try form(sent) == [
                "s2s": "1", "app_token": "apptok", "idfv": Self.idfv, "att_status": "2", "os_name": "ios",
                "os_version": "17.4", "ip_address": "203.0.113.7", "created_at_unix": "1699999000",
                "environment": "production",
            ])
    }

    /// Below iOS 14.5 Adjust takes whether tracking is allowed instead of the ATT status,
    /// never both.
    @Test(arguments: [("14.4", nil as String?, "0"), ("13.7", "3", "1"), ("12", nil, "0")])
    func adjustBelowIOS14Point5SendsTrackingEnabledNotTheATTStatus(os: String, att: String?, tracking: String) throws {
        var fields = ["os_version": Self.q(os)]
        if let att {
            fields["att_status"] = att
            fields["idfa"] = Self.q(Self.idfa)
        }
        let values = try form(try request(adjust, Self.event("session", fields)))
        #expect(values["tracking_enabled"] == tracking && values["att_status"] == nil, "\(values)")
        let current = try form(try request(adjust, Self.event("session", ["os_version": Self.q("14.5")])))
        #expect(current["att_status"] == "2" && current["tracking_enabled"] == nil)
    }

    /// A dual-stack server writes a client's IPv4 address mapped into IPv6: still IPv4.
    @Test func anIPv4MappedAddressIsSentAsIPv4() throws {
        let values = try form(try request(adjust, Self.event("session", ["ip": Self.q("::ffff:198.51.100.4")])))
        #expect(values["ip_address"] == "198.51.100.4")
        let v6 = try form(try request(adjust, Self.event("session", ["ip": Self.q("2001:db8::1")])))
        #expect(v6["ip_address"] == nil)
    }

    @Test func adjustEventUsesTheAppsEventToken() throws {
        let sent = try request(adjust, Self.event("event", ["name": Self.q("level_up")]))
        #expect(sent.url == "http://vendor.test/event")
        let values = try form(sent)
        #expect(values["event_token"] == "lvl1")
        #expect(values["app_token"] == "apptok")
        #expect(values["created_at_unix"] == "1700000000")
    }

    @Test func adjustPurchaseCarriesRevenueAndStringCallbackParams() throws {
        let body = Self.event(
            "purchase",
            [
                "revenue": "9.99", "currency": Self.q("USD"),
                "properties": #"{"plan":"annual & more","trial":false,"seats":3}"#,
            ])
        let values = try form(try request(adjust, body))
        #expect(values["event_token"] == "pur1")
        #expect(values["revenue"] == "9.99")
        #expect(values["currency"] == "USD")
        let params = try JSONValue.parse(Data(try #require(values["callback_params"]).utf8))
        #expect(
            params == .object(["plan": .string("annual & more"), "trial": .string("false"), "seats": .string("3")]))
    }

    /// Adjust refuses revenue below 0.001 ("Invalid revenue"): a free trial's purchase
    /// still reaches it, as the event without an amount.
    @Test(arguments: [("0", nil), ("0.0009", nil), ("0.001", "0.001")] as [(String, String?)])
    func adjustGetsAPurchaseBelowItsSmallestRevenueWithoutTheAmount(revenue: String, sent: String?) throws {
        let body = Self.event("purchase", ["revenue": revenue, "currency": Self.q("USD")])
        let values = try form(try request(adjust, body))
        #expect(values["event_token"] == "pur1")
        #expect(values["revenue"] == sent)
        #expect(values["currency"] == (sent == nil ? nil : "USD"))
    }

    @Test func adjustRefusesWhatAdjustWouldRefuse() throws {
        let day: TimeInterval = 24 * 3600
        let recent = Self.event(
            "event",
            ["name": Self.q("level_up"), "timestamp": String(Int(receivedAt.timeIntervalSince1970 - 57 * day))])
        #expect(try refusal(adjust, recent) == nil)
        let old = Self.event("event", ["name": Self.q("level_up")])
        #expect(try refusal(adjust, old, now: receivedAt.addingTimeInterval(59 * day)) != nil)
        #expect(try refusal(adjust, Self.event("event", ["name": Self.q("tutorial_done")])) != nil)
        #expect(try refusal(adjust, Self.event("session", ["app_id": Self.q("999")])) != nil)
    }

    @Test func adjustOutcomes() {
        #expect(verdict(adjust, 200, "OK") == .delivered)
        #expect(verdict(adjust, 451) == .declined, "opted out is final, never retried, not counted as delivered")
        #expect(verdict(adjust, 202) == .retry)
        #expect(verdict(adjust, 400, #"{"error":"Event request failed (Invalid app token)"}"#) == .reject)
        #expect(verdict(adjust, 500) == .retry)
        // A device Adjust has not learned yet is waited for, for six hours; an unknown app
        // token is mended only in config.
        let notFound = #"{"error":"Event request failed (Device not found)"}"#
        #expect(verdict(adjust, 404, notFound, age: .seconds(5 * 3600)) == .retry)
        #expect(verdict(adjust, 404, notFound, age: .seconds(6 * 3600)) == .reject)
        #expect(verdict(adjust, 404, #"{"error":"Event request failed (App token not found)"}"#) == .reject)
    }

    // MARK: consent

    static let consentCases = [(2, idfa, false), (3, idfa, true), (3, zeroIDFA, false)]

    @Test(arguments: consentCases)
    func idfaReachesVendorsOnlyWhenAllowed(att: Int, idfa: String, forwarded: Bool) throws {
        let body = Self.event(
            "event",
            [
                "name": Self.q("level_up"), "att_status": String(att), "idfa": Self.q(idfa),
                "vendor_ids": "{\"appsflyer_id\":\"\(Self.appsFlyerID)\"}",
            ])
        let stored = try record(body)
        #expect(stored.idfa == (forwarded ? idfa : nil))
        #expect(stored.attStatus == att)
        #expect((stored.raw?["idfa"] != nil) == forwarded)
        let sent: [VendorRequest] = [
            try request(singular, body), try request(appsFlyer, body), try request(adjust, body),
        ]
        for request in sent {
            let text =
                request.url + request.headers.map { $0.0 + $0.1 }.joined()
                + String(decoding: request.body ?? Data(), as: UTF8.self)
            #expect(text.uppercased().contains(idfa) == forwarded, "\(request.url)")
        }
    }

    // MARK: intake

    static let faults: [(String, String)] = [
        (event("session", ["colour": q("red")]), "colour"),
        (#"{"app_id":"123456789"}"#, "type"),
        (event("event"), "name"),
        (event("purchase", ["currency": q("USD")]), "revenue"),
        (event("purchase", ["revenue": "9.99", "currency": q("usd")]), "currency"),
        (event("session", ["att_status": "7"]), "att_status"),
        (event("session", ["idfv": q("not-a-uuid")]), "idfv"),
        (event("session", ["ip": q("203.0.113.300")]), "ip"),
        (event("session", ["timestamp": "1700000000000"]), "timestamp"),
        (event("session", ["vendor_ids": #"{"appsflyer_id":"1700000000000-123"}"#]), "vendor_ids.appsflyer_id"),
        ("[" + event("session") + "," + event("session", ["att_status": "7"]) + "]", "[1].att_status"),
        // A property's name is held to the values' length, and named by its place.
        (
            event("event", ["name": q("e"), "properties": "{\"" + String(repeating: "k", count: 5000) + "\": 1}"]),
            "properties"
        ),
    ]

    @Test(arguments: faults)
    func intakeNamesTheFaultyField(body: String, field: String) {
        #expect(intakeError(body)?.field == field)
    }

    @Test func revenueTextMustBeANumber() {
        for text in ["1,50", "9.99abc", "0x10", "--1", ""] {
            #expect(
                intakeError(Self.event("purchase", ["revenue": Self.q(text), "currency": Self.q("EUR")]))?.field
                    == "revenue", "\(text)")
        }
        #expect(intakeError(Self.event("purchase", ["revenue": Self.q("4.99"), "currency": Self.q("EUR")])) == nil)
    }

    @Test func aBatchHoldsAtMostAThousandEvents() throws {
        let events = { (count: Int) in
            "[" + Array(repeating: Self.event("session"), count: count).joined(separator: ",") + "]"
        }
        #expect(try records(events(1000)).count == 1000)
        let tooMany = intakeError(events(1001))
        #expect(
            tooMany?.code == .invalidField && tooMany?.field == nil
                && tooMany?.message.contains("holds 1001; at most 1000") == true,
            "\(String(describing: tooMany))")
        // About the whole body, not one field: none is named.
        #expect(intakeError("[]").map { $0.code == .invalidField && $0.field == nil } == true)
    }

    @Test func aResentEventKeepsItsDedupeKey() throws {
        let first =
            #"{"type":"event","name":"level_up","app_id":"123456789","timestamp":1699999000,"idfv":"\#(Self.idfv)"}"#
        let again =
            #"{"idfv":"\#(Self.idfv)","timestamp":1699999000,"app_id":"123456789","name":"level_up","type":"event"}"#
        let other =
            #"{"type":"event","name":"level_up","app_id":"123456789","timestamp":1699999001,"idfv":"\#(Self.idfv)"}"#
        let key = try record(first).dedupeKey
        #expect(try record(again, at: receivedAt.addingTimeInterval(3600)).dedupeKey == key)
        #expect(try record(other).dedupeKey != key)
    }

    @Test func aPurchaseIsDedupedByItsTransaction() throws {
        let purchase = { (transaction: String, ip: String, eventID: String?) in
            var fields = [
                "revenue": "9.99", "currency": Self.q("USD"), "transaction_id": Self.q(transaction), "ip": Self.q(ip),
            ]
            fields["event_id"] = eventID.map(Self.q)
            return Self.event("purchase", fields)
        }
        let key = try record(purchase("2000000001", "203.0.113.7", "evt-1")).dedupeKey
        // The key the store's upgrade gives purchases stored under their event id.
        #expect(key == "s2s:123456789:purchase:2000000001")
        #expect(try record(purchase("2000000001", "198.51.100.2", "evt-1")).dedupeKey == key)
        // A backend's retry under a new event id, or none, is still that one purchase.
        #expect(try record(purchase("2000000001", "203.0.113.7", "evt-1-retry")).dedupeKey == key)
        #expect(try record(purchase("2000000001", "203.0.113.7", nil)).dedupeKey == key)
        #expect(try record(purchase("2000000002", "203.0.113.7", "evt-1")).dedupeKey != key)
    }

    @Test func sessionsWithoutATimestampAreDistinctByArrival() throws {
        let session = Self.event("session")
        #expect(try record(session).dedupeKey != record(session, at: receivedAt.addingTimeInterval(1)).dedupeKey)
    }

    // MARK: callbacks

    func callback(_ vendor: Vendor, body: String = "", query: [String: String] = [:], at date: Date? = nil) throws
        -> AttributionRecord
    {
        let payload = IngestPayload(
            body: Data(body.utf8), receivedAt: date ?? receivedAt, path: "/v1/s2s/\(vendor.rawValue)/callbacks",
            query: query,
            contentType: body.isEmpty ? nil : "application/json")
        return try VendorCallback.normalize(payload, vendor: vendor)
    }

    static func appsFlyerInstall(mediaSource: String = "Apple Search Ads", campaignID: String = "15292426") -> String {
        """
        {"event_name":"install","media_source":"\(mediaSource)","campaign":"Brand","af_c_id":"\(campaignID)",
         "af_adset":"Exact","af_adset_id":"15307675","af_keywords":"calm app","install_time":"2023-11-01 04:05:07.925",
         "attributed_touch_time":"2023-11-01 03:59:01.000","attributed_touch_type":"click","app_id":"id123456789",
         "customer_user_id":"user-1","idfv":"\(idfv)","appsflyer_id":"\(appsFlyerID)","country_code":"gb"}
        """
    }

    @Test func appsFlyerPushInstallBecomesAnAttributedInstall() throws {
        let install = try callback(.appsflyer, body: Self.appsFlyerInstall())
        #expect(install.kind == .install)
        #expect(install.attributed)
        #expect(install.provider == "s2s")
        #expect(install.network == "Apple Search Ads")
        #expect(install.campaignName == "Brand")
        #expect(install.campaignID == 15_292_426)
        #expect(install.adGroupName == "Exact")
        #expect(install.adGroupID == 15_307_675)
        #expect(install.keyword == "calm app")
        #expect(abs((install.conversionDate?.timeIntervalSince1970 ?? 0) - 1_698_811_507.925) < 0.001)
        #expect(install.clickDate == Date(timeIntervalSince1970: 1_698_811_141))
        #expect(install.appID == "123456789")
        #expect(install.appUserID == "user-1")
        #expect(install.idfv == Self.idfv)
        #expect(install.countryOrRegion == "GB")
        let named = try callback(.appsflyer, body: Self.appsFlyerInstall(campaignID: "brand_q4"))
        #expect(named.campaignID == nil && named.campaignName == "Brand")
    }

    @Test func appsFlyerOrganicInstallHasNoCampaign() throws {
        let install = try callback(.appsflyer, body: Self.appsFlyerInstall(mediaSource: "organic"))
        #expect(install.kind == .install)
        #expect(!install.attributed)
        #expect(install.campaignName == nil && install.campaignID == nil && install.keyword == nil)
    }

    static let adjustInstall = [
        "activity_kind": "install", "network_name": "Apple Search Ads", "campaign_name": "Brand",
        "adgroup_name": "Exact",
        "installed_at": "1698811507", "is_organic": "0", "adid": "0123456789abcdef0123456789abcdef", "idfv": idfv,
    ]

    @Test func adjustGetCallbackBecomesAnInstall() throws {
        let install = try callback(.adjust, query: Self.adjustInstall)
        #expect(install.kind == .install)
        #expect(install.attributed)
        #expect(install.network == "Apple Search Ads")
        #expect(install.campaignName == "Brand")
        #expect(install.adGroupName == "Exact")
        #expect(install.conversionDate == Date(timeIntervalSince1970: 1_698_811_507))
        #expect(install.idfv == Self.idfv)
        // Adjust's own device id is the record's, for a forget to name.
        #expect(install.vendorIDs == ["adid": "0123456789abcdef0123456789abcdef"])
    }

    @Test func aReattributionConvertsWhenItHappensNotAtTheFirstInstall() throws {
        let reattribution = Self.adjustInstall.merging([
            "activity_kind": "reattribution", "campaign_name": "Winback", "reattributed_at": "1772323200",
        ]) { $1 }
        let record = try callback(.adjust, query: reattribution)
        #expect(record.kind == .reinstall)
        #expect(record.conversionDate == Date(timeIntervalSince1970: 1_772_323_200))
    }

    @Test func placeholdersAVendorHadNoValueForAreAbsentNotRefused() throws {
        // Adjust sends a placeholder it has nothing for as an empty value.
        let empty = Self.adjustInstall.merging(["click_time": "", "country": "", "adgroup_name": ""]) { $1 }
        let install = try callback(.adjust, query: empty)
        #expect(install.attributed && install.campaignName == "Brand")
        #expect(install.clickDate == nil && install.adGroupName == nil && install.countryOrRegion == nil)
        let organic = Self.adjustInstall.merging(["is_organic": "", "network_name": "Organic", "campaign_name": ""]) {
            $1
        }
        #expect(try !callback(.adjust, query: organic).attributed)
        // AppsFlyer sends null.
        let nulls = Self.appsFlyerInstall().replacingOccurrences(
            of: #""attributed_touch_time":"2023-11-01 03:59:01.000""#, with: #""attributed_touch_time":null"#)
        #expect(nulls.contains(#""attributed_touch_time":null"#))
        #expect(try callback(.appsflyer, body: nulls).clickDate == nil)
    }

    @Test func callbackTimesWithTheirOffsetsHoweverTheQueryCarriedThem() throws {
        let noon = try #require(ISO8601.parse("2026-11-23T11:00:00Z"))
        for text in [
            "2026-11-23T12:00:00+01:00", "2026-11-23T12:00:00 01:00", "2026-11-23 12:00:00 +0100",
            "2026-11-23 12:00:00+0100", "2026-11-23 06:00:00-05:00", "2026-11-23 11:00:00", "2026-11-23 11:00:00.000Z",
        ] {
            #expect(CallbackTime.parse(.string(text)) == noon, "\(text)")
        }
        #expect(CallbackTime.parse(.string("2026-11-23 12:00")) == nil)
        // Out of any app's life, however written: no earliest touch from year 1.
        for text in ["0001-01-01T00:00:00Z", "9999-12-31 23:59:59", "0", "1700000000000"] {
            #expect(CallbackTime.parse(.string(text)) == nil, "\(text)")
        }
        // In a callback, such a placeholder is no time: the install is kept without it.
        let placeholder = Self.adjustInstall.merging(["installed_at": "0001-01-01T00:00:00Z"]) { $1 }
        #expect(try callback(.adjust, query: placeholder).conversionDate == nil)
        // Through the route: `+01:00` unencoded in Adjust's URL reads as " 01:00".
        let query = Self.adjustInstall.merging(["installed_at": "2026-11-23T12:00:00 01:00"]) { $1 }
        #expect(try callback(.adjust, query: query).conversionDate == noon)
    }

    @Test func adjustClickIsNotAnAttributionResult() {
        let click = Self.adjustInstall.merging(["activity_kind": "click"]) { $1 }
        #expect(throws: GatewayError.self) { try callback(.adjust, query: click) }
    }

    @Test func singularCallbackBecomesAnInstall() throws {
        let body = #"""
            {"event_name":"install","network":"Apple Search Ads","campaign":"Brand","install_utc_timestamp":1698811507,
             "is_organic":0,"idfv":"\#(Self.idfv)"}
            """#
        let install = try callback(.singular, body: body)
        #expect(install.kind == .install)
        #expect(install.attributed)
        #expect(install.network == "Apple Search Ads")
        #expect(install.campaignName == "Brand")
        #expect(install.conversionDate == Date(timeIntervalSince1970: 1_698_811_507))
        #expect(install.idfv == Self.idfv)
    }

    @Test func aRepeatedCallbackKeepsItsDedupeKey() throws {
        let key = try callback(.appsflyer, body: Self.appsFlyerInstall()).dedupeKey
        #expect(
            try callback(.appsflyer, body: Self.appsFlyerInstall(), at: receivedAt.addingTimeInterval(600)).dedupeKey
                == key)
        let otherDevice = Self.appsFlyerInstall().replacingOccurrences(
            of: Self.appsFlyerID, with: "1700000000000-7654321")
        #expect(try callback(.appsflyer, body: otherDevice).dedupeKey != key)
        #expect(
            try callback(.adjust, query: Self.adjustInstall).dedupeKey
                == callback(.adjust, query: Self.adjustInstall, at: now).dedupeKey)
    }

    @Test func aCallbackKeepsNoAdvertisingIDTheUserDidNotAllow() throws {
        // AppsFlyer sends no ATT status, so its IDFA (in any spelling) is not kept, and no
        // device key falls back to it.
        let body = Self.appsFlyerInstall()
            .replacingOccurrences(of: #""appsflyer_id":"\#(Self.appsFlyerID)","#, with: "")
            .replacingOccurrences(of: #""idfv":"\#(Self.idfv)","#, with: "")
            .replacingOccurrences(of: #""customer_user_id":"user-1","#, with: "")
            .replacingOccurrences(
                of: "{", with: #"{"idfa":"\#(Self.idfa)","idfa_md5":"0f0f","advertising_id":"\#(Self.idfa)","#)
        #expect(throws: GatewayError.self) { try callback(.appsflyer, body: body) }
        let withUser = body.replacingOccurrences(of: "{", with: #"{"customer_user_id":"user-1","#)
        let record = try callback(.appsflyer, body: withUser)
        let everything = try String(decoding: AttributionRecord.makeEncoder().encode(record), as: UTF8.self)
        #expect(record.idfa == nil)
        #expect(!everything.contains(Self.idfa) && !everything.contains("0f0f"))
    }

    @Test func inAppEventsAndSessionsAreNotAttributionResults() {
        let event = Self.appsFlyerInstall().replacingOccurrences(
            of: #""event_name":"install""#, with: #""event_name":"af_purchase""#)
        #expect(throws: GatewayError.self) { try callback(.appsflyer, body: event) }
        var session = Self.adjustInstall
        session["activity_kind"] = "session"
        #expect(throws: GatewayError.self) { try callback(.adjust, query: session) }
    }

    @Test func twoAlikeUntimedEventsInOneRequestAreTwoRecords() throws {
        let alike = Self.event("session")
        let keys = try records("[\(alike),\(alike)]").map(\.dedupeKey)
        #expect(Set(keys).count == 2)
    }
}

/// `replay` may queue any record for a vendor: kinds it does not take are declined, not sent.
@Suite struct VendorKindTests {
    @Test func aRefundReplayedToAVendorIsDeclinedWithoutARequest() async throws {
        let body = S2SVendorFormatTests.event(
            "refund",
            [
                "transaction_id": S2SVendorFormatTests.q("t-1"), "revenue": "9.99",
                "currency": S2SVendorFormatTests.q("USD"),
            ])
        let payload = IngestPayload(body: Data(body.utf8), receivedAt: Date(), path: "/v1/events")
        let refund = try #require(try S2SProvider(options: .init()).normalize(payload).first)
        #expect(refund.kind == .refund)
        // Nothing listens on port 9: a request would be a retry, not a decline.
        var settings = S2SVendorFormatTests.settings(.appsflyer, key: "AFKEY")
        settings.endpoint = "http://127.0.0.1:9"
        let sink = VendorSink(
            adapter: AppsFlyerAdapter(settings: settings), settings: settings, logger: .init(label: "test"))
        let outcomes = try await sink.deliver([refund])
        guard case .declined(let reason)? = outcomes.first else {
            Issue.record("expected a decline, got \(outcomes)")
            return
        }
        #expect(reason.contains("takes no refund records"))
    }

    /// After a forget, `replay` still finds the user's records, their ids replaced by
    /// stand-ins: sent, the stand-in IDFV would be a new device at the vendor.
    @Test func aForgottenUsersEventReplayedToAVendorIsDeclinedWithoutARequest() async throws {
        let body = S2SVendorFormatTests.event("session")
        let payload = IngestPayload(body: Data(body.utf8), receivedAt: Date(), path: "/v1/events")
        let session = try #require(try S2SProvider(options: .init()).normalize(payload).first)
        var sweep = ForgetSweep(ForgetSubject(appID: "123456789", idfv: S2SVendorFormatTests.idfv))
        #expect(sweep.matches(session))
        sweep.add(session)
        let forgotten = try #require(sweep.reduced().first)
        #expect(forgotten.idfv?.hasPrefix("forgotten-") == true)
        var settings = S2SVendorFormatTests.settings(.adjust, key: "ADJUSTKEY")
        settings.endpoint = "http://127.0.0.1:9"
        let sink = VendorSink(
            adapter: AdjustAdapter(settings: settings), settings: settings, logger: .init(label: "test"))
        let outcomes = try await sink.deliver([session, forgotten])
        guard case .declined(let reason)? = outcomes.last else {
            Issue.record("expected a decline, got \(outcomes)")
            return
        }
        #expect(reason.contains("the user was forgotten"))
        // The same event unforgotten is sent: nothing listens, so it is retried.
        guard case .retry? = outcomes.first else {
            Issue.record("expected a retry of the unforgotten event, got \(outcomes)")
            return
        }
    }

    @Test func anEventWithoutConsentQueuedForAVendorThatNeedsItIsDeclinedWithoutARequest() async throws {
        let body = S2SVendorFormatTests.event("event", ["name": S2SVendorFormatTests.q("level_up"), "att_status": "2"])
        let payload = IngestPayload(body: Data(body.utf8), receivedAt: Date(), path: "/v1/events")
        let event = try #require(try S2SProvider(options: .init()).normalize(payload).first)
        var settings = S2SVendorFormatTests.settings(.appsflyer, key: "AFKEY")
        settings.endpoint = "http://127.0.0.1:9"
        settings.requireConsent = true
        let sink = VendorSink(
            adapter: AppsFlyerAdapter(settings: settings), settings: settings, logger: .init(label: "test"))
        guard case .declined(let reason)? = try await sink.deliver([event]).first else {
            Issue.record("expected a decline")
            return
        }
        #expect(reason.contains("consented events only"))
    }
}
