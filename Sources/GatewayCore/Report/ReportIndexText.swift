import Crypto
import Foundation

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
