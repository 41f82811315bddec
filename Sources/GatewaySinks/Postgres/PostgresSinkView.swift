import Crypto
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
        // The store keeps it as seconds since 1970; the record's JSON gives it to the millisecond.
        if column.name == "received_at" { return "to_timestamp(floor(\(table)received_at * 1000 + 0.5) / 1000)" }
        let text = BodyField.text(column.name, of: table + "body")
        let read =
            switch (column.name, column.type) {
            case ("raw", _): "NULL::jsonb"
            case (_, "jsonb"): BodyField.json(column.name, of: table + "body")
            case (_, "text"): text
            case (_, "timestamptz"): "gateway_time\(text)"
            default: "(\(text)::\(column.type))"
            }
        // A body leaves out a field holding its usual value; the view gives it back.
        switch EncodedRecord.codedDefaults[column.name] {
        case .bool(let flag): return "COALESCE(\(read), \(flag))"
        case .string(let value): return "COALESCE(\(read), '\(value)')"
        default: return read
        }
    }

    /// Creates the list and the view, and the listed indexes as indexes on `records`, under
    /// the table's lock; refuses a database whose `attribution_records` is a table.
    static func prepare(_ client: PostgresClient, indexed: [String], logger: Logger) async throws {
        try await client.withConnection { connection in
            try await withAdvisoryLock(0x4154_5452_4757_0002, on: connection, logger: logger) {
                let kind = try await PostgresSinkTable.kind(on: connection, logger: logger)
                if kind == "r" {
                    throw SinkSetupError(
                        reason: "\(name) is a table here (a postgres sink without view: true wrote it); "
                            + "copy what you need and drop it, or keep the sink a table")
                }
                try await makeView(on: connection, replacing: kind == "v", logger: logger)
                try await makeIndexes(on: connection, indexed: indexed, logger: logger)
            }
        }
    }

    static let definition = """
        SELECT \(PostgresSinkTable.columns.map { "\(expression($0, table: "r.")) AS \($0.name)" }.joined(separator: ", "))
        FROM \(rows) d JOIN records r ON r.seq = d.seq
        """

    /// Says which definition made the view, so that a start finding it as this version
    /// makes it leaves it alone: replacing a view waits for every transaction reading it.
    static let mark =
        "made by the postgres sink of the attribution gateway, "
        + SHA256.hash(data: Data(definition.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()

    /// Makes the view as this version defines it, unless it is already. `CREATE OR REPLACE`
    /// keeps the grants an operator gave on it and the views made on it, as fields are
    /// only ever added at its end.
    private static func makeView(on connection: PostgresConnection, replacing: Bool, logger: Logger) async throws {
        if replacing {
            let rows = try await connection.query(
                "SELECT obj_description(\(name)::regclass, 'pg_class')", logger: logger)
            for try await comment in rows.decode(String?.self) where comment == mark { return }
        }
        // In one transaction, so that a query of the view meanwhile waits rather than fails.
        for statement in [
            "BEGIN",
            // Text to timestamptz depends on the session's time zone, so PostgreSQL indexes no
            // such cast; the gateway's dates name theirs (`Z`), which makes this one immutable.
            """
            CREATE OR REPLACE FUNCTION gateway_time(text) RETURNS timestamptz LANGUAGE sql IMMUTABLE
                AS $$ SELECT $1::timestamptz $$
            """,
            // A record retention or a quarantine cap deletes leaves the list with it.
            "CREATE TABLE IF NOT EXISTS \(rows) (seq bigint PRIMARY KEY REFERENCES records (seq) ON DELETE CASCADE)",
            "CREATE OR REPLACE VIEW \(name) AS \(definition)",
            "COMMENT ON VIEW \(name) IS '\(mark)'",
            "COMMIT",
        ] {
            _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
    }

    /// The listed fields' indexes on `records`, made or dropped only where they differ from
    /// the list. `CONCURRENTLY`, so that ingest goes on while an index of a large store is
    /// built; one a failed build left invalid is built again, and so is one of an expression
    /// the view no longer reads (its comment names the expression), which no query would use.
    private static func makeIndexes(on connection: PostgresConnection, indexed: [String], logger: Logger)
        async throws
    {
        let existing = try await indexesOnRecords(on: connection, logger: logger)
        let wanted = Set(indexed)
        for column in PostgresSinkTable.columns {
            let index = SQLiteSinkTable.indexName(column.name)
            let reads = expression(column)
            let valid = existing[index].map { $0.valid && $0.comment == reads }
            var statements: [String] = []
            if valid != nil && (valid == false || !wanted.contains(column.name)) {
                statements.append("DROP INDEX CONCURRENTLY IF EXISTS \(index)")
            }
            if wanted.contains(column.name) && column.name != "raw" && valid != true {
                statements.append("CREATE INDEX CONCURRENTLY IF NOT EXISTS \(index) ON records ((\(reads)))")
                statements.append("COMMENT ON INDEX \(index) IS \(literal(reads))")
            }
            for statement in statements {
                _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
        }
    }

    /// `text` as an SQL string literal.
    static func literal(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }

    /// The sink's indexes on `records` by name (``SQLiteSinkTable/indexName(_:)``), each
    /// with whether it is valid and its comment: a view made them, and a table sink drops them.
    static func indexesOnRecords(on connection: PostgresConnection, logger: Logger) async throws
        -> [String: (valid: Bool, comment: String?)]
    {
        let names = PostgresSinkTable.columns.map { SQLiteSinkTable.indexName($0.name) }
        let rows = try await connection.query(
            """
            SELECT c.relname::text, i.indisvalid, obj_description(c.oid, 'pg_class') FROM pg_index i
            JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
            WHERE t.relname = 'records' AND t.relnamespace = current_schema()::regnamespace
                AND c.relname = ANY(\(names)::text[])
            """, logger: logger)
        var indexes: [String: (valid: Bool, comment: String?)] = [:]
        for try await (index, valid, comment) in rows.decode((String, Bool, String?).self) {
            indexes[index] = (valid, comment)
        }
        return indexes
    }
}

/// `type: postgres` with `view: true`: `attribution_records` is a view over the store's
/// own records, so a record is written once; delivering one lists its place.
public final class PostgresViewSink: AttributionSink {
    public let maxBatchSize = PostgresSink.batchLimit
    let connection: PostgresSinkClient
    let logger: Logger

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

    /// The list of delivered records, which the store writes with each commit when the
    /// sink is inline (``PostgresStore/listInline(sink:table:)``).
    public var listTable: String { PostgresSinkView.rows }

    /// Lists the batch in one statement; one the server refuses is listed a record at a
    /// time, so that a record a trigger or constraint of the list refuses is rejected alone,
    /// as a table sink's row is (``PostgresSink/outcome(of:)``).
    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        guard !records.isEmpty else { return [] }
        return try await PostgresSink.writeEachOnRefusal(records) { try await list($0.map(\.recordID)) }
    }

    private func list(_ ids: [String]) async throws {
        try await connection.execute(
            """
            INSERT INTO attribution_records_rows (seq) SELECT seq FROM gateway_records(\(ids)::text[])
            ON CONFLICT DO NOTHING
            """, logger: logger)
    }

    /// The store has taken the user's ids out of their records already; their rows leave
    /// the view too, as they would leave a table.
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        let ids = request.identifiers.recordIDs
        try await connection.execute(
            """
            DELETE FROM attribution_records_rows
            WHERE seq IN (SELECT seq FROM gateway_records(\(ids)::text[]))
            """, logger: logger)
        return .done
    }
}
