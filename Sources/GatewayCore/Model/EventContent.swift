import Foundation

/// A posted event's content in one spelling, for the key of an event with neither a
/// transaction nor an `event_id`: a backend's resend that writes a field another way (a
/// time as ISO-8601 with an offset or as Unix seconds, an IDFV in lower case, an amount
/// as a string) is the same event, not a second one forwarded to the vendors.
public enum EventContent {
    /// The S2S provider's key for an event known by its content (`s2s:APP:event:HASH`), and
    /// the store's upgrade's for the events keyed before: one rule for both. With
    /// `received`, the arrival joins the content (an event with no time of its own): its
    /// time and place in the request, and for a live one (`arrivalID`, the record's id)
    /// what no other arrival has, since two requests alike arrive in one millisecond.
    /// `sha256Hex` is the caller's: this module has no cryptography.
    public static func dedupeKey(
        appID: String, stored: [String: JSONValue], received: (Date, Int)?, arrivalID: String? = nil,
        sha256Hex: (String) -> String
    ) -> String {
        var content = canonicalText(stored)
        if let (receivedAt, index) = received { content += "@\(ISO8601.format(receivedAt))#\(index)" }
        if received != nil, let arrivalID { content += "/" + arrivalID }
        return DedupeKey.make("s2s", appID, "event", sha256Hex(content))
    }

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
        case ("timestamp", .string(let text)):
            if let seconds = seconds(iso: text) { return .string(seconds) }
        case ("timestamp", .integer(let seconds)):
            return .string(String(seconds))
        case ("timestamp", .double(let seconds)):
            return .string(decimal(String(seconds)))
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

    /// Unix seconds as a decimal with every digit the time was written with (never rounded:
    /// two events a microsecond apart are two events), without trailing zeros. An ISO-8601
    /// time's whole seconds come from its date and offset, its fraction from its text, so
    /// that `…:03.1231Z` and `1795168803.1231` are one time. (A JSON number keeps what a
    /// double holds, about a microsecond at today's times: so it always has.)
    static func seconds(iso text: String) -> String? {
        guard let date = ISO8601.parse(text) else { return nil }
        var fraction = ""
        // ISO-8601 allows a comma before the fraction as well as a point.
        if let t = text.firstIndex(where: { $0 == "T" || $0 == "t" || $0 == " " }),
            let dot = text[t...].firstIndex(where: { $0 == "." || $0 == "," })
        {
            fraction = String(text[text.index(after: dot)...].prefix(while: { $0.isASCII && $0.isNumber }))
        }
        let fractionValue = Double("0." + (fraction.isEmpty ? "0" : fraction)) ?? 0
        let whole = Int64((date.timeIntervalSince1970 - fractionValue).rounded())
        return decimal("\(whole).\(fraction)")
    }

    /// `123.4500` as `123.45`, `123.0` and `123.` as `123`.
    static func decimal(_ text: String) -> String {
        guard text.contains("."), !text.contains("e"), !text.contains("E") else { return text }
        var trimmed = Substring(text)
        while trimmed.last == "0" { trimmed = trimmed.dropLast() }
        if trimmed.last == "." { trimmed = trimmed.dropLast() }
        return String(trimmed)
    }
}
