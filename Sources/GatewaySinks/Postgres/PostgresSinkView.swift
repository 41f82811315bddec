import Foundation
import GatewayCore
import GatewayPostgres
import PostgresNIO

/// `attribution_records` in PostgreSQL as a view over the store's own `records`
/// (`view: true`), as ``SQLiteSinkView`` is in SQLite: the table's columns with their
/// types, read out of each delivered record's body, and the list of delivered records in
/// `attribution_records_rows`.
enum PostgresSinkView {
    static let name = PostgresSinkTable.name
    static let rows = SQLiteSinkView.rows

    /// The SQL giving `column` from a row of `records`, cast to the table's type.
    /// `table` names `records` in the query (an index's expression names no table).
    static func expression(_ column: (name: String, type: String), table: String = "") -> String {
        if EncodedRecord.keptApart.contains(column.name) { return table + column.name }
        let document = "gateway_json(\(table)body)"
        let text = "(\(document) ->> '\(column.name)')"
        switch (column.name, column.type) {
        case ("raw", _): return "NULL::jsonb"
        case (_, "jsonb"): return "(\(document) -> '\(column.name)')"
        case (_, "text"): return text
        case (_, "timestamptz"): return "gateway_time\(text)"
        default: return "(\(text)::\(column.type))"
        }
    }

    /// Creates the list and the view, and the listed indexes as indexes on `records`, under
    /// the table's lock; refuses a database whose `attribution_records` is a table.
    static func prepare(_ client: PostgresClient, indexed: [String], logger: Logger) async throws {
        try await client.withConnection { connection in
            try await withAdvisoryLock(0x4154_5452_4757_0002, on: connection, logger: logger) {
                try await create(on: connection, indexed: indexed, logger: logger)
            }
        }
    }

    private static func create(on connection: PostgresConnection, indexed: [String], logger: Logger) async throws {
        if try await PostgresSinkTable.kind(on: connection, logger: logger) == "r" {
            throw SinkSetupError(
                reason: "\(name) is a table here (a postgres sink without view: true wrote it); "
                    + "copy what you need and drop it, or keep the sink a table")
        }
        let columns = PostgresSinkTable.columns.map { "\(expression($0, table: "r.")) AS \($0.name)" }
        // In one transaction, so that a query of the view meanwhile waits rather than fails.
        for statement in [
            "BEGIN",
            // Text to timestamptz depends on the session's time zone, so PostgreSQL indexes no
            // such cast; the gateway's dates name theirs (`Z`), which makes this one immutable.
            """
            CREATE OR REPLACE FUNCTION gateway_time(text) RETURNS timestamptz LANGUAGE sql IMMUTABLE
                AS $$ SELECT $1::timestamptz $$
            """,
            "CREATE TABLE IF NOT EXISTS \(rows) (seq bigint PRIMARY KEY)",
            "DROP VIEW IF EXISTS \(name)",
            """
            CREATE VIEW \(name) AS SELECT \(columns.joined(separator: ", "))
            FROM \(rows) d JOIN records r ON r.seq = d.seq
            """,
            "COMMIT",
        ] {
            _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
        let wanted = Set(indexed)
        for column in PostgresSinkTable.columns {
            let index = SQLiteSinkTable.indexName(column.name)
            let sql =
                wanted.contains(column.name) && column.name != "raw"
                ? "CREATE INDEX IF NOT EXISTS \(index) ON records ((\(expression(column))))"
                : "DROP INDEX IF EXISTS \(index)"
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        }
    }
}

/// `type: postgres` with `view: true`: `attribution_records` is a view over the store's
/// own records, so a record is written once; delivering one lists its place.
public final class PostgresViewSink: AttributionSink {
    public let maxBatchSize = 500
    let connection: PostgresSinkClient
    let logger: Logger
    var client: PostgresClient { connection.client }

    /// Connects to the store's database and makes the view, with an index on each of `indexes`.
    public init(url: PostgresURL, indexes: [String], logger: Logger) async throws {
        connection = try await PostgresSinkClient(url, logger: logger) { client in
            try await PostgresSinkView.prepare(client, indexed: indexes, logger: logger)
        }
        self.logger = logger
    }

    public func shutdown() async {
        connection.shutdown()
    }

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        guard !records.isEmpty else { return [] }
        let ids = records.map(\.recordID)
        _ = try await client.query(
            """
            INSERT INTO attribution_records_rows (seq) SELECT seq FROM records WHERE record_id = ANY(\(ids)::text[])
            ON CONFLICT DO NOTHING
            """, logger: logger)
        return Array(repeating: .delivered, count: records.count)
    }

    /// The store has taken the user's ids out of their records already; their rows leave
    /// the view too, as they would leave a table.
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        let ids = request.identifiers.recordIDs
        _ = try await client.query(
            """
            DELETE FROM attribution_records_rows
            WHERE seq IN (SELECT seq FROM records WHERE record_id = ANY(\(ids)::text[]))
            """, logger: logger)
        return .done
    }
}
