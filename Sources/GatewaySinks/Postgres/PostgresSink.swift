import Foundation
import GatewayCore
import GatewayPostgres
import Logging
import PostgresNIO

/// Writes records into an `attribution_records` table in PostgreSQL (the gateway's own
/// database by default, or another `url`), idempotently by `record_id`, for analysts who
/// query with any SQL tool.
public final class PostgresSink: AttributionSink {
    /// The rows one statement writes, for the table and the view alike.
    static let batchLimit = 500
    public let maxBatchSize = batchLimit
    let connection: PostgresSinkClient
    let logger: Logger
    /// Whether rows hold the payload as it arrived; the store keeps it compressed anyway,
    /// and it is the largest part of a row.
    let keepsRaw: Bool

    /// Connects and creates or extends the table, with an index on each of `indexes`; with
    /// `raw` false, rows leave the `raw` column empty.
    public init(url: PostgresURL, indexes: [String], raw: Bool = true, logger: Logger) async throws {
        connection = try await PostgresSinkClient(url, logger: logger) { client in
            try await PostgresSinkTable.prepare(client, indexed: indexes, logger: logger)
        }
        self.logger = logger
        keepsRaw = raw
    }

    public func shutdown() async {
        connection.shutdown()
    }

    /// The batch in one statement; when PostgreSQL refuses it, each row on its own, so that
    /// a row refused for what it holds (a constraint or a trigger an operator added, a
    /// value out of range) is dead-lettered alone, since the same row cannot succeed later.
    /// A lost connection fails the batch, which is retried.
    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        guard !records.isEmpty else { return [] }
        return try await Self.writeEachOnRefusal(records) { [connection, keepsRaw, logger] records in
            let rows = PostgresQuery(
                unsafeSQL: PostgresSinkTable.upsertSQL(rows: records.count),
                binds: try PostgresSinkTable.bindings(records, raw: keepsRaw))
            try await connection.execute(rows, logger: logger)
        }
    }

    /// Writes `records` in one statement; when PostgreSQL refuses it, each on its own, so
    /// that a record refused for what it holds is answered alone (``outcome(of:)``). Any
    /// other failure (a lost connection, no answer in time) fails the batch.
    static func writeEachOnRefusal(
        _ records: [AttributionRecord], _ write: ([AttributionRecord]) async throws -> Void
    ) async throws -> [DeliveryOutcome] {
        do {
            try await write(records)
            return Array(repeating: .delivered, count: records.count)
        } catch let error as PSQLError where error.code == .server {
            guard records.count > 1 else { return [outcome(of: error)] }
        }
        var outcomes: [DeliveryOutcome] = []
        for record in records {
            do {
                try await write([record])
                outcomes.append(.delivered)
            } catch let error as PSQLError where error.code == .server {
                outcomes.append(outcome(of: error))
            }
        }
        return outcomes
    }

    /// Deletes the user's rows: the records the store found, and any row of the app that
    /// names one of the user's ids (a row whose record retention has deleted since).
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        let ids = request.identifiers
        let table = PostgresSinkTable.name
        let binds: PostgresBindings = {
            var binds = PostgresBindings()
            binds.append(ids.recordIDs)
            binds.append(request.appID)
            binds.append(ids.appUserIDs)
            binds.append(ids.idfvs)
            binds.append(ids.idfas)
            return binds
        }()
        try await connection.execute(
            PostgresQuery(
                unsafeSQL: """
                    DELETE FROM \(table) WHERE record_id = ANY($1::text[]) OR (app_id = $2 AND (
                        app_user_id = ANY($3::text[]) OR idfv = ANY($4::text[]) OR idfa = ANY($5::text[])))
                    """, binds: binds), logger: logger)
        return .done
    }

    /// Class 22 (data exception) and 23 (integrity constraint) are the row's own.
    static func outcome(of error: PSQLError) -> DeliveryOutcome {
        let state = error.serverInfo?[.sqlState] ?? ""
        let reason = "row not written: PostgreSQL \(state): \(PostgresStore.describe(error))"
        return state.hasPrefix("22") || state.hasPrefix("23") ? .reject(reason: reason) : .retry(reason: reason)
    }
}

/// Why a sink could not be built, or could not reach its database, in words a log can
/// show (a `PSQLError`'s own description is a placeholder).
struct SinkSetupError: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// Registers the PostgreSQL sink as `type: postgres`.
public enum PostgresSinkPlugin: SinkPlugin {
    public struct Options: Sendable {
        public var url: PostgresURL
        public var indexes: [String]
        /// `raw`: whether rows hold the payload as it arrived.
        public var raw: Bool
        /// `view`: whether the table is a view over the store's records (``PostgresViewSink``).
        public var view: Bool
    }

    public static let typeName = "postgres"

    public static func readOptions(_ reader: ConfigReader, context: SinkContext) -> Options? {
        let urlText = reader.string("url")
        guard let keys = DatabaseSinkKeys(reader) else { return nil }
        var url = context.storageURL
        if let text = urlText {
            // A view reads the store's records, which only the store's database holds.
            if keys.view {
                reader.report("needs the store's own database, so leave out url", key: "view")
                return nil
            }
            do {
                url = try PostgresURL(text)
            } catch {
                reader.report("\(error)", key: "url")
                return nil
            }
        }
        guard let url else {
            if keys.view {
                reader.report("needs the store to be PostgreSQL: the view reads its records", key: "view")
            } else {
                reader.report("needs a url, as the store is not PostgreSQL (storage.postgres)", key: "url")
            }
            return nil
        }
        return Options(url: url, indexes: keys.indexes, raw: keys.raw, view: keys.view)
    }

    public static func target(_ options: Options) -> SinkTarget? {
        let url = options.url
        return SinkTarget(
            place: "attribution_records in postgres://\(url.host):\(url.port)/\(url.database ?? "")",
            kind: options.view ? "view" : "table")
    }

    public static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink {
        if options.view {
            return try await PostgresViewSink(url: options.url, indexes: options.indexes, logger: context.logger)
        }
        return try await PostgresSink(
            url: options.url, indexes: options.indexes, raw: options.raw, logger: context.logger)
    }

    public static func maxBatchSize(_ options: Options) -> Int? { PostgresSink.batchLimit }

    public static func summary(_ options: Options) -> String {
        if options.view { return "view attribution_records in \(options.url)" }
        return "table attribution_records in \(options.url)" + (options.raw ? "" : ", without raw payloads")
    }
}
