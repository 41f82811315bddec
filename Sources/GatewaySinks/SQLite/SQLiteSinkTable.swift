import GRDB

/// The `attribution_records` table: one column per record field, named as in the JSON.
///
/// The table only ever grows: on start the sink adds the columns it lacks, so a newer
/// gateway adds fields to an older file without a migration step.
enum SQLiteSinkTable {
    static let name = "attribution_records"

    /// Every record field, with its SQLite type. Dates are ISO-8601 text (UTC) so that
    /// they sort and read well in `sqlite3`; `events` and `raw` are JSON text.
    static let columns: [(name: String, type: String)] = [
        ("record_id", "TEXT"), ("received_at", "TEXT"), ("provider", "TEXT"), ("app_id", "TEXT"),
        ("app_user_id", "TEXT"), ("idfv", "TEXT"), ("idfa", "TEXT"), ("att_status", "INTEGER"),
        ("attributed", "INTEGER"), ("kind", "TEXT"), ("resolution", "TEXT"), ("is_test", "INTEGER"),
        ("duplicate_of", "TEXT"),
        ("org_id", "INTEGER"), ("org_name", "TEXT"), ("campaign_id", "INTEGER"), ("campaign_name", "TEXT"),
        ("ad_group_id", "INTEGER"), ("ad_group_name", "TEXT"), ("keyword_id", "INTEGER"), ("keyword", "TEXT"),
        ("keyword_match_type", "TEXT"), ("ad_id", "INTEGER"), ("creative_set_id", "INTEGER"),
        ("creative_set_name", "TEXT"), ("country_or_region", "TEXT"), ("conversion_type", "TEXT"),
        ("claim_type", "TEXT"), ("supply_placement", "TEXT"), ("click_date", "TEXT"),
        ("impression_date", "TEXT"), ("conversion_date", "TEXT"), ("purchase_date", "TEXT"),
        ("skan_version", "TEXT"), ("ad_network_id", "TEXT"), ("transaction_id", "TEXT"),
        ("source_app_id", "TEXT"), ("source_identifier", "TEXT"), ("source_domain", "TEXT"),
        ("fine_value", "INTEGER"), ("coarse_value", "TEXT"), ("postback_sequence_index", "INTEGER"),
        ("did_win", "INTEGER"), ("fidelity_type", "INTEGER"), ("redownload", "INTEGER"), ("signature", "TEXT"),
        ("events", "TEXT"), ("revenue_min", "REAL"), ("revenue_max", "REAL"),
        ("event_name", "TEXT"), ("revenue", "REAL"), ("currency", "TEXT"), ("transaction_ref", "TEXT"),
        ("raw", "TEXT"), ("dedupe_key", "TEXT"), ("enriched_at", "TEXT"), ("network", "TEXT"),
        // Added columns go last: PostgreSQL's `CREATE OR REPLACE VIEW` takes new columns
        // only at the end.
        ("vendor_ids", "TEXT"),
    ]

    /// Each column's position in ``columns``, by name.
    static let columnIndex = Dictionary(uniqueKeysWithValues: columns.enumerated().map { ($1.name, $0) })

    /// The columns indexed unless the sink's `indexes` says otherwise. Only a forget request
    /// reads this table; `received_at` serves the docs' queries of recent records and
    /// costs a page per commit, since its keys arrive in order. An index on a column whose
    /// values arrive in random order (a user id, a keyword id) costs a page per row once it
    /// outgrows the cache, so those are the operator's to ask for.
    static let defaultIndexed = ["received_at"]

    /// The name of the index the sink keeps on `column`.
    static func indexName(_ column: String) -> String { "\(name)_\(column)" }

