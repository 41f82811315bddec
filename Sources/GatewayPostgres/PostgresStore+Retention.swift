import Foundation
import GatewayCore
import PostgresNIO

extension PostgresStore {
    public func dropRawPayloads(receivedBefore before: Date, after cursor: RetentionCursor, limit: Int) async throws
        -> (dropped: Int, cursor: RetentionCursor?)
    {
        // Bodies without a raw payload stay in the database: only the page's place is read.
        // A payload kept apart (the `raw` column) goes without reading the body at all; one
        // inside the body (a record written before the column) goes by rewriting it.
        let rows = try await query(
            """
            SELECT seq, received_at, raw IS NOT NULL, CASE WHEN strpos(body, '"raw":') > 0 THEN body END FROM records
            WHERE (received_at, seq) > (\(cursor.receivedAt), \(cursor.seq)) AND received_at < \(Self.seconds(before))
            ORDER BY received_at, seq LIMIT \(Int64(limit))
            """, logger: logger)
        var page: [(seq: Int64, receivedAt: Double, body: String?)] = []
        var apart: [Int64] = []
        for try await (seq, receivedAt, hasRaw, body) in rows.decode((Int64, Double, Bool, String?).self) {
            page.append((seq, receivedAt, body))
            if hasRaw { apart.append(seq) }
        }
        let removal = RawPayloadRemoval(page: page)
        guard let next = removal.next else { return (0, nil) }
        let changes = removal.changes
        guard !changes.isEmpty || !apart.isEmpty else { return (0, next) }
        let dropped = try await transaction { [logger, apart] connection in
            var dropped = 0
            for change in changes {
                let updated = try await Self.firstInt(
                    connection.query(
                        """
                        WITH updated AS (
                            UPDATE records SET body = \(change.new) WHERE seq = \(change.seq) AND body = \(change.old)
                            RETURNING 1)
                        SELECT count(*) FROM updated
                        """, logger: logger))
                dropped += Int(updated ?? 0)
            }
            if !apart.isEmpty {
                let cleared = try await Self.firstInt(
                    connection.query(
                        """
                        WITH cleared AS (
                            UPDATE records SET raw = NULL WHERE seq = ANY(\(apart)::bigint[]) AND raw IS NOT NULL
                            RETURNING 1)
                        SELECT count(*) FROM cleared
                        """, logger: logger))
                dropped += Int(cleared ?? 0)
            }
            return dropped
        }
        return (dropped, next)
    }

    public func deleteRecords(receivedBefore before: Date, limit: Int) async throws -> Int {
        let deleted = try await Self.firstInt(
            query(
                """
                WITH deleted AS (
                    DELETE FROM records WHERE seq IN (
                        SELECT r.seq FROM records r
                        WHERE r.received_at < \(Self.seconds(before))
                            AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.record_seq = r.seq)
                            AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.record_seq = r.seq)
                            AND NOT EXISTS (SELECT 1 FROM sdk_users s WHERE s.attribution_record_id = r.record_id)
                        ORDER BY r.received_at, r.seq LIMIT \(Int64(limit))
                        FOR UPDATE SKIP LOCKED)
                    RETURNING 1)
                SELECT count(*) FROM deleted
                """, logger: logger))
        return Int(deleted ?? 0)
    }
}
