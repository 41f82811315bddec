import Crypto
import Foundation

/// When an install named its line, as text that orders as (time, record id) do: the
/// newest install's names are then a database's `MAX` of it.
public enum ReportStamp {
    public static func text(_ time: Date, _ recordID: String) -> String {
        let bits = time.timeIntervalSinceReferenceDate.bitPattern
        // A double's bits order as its value once negative ones are flipped whole and the
        // sign bit of the others is set.
        let ordered = bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
        let hex = String(ordered, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex + recordID
    }

    /// The time and record id of a ``text(_:_:)``; nil for other text.
    public static func parse(_ text: String) -> (time: Date, recordID: String)? {
        guard text.utf8.count >= 16, let ordered = UInt64(text.prefix(16), radix: 16) else { return nil }
        let bits = ordered & (1 << 63) != 0 ? ordered & ~(1 << 63) : ~ordered
        return (Date(timeIntervalSinceReferenceDate: Double(bitPattern: bits)), String(text.dropFirst(16)))
    }
}

/// An attribution or a line as the index keys it: the SHA-256 of every field (absent ones
/// as null), so that a key has one length however long the names an app sends (a database's
/// index refuses keys past a few kilobytes), and names the report holds equal are one key.
public enum ReportAttributionKey {
    public static func text(_ attribution: KeywordReport.Attribution) -> String {
        let fields: [String?] = [
            attribution.appID, attribution.network, attribution.campaignID.map(String.init), attribution.campaign,
            attribution.adGroupID.map(String.init), attribution.adGroup, attribution.keywordID.map(String.init),
            attribution.keyword, attribution.matchType,
        ]
        let data = (try? JSONEncoder().encode(fields.map { $0.map(ReportText.canonical) })) ?? Data()
        return SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }
}

/// Text as the report compares it: Swift's `String` holds canonically equivalent texts
/// equal (`á` typed as one character or as `a` and an accent), so a database keys them by
/// one form, NFC.
public enum ReportText {
    public static func canonical(_ text: String) -> String {
        text.utf8.allSatisfy { $0 < 0x80 } ? text : text.precomposedStringWithCanonicalMapping
    }
}
