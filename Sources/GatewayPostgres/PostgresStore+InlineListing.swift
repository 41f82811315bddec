import Foundation
import GatewayCore
import PostgresNIO
import Synchronization

/// Sinks whose delivery is a row in a list of the store's own database (a `view: true`
/// postgres sink's `attribution_records_rows`), written in the transaction that stores the
/// record instead of through their outboxes.
///
/// Through the outbox, each record costs an outbox row written, claimed, read back and
/// deleted, and a PostgreSQL import left millions of them for a server to drain. Listed
/// with the record, it is in the view the moment its answer is `2xx`. Should the list's
/// insert fail (a savepoint undoes it alone), those records go to the sinks' outboxes, so
/// their workers retry them; replays and late versions always go through the outbox.
final class InlineListings: Sendable {
    private let state = Mutex<(sinks: Set<String>, table: String?)>(([], nil))
    private let observer = Mutex<(any InlineDeliveryObserver)?>(nil)

    var current: (sinks: Set<String>, table: String?) { state.withLock { $0 } }

    func add(sink: String, table: String) {
        precondition(table.allSatisfy { $0.isLetter || $0 == "_" }, "a list's table is a plain name")
        state.withLock { $0 = ($0.sinks.union([sink]), table) }
    }

    func remove(sink: String) {
        state.withLock { _ = $0.sinks.remove(sink) }
    }

    func observe(_ observer: any InlineDeliveryObserver) {
        self.observer.withLock { $0 = observer }
    }

    func report(delivered: [String: [(record: AttributionRecord, queuedAt: Date)]], fellBack: [String: Int]) {
        guard let observer = observer.withLock({ $0 }) else { return }
        for (sink, records) in delivered where !records.isEmpty { observer.delivered(sink: sink, records: records) }
        for (sink, count) in fellBack where count > 0 { observer.fellBack(sink: sink, count: count) }
    }
}

extension PostgresStore: InlineDeliveryStore {
    /// Lists `sink`'s records in `table` (a `seq` column, the records' own) with each
    /// commit that stores them, from now on.
    public func listInline(sink: String, table: String) {
        inlineListings.add(sink: sink, table: table)
    }

    public func stopDeliveringInline(sink: String) {
        inlineListings.remove(sink: sink)
    }

    public func observeInline(_ observer: any InlineDeliveryObserver) {
        inlineListings.observe(observer)
    }

    public var inlineSinkNames: Set<String> { inlineListings.current.sinks }

    /// Stores `batch` as ``insert(_:queuedAt:on:logger:)`` does, its listed sinks' records
    /// in `table` rather than their outboxes, in one transaction.
    func ingestListing(_ batch: [RoutedRecord], sinks listed: Set<String>, table: String, queuedAt: Date)
        async throws -> [IngestResult]
    {
        let outboxBatch = batch.map { item in
            RoutedRecord(record: item.record, sinks: item.sinks.filter { !listed.contains($0) })
        }
        let (results, fellBack) = try await transaction { [logger] connection in
            let results = try await Self.insert(outboxBatch, queuedAt: queuedAt, on: connection, logger: logger)
            var seen: Set<String> = []
            let toList = zip(batch, results).compactMap { item, result -> RoutedRecord? in
                guard case .stored(let id) = result, seen.insert(id).inserted else { return nil }
                let sinks = item.sinks.filter(listed.contains)
                return sinks.isEmpty ? nil : RoutedRecord(record: item.record, sinks: sinks)
            }
            let listedAll = try await Self.list(toList, in: table, queuedAt: queuedAt, on: connection, logger: logger)
            return (results, listedAll ? [] : toList)
        }
        var delivered: [String: [(record: AttributionRecord, queuedAt: Date)]] = [:]
        var queued: [String: Int] = [:]
        var seen: Set<String> = []
        for (item, result) in zip(batch, results) {
            guard case .stored(let id) = result, seen.insert(id).inserted else { continue }
            let didFallBack = fellBack.contains { $0.record.recordID == id }
            for sink in item.sinks where listed.contains(sink) {
                if didFallBack {
                    queued[sink, default: 0] += 1
                } else {
                    delivered[sink, default: []].append((item.record, queuedAt))
                }
            }
        }
        inlineListings.report(delivered: delivered, fellBack: queued)
        return results
    }

    /// Lists `records` in `table` under a savepoint; when that fails, undoes it alone and
    /// queues the records in their sinks' outboxes instead. Tells whether they were listed.
    static func list(
        _ records: [RoutedRecord], in table: String, queuedAt: Date, on connection: PostgresConnection,
        logger: Logger
    ) async throws -> Bool {
        guard !records.isEmpty else { return true }
        let ids = records.map(\.record.recordID)
        _ = try await connection.query("SAVEPOINT inline_listing", logger: logger)
        do {
            _ = try await connection.query(
                """
                INSERT INTO \(unescaped: table) (seq) SELECT seq FROM records WHERE record_id = ANY(\(ids)::text[])
                ON CONFLICT DO NOTHING
                """, logger: logger)
            _ = try await connection.query("RELEASE SAVEPOINT inline_listing", logger: logger)
            return true
        } catch let error as PSQLError where error.serverInfo != nil {
            logger.warning(
                "records could not be listed with their commit; queued in the sinks' outboxes",
                metadata: ["table": "\(table)", "error": "\(describe(error))"])
            _ = try await connection.query("ROLLBACK TO SAVEPOINT inline_listing", logger: logger)
        }
        var sinks: [String] = [], recordIDs: [String] = [], lanes: [String] = [], laneIsNull: [Bool] = []
        for item in records {
            for sink in item.sinks {
                sinks.append(sink)
                recordIDs.append(item.record.recordID)
                lanes.append(item.record.deliveryLane ?? "")
                laneIsNull.append(item.record.deliveryLane == nil)
            }
        }
        let now = seconds(queuedAt)
        _ = try await connection.query(
            """
            INSERT INTO outbox (sink, record_id, attempts, next_attempt_at, created_at, lane)
            SELECT s, r, 0, \(now), \(now), CASE WHEN ln THEN NULL ELSE l END
            FROM unnest(\(sinks)::text[], \(recordIDs)::text[], \(lanes)::text[], \(laneIsNull)::bool[])
                WITH ORDINALITY AS o(s, r, l, ln, n)
            ORDER BY n
            """, logger: logger)
        return false
    }
}
