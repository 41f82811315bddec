import Foundation
import GRDB
import GatewayCore

extension SQLiteStore {
    public func dropRawPayloads(receivedBefore before: Date, after cursor: RetentionCursor, limit: Int) async throws
        -> (dropped: Int, cursor: RetentionCursor?)
    {
        // Bodies without a raw payload stay in the database: only the page's place is read.
        // A payload kept apart (the `raw` column) goes without reading the body at all; one
        // inside the body (a record written before the column) goes by rewriting it.
        // Read into values inside the closure: rows are not Sendable, and handing them out
        // of it picked GRDB's blocking `read` on this task's thread.
        let (page, apart) = try await pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT seq, received_at, raw IS NOT NULL AS apart,
                        CASE WHEN instr(body, '"raw":') > 0 THEN body END AS body FROM records
                    WHERE (received_at, seq) > (?, ?) AND received_at < ? ORDER BY received_at, seq LIMIT ?
                    """,
                arguments: [cursor.receivedAt, cursor.seq, before.timeIntervalSince1970, limit])
            let page = rows.map {
                (seq: $0["seq"] as Int64, receivedAt: $0["received_at"] as Double, body: $0["body"] as String?)
            }
            return (page, rows.filter { $0["apart"] as Bool }.map { $0["seq"] as Int64 })
        }
        let removal = RawPayloadRemoval(page: page)
        guard let next = removal.next else { return (0, nil) }
        let changes = removal.changes
        guard !changes.isEmpty || !apart.isEmpty else { return (0, next) }
        let dropped = try await pool.write { db in
            var dropped = 0
            for change in changes {
                try db.executeCached(
                    "UPDATE records SET body = ? WHERE seq = ? AND body = ?", [change.new, change.seq, change.old])
                dropped += db.changesCount
            }
            for seq in apart {
                try db.executeCached("UPDATE records SET raw = NULL WHERE seq = ? AND raw IS NOT NULL", [seq])
                dropped += db.changesCount
            }
            return dropped
        }
        return (dropped, next)
    }

    public func deleteRecords(receivedBefore before: Date, limit: Int) async throws -> Int {
        try await pool.write { db in
            try db.executeCached(
                """
                DELETE FROM records WHERE seq IN (
                    SELECT r.seq FROM records r
                    WHERE r.received_at < ?
                        AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.record_id = r.record_id)
                        AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.record_id = r.record_id)
                        AND NOT EXISTS (SELECT 1 FROM sdk_users s WHERE s.attribution_record_id = r.record_id)
                    ORDER BY r.received_at, r.seq LIMIT ?)
                """, [before.timeIntervalSince1970, limit])
            return db.changesCount
        }
    }
}
