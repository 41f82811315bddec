import Foundation
import GatewayCore
import PostgresNIO

extension PostgresStore {
    /// Newest first; `ids` are selected before the limit, so an old one is found.
    public func deadLetters(sink: String?, ids: [Int64]?, limit: Int) async throws -> [DeadLetter] {
        let rows = try await query(
            """
            SELECT d.id, d.sink, r.record_id, d.attempts, d.error, d.failed_at
            FROM dead_letters d JOIN records r ON r.seq = d.record_seq
            WHERE (\(sink)::text IS NULL OR d.sink = \(sink)) AND (\(ids)::bigint[] IS NULL OR d.id = ANY(\(ids)::bigint[]))
            ORDER BY d.id DESC LIMIT \(Int64(limit))
            """, logger: logger)
        var letters: [DeadLetter] = []
        for try await (id, sink, recordID, attempts, error, failedAt) in rows.decode(
            (Int64, String, String, Int64, String, Double).self)
        {
            letters.append(
                DeadLetter(
                    id: id, sink: sink, recordID: recordID, attempts: Int(attempts), error: error,
                    failedAt: Self.date(failedAt)))
        }
        return letters
    }

    public func deadLetterCounts(ids: [Int64]?) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        let rows = try await query(
            """
            SELECT sink, count(*) FROM dead_letters WHERE \(ids)::bigint[] IS NULL OR id = ANY(\(ids)::bigint[])
            GROUP BY sink
            """, logger: logger)
        for try await (sink, count) in rows.decode((String, Int64).self) { counts[sink] = Int(count) }
        return counts
    }

    public func retryDeadLetters(ids: [Int64]?, sink: String?, among sinks: [String]?, now: Date) async throws -> Int {
        let at = Self.seconds(now)
        let moved = try await Self.firstInt(
            query(
                """
                WITH moved AS (
                    DELETE FROM dead_letters d
                    WHERE (\(ids)::bigint[] IS NULL OR d.id = ANY(\(ids)::bigint[])) AND (\(sink)::text IS NULL OR d.sink = \(sink))
                        AND (\(sinks)::text[] IS NULL OR d.sink = ANY(\(sinks)::text[]))
                    RETURNING d.sink, d.record_seq),
                queued AS (
                    INSERT INTO outbox (sink, record_seq, attempts, next_attempt_at, created_at, lane)
                    SELECT m.sink, m.record_seq, 0, \(at), \(at), gateway_lane(r.app_id, r.body)
                    FROM moved m JOIN records r ON r.seq = m.record_seq
                    ON CONFLICT (sink, record_seq) DO NOTHING)
                SELECT count(*) FROM moved
                """, logger: logger))
        return Int(moved ?? 0)
    }

    public func dropDeadLetters(ids: [Int64]?, sink: String?) async throws -> Int {
        let dropped = try await Self.firstInt(
            query(
                """
                WITH dropped AS (
                    DELETE FROM dead_letters
                    WHERE (\(ids)::bigint[] IS NULL OR id = ANY(\(ids)::bigint[])) AND (\(sink)::text IS NULL OR sink = \(sink))
                    RETURNING 1)
                SELECT count(*) FROM dropped
                """, logger: logger))
        return Int(dropped ?? 0)
    }
}
