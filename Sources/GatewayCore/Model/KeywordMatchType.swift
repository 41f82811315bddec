/// A keyword's match type in one spelling, the Apple Ads API's (`EXACT`, `BROAD`), whatever
/// the source wrote: iAd's dictionaries say `Exact` and `Broad`, vendors' callbacks and
/// reports vary, and two spellings split one keyword in `report keywords` and in Mixpanel.
public enum KeywordMatchType {
    /// `text` upper-cased, with runs of spaces, hyphens and underscores as one underscore
    /// (iAd's "search match" is `SEARCH_MATCH`); nil when it is blank.
    public static func normalized(_ text: String) -> String? {
        let words = text.uppercased().split { $0 == " " || $0 == "-" || $0 == "_" || $0.isNewline || $0 == "\t" }
        return words.isEmpty ? nil : words.joined(separator: "_")
    }

    public static func normalized(_ text: String?) -> String? {
        text.flatMap(normalized)
    }
}
