import Foundation
import GatewayCore
import GatewayPostgres
import NIOCore
import PostgresNIO

/// The `attribution_records` table in PostgreSQL: the SQLite sink's columns, same names,
/// with PostgreSQL's own types (booleans, `timestamptz`, exact `numeric` amounts, `jsonb`)
/// so that analysts' SQL reads them naturally.
enum PostgresSinkTable {
    static let name = SQLiteSinkTable.name

    static let booleans: Set<String> = ["attributed", "is_test", "did_win", "redownload"]
    static let dates: Set<String> = [
        "received_at", "click_date", "impression_date", "conversion_date", "purchase_date", "enriched_at",
    ]
    static let amounts: Set<String> = ["revenue", "revenue_min", "revenue_max"]
    static let documents: Set<String> = ["events", "vendor_ids", "raw"]

    static let columns: [(name: String, type: String)] = SQLiteSinkTable.columns.map { column in
        let type: String
        if booleans.contains(column.name) {
            type = "boolean"
        } else if dates.contains(column.name) {
            type = "timestamptz"
        } else if amounts.contains(column.name) {
            type = "numeric"
        } else if documents.contains(column.name) {
            type = "jsonb"
        } else {
            type = column.type == "INTEGER" ? "bigint" : "text"
        }
        return (column.name, type)
    }

    /// Creates the table, adds the columns it lacks (a newer gateway's fields) and the
    /// indexes on `indexed`, and drops the sink's own indexes on columns no longer listed
    /// (each is written with every row), under an advisory lock so that replicas starting
    /// together do not race on the catalogue. Indexes an operator made under other names stay.
    static func prepare(_ client: PostgresClient, indexed: [String], logger: Logger) async throws {
        try await client.withConnection { connection in
            try await withAdvisoryLock(0x4154_5452_4757_0002, on: connection, logger: logger) {
                try await create(on: connection, indexed: indexed, logger: logger)
            }
        }
    }

    /// What `attribution_records` is in the current schema (`r` a table, `v` a view), nil
    /// when there is none.
    static func kind(on connection: PostgresConnection, logger: Logger) async throws -> String? {
        let rows = try await connection.query(
            """
            SELECT relkind::text FROM pg_class
            WHERE relname = \(name) AND relnamespace = current_schema()::regnamespace
            """, logger: logger)
        for try await kind in rows.decode(String.self) { return kind }
        return nil
    }

    private static func create(on connection: PostgresConnection, indexed: [String], logger: Logger) async throws {
        if try await kind(on: connection, logger: logger) == "v" {
            throw SinkSetupError(
                reason: "\(name) is a view here (a postgres sink with view: true made it); "
                    + "give every sink on this database the same view setting, or drop the view, which holds no rows")
        }
        let definitions = columns.map { column in
            column.name == "record_id" ? "record_id text PRIMARY KEY" : "\(column.name) \(column.type)"
        }
        _ = try await connection.query(
            PostgresQuery(unsafeSQL: "CREATE TABLE IF NOT EXISTS \(name) (\(definitions.joined(separator: ", ")))"),
            logger: logger)
        var existing: Set<String> = []
        for try await column in try await connection.query(
            "SELECT column_name::text FROM information_schema.columns WHERE table_name = \(name) AND table_schema = current_schema()",
            logger: logger
        ).decode(String.self) {
            existing.insert(column)
        }
        for column in columns where !existing.contains(column.name) {
            _ = try await connection.query(
                PostgresQuery(unsafeSQL: "ALTER TABLE \(name) ADD COLUMN \(column.name) \(column.type)"),
                logger: logger)
        }
        // A sink that was a view left its indexes on `records` under these names, where the
        // table's would not be made and the store would keep writing them.
        for index in try await PostgresSinkView.indexesOnRecords(on: connection, logger: logger).keys {
            _ = try await connection.query(PostgresQuery(unsafeSQL: "DROP INDEX IF EXISTS \(index)"), logger: logger)
        }
        let wanted = Set(indexed)
        for column in columns.map(\.name) where !wanted.contains(column) {
            _ = try await connection.query(
                PostgresQuery(unsafeSQL: "DROP INDEX IF EXISTS \(SQLiteSinkTable.indexName(column))"), logger: logger)
        }
        for column in indexed {
            _ = try await connection.query(
                PostgresQuery(
                    unsafeSQL:
                        "CREATE INDEX IF NOT EXISTS \(SQLiteSinkTable.indexName(column)) ON \(name) (\(column))"),
                logger: logger)
        }
    }

    /// `INSERT … ON CONFLICT (record_id) DO UPDATE`: a re-delivery or a late version of the
    /// same record overwrites its row.
    /// For `rows` records at once, their parameters one record after another.
    static func upsertSQL(rows: Int) -> String {
        let names = columns.map(\.name)
        let tuples = (0..<rows).map { row in
            let values = columns.enumerated().map { index, column in
                let parameter = "$\(row * columns.count + index + 1)"
                return documents.contains(column.name) ? parameter + "::jsonb" : parameter
            }
            return "(" + values.joined(separator: ", ") + ")"
        }
        let updates = names.dropFirst().map { "\($0) = EXCLUDED.\($0)" }
        return """
            INSERT INTO \(name) (\(names.joined(separator: ", "))) VALUES \(tuples.joined(separator: ", "))
            ON CONFLICT (record_id) DO UPDATE SET \(updates.joined(separator: ", "))
            """
    }

    static let columnIndex = Dictionary(uniqueKeysWithValues: columns.enumerated().map { ($1.name, $0) })

    /// The record's fields as the statement's parameters, in column order; absent fields
    /// NULL, and `raw` too unless `raw`.
    static func bindings(_ records: [AttributionRecord], raw: Bool) throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: columns.count * records.count)
        for record in records { try append(record, raw: raw, to: &bindings) }
        return bindings
    }

    private static func append(_ record: AttributionRecord, raw: Bool, to bindings: inout PostgresBindings) throws {
        var values = [AttributionRecord.FieldValue?](repeating: nil, count: columns.count)
        for (name, value) in record.fields where raw || name != "raw" {
            if let index = columnIndex[name] { values[index] = value }
        }
        for value in values {
            switch value {
            case nil: bindings.appendNull()
            case .string(let text)?: bindings.append(text)
            case .integer(let number)?: bindings.append(number)
            case .bool(let flag)?: bindings.append(flag)
            case .decimal(let amount)?: try bindings.append(amount)
            case .date(let date)?: bindings.append(Timestamp(date: date))
            case .json(let document)?: bindings.append(AttributionRecord.jsonText(.json(document)))
            case .strings(let list)?: bindings.append(AttributionRecord.jsonText(.strings(list)))
            }
        }
    }
}

/// A date as PostgreSQL's `timestamptz` to the nearest microsecond. PostgresNIO's own
/// encoding truncates, and a time such as 07.123 is a fraction under its microseconds in
/// binary, so it landed on 07.122999.
struct Timestamp: PostgresNonThrowingEncodable {
    static var psqlType: PostgresDataType { .timestamptz }
    static var psqlFormat: PostgresFormat { .binary }
    /// PostgreSQL counts from 2000-01-01, a leap year before the reference date.
    static let referenceDateInPostgres: Double = 366 * 86_400

    let date: Date

    func encode<Encoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<Encoder>)
    {
        let seconds = date.timeIntervalSinceReferenceDate + Self.referenceDateInPostgres
        buffer.writeInteger(Int64((seconds * 1_000_000).rounded()))
    }
}
