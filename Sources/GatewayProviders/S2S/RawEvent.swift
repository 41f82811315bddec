import Foundation
import GatewayCore

#if canImport(Glibc)
    import Glibc
#endif

/// One session, event, purchase or refund as a backend posts it to `POST /v1/events`, checked.
///
/// The same reading serves intake and the vendor adapters, which read the stored event
/// back from the record's `raw`: what a vendor receives is exactly what was validated,
/// and the consent rule is applied both times.
public struct RawEvent: Sendable {
    public enum EventType: String, Sendable, CaseIterable {
        case session, event, purchase, refund
    }

    public var type: EventType
    public var name: String?
    public var appID: String
    public var bundleID: String?
    public var appUserID: String?
    public var eventID: String?
    /// IDFV, ATT status, and the IDFA only when the user allowed it.
    var device: DeviceFields
    public var ip: String?
    public var userAgent: String?
    public var osVersion: String?
    public var deviceModel: String?
    public var locale: String?
    public var appVersion: String?
    public var timestamp: Date?
    public var revenue: Decimal?
    public var currency: String?
    public var transactionID: String?
    public var productID: String?
    public var adServicesToken: String?
    public var skanConversionValue: Int?
    public var skanFirstCallTimestamp: Int64?
    public var skanLastCallTimestamp: Int64?
    /// SKAN 4 or later, or AdAttributionKit: the app's values follow the postback windows.
    public var skanWindowed: Bool?
    /// The current window's coarse value the app has set (SKAN 4).
    public var skanCoarseValue: String?
    public var vendorIDs: [String: String]
    /// Flat event attributes: strings, numbers and booleans.
    public var properties: [String: JSONValue]
    /// The event as it is stored: as received, minus an IDFA the user did not allow.
    public var stored: [String: JSONValue]

    public var idfv: String? { device.idfv }
    public var idfa: String? { device.idfa }
    public var attStatus: Int? { device.attStatus }

    /// The keys an event may have; anything else is refused, so that a misspelt
    /// `att_status` cannot silently drop consent.
    static let knownKeys: Set<String> = [
        "type", "name", "app_id", "bundle_id", "app_user_id", "event_id", "idfv", "idfa", "att_status", "ip",
        "user_agent", "os_version", "device_model", "locale", "app_version", "timestamp", "revenue", "currency",
        "transaction_id", "product_id", "adservices_token", "skan_conversion_value", "skan_first_call_timestamp",
        "skan_last_call_timestamp", "skan_version", "skan_coarse_value", "vendor_ids", "properties",
    ]
    static let maxProperties = 50
    static let maxTokenLength = 16 * 1024
    /// The times an event may have, in Unix seconds: from 2008, the App Store's first
    /// year, to 2100. Past it, seconds are almost surely milliseconds, and an ISO date
    /// such as `0001-01-01` reached Singular as a negative `utime` and AppsFlyer as
    /// another day.
    static let unixSecondsWindow = PayloadFields.plausibleSeconds

