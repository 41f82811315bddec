import Foundation

/// A posted event's content in one spelling, for the key of an event with neither a
/// transaction nor an `event_id`: a backend's resend that writes a field another way (a
/// time as ISO-8601 with an offset or as Unix seconds, an IDFV in lower case, an amount
/// as a string) is the same event, not a second one forwarded to the vendors.
public enum EventContent {
    /// The stored event's fields as sorted JSON, each written one way; a null is no field.
    public static func canonicalText(_ object: [String: JSONValue]) -> String {
        var canonical: [String: JSONValue] = [:]
        for (key, value) in object where value != .null {
            canonical[key] = Self.canonical(key, value)
        }
        return JSONValue.object(canonical).jsonText
    }

    static func canonical(_ key: String, _ value: JSONValue) -> JSONValue {
        switch (key, value) {
        // Milliseconds: a fraction read from ISO-8601 text and the same one sent as a
        // number need not be the same double.
        case ("timestamp", .string(let text)):
            if let date = ISO8601.parse(text) { return milliseconds(date.timeIntervalSince1970) }
        case ("timestamp", .integer(let seconds)):
            return milliseconds(Double(seconds))
        case ("timestamp", .double(let seconds)):
            return milliseconds(seconds)
        case ("idfv", .string(let id)), ("idfa", .string(let id)):
            return .string(id.uppercased())
        case ("revenue", .integer(let amount)):
            return .string(Decimal(amount).description)
        case ("revenue", .double(let amount)):
            if amount.isFinite, let decimal = Decimal(string: String(amount)) { return .string(decimal.description) }
        case ("revenue", .string(let text)):
            if let decimal = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) {
                return .string(decimal.description)
            }
        default:
            break
        }
        return value
    }

    static func milliseconds(_ seconds: Double) -> JSONValue {
        let value = (seconds * 1000).rounded()
        return value.magnitude < 9e15 ? .integer(Int64(value)) : .double(seconds)
    }
}
