/// The keys of the Apple Ads names cache (`apple_ads_names`): one spelling for the
/// enricher that fills it and reads it, `keywords import`, and the keyword report.
public enum AppleAdsNameKey {
    public static func keyword(_ id: Int64) -> String { "keyword:\(id)" }
    public static func adGroup(_ id: Int64) -> String { "adgroup:\(id)" }
    public static func campaign(_ id: Int64) -> String { "campaign:\(id)" }
}
