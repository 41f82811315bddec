import GRDB
import GatewayCore

/// `attribution_records` as a view over the store's own `records` (`view: true`): the
/// table's columns, read out of each record's body, for the records delivered to the
/// sink. A record is then written once; the sink keeps only which records it was given,
/// in `attribution_records_rows`.
///
/// A view holds no `raw` (the store keeps the payload compressed, which `sqlite3` cannot
/// read), takes no triggers of an operator's, and shows what the store holds now: a late
/// version at once, and nothing of a record that retention or a forget request removed.
enum SQLiteSinkView {
    static let name = SQLiteSinkTable.name
    static let rows = "\(SQLiteSinkTable.name)_rows"

    /// Why the view cannot be made.
    struct Conflict: Error, CustomStringConvertible {
        let description: String
    }

    /// The SQL giving `column` from a row of `records`. Fields the store keeps in columns
    /// come from those; the others from the body, as JSON text for JSON values and REAL
    /// for amounts, as the table holds them.
    /// `table` names `records` in the query (an index's expression names no table).
    static func expression(_ column: (name: String, type: String), table: String = "") -> String {
        if EncodedRecord.keptApart.contains(column.name) { return table + column.name }
        if column.name == "raw" { return "NULL" }
        let value = "json_extract(\(table)body, '$.\(column.name)')"
        return column.type == "REAL" ? "CAST(\(value) AS REAL)" : value
    }

    /// Creates the list of delivered records and the view (again, so that it has every
    /// field this version knows; a damaged body, which would fail every query of the
    /// view, leaves its row out), the indexes on `indexed` as indexes on `records` of the
    /// same expressions, and drops the sink's own indexes on fields no longer listed.
    /// Refuses a file whose `attribution_records` is a table: its rows would be lost.
    static func prepare(_ db: Database, indexed: [String]) throws {
        let existing = try String.fetchOne(db, sql: "SELECT type FROM sqlite_master WHERE name = ?", arguments: [name])
        if existing == "table" {
            throw Conflict(
                description: "\(name) is a table here (a sqlite sink without view: true wrote it); "
                    + "copy what you need and drop it, or keep the sink a table")
        }
        // A record retention or a quarantine cap deletes leaves the list with it.
        try db.execute(
            sql:
                "CREATE TABLE IF NOT EXISTS \(rows) (seq INTEGER PRIMARY KEY REFERENCES records (seq) ON DELETE CASCADE)"
        )
        let columns = SQLiteSinkTable.columns.map { "\(expression($0, table: "r.")) AS \($0.name)" }
        try db.execute(sql: "DROP VIEW IF EXISTS \(name)")
        try db.execute(
            sql: """
                CREATE VIEW \(name) AS SELECT \(columns.joined(separator: ", "))
                FROM \(rows) d JOIN records r ON r.seq = d.seq WHERE json_valid(r.body)
                """)
        let wanted = Set(indexed)
        for column in SQLiteSinkTable.columns.map(\.name) where !wanted.contains(column) {
            try db.execute(sql: "DROP INDEX IF EXISTS \(SQLiteSinkTable.indexName(column))")
        }
        for column in SQLiteSinkTable.columns where wanted.contains(column.name) && column.name != "raw" {
            try db.execute(
                sql:
                    "CREATE INDEX IF NOT EXISTS \(SQLiteSinkTable.indexName(column.name)) ON records (\(expression(column)))"
            )
        }
    }

    /// Adds one delivered record by its id; a record the store no longer holds adds nothing.
    static let deliverSQL = "INSERT OR IGNORE INTO \(rows) (seq) SELECT seq FROM records WHERE record_id = ?"
}
