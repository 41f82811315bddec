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

/// An attribution or a line as the index keys it: every field, absent ones as null.
public enum ReportAttributionKey {
    public static func text(_ attribution: KeywordReport.Attribution) -> String {
        let fields: [String?] = [
            attribution.appID, attribution.network, attribution.campaignID.map(String.init), attribution.campaign,
            attribution.adGroupID.map(String.init), attribution.adGroup, attribution.keywordID.map(String.init),
            attribution.keyword, attribution.matchType,
        ]
        let data = (try? JSONEncoder().encode(fields)) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
