import GatewayCore

/// The keys the `sqlite` and `postgres` sinks read alike: which columns to index, whether
/// rows hold the raw payload, and whether the table is a view over the store's records.
struct DatabaseSinkKeys {
    var indexes: [String]
    var raw: Bool
    var view: Bool

    /// `nil` once it has reported a view asked to hold raw payloads, which it cannot.
    init?(_ reader: ConfigReader) {
        // The key's own unique index serves `record_id` already.
        indexes =
            reader.choices("indexes", SQLiteSinkTable.columns.map(\.name)).map { $0.filter { $0 != "record_id" } }
            ?? SQLiteSink.defaultIndexes
        view = reader.bool("view") ?? false
        let raw = reader.bool("raw")
        if view && raw == true {
            reader.report("a view has no raw payloads: the store keeps them compressed", key: "raw")
            return nil
        }
        self.raw = raw ?? !view
    }
}