    /// Creates the table, adds missing columns, creates the indexes on `indexed` and drops
    /// the sink's own indexes (by ``indexName(_:)``) on columns no longer listed, since each
    /// index is written with every row. Indexes an operator created under other names stay.
    static func prepare(_ db: Database, indexed: [String] = defaultIndexed) throws {
        if try String.fetchOne(db, sql: "SELECT type FROM sqlite_master WHERE name = ?", arguments: [name]) == "view" {
            throw SQLiteSinkView.Conflict(
                description: "\(name) is a view here (a sqlite sink with view: true made it); "
                    + "give every sink on this file the same view setting, or drop the view, which holds no rows")
        }
        let definitions = columns.map { column in
            column.name == "record_id" ? "record_id TEXT PRIMARY KEY" : "\(column.name) \(column.type)"
        }
        try db.execute(sql: "CREATE TABLE IF NOT EXISTS \(name) (\(definitions.joined(separator: ", ")))")
        let existing = Set(try db.columns(in: name).map(\.name))
        for column in columns where !existing.contains(column.name) {
            try db.execute(sql: "ALTER TABLE \(name) ADD COLUMN \(column.name) \(column.type)")
        }
        // A sink that was a view left its indexes on `records` under these names, where the
        // table's would not be made and the store would keep writing them.
        let names = Set(columns.map { indexName($0.name) })
        for index in try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records'")
        where names.contains(index) {
            try db.execute(sql: "DROP INDEX \(index)")
        }
        let wanted = Set(indexed)
        for column in columns.map(\.name) where !wanted.contains(column) {
            try db.execute(sql: "DROP INDEX IF EXISTS \(indexName(column))")
        }
        for column in indexed {
            try db.execute(sql: "CREATE INDEX IF NOT EXISTS \(indexName(column)) ON \(name)(\(column))")
        }
        try applyDataSteps(db)
    }

    /// Changes to rows written by older versions, each run once per table; done ones are
    /// named in `attribution_records_steps`. Older versions ignore that table, as they do
    /// columns they do not know.
    static let dataSteps: [(name: String, sql: String)] = [
        // Rows written by older versions may hold in `raw` an IDFA sent without consent
        // (iAd) and an imported AdServices answer's IDFA and token.
        (
            "raw-without-unconsented-ids",
            """
            UPDATE \(name) SET raw = json_remove(raw, '$.idfa')
            WHERE provider = 'iad' AND idfa IS NULL AND json_valid(raw) AND json_type(raw, '$.idfa') IS NOT NULL;
            UPDATE \(name) SET raw = json_remove(raw, '$.apple.body.token')
            WHERE dedupe_key LIKE 'adservices:answer:%' AND json_valid(raw)
                AND json_type(raw, '$.apple.body.token') IS NOT NULL;
            UPDATE \(name) SET raw = json_remove(raw, '$.apple.body.idfa')
            WHERE dedupe_key LIKE 'adservices:answer:%' AND idfa IS NULL AND json_valid(raw)
                AND json_type(raw, '$.apple.body.idfa') IS NOT NULL;
            """
        )
    ]

    private static func applyDataSteps(_ db: Database) throws {
        try db.execute(
            sql: "CREATE TABLE IF NOT EXISTS \(name)_steps (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        let done = Set(try String.fetchAll(db, sql: "SELECT name FROM \(name)_steps"))
        for step in dataSteps where !done.contains(step.name) {
            try db.execute(sql: step.sql)
            try db.execute(
                sql: "INSERT INTO \(name)_steps (name, applied_at) VALUES (?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
                arguments: [step.name])
        }
    }

    /// `INSERT … ON CONFLICT(record_id) DO UPDATE`: a re-delivery or an update of the
    /// same record overwrites its row instead of adding one.
    static let upsertSQL: String = {
        let names = columns.map(\.name)
        let updates = names.dropFirst().map { "\($0) = excluded.\($0)" }
        return """
            INSERT INTO \(name) (\(names.joined(separator: ", "))) VALUES (\(names.map { _ in "?" }.joined(separator: ", ")))
            ON CONFLICT(record_id) DO UPDATE SET \(updates.joined(separator: ", "))
            """
    }()
}
