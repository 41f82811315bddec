/// The one-character keys a PostgreSQL store writes a body's fields under
/// (``AttributionRecord/encoded(codedKeys:)``): a field's name is most of its bytes there,
/// and PostgreSQL compresses nothing in a row under 2 KB. No code is a field's name, as every
/// name is longer, so a body reads the same whichever keys it has.
///
/// Bodies keep their codes: never change one, and give a new field the next one.
public enum StoredKey {
    /// Each field's code, in the order the fields were given one.
    static let table: [(name: String, code: String)] = {
        let names = [
            "record_id", "received_at", "provider", "app_id", "app_user_id", "idfv", "idfa", "att_status",
            "attributed", "kind", "resolution", "is_test", "duplicate_of", "network", "org_id", "org_name",
            "campaign_id", "campaign_name", "ad_group_id", "ad_group_name", "keyword_id", "keyword",
            "keyword_match_type", "ad_id", "creative_set_id", "creative_set_name", "country_or_region",
            "conversion_type", "claim_type", "supply_placement", "click_date", "impression_date",
            "conversion_date", "purchase_date", "skan_version", "ad_network_id", "transaction_id",
            "source_app_id", "source_identifier", "source_domain", "fine_value", "coarse_value",
            "postback_sequence_index", "did_win", "fidelity_type", "redownload", "signature", "events",
            "revenue_min", "revenue_max", "event_name", "revenue", "currency", "transaction_ref", "vendor_ids",
            "raw", "dedupe_key", "enriched_at",
        ]
        let codes = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".map(String.init)
        return zip(names, codes).map { (name: $0, code: $1) }
    }()

    private static let codes = Dictionary(uniqueKeysWithValues: table.map { ($0.name, $0.code) })
    private static let names = Dictionary(uniqueKeysWithValues: table.map { ($0.code, $0.name) })

    /// The code of the field `name`; the name itself for a field without one.
    public static func code(of name: String) -> String { codes[name] ?? name }

    /// The field a key of a body names: the field of a code, or the key itself.
    public static func name(of key: String) -> String { names[key] ?? key }

    /// A body's members under their fields' names: those under a code renamed, the others
    /// as they are.
    static func named(_ body: [String: JSONValue]) -> [String: JSONValue] {
        guard isCoded(body) else { return body }
        return Dictionary(body.map { (name(of: $0.key), $0.value) }) { coded, _ in coded }
    }

    /// Whether a body has any field under a code: names are longer than one character.
    static func isCoded(_ body: [String: JSONValue]) -> Bool {
        body.keys.contains { $0.utf8.count == 1 }
    }

    /// Every field's name with its code, as the schema's `gateway_record` spells them out.
    public static var all: [(name: String, code: String)] { table }
}