    public init(_ fields: PayloadFields) throws {
        for key in fields.object.keys.sorted() where !Self.knownKeys.contains(key) {
            throw GatewayError.invalid(fields.fieldPath(key), "unknown field")
        }
        guard let typeName = try fields.string("type") else { throw GatewayError.missing(fields.fieldPath("type")) }
        guard let type = EventType(rawValue: typeName) else {
            throw GatewayError.invalid(fields.fieldPath("type"), "expected session, event, purchase or refund")
        }
        self.type = type
        name = try fields.string("name")
        if type == .event, name == nil { throw GatewayError.missing(fields.fieldPath("name")) }
        appID = try fields.requiredString("app_id")
        bundleID = try fields.string("bundle_id")
        appUserID = try fields.string("app_user_id")
        eventID = try fields.string("event_id")
        device = try DeviceFields(fields)
        ip = try fields.string("ip")
        if let ip, !Self.isIPAddress(ip) {
            throw GatewayError.invalid(fields.fieldPath("ip"), "expected an IPv4 or IPv6 address")
        }
        userAgent = try fields.string("user_agent")
        osVersion = try fields.string("os_version")
        deviceModel = try fields.string("device_model")
        locale = try fields.string("locale")
        appVersion = try fields.string("app_version")
        timestamp = try Self.timestamp(fields, "timestamp")
        revenue = try Self.amount(fields, "revenue")
        currency = try fields.string("currency")
        if let currency, currency.count != 3 || !currency.unicodeScalars.allSatisfy({ ("A"..."Z").contains($0) }) {
            throw GatewayError.invalid(fields.fieldPath("currency"), "expected an ISO 4217 code such as USD")
        }
        if revenue != nil, currency == nil { throw GatewayError.missing(fields.fieldPath("currency")) }
        if type == .purchase, revenue == nil { throw GatewayError.missing(fields.fieldPath("revenue")) }
        transactionID = try fields.string("transaction_id")
        // A refund is only worth its purchase's name: without it nothing can be given back.
        if type == .refund, transactionID == nil { throw GatewayError.missing(fields.fieldPath("transaction_id")) }
        productID = try fields.string("product_id")
        adServicesToken = try Self.token(fields, "adservices_token")
        skanConversionValue = try fields.int("skan_conversion_value", in: 0...63)
        skanFirstCallTimestamp = try Self.unixSeconds(fields, "skan_first_call_timestamp")
        skanLastCallTimestamp = try Self.unixSeconds(fields, "skan_last_call_timestamp")
        if let version = try fields.string("skan_version") {
            guard let windowed = ConversionModel.isWindowed(skanVersion: version) else {
                throw GatewayError.invalid(
                    fields.fieldPath("skan_version"), "expected a SKAdNetwork version such as 4.0, or aak")
            }
            // Windows are counted from the first call: without it no window can be told.
            if windowed, skanFirstCallTimestamp == nil {
                let field = fields.fieldPath("skan_first_call_timestamp")
                throw GatewayError(
                    .missingField, "\(field) is required with skan_version 4 and later: the windows count from it",
                    field: field)
            }
            skanWindowed = windowed
        }
        skanCoarseValue = try fields.string("skan_coarse_value")
        if let coarse = skanCoarseValue, !ConversionModel.coarseLevels.contains(coarse) {
            throw GatewayError.invalid(fields.fieldPath("skan_coarse_value"), "expected low, medium or high")
        }
        vendorIDs = try Self.vendorIDs(fields)
        properties = try Self.properties(fields)

        stored = device.scrubbed(fields.object)
    }

    /// Reads a stored event back (from a record's `raw`).
    public init(stored: JSONValue?) throws {
        guard let object = stored?.objectValue else {
            throw GatewayError(.invalidField, "the record holds no event")
        }
        try self.init(PayloadFields(object))
    }

    /// When it happened: the event's own timestamp, else when the gateway received it.
    public func occurredAt(receivedAt: Date) -> Date {
        timestamp ?? receivedAt
    }

    /// The app's SKAdNetwork state as the event reports it, for the conversion model; nil
    /// for an event that says nothing of SKAdNetwork (no `skan_*` field), whose app is
    /// taken not to use it, and for a refund. A session is the model's `__SESSION__`
    /// whatever its name, an unnamed purchase `purchase`; the revenue is the event's own.
    public var skanState: ConversionModel.AppState? {
        guard type != .refund,
            skanConversionValue != nil || skanFirstCallTimestamp != nil || skanLastCallTimestamp != nil
                || skanWindowed != nil || skanCoarseValue != nil
        else { return nil }
        let event = type == .session ? "__SESSION__" : name ?? type.rawValue
        var revenue: [String: Decimal] = [:]
        if let amount = self.revenue, let currency { revenue[currency] = amount }
        var timing = ConversionModel.AppState.Timing.skan3(lastCall: skanLastCallTimestamp.map(Double.init))
        if skanWindowed == true, let first = skanFirstCallTimestamp { timing = .windowed(firstCall: Double(first)) }
        return ConversionModel.AppState(
            event: event, revenue: revenue, fineValue: skanConversionValue ?? 0, coarseValue: skanCoarseValue,
            timing: timing)
    }

    /// The IPv4 address, also when written IPv4-mapped (`::ffff:198.51.100.4`, as a
    /// dual-stack server logs a client's): the vendors that take only IPv4 get it.
    public var ipv4: String? {
        guard let ip, ip.contains(".") else { return nil }
        guard ip.contains(":") else { return ip }
        let mapped = ip.lowercased()
        guard mapped.hasPrefix("::ffff:"), case let tail = String(ip.dropFirst(7)), !tail.contains(":") else {
            return nil
        }
        return tail
    }

    // MARK: field readers

    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// An ISO-8601 date or Unix seconds.
    static func timestamp(_ fields: PayloadFields, _ key: String) throws -> Date? {
        guard let value = fields.value(key) else { return nil }
        switch value {
        case .string:
            guard let date = try fields.date(key) else { return nil }
            _ = try seconds(date.timeIntervalSince1970, fields.fieldPath(key))
            return date
        case .integer(let n):
            return try seconds(Double(n), fields.fieldPath(key))
        case .double(let d):
            return try seconds(d, fields.fieldPath(key))
        default:
            throw GatewayError.invalid(
                fields.fieldPath(key), "expected an ISO-8601 date or Unix seconds, found \(value.typeName)")
        }
    }

