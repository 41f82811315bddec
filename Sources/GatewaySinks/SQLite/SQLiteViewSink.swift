import Foundation
import GatewayCore
import GatewayStorage
import GRDB

/// `type: sqlite` with `view: true`: `attribution_records` is a view over the store's own
/// records (``SQLiteSinkView``), so a record is written once. Delivering a record adds its
/// place to the sink's list, with the record itself when the sink is inline.
public final class SQLiteViewSink: AttributionSink {
    public let maxBatchSize = SQLiteSink.batchLimit
    let pool: DatabasePool

    /// Makes the view in the store's file at `path`, with an index on each of `indexes`.
    public init(path: String, indexes: [String] = SQLiteSink.defaultIndexes) throws {
        pool = try SQLiteDatabase.pool(path: path)
        try pool.write { db in try SQLiteSinkView.prepare(db, indexed: indexes) }
    }

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        try await pool.write { db in
            for record in records {
                try db.cachedStatement(sql: SQLiteSinkView.deliverSQL).execute(arguments: [record.recordID])
            }
        }
        return Array(repeating: .delivered, count: records.count)
    }

    /// The store has taken the user's ids out of their records already; their rows leave
    /// the view too, as they would leave a table. A record retention deleted shows nowhere.
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        try await pool.write { db in
            try db.execute(
                sql: """
                    DELETE FROM \(SQLiteSinkView.rows) WHERE seq IN (
                        SELECT seq FROM records WHERE record_id IN (SELECT value FROM json_each(?1)))
                    """,
                arguments: [SQLiteStore.jsonArray(request.identifiers.recordIDs)])
        }
        return .done
    }
}

extension SQLiteViewSink: InlineDeliverable {
    /// Always on the store's own file: the record's place is listed with the record.
    public func inlineDelivery(sinkName: String, into store: SQLiteStore) -> InlineDelivery? {
        guard pool === store.pool else { return nil }
        return InlineDelivery(sink: sinkName, sql: SQLiteSinkView.deliverSQL) { record, _ in [record.recordID] }
    }
}
