import Foundation
import GatewayCore
import GatewayStorage
import GRDB

/// Writes records into a queryable, indexed `attribution_records` table, idempotently by
/// `record_id`. By default it uses the gateway's own SQLite file.
public final class SQLiteSink: AttributionSink {
    /// The rows one transaction writes, for the table and the view alike.
    static let batchLimit = 500
    public let maxBatchSize = batchLimit
    let pool: DatabasePool
    /// Whether rows hold the payload as it arrived; the store keeps it compressed anyway,
    /// and it is the largest part of a row.
    let keepsRaw: Bool

    /// The columns indexed unless the config's `indexes` says otherwise.
    public static let defaultIndexes = SQLiteSinkTable.defaultIndexed

    /// Opens (or creates) the table in `path`, with an index on each of `indexes`; with
    /// `raw` false, rows leave the `raw` column empty.
    public init(path: String, indexes: [String] = SQLiteSink.defaultIndexes, raw: Bool = true) throws {
        pool = try SQLiteDatabase.pool(path: path)
        keepsRaw = raw
        try pool.write { db in try SQLiteSinkTable.prepare(db, indexed: indexes) }
    }

    /// Each row succeeds or fails on its own: a row SQLite refuses for what it holds (a
    /// trigger's `RAISE`, a constraint an operator added) is dead-lettered alone, at once,
    /// as retrying the same row cannot help; another error retries that row alone. A
    /// failure that undoes the whole transaction (a full disk) retries them all.
    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        let rows = try records.map { StatementArguments(try Self.row($0, raw: keepsRaw)) }
        return try await pool.write { db in
            try rows.map { row -> DeliveryOutcome in
                do {
                    // From the cache for each row: GRDB drops a statement whose run failed
                    // (SQLite could not reset it), and one held across rows would fail
                    // every row after the refused one with the same error.
                    try db.cachedStatement(sql: SQLiteSinkTable.upsertSQL).execute(arguments: row)
                    return .delivered
                } catch let error as DatabaseError {
                    // Statement atomicity undid this row only, unless SQLite rolled the
                    // transaction back, when the rows before it are gone as well.
                    guard db.isInsideTransaction else { throw error }
                    let reason = "row not written: SQLite error \(error.resultCode.rawValue): \(error.message ?? "")"
                    return error.resultCode == .SQLITE_CONSTRAINT ? .reject(reason: reason) : .retry(reason: reason)
                }
            }
        }
    }

    /// Deletes the user's rows: the records the store found, and any row of the app that
    /// names one of the user's ids (a row whose record retention has deleted since).
    /// Freed space is zeroed, so that the ids do not stay readable in the file.
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        let ids = request.identifiers
        // The rows naming the ids are looked for in a read: unless the operator indexed
        // those columns it reads the whole table, and a write would hold ingest that long.
        let named = try await pool.read { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT record_id FROM \(SQLiteSinkTable.name) WHERE app_id = ?1 AND (
                        app_user_id IN (SELECT value FROM json_each(?2)) OR idfv IN (SELECT value FROM json_each(?3))
                        OR idfa IN (SELECT value FROM json_each(?4)))
                    """,
                arguments: [
                    request.appID, SQLiteStore.jsonArray(ids.appUserIDs), SQLiteStore.jsonArray(ids.idfvs),
                    SQLiteStore.jsonArray(ids.idfas),
                ])
        }
        try await pool.write { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
            defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
            try db.execute(
                sql: "DELETE FROM \(SQLiteSinkTable.name) WHERE record_id IN (SELECT value FROM json_each(?1))",
                arguments: [SQLiteStore.jsonArray(ids.recordIDs + named)])
        }
        return .done
    }

    /// The record's fields spread over the table's columns, by JSON name: dates as
    /// ISO-8601 text, amounts as REAL, `raw` and `events` as JSON text. Existentials
    /// rather than `[DatabaseValue]`: GRDB reads those through a key path, and converting
    /// one array to the other casts every element; either was a third of the upsert.
    /// `encoded`, when given, supplies the text of `raw` and `events`; with `raw` false,
    /// `raw` stays NULL.
    static func row(_ record: AttributionRecord, encoded: EncodedRecord? = nil, raw: Bool) throws
        -> [(any DatabaseValueConvertible)?]
    {
        var values = [(any DatabaseValueConvertible)?](repeating: nil, count: SQLiteSinkTable.columns.count)
        for (name, value) in record.fields where raw || name != "raw" {
            guard let column = SQLiteSinkTable.columnIndex[name] else { continue }
            values[column] =
                switch value {
                case .string(let s): s.databaseValue
                case .integer(let n): n.databaseValue
                case .bool(let b): (b ? 1 : 0).databaseValue
                case .decimal(let d): d.doubleThroughText.databaseValue
                case .date(let date): ISO8601.format(date).databaseValue
                case .json, .strings: (encoded?.jsonText(of: name) ?? AttributionRecord.jsonText(value)).databaseValue
                }
        }
        return values
    }
}

extension SQLiteSink: InlineDeliverable {
    /// On the store's own file (the default), rows are written with their records.
    public func inlineDelivery(sinkName: String, into store: SQLiteStore) -> InlineDelivery? {
        guard pool === store.pool else { return nil }
        let raw = keepsRaw
        return InlineDelivery(sink: sinkName, sql: SQLiteSinkTable.upsertSQL) { record, encoded in
            StatementArguments(try Self.row(record, encoded: encoded, raw: raw))
        }
    }
}

/// Registers the SQLite sink as `type: sqlite`.
public enum SQLiteSinkPlugin: SinkPlugin {
    public struct Options: Sendable {
        public var path: String
        /// The columns that get an index (JSON field names); `record_id`, the key, always has one.
        public var indexes: [String]
        /// `raw`: whether rows hold the payload as it arrived.
        public var raw: Bool
        /// `view`: whether the table is a view over the store's records (``SQLiteViewSink``).
        public var view: Bool
    }

    public static let typeName = "sqlite"

    public static func readOptions(_ reader: ConfigReader, context: SinkContext) -> Options? {
        let path = reader.filePath("path")
        guard let keys = DatabaseSinkKeys(reader) else { return nil }
        if keys.view {
            // A view can read only the tables of its own file, and no compressed payload.
            if context.storageURL != nil {
                reader.report("needs the store to be SQLite: the view reads its records", key: "view")
                return nil
            }
            if let path, Self.samePlace(path) != Self.samePlace(context.storagePath) {
                reader.report("needs the store's own file, so leave out path (\(path))", key: "view")
                return nil
            }
        }
        return Options(path: path ?? context.storagePath, indexes: keys.indexes, raw: keys.raw, view: keys.view)
    }

    /// A path as the file it names, so that `./store.sqlite` and its absolute path are one.
    static func samePlace(_ path: String) -> String { URL(fileURLWithPath: path).standardizedFileURL.path }

    public static func target(_ options: Options) -> SinkTarget? {
        SinkTarget(place: "attribution_records in \(samePlace(options.path))", kind: options.view ? "view" : "table")
    }

    public static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink {
        if options.view { return try SQLiteViewSink(path: options.path, indexes: options.indexes) }
        return try SQLiteSink(path: options.path, indexes: options.indexes, raw: options.raw)
    }

    public static func maxBatchSize(_ options: Options) -> Int? { SQLiteSink.batchLimit }

    public static func summary(_ options: Options) -> String {
        var table = "\(options.view ? "view" : "table") attribution_records in \(options.path)"
        if options.indexes != SQLiteSink.defaultIndexes {
            table +=
                options.indexes.isEmpty ? ", no indexes" : ", indexes on \(options.indexes.joined(separator: ", "))"
        }
        return options.raw || options.view ? table : table + ", without raw payloads"
    }
}