    static func seconds(_ value: Double, _ field: String) throws -> Date {
        guard unixSecondsWindow.contains(value) else {
            throw GatewayError.invalid(
                field,
                "expected a time from 2008 to 2100, in Unix seconds (not milliseconds) or ISO-8601, found \(value)")
        }
        return Date(timeIntervalSince1970: value)
    }

    static func unixSeconds(_ fields: PayloadFields, _ key: String) throws -> Int64? {
        guard let n = try fields.id(key) else { return nil }
        _ = try seconds(Double(n), fields.fieldPath(key))
        return n
    }

    /// A non-negative amount from a number or a numeric string, kept in decimal.
    static func amount(_ fields: PayloadFields, _ key: String) throws -> Decimal? {
        guard let value = fields.value(key) else { return nil }
        let amount: Decimal?
        switch value {
        case .integer(let n): amount = Decimal(n)
        // The shortest text of a double is what the sender wrote (9.99, not 9.9900000000000002).
        case .double(let d): amount = d.isFinite ? Decimal(string: String(d)) : nil
        // Decimal(string:) would read "9.99abc" as 9.99: only plain decimals are amounts.
        case .string(let s) where s.wholeMatch(of: /[0-9]{1,15}(\.[0-9]{1,10})?/) != nil:
            amount = Decimal(string: s, locale: Locale(identifier: "en_US_POSIX"))
        default: amount = nil
        }
        guard let amount, amount >= 0 else {
            throw GatewayError.invalid(fields.fieldPath(key), "expected a non-negative amount such as 4.99")
        }
        return amount
    }

    /// The AdServices token: longer than ordinary fields allow, and Base64.
    static func token(_ fields: PayloadFields, _ key: String) throws -> String? {
        guard let value = fields.value(key) else { return nil }
        guard case .string(let token) = value, !token.isEmpty else {
            throw GatewayError.invalid(
                fields.fieldPath(key), "expected the Base64 token from AAAttribution.attributionToken()")
        }
        guard token.utf8.count <= maxTokenLength, Data(base64Encoded: token) != nil else {
            throw GatewayError.invalid(
                fields.fieldPath(key), "expected the Base64 token from AAAttribution.attributionToken()")
        }
        return token
    }

    static func vendorIDs(_ fields: PayloadFields) throws -> [String: String] {
        guard let ids = try fields.object("vendor_ids") else { return [:] }
        var result: [String: String] = [:]
        for key in ids.object.keys {
            guard let value = try ids.string(key) else { continue }
            result[key] = value
        }
        // Checked here so that a backend hears of a malformed id at once, not from a dead letter.
        if let id = result["appsflyer_id"], !matches(id, digits: [13, 7], separator: "-") {
            throw GatewayError.invalid(
                ids.fieldPath("appsflyer_id"), "expected AppsFlyer's id, 13 digits, '-', 7 digits")
        }
        if let adid = result["adid"], adid.count != 32 || !adid.allSatisfy(\.isHexDigit) {
            throw GatewayError.invalid(ids.fieldPath("adid"), "expected Adjust's adid, 32 hexadecimal digits")
        }
        return result
    }

    static func matches(_ text: String, digits groups: [Int], separator: Character) -> Bool {
        let parts = text.split(separator: separator, omittingEmptySubsequences: false)
        return parts.count == groups.count
            && zip(parts, groups).allSatisfy { part, count in part.count == count && part.isASCIIDigits }
    }

    static func properties(_ fields: PayloadFields) throws -> [String: JSONValue] {
        guard let object = try fields.object("properties") else { return [:] }
        guard object.object.count <= maxProperties else {
            throw GatewayError.invalid(fields.fieldPath("properties"), "at most \(maxProperties) properties")
        }
        for (key, value) in object.object {
            // Names are held to the length values are (and named by their place, not
            // echoed: the key itself is what is too long).
            guard PayloadFields.fitsLengthLimit(key), !key.utf8.contains(0) else {
                throw GatewayError.invalid(
                    fields.fieldPath("properties"),
                    "a property name is longer than \(PayloadFields.maxStringLength) characters or holds a NUL")
            }
            switch value {
            case .string(let s) where PayloadFields.fitsLengthLimit(s): continue
            case .integer, .double, .bool: continue
            default:
                throw GatewayError.invalid(
                    object.fieldPath(key),
                    "properties are flat: strings (up to \(PayloadFields.maxStringLength) characters), numbers or booleans"
                )
            }
        }
        return object.object
    }
}
